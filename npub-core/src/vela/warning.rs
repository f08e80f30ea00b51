//! What an import accepted without trusting it: reported beside the pack (`npub pack` prints each on
//! stderr), never a reason to refuse a valid command stream.
//!
//! Every warning is about IO metadata the raw `.npz` records beside the stream — metadata Vela's raw
//! writers have got wrong or left out over the versions — and never about the stream, its regions or
//! where the stream expects its inputs and outputs, which are always checked and refused when wrong.
//! A binding whose quantisation cannot be trusted is written with scale 0 and zero point 0, and
//! [`super::VelaImport::quantisation_known`] says it is unknown rather than "not quantised".
use core::fmt;

use crate::io_bindings::IoKind;

/// One thing an import could not trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The `.npz` has no `input_quantization` (or `output_quantization`) array: Vela 4.x's raw
    /// writers (both cores) do not record it.
    QuantisationNotRecorded {
        /// Input or output.
        kind: IoKind,
        /// Its index.
        index: u32,
    },
    /// The `.npz` records per-channel quantisation for a model input or output. Activations are
    /// quantised per tensor: this is the raw writer's mistake (Vela 5.0's C++ core records a
    /// convolution's weight scales for its output), not the model's.
    QuantisationPerChannel {
        /// Input or output.
        kind: IoKind,
        /// Its index.
        index: u32,
        /// Scales recorded.
        channels: u64,
    },
    /// The `.npz` records quantisation that cannot be per-tensor parameters: more zero points than
    /// scales, or a zero point outside 32 bits.
    QuantisationMalformed {
        /// Input or output.
        kind: IoKind,
        /// Its index.
        index: u32,
    },
    /// The quantisation array has a different number of entries than there are tensors of its
    /// kind, so no entry can be matched to its tensor.
    QuantisationCountMismatch {
        /// Inputs or outputs.
        kind: IoKind,
        /// Entries in the array.
        len: u64,
        /// Tensors of that kind.
        expected: u64,
    },
    /// An output's quantisation in an `.npz` whose writer recorded another output per channel
    /// (see [`Warning::QuantisationPerChannel`]): that writer (Vela 5.0's C++ core) also records
    /// single wrong scales, so none of its output quantisation is trusted.
    QuantisationFromUntrustedWriter {
        /// Input or output.
        kind: IoKind,
        /// Its index.
        index: u32,
    },
}

impl Warning {
    /// The one binding this warning is about, if it is about one.
    pub fn io(&self) -> Option<(IoKind, u32)> {
        match *self {
            Warning::QuantisationNotRecorded { kind, index }
            | Warning::QuantisationPerChannel { kind, index, .. }
            | Warning::QuantisationMalformed { kind, index }
            | Warning::QuantisationFromUntrustedWriter { kind, index } => Some((kind, index)),
            Warning::QuantisationCountMismatch { .. } => None,
        }
    }

    /// The kind of binding all of whose quantisation this warning is about, if it is about all.
    pub fn kind_wide(&self) -> Option<IoKind> {
        match *self {
            Warning::QuantisationCountMismatch { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// What every quantisation warning ends with: where the real parameters are.
const USE_TFLITE: &str = "the IO binding's scale and zero point are unknown (written as 0); the \
                          *_vela.tflite of the same compilation carries them: pack it instead, or \
                          take them from the model";

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Warning::QuantisationNotRecorded { kind, index } => write!(
                f,
                "{kind} {index}: the raw output records no quantisation (Vela 4.x does not \
                 write `{kind}_quantization`); {USE_TFLITE}"
            ),
            Warning::QuantisationPerChannel {
                kind,
                index,
                channels,
            } => write!(
                f,
                "{kind} {index}: the raw output records per-channel quantisation ({channels} \
                 scales), which a model input or output never has (Vela 5.0's raw writer records \
                 weight scales here); ignored: {USE_TFLITE}"
            ),
            Warning::QuantisationMalformed { kind, index } => write!(
                f,
                "{kind} {index}: the raw output's quantisation is not one scale and zero point; \
                 ignored: {USE_TFLITE}"
            ),
            Warning::QuantisationCountMismatch {
                kind,
                len,
                expected,
            } => write!(
                f,
                "`{kind}_quantization` has {len} entries for {expected} {kind}s; ignored: every \
                 {kind}'s quantisation is unknown (written as 0); the *_vela.tflite of the same \
                 compilation carries it"
            ),
            Warning::QuantisationFromUntrustedWriter { kind, index } => write!(
                f,
                "{kind} {index}: the raw output records another output per channel, which only \
                 Vela 5.0's raw writer does, and it records single output scales wrongly too \
                 (e.g. after a FULLY_CONNECTED); ignored: {USE_TFLITE}"
            ),
        }
    }
}
