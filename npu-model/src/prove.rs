//! Proof that a pack computes what its source model computes: the comparison of the functional
//! model's outputs with the TFLite reference kernels' on the same inputs, and its report.
//!
//! Running the reference itself is the caller's job (the CLI runs a pinned Python interpreter);
//! this module compares and reports, so the server and the device tooling report alike.
use npub_core::io_bindings::{Dtype, IoBinding, IoKind};
use serde::{Deserialize, Serialize};

use crate::{Model, RunError, bindings, operation_at};

/// The report's `format` field.
pub const FORMAT: &str = "npub-proof";

/// One set of model inputs (raw bytes, in the model's input order), or one set of outputs.
pub type TensorSet = Vec<Vec<u8>>;

/// `n` sets of random inputs for the pack's input bindings, from `seed` (SplitMix64: the same
/// seed gives the same bytes on every machine). Every byte is uniform, so every element value of
/// an integer dtype is as likely as any other.
pub fn random_inputs(io: &[IoBinding], n: u32, seed: u64) -> Vec<TensorSet> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let ins = bindings(io, IoKind::Input);
    (0..n)
        .map(|_| {
            ins.iter()
                .map(|b| (0..b.bytes).map(|_| next() as u8).collect())
                .collect()
        })
        .collect()
}

/// Element `i` of a tensor of `dtype` as an integer (float dtypes by their bits).
fn element(bytes: &[u8], dtype: Dtype, i: usize) -> i64 {
    let n = dtype.size() as usize;
    let Some(b) = bytes.get(i * n..i * n + n) else {
        return 0;
    };
    match dtype {
        Dtype::Int8 => i64::from(b[0] as i8),
        Dtype::Int16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        Dtype::Int32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::Int64 | Dtype::Bits64 => i64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        _ => b
            .iter()
            .rev()
            .fold(0i64, |acc, &x| (acc << 8) | i64::from(x)),
    }
}

/// Runs the pack through the functional model on every input set and compares each output with
/// the reference's (`reference[k]` = the reference outputs for `input_sets[k]`).
pub fn compare(
    pack: &[u8],
    io: &[IoBinding],
    input_sets: &[TensorSet],
    reference: &[TensorSet],
    seed: u64,
) -> Result<Report, RunError> {
    let outs = bindings(io, IoKind::Output);
    let mut report = Report {
        format: FORMAT.into(),
        inputs: input_sets.len() as u32,
        seed,
        outputs: outs
            .iter()
            .map(|b| OutputReport {
                index: b.index,
                name: b.name.as_str().into(),
                inputs: input_sets.len() as u32,
                bit_exact: 0,
                divergence: None,
            })
            .collect(),
    };
    let model = Model::load(pack, io)?;
    for (k, (set, want)) in input_sets.iter().zip(reference).enumerate() {
        let refs: Vec<&[u8]> = set.iter().map(Vec::as_slice).collect();
        let got = model.run_traced(&refs)?;
        for (j, (b, entry)) in outs.iter().zip(&mut report.outputs).enumerate() {
            let mine = &got.tensors[j];
            let theirs = want.get(j).map_or(&[][..], Vec::as_slice);
            if mine == theirs {
                entry.bit_exact += 1;
                continue;
            }
            if entry.divergence.is_some() {
                continue;
            }
            entry.divergence = Some(divergence(pack, b, k as u32, mine, theirs, &got.writers[j]));
        }
    }
    Ok(report)
}

fn divergence(
    pack: &[u8],
    b: &IoBinding,
    input: u32,
    mine: &[u8],
    theirs: &[u8],
    writers: &[Option<u32>],
) -> Divergence {
    let size = b.dtype.size() as usize;
    let n = mine.len().max(theirs.len()) / size.max(1);
    let mut first = None;
    let mut max_abs_diff = 0i64;
    for i in 0..n {
        let (g, e) = (element(mine, b.dtype, i), element(theirs, b.dtype, i));
        if g != e {
            first.get_or_insert((i, e, g));
            max_abs_diff = max_abs_diff.max((g - e).saturating_abs());
        }
    }
    // Lengths that differ (a reference output of another shape) diverge at the first element.
    let (index, expected, got) =
        first.unwrap_or((0, element(theirs, b.dtype, 0), element(mine, b.dtype, 0)));
    let command_offset = writers.get(index * size).copied().flatten();
    Divergence {
        input,
        index: index as u64,
        max_abs_diff,
        operation: command_offset
            .and_then(|at| operation_at(pack, at))
            .map(str::to_owned),
        command_offset,
        expected,
        got,
    }
}

/// The verdict for one model output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputReport {
    /// The output's number.
    pub index: u32,
    /// The output's name.
    pub name: String,
    /// Inputs compared.
    pub inputs: u32,
    /// Inputs on which every byte matched.
    pub bit_exact: u32,
    /// The first input on which it diverged, if any.
    pub divergence: Option<Divergence>,
}

/// Where an output first diverged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// Which input set (0-based, in the order compared).
    pub input: u32,
    /// The first differing element.
    pub index: u64,
    /// The largest absolute difference over the whole output.
    pub max_abs_diff: i64,
    /// The NPU operation that wrote the first differing element (`CONV`, …), if one did.
    pub operation: Option<String>,
    /// Its command offset.
    pub command_offset: Option<u32>,
    /// The reference's value there.
    pub expected: i64,
    /// The functional model's value there.
    pub got: i64,
}

/// The whole proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Format tag, `npub-proof`.
    pub format: String,
    /// Inputs compared (seeded random plus the user's).
    pub inputs: u32,
    /// The seed of the random inputs.
    pub seed: u64,
    /// One entry per model output, in the model's output order.
    pub outputs: Vec<OutputReport>,
}

impl Report {
    /// True when every output matched on every input.
    pub fn bit_exact(&self) -> bool {
        self.outputs
            .iter()
            .all(|o| o.divergence.is_none() && o.bit_exact == o.inputs)
    }
}

impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for o in &self.outputs {
            write!(f, "output {} ({}): ", o.index, o.name)?;
            match &o.divergence {
                None => writeln!(f, "bit-exact on {}/{}", o.bit_exact, o.inputs)?,
                Some(d) => {
                    write!(
                        f,
                        "DIVERGES: bit-exact on {}/{}; input set {}: first differing element {} \
                         (reference {}, pack {}), largest absolute difference {}",
                        o.bit_exact, o.inputs, d.input, d.index, d.expected, d.got, d.max_abs_diff
                    )?;
                    match (&d.operation, d.command_offset) {
                        (Some(op), Some(at)) => {
                            writeln!(f, ", written by {op} at command offset {at}")?
                        }
                        _ => writeln!(f)?,
                    }
                }
            }
        }
        Ok(())
    }
}
