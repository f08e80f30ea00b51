//! The Ethos-U55 command-stream verifier on Vela 5.2's real output (`shared/fixtures/vela/cases/*`,
//! every case directory), on mutations of it (each rejected with its exact variant), on small
//! hand-written streams for the paths Vela's fixtures do not take (SHRAM, tiles, broadcast,
//! negative strides, upscaling), and on the committed fuzz corpus.
use std::path::{Path, PathBuf};

use npub_core::cmdstream::{
    Operand, Operation, Reg, SHRAM_BYTES_MIN, Span, StreamSummary, Target, shram_bytes, verify,
    verify_blob,
};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Blob, Error, Role, StreamError};
use serde_json::Value;

#[path = "../fuzz/fuzz_targets/cmdstream_input.rs"]
mod fuzz_input;

// ----- fixtures ------------------------------------------------------------------------------

struct Case {
    name: String,
    cmd: Vec<u8>,
    weights: Vec<u8>,
    sizes: Vec<u32>,
    accel: Accel,
    meta: Value,
}

impl Case {
    fn shram(&self) -> u32 {
        shram_bytes(self.accel)
    }

    fn verify(&self, cmd: &[u8]) -> Result<StreamSummary, Error> {
        verify(cmd, &self.sizes, self.shram())
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/vela/cases")
}

fn cases() -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "only {} fixture cases", dirs.len());
    dirs.iter().map(|d| load(d)).collect()
}

fn case(name: &str) -> Case {
    load(&fixtures().join(name))
}

fn load(dir: &Path) -> Case {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    let mut sizes = Vec::new();
    for (i, r) in meta["regions"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            r["index"].as_u64(),
            Some(i as u64),
            "regions listed in BASEP order"
        );
        sizes.push(r["size"].as_u64().unwrap() as u32);
    }
    let accel = Accel::from_name(meta["accelerator"].as_str().unwrap()).expect("known accel");
    Case {
        name: dir.file_name().unwrap().to_str().unwrap().to_string(),
        cmd: std::fs::read(dir.join("cmd.bin")).unwrap(),
        weights: std::fs::read(dir.join("weights.bin")).unwrap(),
        sizes,
        accel,
        meta,
    }
}

// ----- a small walker over commands, to aim mutations -------------------------------------------

const STOP: u16 = 0x000;
const CONV: u16 = 0x002;
const ELEMENTWISE: u16 = 0x006;
const DMA_START: u16 = 0x010;
const STOP_WORD: u32 = 0xFFFF_0000;

#[derive(Debug, Clone, Copy)]
struct Cmd {
    at: usize,
    opcode: u16,
    cmd1: bool,
    param: u16,
    data: u32,
    len: usize,
}

