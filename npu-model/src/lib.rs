//! # npu-model
//!
//! A host functional model of the Arm Ethos-U55: it executes a pack's command stream — the
//! register writes and operations Vela compiled — on the host, and produces the bytes the NPU
//! would leave in the arena. It is what proves that a pack computes what its `.tflite` computes
//! (see [`prove`]), not a performance model: it says nothing about cycles.
//!
//! Only a stream that npub-core's static verifier accepts is executed, so every access already
//! lies inside its region; memory is the pack's own regions and the SHRAM of its accelerator,
//! plus working buffers no larger than the feature maps an operation touches.
//!
//! | covered                          | how                                                  |
//! |----------------------------------|------------------------------------------------------|
//! | weights                          | Vela's compressed weight streams (`mlw.rs`), in the NPU's traversal order (`ops/weights.rs`) |
//! | CONV (CONV_2D, FULLY_CONNECTED), DEPTHWISE | 40-bit bias, per-channel scale, strides 1–3, dilation, padding, part-kernel-first order |
//! | POOL                             | MAX, AVERAGE (padded and not), REDUCE_SUM            |
//! | ELEMENTWISE                      | ADD, SUB, MUL, MIN, MAX with IFM2 broadcast and scalars |
//! | output stage                     | rounding modes, zero points, ReLU/ReLU6/clamp, 8-bit LUTs (tanh, sigmoid…) |
//! | DMA                              | 1-D, between regions and SHRAM (LUT loads)            |
//! | feature maps                     | NHWC and NHCWB16, 8/16/32-bit, signed and unsigned, tiles |
//!
//! Anything else (IFM upscaling, the built-in 16-bit TANH/SIGMOID, LRELU/ABS/CLZ/SHL/SHR, 2-D DMA,
//! 16-bit LUTs) fails with [`RunError::Unsupported`], naming the operation and its command offset.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod fmap;
pub mod golden;
#[doc(hidden)]
pub mod harness;
mod machine;
mod mlw;
mod ops;
pub mod prove;
pub mod reference;
mod rounding;

pub use error::{RunError, WeightProblem};

use std::borrow::Cow;

use npub_core::cmdstream::{self, Command};
use npub_core::io_bindings::{self, IoBinding, IoBindings, IoKind};
use npub_core::{Blob, format::MAX_BASE_POINTERS};

/// What a run produced: each model output's bytes, in the model's output order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs {
    /// Output `i`'s raw bytes (NHWC, the output's dtype).
    pub tensors: Vec<Vec<u8>>,
    /// For output `i`, byte `j`: the command offset of the operation that last wrote it (`None`:
    /// no operation did, e.g. an output that is also an input).
    pub writers: Vec<Vec<Option<u32>>>,
}

/// Runs `pack` on `inputs` (one per model input, in the model's input order, each exactly its
/// tensor's bytes) and returns the outputs' bytes in the model's output order.
///
/// `io` are the pack's IO bindings (from `OUT.io.json` or the canonical encoding). To run one
/// pack many times, [`Model::load`] it once.
pub fn run(pack: &[u8], io: &[IoBinding], inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, RunError> {
    Model::load(pack, io)?.run(inputs)
}

/// [`run`], also saying which operation wrote each output byte (for a divergence report).
pub fn run_traced(pack: &[u8], io: &[IoBinding], inputs: &[&[u8]]) -> Result<Outputs, RunError> {
    Model::load(pack, io)?.run_traced(inputs)
}

/// The bindings of one kind, in index order.
pub fn bindings(io: &[IoBinding], kind: IoKind) -> Vec<IoBinding> {
    let mut v: Vec<IoBinding> = io.iter().copied().filter(|b| b.kind == kind).collect();
    v.sort_by_key(|b| b.index);
    v
}

/// The name of the operation whose command is at byte `offset` of `pack`'s stream (`CONV`,
/// `ELEMENTWISE ADD`, …).
pub fn operation_at(pack: &[u8], offset: u32) -> Option<&'static str> {
    let blob = Blob::parse(pack).ok()?;
    let cmd = blob.command_stream();
    match cmdstream::decode(cmd, offset as usize).ok()?.0 {
        Command::Op { code, param } => Some(machine::op_name(code, param)),
        Command::Set { .. } => None,
    }
}

/// A pack checked once — container, command stream (the static verifier), IO bindings,
/// accelerator — and ready to run on any number of input sets. It keeps each operation's decoded
/// weights between runs (keyed by the compressed bytes, so weights a stream copies into the arena
/// are decoded again whenever they differ).
pub struct Model<'p> {
    blob: Blob<'p>,
    inputs: Vec<IoBinding>,
    outputs: Vec<IoBinding>,
    macs: u32,
    shram: usize,
    cache: machine::WeightCache,
}

