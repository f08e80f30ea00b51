//! The Ethos-U55 registers a command stream can write, and the register file the verifier keeps.
//!
//! Vela writes a register only when its value changes, so every operation reads a mix of values set
//! just before it and values set many commands earlier. The verifier keeps one value per register
//! across the whole stream plus a "set" bit: reading a register whose bit is clear means the
//! operation would run on whatever the previous job left behind, which is rejected.
//!
//! The table below is every register of the Ethos-U55 command-stream interface (Vela 5.2's
//! `ethos_u55_regs`). cmd0 registers hold the 16-bit param; cmd1 registers hold the data word.
//! Any other opcode is rejected as unknown.

/// Which words of a cmd1 command carry what, for the address-high check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HighParam {
    /// cmd0: the param *is* the value; no check.
    Value,
    /// An address or a length: the param holds address bits 47:32 and must be 0 on the 32-bit U55.
    Zero,
    /// A signed stride or skip: the param may only be the sign extension of the data word (0, or
    /// 0xFFFF when bit 31 is set — what Vela's encoder writes for a negative stride).
    SignExtension,
    /// A scale: the param is the shift; any value.
    Shift,
}

macro_rules! registers {
    ($( $variant:ident = $space:ident $opcode:literal $name:literal $high:ident; )*) => {
        /// An Ethos-U55 register that a command stream writes (`NPU_SET_*`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Reg {
            $(
                #[doc = concat!("`NPU_SET_", $name, "`: ", stringify!($space), " opcode ", stringify!($opcode), ".")]
                $variant,
            )*
        }

        impl Reg {
            /// Every register, in table order (the order of the register file).
            pub const ALL: &'static [Reg] = &[$(Reg::$variant),*];

            /// Vela's name, without `NPU_SET_`.
            pub const fn name(self) -> &'static str {
                match self { $(Reg::$variant => $name,)* }
            }

            /// The opcode (bits 9:0) within its space.
            pub const fn opcode(self) -> u16 {
                match self { $(Reg::$variant => $opcode,)* }
            }

            /// True for cmd1 registers (a data word follows the command).
            pub const fn is_cmd1(self) -> bool {
                match self { $(Reg::$variant => registers!(@is_cmd1 $space),)* }
            }

            /// What the param of the command writing this register may hold.
            pub(crate) const fn high_param(self) -> HighParam {
                match self { $(Reg::$variant => HighParam::$high,)* }
            }

            /// The register a cmd0 command with `opcode` writes.
            pub const fn from_cmd0(opcode: u16) -> Option<Reg> {
                Self::lookup(false, opcode)
            }

            /// The register a cmd1 command with `opcode` writes.
            pub const fn from_cmd1(opcode: u16) -> Option<Reg> {
                Self::lookup(true, opcode)
            }

            const fn lookup(cmd1: bool, opcode: u16) -> Option<Reg> {
                match (cmd1, opcode) {
                    $( (registers!(@is_cmd1 $space), $opcode) => Some(Reg::$variant), )*
                    _ => None,
                }
            }
        }
    };
    (@is_cmd1 cmd0) => { false };
    (@is_cmd1 cmd1) => { true };
}

