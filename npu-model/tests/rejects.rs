//! What the functional model refuses, and what it survives: streams edited from conv1's real Vela
//! output (`shared/fixtures/vela`), rebuilt into packs the verifier accepts.
use std::path::Path;

use npu_model::{RunError, WeightProblem};
use npub_core::cmdstream::{self, Command, OpCode, Reg};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::io_bindings::IoBinding;
use npub_core::{Blob, Role, vela};

struct Conv1 {
    cmd: Vec<u8>,
    weights: Vec<u8>,
    scratch: u32,
    io: Vec<IoBinding>,
    accel: npub_core::Accel,
    input: Vec<u8>,
    output: Vec<u8>,
}

fn conv1() -> Conv1 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(
        root.join("../../shared/fixtures/vela/vela_out/u55_256/tflite/conv1_vela.tflite"),
    )
    .unwrap();
    let imp = vela::import(&bytes).unwrap();
    let blob = Blob::parse(&imp.pack).unwrap();
    let set = root.join("tests/models/ref/conv1/set-0");
    Conv1 {
        cmd: blob.command_stream().to_vec(),
        weights: blob.baked_bytes(0).unwrap().to_vec(),
        scratch: blob.region(1).unwrap().size,
        io: imp.io.clone(),
        accel: blob.accel(),
        input: std::fs::read(set.join("input-0.bin")).unwrap(),
        output: std::fs::read(set.join("output-0.bin")).unwrap(),
    }
}

impl Conv1 {
    fn pack(&self) -> Vec<u8> {
        build_pack(
            &self.cmd,
            &[
                RegionSpec::Baked {
                    role: Role::Weights,
                    bytes: &self.weights,
                },
                RegionSpec::Runtime {
                    role: Role::Scratch,
                    size: self.scratch,
                },
                RegionSpec::Runtime {
                    role: Role::Scratch,
                    size: 0,
                },
            ],
            self.accel,
        )
        .unwrap()
    }

    fn run(&self) -> Result<Vec<Vec<u8>>, RunError> {
        npu_model::run(&self.pack(), &self.io, &[&self.input])
    }

    /// Byte offset of the STOP command.
    fn stop(&self) -> usize {
        self.cmd.len() - 4
    }

    /// Inserts `words` before STOP.
    fn insert_before_stop(&mut self, words: &[u32]) -> u32 {
        let at = self.stop();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.cmd.splice(at..at, bytes);
        at as u32
    }

    /// `[WEIGHT_BASE, +WEIGHT_LENGTH)` of the (only) CONV.
    fn weight_range(&self) -> (usize, usize) {
        let (mut base, mut len) = (0, 0);
        for c in cmdstream::commands(&self.cmd) {
            match c.unwrap().1 {
                Command::Set {
                    reg: Reg::WeightBase,
                    value,
                    ..
                } => base = value as usize,
                Command::Set {
                    reg: Reg::WeightLength,
                    value,
                    ..
                } => len = value as usize,
                _ => {}
            }
        }
        (base, len)
    }
}

#[test]
fn the_unedited_stream_is_bit_exact() {
    let c = conv1();
    assert_eq!(c.run().unwrap(), vec![c.output.clone()]);
}

#[test]
fn rejects_unimplemented_elementwise_mode_naming_it_and_its_offset() {
    let mut c = conv1();
    // ELEMENTWISE, mode 7 (CLZ): the verifier accepts it (IFM and OFM are set by the CONV).
    let at = c.insert_before_stop(&[0x0007_0006]);
    let err = c.run().unwrap_err();
    assert_eq!(
        err,
        RunError::Unsupported {
            offset: at,
            op: "ELEMENTWISE CLZ",
            what: "this elementwise mode (only MUL, ADD, SUB, MIN, MAX are)",
        }
    );
    assert!(
        err.to_string()
            .contains(&format!("ELEMENTWISE CLZ at command offset {at}"))
    );
}