impl Cmd {
    fn reg(&self) -> Option<Reg> {
        if self.cmd1 {
            Reg::from_cmd1(self.opcode)
        } else {
            Reg::from_cmd0(self.opcode)
        }
    }
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn set_word(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn or_word(b: &mut [u8], at: usize, bits: u32) {
    let w = word(b, at);
    set_word(b, at, w | bits);
}

fn walk(cmd: &[u8]) -> Vec<Cmd> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < cmd.len() {
        let w = word(cmd, at);
        let cmd1 = (w >> 14) & 3 == 1;
        let len = if cmd1 { 8 } else { 4 };
        out.push(Cmd {
            at,
            opcode: (w & 0x3FF) as u16,
            cmd1,
            param: (w >> 16) as u16,
            data: if cmd1 { word(cmd, at + 4) } else { 0 },
            len,
        });
        at += len;
    }
    out
}

fn writes(cmd: &[u8], reg: Reg) -> Vec<Cmd> {
    walk(cmd)
        .into_iter()
        .filter(|c| c.reg() == Some(reg))
        .collect()
}

fn ops(cmd: &[u8], opcode: u16) -> Vec<Cmd> {
    walk(cmd)
        .into_iter()
        .filter(|c| !c.cmd1 && c.opcode == opcode)
        .collect()
}

/// The first operation at or after byte `from` (the one that reads a register written there).
fn next_op(cmd: &[u8], from: usize) -> Cmd {
    walk(cmd)
        .into_iter()
        .find(|c| c.at >= from && !c.cmd1 && c.opcode < 0x100 && c.opcode != STOP)
        .unwrap()
}

/// Sets the value a command writes (cmd1: the data word; cmd0: the param).
fn set_value(cmd: &mut [u8], c: Cmd, value: u32) {
    if c.cmd1 {
        set_word(cmd, c.at + 4, value);
    } else {
        let w = word(cmd, c.at);
        set_word(cmd, c.at, (w & 0xFFFF) | (value << 16));
    }
}

fn without(cmd: &[u8], c: Cmd) -> Vec<u8> {
    let mut out = cmd[..c.at].to_vec();
    out.extend_from_slice(&cmd[c.at + c.len..]);
    out
}

// ----- the fixtures verify, with the meta's spans ---------------------------------------------------

#[test]
fn every_fixture_stream_verifies_with_the_spans_of_its_meta() {
    for case in cases() {
        let name = &case.name;
        assert_eq!(
            case.meta["bounds_check_errors"].as_array().map(Vec::len),
            Some(0)
        );
        let s = case
            .verify(&case.cmd)
            .unwrap_or_else(|e| panic!("{name}: {e}"));

        let spans = case.meta["accessed_span_per_region"].as_object().unwrap();
        for (k, v) in spans {
            let i: usize = k.parse().unwrap();
            let want = Span {
                start: v[0].as_u64().unwrap() as u32,
                end: v[1].as_u64().unwrap() as u32,
            };
            assert_eq!(s.span(i), Some(want), "{name}: region {i}");
        }
        let used: Vec<usize> = case.meta["regions_used_by_stream"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(s.used_regions().collect::<Vec<_>>(), used, "{name}");
        assert_eq!(spans.len(), used.len(), "{name}");
        assert_eq!(s.shram, None, "{name}");

        // Operation counts agree with the meta's list of NPU ops.
        let listed: Vec<&str> = case.meta["cmd"]["npu_ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for op in [
            Operation::Conv,
            Operation::Depthwise,
            Operation::Pool,
            Operation::Elementwise,
            Operation::DmaStart,
        ] {
            let want = listed
                .iter()
                .filter(|n| **n == format!("NPU_OP_{op}"))
                .count();
            assert_eq!(s.ops.get(op) as usize, want, "{name}: {op}");
        }
        assert_eq!(s.commands as usize, walk(&case.cmd).len(), "{name}");
    }
}

#[test]
fn every_fixture_pack_verifies_through_its_own_region_table() {
    for case in cases() {
        let regions: Vec<RegionSpec<'_>> = case.meta["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                if r["baked"].as_bool().unwrap() {
                    RegionSpec::Baked {
                        role: Role::Weights,
                        bytes: &case.weights,
                    }
                } else {
                    RegionSpec::Runtime {
                        role: Role::Scratch,
                        size: r["size"].as_u64().unwrap() as u32,
                    }
                }
            })
            .collect();
        let pack = build_pack(&case.cmd, &regions, case.accel).unwrap();
        let blob = Blob::parse(&pack).unwrap();
        let from_blob = verify_blob(&blob).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(from_blob, case.verify(&case.cmd).unwrap(), "{}", case.name);
    }
}

#[test]
fn summary_displays_its_operations_and_spans() {
    let c = case("small_net_u55_256");
    let s = c.verify(&c.cmd).unwrap();
    assert_eq!(
        s.to_string(),
        "141 commands: 3 CONV, 1 DEPTHWISE, 3 DMA_START; region 0 [0, 134976), region 1 [0, 19424)"
    );
}

#[test]
fn summary_serializes_for_reports() {
    let c = case("conv1_u55_256");
    let v = serde_json::to_value(c.verify(&c.cmd).unwrap()).unwrap();
    assert_eq!(v["commands"], 56);
    assert_eq!(v["ops"]["conv"], 1);
    assert_eq!(v["regions_used"], 0b11);
    assert_eq!(v["spans"][0], serde_json::json!({"start": 0, "end": 400}));
    assert_eq!(v["spans"][1], serde_json::json!({"start": 0, "end": 704}));
    assert_eq!(v["spans"][2], Value::Null);
    assert_eq!(v["shram"], Value::Null);
}

