//! Why a pack could not be run: one enum, grouped by domain, each variant naming what it rejects
//! and where (the command offset of the operation, for anything the stream does).
use core::fmt;

use npub_core::io_bindings::IoKind;

/// What is wrong inside one operation's weight stream (bit positions are inside its range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeightProblem {
    /// The stream ends in the middle of a field.
    Truncated {
        /// Bit where the read would start.
        bit: u64,
    },
    /// The bits after the last end of stream are not all ones.
    BadPadding {
        /// Bit at the end of the padding.
        bit: u64,
    },
    /// A zero-run divisor of 4 or 5 (only 0..3, 6 and 7 exist).
    BadZeroDivisor {
        /// Bit of the slice header.
        bit: u64,
        /// The field.
        zdiv: u8,
    },
    /// A weight divisor of 6 (only 0..5 and 7 exist).
    BadWeightDivisor {
        /// Bit of the slice header.
        bit: u64,
        /// The field.
        wdiv: u8,
    },
    /// A decoded value does not fit the 9-bit weight path.
    ValueRange {
        /// Bit of the slice header.
        bit: u64,
    },
    /// The stream holds more weights than the operation consumes.
    TooManyWeights {
        /// Bit of the slice header.
        bit: u64,
        /// What the operation consumes.
        limit: u64,
    },
    /// The stream ends before the operation has all its weights.
    TooFewWeights {
        /// Weights decoded.
        decoded: u64,
        /// What the operation consumes.
        needed: u64,
    },
}

impl fmt::Display for WeightProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { bit } => write!(f, "the stream ends inside a field at bit {bit}"),
            Self::BadPadding { bit } => {
                write!(f, "padding before bit {bit} is not all ones")
            }
            Self::BadZeroDivisor { bit, zdiv } => {
                write!(
                    f,
                    "slice at bit {bit}: zero-run divisor {zdiv} does not exist"
                )
            }
            Self::BadWeightDivisor { bit, wdiv } => {
                write!(
                    f,
                    "slice at bit {bit}: weight divisor {wdiv} does not exist"
                )
            }
            Self::ValueRange { bit } => {
                write!(f, "slice at bit {bit}: a weight does not fit 9 bits")
            }
            Self::TooManyWeights { bit, limit } => write!(
                f,
                "slice at bit {bit}: more weights than the {limit} the operation consumes"
            ),
            Self::TooFewWeights { decoded, needed } => write!(
                f,
                "{decoded} weights decoded, the operation consumes {needed}"
            ),
        }
    }
}

/// Why [`crate::run`] failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunError {
    /// The pack is not a valid NPU1 blob, or its command stream fails the static verifier: nothing
    /// was executed.
    Pack(npub_core::Error),
    /// The IO bindings do not fit the pack (region missing, tensor outside it).
    Bindings(npub_core::Error),
    /// Wrong number of input files.
    InputCount {
        /// Inputs given.
        given: usize,
        /// Inputs the model has.
        expected: usize,
    },
    /// An input's size is not its tensor's.
    InputSize {
        /// The model's input number.
        index: u32,
        /// Bytes given.
        given: u64,
        /// Bytes the tensor has.
        expected: u32,
    },
    /// An operation or register setting this model does not implement.
    Unsupported {
        /// Byte offset of the operation's command.
        offset: u32,
        /// The operation (`CONV`, `ELEMENTWISE CLZ`, …).
        op: &'static str,
        /// What about it is not implemented.
        what: &'static str,
    },
    /// A register holds a value the operation cannot use.
    BadRegister {
        /// Byte offset of the operation's command.
        offset: u32,
        /// The operation.
        op: &'static str,
        /// The register (Vela's name without `NPU_SET_`).
        reg: &'static str,
        /// Its value.
        value: u32,
        /// What is wrong.
        problem: &'static str,
    },
    /// An operation's weight stream cannot be decoded.
    WeightStream {
        /// Byte offset of the operation's command.
        offset: u32,
        /// What is wrong.
        problem: WeightProblem,
    },
    /// An operation's scale range is shorter than its output channels need.
    ScaleStream {
        /// Byte offset of the operation's command.
        offset: u32,
        /// Bytes in the range.
        bytes: u32,
        /// Bytes needed (10 per output channel).
        needed: u64,
    },
    /// A feature-map element lies outside its region (the verifier bounds whole tiles, so this
    /// means a register combination the verifier and this model read differently).
    OutOfRange {
        /// Byte offset of the operation's command.
        offset: u32,
        /// The operation.
        op: &'static str,
        /// The region.
        region: u8,
        /// The address.
        address: i64,
    },
    /// An output binding lies outside its region.
    Output {
        /// Input or output.
        kind: IoKind,
        /// Its number.
        index: u32,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pack(e) => write!(f, "pack rejected, nothing run: {e}"),
            Self::Bindings(e) => write!(f, "IO bindings do not fit the pack: {e}"),
            Self::InputCount { given, expected } => write!(
                f,
                "{given} input file(s) given, the model has {expected} input(s)"
            ),
            Self::InputSize {
                index,
                given,
                expected,
            } => write!(
                f,
                "input {index}: {given} bytes given, the tensor has {expected}"
            ),
            Self::Unsupported { offset, op, what } => write!(
                f,
                "{op} at command offset {offset}: {what} is not implemented by the functional model"
            ),
            Self::BadRegister {
                offset,
                op,
                reg,
                value,
                problem,
            } => write!(
                f,
                "{op} at command offset {offset}: {reg} = {value:#x}: {problem}"
            ),
            Self::WeightStream { offset, problem } => {
                write!(
                    f,
                    "weight stream of the operation at command offset {offset}: {problem}"
                )
            }
            Self::ScaleStream {
                offset,
                bytes,
                needed,
            } => write!(
                f,
                "scale stream of the operation at command offset {offset}: {bytes} bytes, \
                 {needed} needed (10 per output channel)"
            ),
            Self::OutOfRange {
                offset,
                op,
                region,
                address,
            } => write!(
                f,
                "{op} at command offset {offset}: element at address {address} lies outside \
                 region {region}"
            ),
            Self::Output { kind, index } => {
                write!(f, "{kind} {index} lies outside its region")
            }
        }
    }
}

impl std::error::Error for RunError {}