registers! {
    IfmPadTop = cmd0 0x100 "IFM_PAD_TOP" Value;
    IfmPadLeft = cmd0 0x101 "IFM_PAD_LEFT" Value;
    IfmPadRight = cmd0 0x102 "IFM_PAD_RIGHT" Value;
    IfmPadBottom = cmd0 0x103 "IFM_PAD_BOTTOM" Value;
    IfmDepthM1 = cmd0 0x104 "IFM_DEPTH_M1" Value;
    IfmPrecision = cmd0 0x105 "IFM_PRECISION" Value;
    IfmUpscale = cmd0 0x107 "IFM_UPSCALE" Value;
    IfmZeroPoint = cmd0 0x109 "IFM_ZERO_POINT" Value;
    IfmWidth0M1 = cmd0 0x10A "IFM_WIDTH0_M1" Value;
    IfmHeight0M1 = cmd0 0x10B "IFM_HEIGHT0_M1" Value;
    IfmHeight1M1 = cmd0 0x10C "IFM_HEIGHT1_M1" Value;
    IfmIbEnd = cmd0 0x10D "IFM_IB_END" Value;
    IfmRegion = cmd0 0x10F "IFM_REGION" Value;
    OfmWidthM1 = cmd0 0x111 "OFM_WIDTH_M1" Value;
    OfmHeightM1 = cmd0 0x112 "OFM_HEIGHT_M1" Value;
    OfmDepthM1 = cmd0 0x113 "OFM_DEPTH_M1" Value;
    OfmPrecision = cmd0 0x114 "OFM_PRECISION" Value;
    OfmBlkWidthM1 = cmd0 0x115 "OFM_BLK_WIDTH_M1" Value;
    OfmBlkHeightM1 = cmd0 0x116 "OFM_BLK_HEIGHT_M1" Value;
    OfmBlkDepthM1 = cmd0 0x117 "OFM_BLK_DEPTH_M1" Value;
    OfmZeroPoint = cmd0 0x118 "OFM_ZERO_POINT" Value;
    OfmWidth0M1 = cmd0 0x11A "OFM_WIDTH0_M1" Value;
    OfmHeight0M1 = cmd0 0x11B "OFM_HEIGHT0_M1" Value;
    OfmHeight1M1 = cmd0 0x11C "OFM_HEIGHT1_M1" Value;
    OfmRegion = cmd0 0x11F "OFM_REGION" Value;
    KernelWidthM1 = cmd0 0x120 "KERNEL_WIDTH_M1" Value;
    KernelHeightM1 = cmd0 0x121 "KERNEL_HEIGHT_M1" Value;
    KernelStride = cmd0 0x122 "KERNEL_STRIDE" Value;
    ParallelMode = cmd0 0x123 "PARALLEL_MODE" Value;
    AccFormat = cmd0 0x124 "ACC_FORMAT" Value;
    Activation = cmd0 0x125 "ACTIVATION" Value;
    ActivationMin = cmd0 0x126 "ACTIVATION_MIN" Value;
    ActivationMax = cmd0 0x127 "ACTIVATION_MAX" Value;
    WeightRegion = cmd0 0x128 "WEIGHT_REGION" Value;
    ScaleRegion = cmd0 0x129 "SCALE_REGION" Value;
    AbStart = cmd0 0x12D "AB_START" Value;
    Blockdep = cmd0 0x12F "BLOCKDEP" Value;
    Dma0SrcRegion = cmd0 0x130 "DMA0_SRC_REGION" Value;
    Dma0DstRegion = cmd0 0x131 "DMA0_DST_REGION" Value;
    Dma0Size0 = cmd0 0x132 "DMA0_SIZE0" Value;
    Dma0Size1 = cmd0 0x133 "DMA0_SIZE1" Value;
    Ifm2Broadcast = cmd0 0x180 "IFM2_BROADCAST" Value;
    Ifm2Scalar = cmd0 0x181 "IFM2_SCALAR" Value;
    Ifm2Precision = cmd0 0x185 "IFM2_PRECISION" Value;
    Ifm2ZeroPoint = cmd0 0x189 "IFM2_ZERO_POINT" Value;
    Ifm2Width0M1 = cmd0 0x18A "IFM2_WIDTH0_M1" Value;
    Ifm2Height0M1 = cmd0 0x18B "IFM2_HEIGHT0_M1" Value;
    Ifm2Height1M1 = cmd0 0x18C "IFM2_HEIGHT1_M1" Value;
    Ifm2IbStart = cmd0 0x18D "IFM2_IB_START" Value;
    Ifm2Region = cmd0 0x18F "IFM2_REGION" Value;
    IfmBase0 = cmd1 0x000 "IFM_BASE0" Zero;
    IfmBase1 = cmd1 0x001 "IFM_BASE1" Zero;
    IfmBase2 = cmd1 0x002 "IFM_BASE2" Zero;
    IfmBase3 = cmd1 0x003 "IFM_BASE3" Zero;
    IfmStrideX = cmd1 0x004 "IFM_STRIDE_X" SignExtension;
    IfmStrideY = cmd1 0x005 "IFM_STRIDE_Y" SignExtension;
    IfmStrideC = cmd1 0x006 "IFM_STRIDE_C" SignExtension;
    OfmBase0 = cmd1 0x010 "OFM_BASE0" Zero;
    OfmBase1 = cmd1 0x011 "OFM_BASE1" Zero;
    OfmBase2 = cmd1 0x012 "OFM_BASE2" Zero;
    OfmBase3 = cmd1 0x013 "OFM_BASE3" Zero;
    OfmStrideX = cmd1 0x014 "OFM_STRIDE_X" SignExtension;
    OfmStrideY = cmd1 0x015 "OFM_STRIDE_Y" SignExtension;
    OfmStrideC = cmd1 0x016 "OFM_STRIDE_C" SignExtension;
    WeightBase = cmd1 0x020 "WEIGHT_BASE" Zero;
    WeightLength = cmd1 0x021 "WEIGHT_LENGTH" Zero;
    ScaleBase = cmd1 0x022 "SCALE_BASE" Zero;
    ScaleLength = cmd1 0x023 "SCALE_LENGTH" Zero;
    OfmScale = cmd1 0x024 "OFM_SCALE" Shift;
    OpaScale = cmd1 0x025 "OPA_SCALE" Shift;
    OpbScale = cmd1 0x026 "OPB_SCALE" Shift;
    Dma0Src = cmd1 0x030 "DMA0_SRC" Zero;
    Dma0Dst = cmd1 0x031 "DMA0_DST" Zero;
    Dma0Len = cmd1 0x032 "DMA0_LEN" Zero;
    Dma0Skip0 = cmd1 0x033 "DMA0_SKIP0" SignExtension;
    Dma0Skip1 = cmd1 0x034 "DMA0_SKIP1" SignExtension;
    Ifm2Base0 = cmd1 0x080 "IFM2_BASE0" Zero;
    Ifm2Base1 = cmd1 0x081 "IFM2_BASE1" Zero;
    Ifm2Base2 = cmd1 0x082 "IFM2_BASE2" Zero;
    Ifm2Base3 = cmd1 0x083 "IFM2_BASE3" Zero;
    Ifm2StrideX = cmd1 0x084 "IFM2_STRIDE_X" SignExtension;
    Ifm2StrideY = cmd1 0x085 "IFM2_STRIDE_Y" SignExtension;
    Ifm2StrideC = cmd1 0x086 "IFM2_STRIDE_C" SignExtension;
    Weight1Base = cmd1 0x090 "WEIGHT1_BASE" Zero;
    Weight1Length = cmd1 0x091 "WEIGHT1_LENGTH" Zero;
    Scale1Base = cmd1 0x092 "SCALE1_BASE" Zero;
    Scale1Length = cmd1 0x093 "SCALE1_LENGTH" Zero;
}