impl<'p> Model<'p> {
    /// Parses and verifies `pack` and checks `io` against it. Nothing is executed.
    pub fn load(pack: &'p [u8], io: &[IoBinding]) -> Result<Model<'p>, RunError> {
        Self::load_blob(Blob::parse(pack).map_err(RunError::Pack)?, io)
    }

    /// [`Model::load`] as an NPU runs a bound pack: its structure and command stream are
    /// checked, its payload's FNV-1a is not (the NPU executes what flash holds; the device
    /// agent checked the SHA-256 when it installed the pack). The host simulator's NPU, so that
    /// a byte that changes in flash after that check changes the outputs, as on the device.
    pub fn load_as_bound(pack: &'p [u8], io: &[IoBinding]) -> Result<Model<'p>, RunError> {
        let stated = npub_core::format::Header::read(pack)
            .map(|h| h.checksum)
            .unwrap_or(0);
        let blob = Blob::parse_prehashed(pack, stated).map_err(RunError::Pack)?;
        Self::load_blob(blob, io)
    }

    fn load_blob(blob: Blob<'p>, io: &[IoBinding]) -> Result<Model<'p>, RunError> {
        cmdstream::verify_blob(&blob).map_err(RunError::Pack)?;
        let canonical = io_bindings::encode(io).map_err(RunError::Bindings)?;
        IoBindings::parse(&canonical)
            .and_then(|b| b.check_against(&blob))
            .map_err(RunError::Bindings)?;
        let accel = blob.accel();
        let macs = match accel.macs() {
            Some(m) if accel.is_u55() => m,
            _ => {
                return Err(RunError::Unsupported {
                    offset: 0,
                    op: "pack",
                    what: "a pack whose header names no Ethos-U55 configuration (its weight order and SHRAM depend on it)",
                });
            }
        };
        Ok(Model {
            blob,
            inputs: bindings(io, IoKind::Input),
            outputs: bindings(io, IoKind::Output),
            macs,
            shram: cmdstream::shram_bytes(accel) as usize,
            cache: machine::WeightCache::default(),
        })
    }

    /// Runs the pack on `inputs` (see [`run`]).
    pub fn run(&self, inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, RunError> {
        Ok(self.execute(inputs, false)?.tensors)
    }

    /// Runs the pack on `inputs`, saying which operation wrote each output byte.
    pub fn run_traced(&self, inputs: &[&[u8]]) -> Result<Outputs, RunError> {
        self.execute(inputs, true)
    }

    fn execute(&self, inputs: &[&[u8]], track: bool) -> Result<Outputs, RunError> {
        if self.inputs.len() != inputs.len() {
            return Err(RunError::InputCount {
                given: inputs.len(),
                expected: self.inputs.len(),
            });
        }
        let blob = &self.blob;
        let mut regions = Vec::new();
        for (i, desc) in blob.regions().take(MAX_BASE_POINTERS).enumerate() {
            regions.push(match blob.baked_bytes(i as u32) {
                Some(bytes) if desc.is_baked() => Cow::Borrowed(bytes),
                _ => Cow::Owned(vec![0u8; desc.size as usize]),
            });
        }
        for (b, data) in self.inputs.iter().zip(inputs) {
            if data.len() as u64 != u64::from(b.bytes) {
                return Err(RunError::InputSize {
                    index: b.index,
                    given: data.len() as u64,
                    expected: b.bytes,
                });
            }
            let start = b.offset as usize;
            // `load` proved the binding inside its region.
            regions[usize::from(b.region)].to_mut()[start..start + data.len()]
                .copy_from_slice(data);
        }
        let mut mem = machine::Mem::new(regions, self.shram, track);
        machine::execute(blob.command_stream(), &mut mem, self.macs, &self.cache)?;

        let mut out = Outputs {
            tensors: Vec::new(),
            writers: Vec::new(),
        };
        for b in &self.outputs {
            let start = b.offset as usize;
            let bytes = mem
                .region(b.region)
                .get(start..start + b.bytes as usize)
                .ok_or(RunError::Output {
                    kind: b.kind,
                    index: b.index,
                })?;
            out.tensors.push(bytes.to_vec());
            if track {
                out.writers.push(
                    (start..start + b.bytes as usize)
                        .map(|a| mem.writer(b.region, a))
                        .collect(),
                );
            }
        }
        Ok(out)
    }
}
