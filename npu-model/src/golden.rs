//! A pack's golden vector: one input, fixed by the pack's IO bindings alone, and the SHA-256 of
//! the outputs the functional model computes for it. A device runs the same input on its NPU
//! after an install and compares digests (the trial boot's self-test), so a pack that a flash,
//! a download or a bad Vela run changed is caught before it is confirmed.
//!
//! | what            | how                                                                      |
//! |-----------------|--------------------------------------------------------------------------|
//! | the input       | [`crate::prove::random_inputs`]`(io, 1, `[`GOLDEN_SEED`]`)`, each model input's bytes in the model's input order, concatenated |
//! | the digest      | SHA-256 of every output's bytes, in the model's output order, concatenated |
//!
//! Both ends compute the digest the same way from bytes alone: nothing about dtypes or shapes.
use npub_core::io_bindings::IoBinding;
use sha2::{Digest, Sha256};

use crate::{Model, RunError};

/// The seed of every golden input ("npubgold"): the same bindings give the same input on every
/// machine, so anyone can recompute a golden record from the pack and its bindings.
pub const GOLDEN_SEED: u64 = 0x6E70_7562_676F_6C64;

/// A golden vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Golden {
    /// Every model input's bytes, in the model's input order, concatenated.
    pub input: Vec<u8>,
    /// SHA-256 of the outputs the functional model computes for it.
    pub output_sha256: [u8; 32],
}

/// The golden input of a pack with bindings `io`, one tensor per model input.
pub fn input_sets(io: &[IoBinding]) -> Vec<Vec<u8>> {
    crate::prove::random_inputs(io, 1, GOLDEN_SEED)
        .pop()
        .unwrap_or_default()
}

/// SHA-256 of `outputs`, concatenated in order.
pub fn output_digest<T: AsRef<[u8]>>(outputs: &[T]) -> [u8; 32] {
    let mut h = Sha256::new();
    for o in outputs {
        h.update(o.as_ref());
    }
    h.finalize().into()
}

/// Runs the golden input through `model`.
pub fn compute(model: &Model<'_>, io: &[IoBinding]) -> Result<Golden, RunError> {
    let inputs = input_sets(io);
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let outputs = model.run(&refs)?;
    Ok(Golden {
        input: inputs.concat(),
        output_sha256: output_digest(&outputs),
    })
}

impl Golden {
    /// The self-test record a device receives beside the pack (`npub_core::release::SelfTest`,
    /// "NPS1"); `None` when the input is larger than a record carries.
    pub fn record(&self) -> Option<Vec<u8>> {
        npub_core::release::encode_selftest(&self.input, &self.output_sha256)
    }
}

/// Splits a concatenated golden input back into one tensor per model input (`None`: its length
/// is not the sum of the input bindings' sizes).
pub fn split_input(io: &[IoBinding], input: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut rest = input;
    let mut out = Vec::new();
    for b in crate::bindings(io, npub_core::io_bindings::IoKind::Input) {
        let n = usize::try_from(b.bytes).ok()?;
        if rest.len() < n {
            return None;
        }
        let (head, tail) = rest.split_at(n);
        out.push(head.to_vec());
        rest = tail;
    }
    rest.is_empty().then_some(out)
}
