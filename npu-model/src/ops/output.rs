//! The output stage shared by every operation: scale, add the OFM zero point, clamp, look up.
//!
//! | step | what                                                                             |
//! |------|----------------------------------------------------------------------------------|
//! | 1    | `x · scale / 2^shift` rounded by `OFM_PRECISION` bits 15:14 (`rounding.rs`)      |
//! | 2    | `+ OFM_ZERO_POINT`                                                               |
//! | 3    | clamp to `[ACTIVATION_MIN, ACTIVATION_MAX]` (signed 16-bit; unset = no clamp)     |
//! | 4    | saturate to the clip range: `ACTIVATION` bits 14:12 (0 the OFM's type, 2 uint8, 3 int8, 5 int16) |
//! | 5    | `ACTIVATION` bits 4:0 = 16 + n (TABLE_n): replace by entry `v − type minimum` of the 256-byte table n at the top of SHRAM |
//!
//! The tables: the top 2 KiB of SHRAM, eight 256-byte slots, loaded by DMA before the operation.
use npub_core::cmdstream::Reg;

use crate::error::RunError;
use crate::fmap::FeatureMap;
use crate::machine::{Mem, Site};
use crate::rounding::{self, RoundMode};

/// `ACTIVATION` bits 4:0: no function beyond the clamp.
const ACT_NONE: u32 = 0;
/// `ACTIVATION` bits 4:0: TABLE_0; TABLE_n = 16 + n.
const ACT_TABLE0: u32 = 16;
/// Bytes of one 8-bit LUT slot.
const LUT_SLOT: usize = 256;
/// The LUT memory: the top 2 KiB of SHRAM on every U55 size (Vela's DMA lands there on U55-64's
/// 16 KiB as on U55-256's 48 KiB), eight 256-byte slots.
const LUT_BYTES: usize = 2048;
/// Rounding point of the output scale (TFLite's Q31 multiplier).
pub const OFM_POINT: u32 = 31;

/// The output stage of one operation, read once.
pub struct Output {
    mode: RoundMode,
    zero_point: i64,
    lo: i64,
    hi: i64,
    table: Option<[u8; LUT_SLOT]>,
    type_min: i64,
}

impl Output {
    /// Reads the registers for an OFM `ofm`.
    pub fn new(site: &Site<'_>, mem: &Mem<'_>, ofm: &FeatureMap) -> Result<Output, RunError> {
        let mode = RoundMode::from_bits((ofm.precision >> 14) & 0b11).ok_or_else(|| {
            site.bad(
                Reg::OfmPrecision,
                ofm.precision,
                "rounding mode 3 is reserved",
            )
        })?;
        let act = site.get(Reg::Activation);
        let (type_min, type_max) = ofm.range();
        let (clip_lo, clip_hi) = match (act >> 12) & 0b111 {
            0 => (type_min, type_max),
            2 => (0, 255),
            3 => (-128, 127),
            5 => (-32768, 32767),
            _ => return Err(site.bad(Reg::Activation, act, "reserved clip range")),
        };
        let reg_or = |reg, default| {
            if site.is_set(reg) {
                i64::from(site.get(reg) as u16 as i16)
            } else {
                default
            }
        };
        let lo = reg_or(Reg::ActivationMin, clip_lo).max(clip_lo);
        let hi = reg_or(Reg::ActivationMax, clip_hi).min(clip_hi);
        let table = match act & 0x1F {
            ACT_NONE => None,
            f if (ACT_TABLE0..ACT_TABLE0 + 8).contains(&f) => {
                if ofm.elem != 1 {
                    return Err(site.unsupported("a lookup table on a 16- or 32-bit OFM"));
                }
                Some(lut(site, mem, (f - ACT_TABLE0) as usize)?)
            }
            _ => return Err(site.unsupported("the built-in TANH/SIGMOID activation functions")),
        };
        Ok(Output {
            mode,
            zero_point: ofm.zero_point,
            lo,
            hi,
            table,
            type_min,
        })
    }

    /// The rounding mode.
    pub fn mode(&self) -> RoundMode {
        self.mode
    }

    /// Steps 1 to 5 for an accumulator `x`.
    #[inline]
    pub fn apply(&self, x: i64, scale: u32, shift: u32) -> i64 {
        self.finish(rounding::scale(x, scale, shift, self.mode, OFM_POINT))
    }

    /// Steps 2 to 5 for an already scaled value.
    #[inline]
    pub fn finish(&self, scaled: i64) -> i64 {
        // max then min, not `clamp`: a stream may set ACTIVATION_MIN above ACTIVATION_MAX, and
        // then the upper bound wins.
        let v = scaled
            .saturating_add(self.zero_point)
            .max(self.lo)
            .min(self.hi);
        match &self.table {
            Some(t) => {
                let entry = t[(v - self.type_min) as usize & 0xFF];
                if self.type_min < 0 {
                    i64::from(entry as i8)
                } else {
                    i64::from(entry)
                }
            }
            None => v,
        }
    }
}

/// The 8-bit table in LUT slot `n`.
fn lut(site: &Site<'_>, mem: &Mem<'_>, n: usize) -> Result<[u8; LUT_SLOT], RunError> {
    let start = mem.shram.len().saturating_sub(LUT_BYTES) + n * LUT_SLOT;
    let bytes = mem
        .shram
        .get(start..start + LUT_SLOT)
        .ok_or_else(|| site.unsupported("a LUT slot beyond the SHRAM's LUT banks"))?;
    let mut t = [0u8; LUT_SLOT];
    t.copy_from_slice(bytes);
    Ok(t)
}