/// Number of registers in the file.
pub const REGISTER_COUNT: usize = Reg::ALL.len();

// The "set" bits live in one u128.
const _: () = assert!(REGISTER_COUNT <= 128);

impl Reg {
    /// True when `param` is an acceptable bits 31:16 for a command writing this register with
    /// data word `data` (see [`HighParam`]).
    pub(crate) const fn param_ok(self, param: u16, data: u32) -> bool {
        match self.high_param() {
            HighParam::Value | HighParam::Shift => true,
            HighParam::Zero => param == 0,
            HighParam::SignExtension => param == 0 || (param == 0xFFFF && data & (1 << 31) != 0),
        }
    }
}

impl core::fmt::Display for Reg {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One value per register plus a "set" bit: fixed size, no allocation.
#[derive(Debug, Clone)]
pub struct RegisterFile {
    values: [u32; REGISTER_COUNT],
    set: u128,
}

impl Default for RegisterFile {
    fn default() -> Self {
        Self::new()
    }
}

impl RegisterFile {
    /// Every register unset, as at the start of a job.
    pub const fn new() -> Self {
        Self {
            values: [0; REGISTER_COUNT],
            set: 0,
        }
    }

    /// Records a write.
    #[inline]
    pub fn write(&mut self, reg: Reg, value: u32) {
        let i = reg as usize;
        self.values[i] = value;
        self.set |= 1 << i;
    }

    /// The value, or `None` if the stream has not written the register yet.
    #[inline]
    pub fn read(&self, reg: Reg) -> Option<u32> {
        let i = reg as usize;
        if self.set & (1 << i) != 0 {
            Some(self.values[i])
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_register_round_trips_through_its_opcode() {
        for (i, &r) in Reg::ALL.iter().enumerate() {
            assert_eq!(r as usize, i);
            let back = if r.is_cmd1() {
                Reg::from_cmd1(r.opcode())
            } else {
                Reg::from_cmd0(r.opcode())
            };
            assert_eq!(back, Some(r), "{r}");
        }
    }

    #[test]
    fn opcode_spaces_are_separate() {
        // 0x000 is IFM_BASE0 as cmd1 and STOP (not a register) as cmd0.
        assert_eq!(Reg::from_cmd1(0x000), Some(Reg::IfmBase0));
        assert_eq!(Reg::from_cmd0(0x000), None);
        assert_eq!(Reg::from_cmd1(0x100), None);
        assert_eq!(Reg::from_cmd0(0x106), None);
    }

    #[test]
    fn sign_extension_only_for_negative_data() {
        assert!(Reg::IfmStrideY.param_ok(0xFFFF, 0xFFFF_FF00));
        assert!(!Reg::IfmStrideY.param_ok(0xFFFF, 0x100));
        assert!(!Reg::IfmBase0.param_ok(1, 0));
        assert!(Reg::OfmScale.param_ok(50, 0));
    }

    #[test]
    fn unset_registers_read_as_none() {
        let mut f = RegisterFile::new();
        assert_eq!(f.read(Reg::Scale1Length), None);
        f.write(Reg::Scale1Length, 7);
        assert_eq!(f.read(Reg::Scale1Length), Some(7));
        assert_eq!(f.read(Reg::IfmPadTop), None);
    }
}