// ----- mutations of real streams, each with its exact error ------------------------------------

#[test]
fn rejects_ofm_base_moved_past_its_region() {
    let c = case("small_net_u55_256");
    let mut cmd = c.cmd.clone();
    // The last OFM_BASE0 is the fully connected layer's 16-byte output at offset 0 of region 1.
    let base = *writes(&cmd, Reg::OfmBase0).last().unwrap();
    set_value(&mut cmd, base, c.sizes[1]);
    let conv = *ops(&cmd, CONV).last().unwrap();
    let err = c.verify(&cmd).unwrap_err();
    assert_eq!(
        err,
        Error::Stream(StreamError::OutOfRange {
            offset: conv.at as u32,
            op: Operation::Conv,
            operand: Operand::OfmTile(0),
            start: 19424,
            end: 19440,
            target: Target::Region(1),
            size: 19424,
        })
    );
    assert_eq!(
        err.to_string(),
        format!(
            "command stream @{:#06x} CONV: OFM tile 0 [19424, 19440) outside region 1 (19424 bytes)",
            conv.at
        )
    );
}

#[test]
fn rejects_ofm_base_moved_past_its_region_in_every_case() {
    for c in cases() {
        let mut cmd = c.cmd.clone();
        let base = writes(&cmd, Reg::OfmBase0)[0];
        let region = writes(&cmd, Reg::OfmRegion)[0].param;
        let size = c.sizes[usize::from(region)];
        set_value(&mut cmd, base, size);
        match c.verify(&cmd) {
            Err(Error::Stream(StreamError::OutOfRange {
                operand: Operand::OfmTile(0),
                start,
                target: Target::Region(r),
                size: s,
                ..
            })) => {
                assert_eq!(
                    (start, u16::from(r), s),
                    (i64::from(size), region, size),
                    "{}",
                    c.name
                );
            }
            other => panic!("{}: {other:?}", c.name),
        }
    }
}

#[test]
fn rejects_weight_length_grown_by_16() {
    for name in ["conv1_u55_256", "small_net_u55_128", "small_net_u55_256"] {
        let c = case(name);
        let mut cmd = c.cmd.clone();
        // In these streams the last weight range ends exactly at the end of region 0.
        let len = *writes(&cmd, Reg::WeightLength).last().unwrap();
        let base = writes(&cmd, Reg::WeightBase).last().unwrap().data;
        set_value(&mut cmd, len, len.data + 16);
        let conv = next_op(&cmd, len.at);
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::OutOfRange {
                offset: conv.at as u32,
                op: Operation::Conv,
                operand: Operand::Weight,
                start: i64::from(base),
                end: i64::from(base + len.data + 16),
                target: Target::Region(0),
                size: c.sizes[0],
            }),
            "{name}"
        );
    }
}

#[test]
fn rejects_dma_into_a_region_with_no_descriptor() {
    for name in ["small_net_u55_256", "two_io_u55_256"] {
        let c = case(name);
        let mut cmd = c.cmd.clone();
        let dst = writes(&cmd, Reg::Dma0DstRegion)[0];
        set_value(&mut cmd, dst, 3);
        let dma = ops(&cmd, DMA_START)[0];
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::RegionMissing {
                offset: dma.at as u32,
                op: Operation::DmaStart,
                operand: Operand::DmaDst,
                region: 3,
                regions: 3,
            }),
            "{name}"
        );
    }
}

#[test]
fn rejects_dma_into_a_region_of_size_zero() {
    let c = case("small_net_u55_256");
    let mut cmd = c.cmd.clone();
    let dst = writes(&cmd, Reg::Dma0DstRegion)[0];
    set_value(&mut cmd, dst, 2);
    let err = c.verify(&cmd).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Stream(StreamError::OutOfRange {
                operand: Operand::DmaDst,
                target: Target::Region(2),
                size: 0,
                ..
            })
        ),
        "{err}"
    );
}