#[test]
fn rejects_ifm_upscaling_naming_the_operation() {
    let mut c = conv1();
    // IFM_UPSCALE = 1 (nearest), then the CONV again: its IFM is read at half size.
    let at = c.insert_before_stop(&[0x0001_0107, 0x0000_0002]) + 4;
    assert_eq!(
        c.run().unwrap_err(),
        RunError::Unsupported {
            offset: at,
            op: "CONV",
            what: "IFM upscaling (IFM_UPSCALE)",
        }
    );
}

#[test]
fn rejects_a_stream_the_verifier_refuses_before_running_it() {
    let mut c = conv1();
    // OFM_BASE0 far past the scratch region, then the CONV again.
    c.insert_before_stop(&[0x0000_4010, 1 << 20, 0x0000_0002]);
    assert!(matches!(
        c.run().unwrap_err(),
        RunError::Pack(npub_core::Error::Stream(
            npub_core::StreamError::OutOfRange { .. }
        ))
    ));
}

#[test]
fn rejects_a_weight_stream_with_an_undefined_divisor() {
    let mut c = conv1();
    let (base, _) = c.weight_range();
    // The first slice header's ZDIV (bits 2:0) = 4: no such divisor.
    c.weights[base] = (c.weights[base] & !0b111) | 4;
    assert!(matches!(
        c.run().unwrap_err(),
        RunError::WeightStream {
            problem: WeightProblem::BadZeroDivisor { zdiv: 4, .. },
            ..
        }
    ));
}

#[test]
fn rejects_a_weight_stream_cut_short() {
    let mut c = conv1();
    let (base, len) = c.weight_range();
    // Everything after the first quarter reads as padding: too few weights.
    for b in &mut c.weights[base + len / 4..base + len] {
        *b = 0xFF;
    }
    assert!(matches!(
        c.run().unwrap_err(),
        RunError::WeightStream { .. }
    ));
}

#[test]
fn a_corrupted_weight_that_still_decodes_changes_the_output() {
    // The case no shape check sees: the stream has the right length and decodes, but one weight
    // is wrong. Every single-bit flip in the stream either fails to decode or changes an output
    // byte, and none of them panics.
    let c = conv1();
    let (base, len) = c.weight_range();
    let mut decoded_but_wrong = 0;
    for i in base..base + len {
        for bit in [0u8, 3, 6] {
            let mut d = conv1();
            d.weights[i] ^= 1 << bit;
            match d.run() {
                Ok(out) => {
                    if out != vec![c.output.clone()] {
                        decoded_but_wrong += 1;
                    }
                }
                Err(RunError::WeightStream { .. }) => {}
                Err(e) => panic!("byte {i} bit {bit}: {e}"),
            }
        }
    }
    assert!(decoded_but_wrong > 0);
}

#[test]
fn rejects_wrong_inputs() {
    let c = conv1();
    let pack = c.pack();
    assert_eq!(
        npu_model::run(&pack, &c.io, &[]).unwrap_err(),
        RunError::InputCount {
            given: 0,
            expected: 1
        }
    );
    assert_eq!(
        npu_model::run(&pack, &c.io, &[&c.input[1..]]).unwrap_err(),
        RunError::InputSize {
            index: 0,
            given: 191,
            expected: 192
        }
    );
}

#[test]
fn rejects_bindings_outside_the_pack() {
    let c = conv1();
    let mut io = c.io.clone();
    io[0].offset = c.scratch;
    assert!(matches!(
        npu_model::run(&c.pack(), &io, &[&c.input]).unwrap_err(),
        RunError::Bindings(_)
    ));
}

#[test]
fn traced_run_names_the_writer_of_each_output_byte() {
    let c = conv1();
    let pack = c.pack();
    let out = npu_model::run_traced(&pack, &c.io, &[&c.input]).unwrap();
    let conv_at = cmdstream::commands(&c.cmd)
        .map(Result::unwrap)
        .find(|(_, cmd)| {
            matches!(
                cmd,
                Command::Op {
                    code: OpCode::Conv,
                    ..
                }
            )
        })
        .unwrap()
        .0;
    assert!(out.writers[0].iter().all(|w| *w == Some(conv_at)));
    assert_eq!(npu_model::operation_at(&pack, conv_at), Some("CONV"));
}
