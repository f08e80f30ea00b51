//! The first word of a command, and the cmd0 operations.
//!
//! | bits  | field        | meaning                                                              |
//! |-------|--------------|----------------------------------------------------------------------|
//! | 9:0   | opcode       | cmd0 and cmd1 are separate opcode spaces                             |
//! | 13:10 | must be zero | any set bit is rejected                                              |
//! | 15:14 | payload size | 0 = cmd0 (one word), 1 = cmd1 (one data word follows); 2, 3 invalid on U55 |
//! | 31:16 | param        | cmd0: the value; address cmd1: address bits 47:32; `*_SCALE` cmd1: the shift |
//!
//! cmd0 opcodes below 0x100 are operations ([`OpCode`]); the rest, and every cmd1 opcode, are
//! register writes (see `registers.rs`).

/// Bits 9:0 of word 0.
pub const OPCODE_MASK: u32 = 0x3FF;
/// Bits 13:10 of word 0: must be zero on every command.
pub const MUST_BE_ZERO_MASK: u32 = 0xF << 10;
/// Shift of the 2-bit payload-size field (bits 15:14).
pub const PAYLOAD_SIZE_SHIFT: u32 = 14;
/// Shift of the 16-bit param field (bits 31:16).
pub const PARAM_SHIFT: u32 = 16;

/// Payload size 0: a one-word command.
pub const PAYLOAD_CMD0: u32 = 0;
/// Payload size 1: a command followed by one 32-bit data word.
pub const PAYLOAD_CMD1: u32 = 1;

/// A cmd0 operation opcode (below 0x100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    /// `NPU_OP_STOP` 0x000: end of the stream (param: IRQ mask, 0xFFFF from Vela).
    Stop,
    /// `NPU_OP_IRQ` 0x001.
    Irq,
    /// `NPU_OP_CONV` 0x002 (fully connected compiles to it too).
    Conv,
    /// `NPU_OP_DEPTHWISE` 0x003.
    Depthwise,
    /// `NPU_OP_POOL` 0x005 (param: pooling mode).
    Pool,
    /// `NPU_OP_ELEMENTWISE` 0x006 (param: elementwise mode).
    Elementwise,
    /// `NPU_OP_DMA_START` 0x010 (param: channel·16 + mode).
    DmaStart,
    /// `NPU_OP_DMA_WAIT` 0x011.
    DmaWait,
    /// `NPU_OP_KERNEL_WAIT` 0x012.
    KernelWait,
    /// `NPU_OP_PMU_MASK` 0x013.
    PmuMask,
}

impl OpCode {
    /// The operation with cmd0 opcode `opcode`, if it is one Ethos-U55 defines.
    pub const fn from_opcode(opcode: u16) -> Option<Self> {
        Some(match opcode {
            0x000 => Self::Stop,
            0x001 => Self::Irq,
            0x002 => Self::Conv,
            0x003 => Self::Depthwise,
            0x005 => Self::Pool,
            0x006 => Self::Elementwise,
            0x010 => Self::DmaStart,
            0x011 => Self::DmaWait,
            0x012 => Self::KernelWait,
            0x013 => Self::PmuMask,
            _ => return None,
        })
    }

    /// The operation that touches memory, for the ones that do.
    pub const fn operation(self) -> Option<Operation> {
        match self {
            Self::Conv => Some(Operation::Conv),
            Self::Depthwise => Some(Operation::Depthwise),
            Self::Pool => Some(Operation::Pool),
            Self::Elementwise => Some(Operation::Elementwise),
            Self::DmaStart => Some(Operation::DmaStart),
            Self::Stop | Self::Irq | Self::DmaWait | Self::KernelWait | Self::PmuMask => None,
        }
    }
}

/// An operation that reads or writes memory: what an error names and the summary counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub enum Operation {
    /// `NPU_OP_CONV`: IFM, OFM, weights, scales.
    Conv,
    /// `NPU_OP_DEPTHWISE`: IFM, OFM, weights, scales.
    Depthwise,
    /// `NPU_OP_POOL`: IFM, OFM.
    Pool,
    /// `NPU_OP_ELEMENTWISE`: IFM, OFM, and IFM2 for binary modes unless it is a scalar.
    Elementwise,
    /// `NPU_OP_DMA_START`: source and destination.
    DmaStart,
}

impl Operation {
    /// The name used in errors and summaries (Vela's, without `NPU_OP_`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Conv => "CONV",
            Self::Depthwise => "DEPTHWISE",
            Self::Pool => "POOL",
            Self::Elementwise => "ELEMENTWISE",
            Self::DmaStart => "DMA_START",
        }
    }
}

impl core::fmt::Display for Operation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// `NPU_OP_POOL` modes (param): MAX, AVERAGE, REDUCE_SUM.
pub const POOL_MODES: u16 = 3;

/// What an `NPU_OP_ELEMENTWISE` mode reads besides the IFM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementwiseArity {
    /// LRELU, ABS, CLZ: the IFM only.
    Unary,
    /// MUL, ADD, SUB, MIN, MAX, SHR, SHL: the IFM and IFM2 (or a scalar).
    Binary,
}

/// The arity of elementwise mode `mode`, or `None` for a mode Ethos-U55 does not define.
pub const fn elementwise_arity(mode: u16) -> Option<ElementwiseArity> {
    match mode {
        // MUL, ADD, SUB, MIN, MAX
        0..=4 => Some(ElementwiseArity::Binary),
        // LRELU, ABS, CLZ
        5..=7 => Some(ElementwiseArity::Unary),
        // SHR, SHL
        8 | 9 => Some(ElementwiseArity::Binary),
        _ => None,
    }
}