/// Registers conv1's CONV must have seen set: every one that decides an address.
const CONV1_READS: &[Reg] = &[
    Reg::IfmRegion,
    Reg::IfmBase0,
    Reg::IfmHeight0M1,
    Reg::IfmWidth0M1,
    Reg::IfmDepthM1,
    Reg::IfmStrideX,
    Reg::IfmStrideY,
    Reg::IfmPrecision,
    Reg::IfmUpscale,
    Reg::IfmPadTop,
    Reg::IfmPadLeft,
    Reg::IfmPadBottom,
    Reg::IfmPadRight,
    Reg::OfmRegion,
    Reg::OfmBase0,
    Reg::OfmHeightM1,
    Reg::OfmWidthM1,
    Reg::OfmHeight0M1,
    Reg::OfmWidth0M1,
    Reg::OfmDepthM1,
    Reg::OfmStrideX,
    Reg::OfmStrideY,
    Reg::OfmPrecision,
    Reg::KernelHeightM1,
    Reg::KernelWidthM1,
    Reg::KernelStride,
    Reg::WeightRegion,
    Reg::WeightBase,
    Reg::WeightLength,
    Reg::ScaleRegion,
    Reg::ScaleBase,
    Reg::ScaleLength,
];

#[test]
fn rejects_a_register_read_before_it_is_set() {
    let c = case("conv1_u55_256");
    let stride_y = writes(&c.cmd, Reg::IfmStrideY)[0];
    let cmd = without(&c.cmd, stride_y);
    let conv = ops(&cmd, CONV)[0];
    let err = c.verify(&cmd).unwrap_err();
    assert_eq!(
        err,
        Error::Stream(StreamError::UnsetRegister {
            offset: conv.at as u32,
            op: Operation::Conv,
            reg: Reg::IfmStrideY,
        })
    );
    assert!(
        err.to_string()
            .contains("reads IFM_STRIDE_Y, which the stream never set")
    );
}

#[test]
fn rejects_removing_any_address_register_and_accepts_removing_any_other() {
    // conv1 sets every register once, then runs one CONV: removing a command either removes a
    // register that CONV reads (rejected, naming it) or one that moves no byte (same summary).
    let c = case("conv1_u55_256");
    let whole = c.verify(&c.cmd).unwrap();
    for cmd in walk(&c.cmd) {
        let Some(reg) = cmd.reg() else { continue };
        let result = c.verify(&without(&c.cmd, cmd));
        if CONV1_READS.contains(&reg) {
            assert!(
                matches!(result, Err(Error::Stream(StreamError::UnsetRegister { reg: r, .. })) if r == reg),
                "{reg}: {result:?}"
            );
        } else {
            let s = result.unwrap_or_else(|e| panic!("{reg}: {e}"));
            assert_eq!(s.spans, whole.spans, "{reg}");
        }
    }
}

#[test]
fn rejects_a_stream_cut_before_stop() {
    for c in cases() {
        let cut = &c.cmd[..c.cmd.len() - 4];
        assert_eq!(
            c.verify(cut).unwrap_err(),
            Error::Stream(StreamError::NoStop {
                len: cut.len() as u64
            }),
            "{}",
            c.name
        );
    }
}

#[test]
fn rejects_every_truncation_at_a_word_boundary() {
    for c in cases() {
        let starts: Vec<usize> = walk(&c.cmd).iter().map(|k| k.at).collect();
        for len in (0..c.cmd.len()).step_by(4) {
            match c.verify(&c.cmd[..len]) {
                Err(Error::Stream(StreamError::NoStop { len: l })) => {
                    assert_eq!(l, len as u64);
                    assert!(starts.contains(&len), "{}: cut at {len}", c.name);
                }
                Err(Error::Stream(StreamError::Truncated { offset, .. })) => {
                    assert_eq!(offset as usize + 4, len, "{}", c.name);
                }
                other => panic!("{}: cut at {len}: {other:?}", c.name),
            }
        }
    }
}

