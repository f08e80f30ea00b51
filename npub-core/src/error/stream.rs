//! Errors of the Ethos-U55 command stream (`cmdstream/`): decoding and the static check that every access stays in its region.
use core::fmt;

/// The Ethos-U55 command stream, as `cmdstream/` decodes and checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream is longer than 32-bit offsets can address (NPU1's `cmd_bytes` is a `u32`).
    TooLong {
        /// Bytes given.
        len: u64,
    },
    /// The stream is not a whole number of 32-bit words.
    NotWordAligned {
        /// Bytes given.
        len: u64,
    },
    /// A command word sets must-be-zero bits 13:10.
    MustBeZero {
        /// Byte offset of the command.
        offset: u32,
        /// The word.
        word: u32,
    },
    /// A command's payload size (bits 15:14) is neither 0 (cmd0) nor 1 (cmd1).
    PayloadSize {
        /// Byte offset of the command.
        offset: u32,
        /// The word.
        word: u32,
        /// The payload size field.
        size: u8,
    },
    /// An opcode the Ethos-U55 does not define in its space.
    UnknownOpcode {
        /// Byte offset of the command.
        offset: u32,
        /// Bits 9:0.
        opcode: u16,
        /// True for the cmd1 space (payload size 1).
        cmd1: bool,
    },
    /// A cmd1's param (address bits 47:32) is not 0 on the 32-bit Ethos-U55 (for a stride: neither 0
    /// nor the sign extension of a negative value).
    AddressHigh {
        /// Byte offset of the command.
        offset: u32,
        /// The register it writes.
        reg: crate::cmdstream::Reg,
        /// Bits 31:16.
        param: u16,
        /// The data word.
        data: u32,
    },
    /// The stream ends between a cmd1 and its data word.
    Truncated {
        /// Byte offset of the command.
        offset: u32,
        /// The register it would write.
        reg: crate::cmdstream::Reg,
    },
    /// The stream ends without `NPU_OP_STOP` (cut short, or not a whole stream).
    NoStop {
        /// Bytes given.
        len: u64,
    },
    /// Bytes follow `NPU_OP_STOP`; the NPU would never run them, so the stream is not what it seems.
    DataAfterStop {
        /// Byte offset of the STOP.
        offset: u32,
        /// Bytes after it.
        trailing: u32,
    },
    /// An operation reads a register the stream never set: its value would be whatever the previous
    /// job left behind.
    UnsetRegister {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The register.
        reg: crate::cmdstream::Reg,
    },
    /// A register an operation reads holds a value the Ethos-U55 does not define, or this checker
    /// does not model (2-D/3-D DMA).
    InvalidRegister {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The register.
        reg: crate::cmdstream::Reg,
        /// Its value.
        value: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An operation's param (pooling or elementwise mode, DMA channel and mode) is not one the
    /// Ethos-U55 defines.
    BadOperationParam {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// Bits 31:16.
        param: u16,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An operand lies in a region the pack has no descriptor for.
    RegionMissing {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The operand.
        operand: crate::cmdstream::Operand,
        /// The region (BASEP index) it names.
        region: u8,
        /// Descriptors the pack has.
        regions: u32,
    },
    /// An operand's byte range does not lie inside its region (or SHRAM).
    OutOfRange {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The operand.
        operand: crate::cmdstream::Operand,
        /// First byte (negative with negative strides).
        start: i64,
        /// One past the last byte.
        end: i64,
        /// The region or SHRAM.
        target: crate::cmdstream::Target,
        /// Its size in bytes.
        size: u32,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooLong { len } => write!(
                f,
                "command stream: {len} bytes, more than 32-bit offsets can address"
            ),
            Self::NotWordAligned { len } => write!(
                f,
                "command stream: {len} bytes is not a whole number of 32-bit words ({} trailing \
                 bytes)",
                len % 4
            ),
            Self::MustBeZero { offset, word } => write!(
                f,
                "command stream @{offset:#06x}: word {word:#010x} sets must-be-zero bits 13:10"
            ),
            Self::PayloadSize { offset, word, size } => write!(
                f,
                "command stream @{offset:#06x}: word {word:#010x} has payload size {size}; \
                 Ethos-U55 commands have 0 (cmd0) or 1 (cmd1)"
            ),
            Self::UnknownOpcode {
                offset,
                opcode,
                cmd1,
            } => write!(
                f,
                "command stream @{offset:#06x}: unknown {} opcode {opcode:#05x}",
                if cmd1 { "cmd1" } else { "cmd0" }
            ),
            Self::AddressHigh {
                offset,
                reg,
                param,
                data,
            } => write!(
                f,
                "command stream @{offset:#06x} {reg}: address-high param {param:#06x} (data \
                 {data:#010x}) must be 0 on the 32-bit Ethos-U55"
            ),
            Self::Truncated { offset, reg } => write!(
                f,
                "command stream @{offset:#06x} {reg}: the stream ends before this cmd1's data word"
            ),
            Self::NoStop { len } => write!(
                f,
                "command stream: ends after {len} bytes without NPU_OP_STOP"
            ),
            Self::DataAfterStop { offset, trailing } => write!(
                f,
                "command stream @{offset:#06x}: {trailing} bytes follow NPU_OP_STOP"
            ),
            Self::UnsetRegister { offset, op, reg } => write!(
                f,
                "command stream @{offset:#06x} {op}: reads {reg}, which the stream never set \
                 (it would hold whatever the previous job left)"
            ),
            Self::InvalidRegister {
                offset,
                op,
                reg,
                value,
                problem,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {reg} = {value:#x}: {problem}"
            ),
            Self::BadOperationParam {
                offset,
                op,
                param,
                problem,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: param {param}: {problem}"
            ),
            Self::RegionMissing {
                offset,
                op,
                operand,
                region,
                regions,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {operand} is in region {region}, which has no \
                 descriptor (the pack has {regions})"
            ),
            Self::OutOfRange {
                offset,
                op,
                operand,
                start,
                end,
                target,
                size,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {operand} [{start}, {end}) outside {target} \
                 ({size} bytes)"
            ),
        }
    }
}

impl core::error::Error for StreamError {}
