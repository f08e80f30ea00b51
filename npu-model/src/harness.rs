//! The fuzz harness's input format and its one run, shared by the fuzz target
//! (`npub-core/fuzz/fuzz_targets/npu_model.rs`), its corpus generator (`examples/fuzz_corpus.rs`)
//! and the test that replays the corpus (`tests/fuzz_corpus.rs`).
//!
//! | bytes        | field                                                              |
//! |--------------|--------------------------------------------------------------------|
//! | 0            | accelerator: bits 1:0 → U55-32, -64, -128, -256                     |
//! | 1..3         | `cmd_len`, u16 LE: bytes of command stream (rounded down to words)  |
//! | 3..5         | scratch (region 1) size, u16 LE, at most [`MAX_SCRATCH`]            |
//! | 5..5+cmd_len | the command stream                                                 |
//! | rest         | region 0, the weights                                              |
//!
//! One input and one output binding of up to 64 int8 bytes sit at offset 0 of the scratch region.
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape};
use npub_core::{Accel, Role};

/// Largest scratch region a fuzz input may ask for: keeps each run's budget small.
pub const MAX_SCRATCH: u16 = 16 * 1024;
/// Header bytes before the stream.
const HEADER: usize = 5;

/// A fuzz input's parts.
pub struct Input<'a> {
    /// Accelerator.
    pub accel: Accel,
    /// Command stream.
    pub cmd: &'a [u8],
    /// Scratch size.
    pub scratch: u32,
    /// Weights.
    pub weights: &'a [u8],
}

const ACCELS: [Accel; 4] = [
    Accel::EthosU55_32,
    Accel::EthosU55_64,
    Accel::EthosU55_128,
    Accel::EthosU55_256,
];

/// Splits `data`; `None` when it is too short for the header.
pub fn split(data: &[u8]) -> Option<Input<'_>> {
    let head = data.get(..HEADER)?;
    let rest = &data[HEADER..];
    let cmd_len = (usize::from(u16::from_le_bytes([head[1], head[2]])) & !3).min(rest.len() & !3);
    Some(Input {
        accel: ACCELS[usize::from(head[0] & 3)],
        cmd: &rest[..cmd_len],
        scratch: u32::from(u16::from_le_bytes([head[3], head[4]]).min(MAX_SCRATCH)),
        weights: &rest[cmd_len..],
    })
}

/// The bytes [`split`] reads back as these parts (a corpus entry).
pub fn encode(accel: Accel, cmd: &[u8], scratch: u32, weights: &[u8]) -> Vec<u8> {
    let sel = ACCELS.iter().position(|&a| a == accel).unwrap_or(3) as u8;
    let mut v = vec![sel];
    v.extend_from_slice(&(cmd.len() as u16).to_le_bytes());
    v.extend_from_slice(&(scratch.min(u32::from(MAX_SCRATCH)) as u16).to_le_bytes());
    v.extend_from_slice(cmd);
    v.extend_from_slice(weights);
    v
}

/// Runs one input: builds the pack, runs it if the verifier accepts it. Panics only if the model
/// does (or an error cannot say what it is), which is what the fuzzer looks for.
pub fn run_one(data: &[u8]) {
    let Some(input) = split(data) else {
        return;
    };
    let regions = [
        RegionSpec::Baked {
            role: Role::Weights,
            bytes: input.weights,
        },
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: input.scratch,
        },
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: 0,
        },
    ];
    let Ok(pack) = build_pack(input.cmd, &regions, input.accel) else {
        return;
    };
    let n = input.scratch.min(64);
    let mut io = Vec::new();
    let Some(shape) = Shape::new(&[1, n]) else {
        return;
    };
    if n > 0 {
        for kind in [IoKind::Input, IoKind::Output] {
            io.push(IoBinding {
                kind,
                index: 0,
                name: Name::truncated("t"),
                region: 1,
                offset: 0,
                bytes: n,
                shape,
                dtype: Dtype::Int8,
                scale: 0.0,
                zero_point: 0,
            });
        }
    }
    let input_bytes: Vec<u8> = (0..n).map(|i| (i * 37) as u8).collect();
    let inputs: Vec<&[u8]> = if n > 0 { vec![&input_bytes] } else { vec![] };
    if let Err(e) = crate::run(&pack, &io, &inputs) {
        assert!(!e.to_string().is_empty());
    }
}