#[test]
fn rejects_an_unknown_opcode() {
    let c = case("conv1_u55_256");
    // cmd0 0x12E sits between AB_START (0x12D) and BLOCKDEP (0x12F) and is not defined.
    let blockdep = writes(&c.cmd, Reg::Blockdep)[0];
    let mut cmd = c.cmd.clone();
    set_word(&mut cmd, blockdep.at, 0x12E);
    assert_eq!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::UnknownOpcode {
            offset: blockdep.at as u32,
            opcode: 0x12E,
            cmd1: false,
        })
    );
    // cmd1 0x035 follows DMA0_SKIP1 and is not defined either; and 0x100 is a cmd0 register, not
    // a cmd1 one.
    for opcode in [0x035u16, 0x100] {
        let mut cmd = c.cmd.clone();
        let base = writes(&cmd, Reg::IfmBase0)[0];
        set_word(&mut cmd, base.at, 0x4000 | u32::from(opcode));
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::UnknownOpcode {
                offset: base.at as u32,
                opcode,
                cmd1: true,
            })
        );
    }
}

#[test]
fn rejects_must_be_zero_bits() {
    let c = case("conv1_u55_256");
    for bit in 10..14 {
        let mut cmd = c.cmd.clone();
        let at = walk(&cmd)[3].at;
        let w = word(&cmd, at) | (1 << bit);
        set_word(&mut cmd, at, w);
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::MustBeZero {
                offset: at as u32,
                word: w,
            })
        );
    }
}

#[test]
fn rejects_address_high_bits() {
    let c = case("small_net_u55_256");
    for reg in [
        Reg::IfmBase0,
        Reg::OfmBase0,
        Reg::WeightBase,
        Reg::WeightLength,
        Reg::ScaleBase,
        Reg::Dma0Src,
        Reg::Dma0Dst,
        Reg::Dma0Len,
        Reg::IfmStrideY,
    ] {
        let target = writes(&c.cmd, reg)[0];
        let mut cmd = c.cmd.clone();
        or_word(&mut cmd, target.at, 1 << 16);
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::AddressHigh {
                offset: target.at as u32,
                reg,
                param: 1,
                data: target.data,
            }),
            "{reg}"
        );
    }
    // A scale's param is its shift: any value is fine.
    let c = case("two_io_u55_256");
    assert_eq!(writes(&c.cmd, Reg::OfmScale)[0].param, 50);
    c.verify(&c.cmd).unwrap();
}

#[test]
fn rejects_a_truncated_cmd1() {
    let c = case("conv1_u55_256");
    for k in walk(&c.cmd).into_iter().filter(|k| k.cmd1) {
        let cut = &c.cmd[..k.at + 4];
        assert_eq!(
            c.verify(cut).unwrap_err(),
            Error::Stream(StreamError::Truncated {
                offset: k.at as u32,
                reg: k.reg().unwrap(),
            })
        );
    }
}

#[test]
fn rejects_payload_size_2_and_3() {
    let c = case("conv1_u55_256");
    for size in [2u32, 3] {
        let mut cmd = c.cmd.clone();
        let at = ops(&cmd, CONV)[0].at;
        let w = (word(&cmd, at) & !0xC000) | (size << 14);
        set_word(&mut cmd, at, w);
        assert_eq!(
            c.verify(&cmd).unwrap_err(),
            Error::Stream(StreamError::PayloadSize {
                offset: at as u32,
                word: w,
                size: size as u8,
            })
        );
    }
}

#[test]
fn rejects_data_after_stop() {
    let c = case("conv1_u55_256");
    let stop = ops(&c.cmd, STOP)[0];
    let mut cmd = c.cmd.clone();
    cmd.extend_from_slice(&STOP_WORD.to_le_bytes());
    assert_eq!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::DataAfterStop {
            offset: stop.at as u32,
            trailing: 4,
        })
    );
}

#[test]
fn rejects_a_stream_that_is_not_whole_words() {
    let c = case("conv1_u55_256");
    let mut cmd = c.cmd.clone();
    cmd.extend_from_slice(&[0, 0]);
    assert_eq!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::NotWordAligned {
            len: cmd.len() as u64
        })
    );
    assert_eq!(
        verify(&[], &[], SHRAM_BYTES_MIN).unwrap_err(),
        Error::Stream(StreamError::NoStop { len: 0 })
    );
}

#[test]
fn rejects_an_unknown_elementwise_mode() {
    let c = case("two_io_u55_256");
    let ew = ops(&c.cmd, ELEMENTWISE)[0];
    assert_eq!(ew.param, 1, "ADD");
    let mut cmd = c.cmd.clone();
    set_value(&mut cmd, ew, 10);
    assert!(matches!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::BadOperationParam {
            op: Operation::Elementwise,
            param: 10,
            ..
        })
    ));
}

#[test]
fn rejects_a_region_field_above_7() {
    let c = case("conv1_u55_256");
    let mut cmd = c.cmd.clone();
    let r = writes(&cmd, Reg::IfmRegion)[0];
    set_value(&mut cmd, r, 9);
    assert!(matches!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::InvalidRegister {
            reg: Reg::IfmRegion,
            value: 9,
            ..
        })
    ));
}

#[test]
fn rejects_reserved_precision_fields() {
    let c = case("conv1_u55_256");
    // IFM element size field (bits 3:2) = 3; OFM layout field (bits 7:6) = 2.
    for (reg, value) in [
        (Reg::IfmPrecision, 0b1100),
        (Reg::OfmPrecision, 0b1000_0000),
    ] {
        let mut cmd = c.cmd.clone();
        let w = writes(&cmd, reg)[0];
        set_value(&mut cmd, w, value);
        assert!(
            matches!(c.verify(&cmd).unwrap_err(), Error::Stream(StreamError::InvalidRegister { reg: r, .. }) if r == reg),
            "{reg}"
        );
    }
}

// ----- geometry the fixtures do not exercise, on conv1 variants ----------------------------------

#[test]
fn rejects_ofm_tile_1_past_its_region() {
    // Split conv1's 8×8 OFM at column 4: tile 1 (columns 4..8, all 8 rows, HEIGHT1 = 7) is
    // addressed from OFM_BASE1.
    let c = case("conv1_u55_256");
    let mut cmd = c.cmd.clone();
    let w0 = writes(&cmd, Reg::OfmWidth0M1)[0];
    set_value(&mut cmd, w0, 3);
    // Tile 1 from base 0 stays inside, so the stream still verifies.
    c.verify(&cmd).unwrap();
    let base1 = writes(&cmd, Reg::OfmBase1)[0];
    set_value(&mut cmd, base1, 512);
    // 8 rows × 4 cols × 8 ch, stride y 64, x 8: last byte 512 + 7·64 + 3·8 + 7.
    let conv = ops(&cmd, CONV)[0];
    assert_eq!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::OutOfRange {
            offset: conv.at as u32,
            op: Operation::Conv,
            operand: Operand::OfmTile(1),
            start: 512,
            end: 512 + 7 * 64 + 3 * 8 + 8,
            target: Target::Region(1),
            size: 704,
        })
    );
}

#[test]
fn accepts_a_negative_row_stride_inside_and_rejects_one_reaching_below_the_region() {
    let c = case("conv1_u55_256");
    // Walk conv1's IFM rows upwards: row 0 at the top of the buffer, stride −24 (param 0xFFFF,
    // Vela's sign extension). Same bytes, same span.
    let stride = writes(&c.cmd, Reg::IfmStrideY)[0];
    let base = writes(&c.cmd, Reg::IfmBase0)[0];
    let mut cmd = c.cmd.clone();
    or_word(&mut cmd, stride.at, 0xFFFF_0000);
    set_word(&mut cmd, stride.at + 4, (-24i32) as u32);
    set_value(&mut cmd, base, 512 + 7 * 24);
    assert_eq!(
        c.verify(&cmd).unwrap().spans,
        c.verify(&c.cmd).unwrap().spans
    );
    // From base 100, row 7 is at 100 − 168.
    set_value(&mut cmd, base, 100);
    let err = c.verify(&cmd).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Stream(StreamError::OutOfRange {
                operand: Operand::IfmTile(0),
                start: -68,
                end: 124,
                ..
            })
        ),
        "{err}"
    );
    // A positive stride may not carry the sign extension.
    let mut cmd = c.cmd.clone();
    or_word(&mut cmd, stride.at, 0xFFFF_0000);
    assert!(matches!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::AddressHigh {
            reg: Reg::IfmStrideY,
            param: 0xFFFF,
            ..
        })
    ));
}

#[test]
fn upscaling_reads_half_the_input_and_mode_3_is_rejected() {
    let c = case("conv1_u55_256");
    let up = writes(&c.cmd, Reg::IfmUpscale)[0];
    let mut cmd = c.cmd.clone();
    set_value(&mut cmd, up, 1);
    // The sweep is 8×8; a 2× upscaled IFM of ⌈(8+1)/2⌉ = 5 rows and columns, 3 channels, from
    // byte 512 with strides 24/3: [512, 512 + 4·24 + 4·3 + 3); the OFM is [0, 512).
    let s = c.verify(&cmd).unwrap();
    assert_eq!(
        s.span(1),
        Some(Span {
            start: 0,
            end: 512 + 4 * 24 + 4 * 3 + 3
        })
    );
    set_value(&mut cmd, up, 3);
    assert!(matches!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::InvalidRegister {
            reg: Reg::IfmUpscale,
            value: 3,
            ..
        })
    ));
}

#[test]
fn ifm2_broadcast_and_scalar_shrink_what_is_read() {
    let c = case("two_io_u55_256");
    let bcast = writes(&c.cmd, Reg::Ifm2Broadcast)[0];
    let base = writes(&c.cmd, Reg::Ifm2Base0)[0];
    let region = writes(&c.cmd, Reg::Ifm2Region)[0];
    let ew = ops(&c.cmd, ELEMENTWISE)[0];

    // IFM2 (8×8×16 at 1280) moved to the last byte of region 1: out of range as a full tensor …
    let mut cmd = c.cmd.clone();
    set_value(&mut cmd, base, c.sizes[1] - 1);
    assert_eq!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::OutOfRange {
            offset: ew.at as u32,
            op: Operation::Elementwise,
            operand: Operand::Ifm2Tile(0),
            start: i64::from(c.sizes[1]) - 1,
            end: i64::from(c.sizes[1]) - 1 + 1024,
            target: Target::Region(1),
            size: c.sizes[1],
        })
    );
    // … but a single element when broadcast along H, W and C.
    set_value(&mut cmd, bcast, 0b111);
    c.verify(&cmd).unwrap();

    // As a scalar IFM2 is not read at all: even a region without a descriptor is fine.
    let mut cmd = c.cmd.clone();
    set_value(&mut cmd, region, 7);
    assert!(matches!(
        c.verify(&cmd).unwrap_err(),
        Error::Stream(StreamError::RegionMissing {
            operand: Operand::Ifm2Tile(0),
            region: 7,
            ..
        })
    ));
    set_value(&mut cmd, bcast, 0x80);
    c.verify(&cmd).unwrap();
}

// ----- SHRAM and the accelerator config --------------------------------------------------------

/// A LUT load: `len` bytes from region 0 into SHRAM at `dst` (DMA0_DST_REGION param `dst_region`).
fn lut_load(dst_region: u32, dst: u32, len: u32) -> Vec<u8> {
    let words = [
        0x130,
        0x4030,
        0,
        0x131 | (dst_region << 16),
        0x4031,
        dst,
        0x4032,
        len,
        0x010,
        STOP_WORD,
    ];
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn accepts_a_lut_load_into_shram_and_reports_its_span() {
    // Vela puts the 2 KiB LUT at the top of a U55-256's 48 KiB (banks 46 and 47).
    let s = verify(
        &lut_load(0x100, 46 * 1024, 2048),
        &[2048],
        shram_bytes(Accel::EthosU55_256),
    )
    .unwrap();
    assert_eq!(
        s.shram,
        Some(Span {
            start: 46 * 1024,
            end: 48 * 1024
        })
    );
    assert_eq!(
        s.span(0),
        Some(Span {
            start: 0,
            end: 2048
        })
    );
    assert_eq!(s.regions_used, 0b1);
    assert_eq!(s.ops.dma_start, 1);
}

#[test]
fn rejects_a_dma_past_shram() {
    let err = verify(
        &lut_load(0x100, 46 * 1024, 2048),
        &[2048],
        shram_bytes(Accel::EthosU55_128),
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::Stream(StreamError::OutOfRange {
            offset: 32,
            op: Operation::DmaStart,
            operand: Operand::DmaDst,
            start: 46 * 1024,
            end: 48 * 1024,
            target: Target::Shram,
            size: 24 * 1024,
        })
    );
    assert!(
        err.to_string().ends_with("outside SHRAM (24576 bytes)"),
        "{err}"
    );
}

#[test]
fn rejects_shram_past_the_smallest_u55_when_the_pack_does_not_name_its_accel() {
    let cmd = lut_load(0x100, 46 * 1024, 2048);
    let lut = vec![0u8; 2048];
    let regions = [RegionSpec::Baked {
        role: Role::Weights,
        bytes: &lut,
    }];
    let named = build_pack(&cmd, &regions, Accel::EthosU55_256).unwrap();
    verify_blob(&Blob::parse(&named).unwrap()).unwrap();
    for accel in [Accel::Unspecified, Accel::Unknown(77)] {
        let unnamed = build_pack(&cmd, &regions, accel).unwrap();
        let err = verify_blob(&Blob::parse(&unnamed).unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Stream(StreamError::OutOfRange {
                    target: Target::Shram,
                    size: SHRAM_BYTES_MIN,
                    ..
                })
            ),
            "{accel}: {err}"
        );
    }
}

#[test]
fn rejects_a_2d_dma_and_reserved_dma_region_bits() {
    for (param, what) in [
        (0x100 | (1 << 9), "2-D"),
        (0x100 | (2 << 9), "3-D"),
        (1 << 11, "reserved"),
    ] {
        let err = verify(&lut_load(param, 0, 16), &[2048], 48 * 1024).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Stream(StreamError::InvalidRegister {
                    reg: Reg::Dma0DstRegion,
                    ..
                })
            ),
            "{what}: {err}"
        );
    }
    // DMA_START with a channel or mode the U55 does not have.
    let mut cmd = lut_load(0x100, 0, 16);
    set_word(&mut cmd, 32, 0x0001_0010);
    assert!(matches!(
        verify(&cmd, &[2048], 48 * 1024).unwrap_err(),
        Error::Stream(StreamError::BadOperationParam {
            op: Operation::DmaStart,
            param: 1,
            ..
        })
    ));
}

#[test]
fn an_empty_dma_touches_nothing() {
    // DMA0_LEN 0 from a region that has no descriptor: nothing is read or written.
    let s = verify(&lut_load(5, 0, 0), &[], SHRAM_BYTES_MIN).unwrap();
    assert_eq!(s.regions_used, 0);
    assert_eq!(s.shram, None);
}

// ----- the fuzz corpus ----------------------------------------------------------------------------

/// The name of an error's variant within its domain, as `Debug` spells it
/// (`Stream(Truncated { .. })` → `Truncated`).
fn variant(e: &Error) -> String {
    let s = format!("{e:?}");
    let inner = s.split_once('(').map_or(s.as_str(), |(_, inner)| inner);
    inner
        .split([' ', '{', '(', ')'])
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn every_fuzz_corpus_file_gets_the_verdict_its_name_states() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/cmdstream");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "only {} corpus files", paths.len());
    for path in paths {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let data = std::fs::read(&path).unwrap();
        let input = fuzz_input::split(&data).expect(&name);
        let result = verify(input.cmd, input.regions(), input.shram);
        if let Ok(s) = &result {
            fuzz_input::check_summary(&input, s);
        }
        if name.starts_with("accept_") {
            result.unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if let Some(rest) = name.strip_prefix("reject_") {
            let want = rest.split('_').next().unwrap();
            let err = result.expect_err(&name);
            assert_eq!(variant(&err), want, "{name}: {err}");
            assert!(err.to_string().starts_with("command stream"), "{err}");
        }
        // Any other name is a crash reproducer kept for regression: it just must not panic.
    }
}
