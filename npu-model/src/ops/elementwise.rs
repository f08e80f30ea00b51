//! `NPU_OP_ELEMENTWISE`: binary ADD, SUB, MUL, MIN, MAX between the IFM and IFM2 (or a scalar).
//!
//! | register         | bits                                                               |
//! |------------------|--------------------------------------------------------------------|
//! | `IFM2_BROADCAST` | 0 H, 1 W, 2 C: IFM2 is 1 along that axis; 6 operand order (IFM2 is the first operand); 7 scalar (`IFM2_SCALAR`) |
//! | `IFM_PRECISION`  | 9:8 scale mode: 0 both operands × their 16-bit scale; 1 operand A rescaled (OPA_SCALE, shift), B × OPB_SCALE; 2 the same for B |
//! | `OPA_SCALE`, `OPB_SCALE` | the input scales (ADD/SUB only)                            |
//!
//! With `a`, `b` the operands minus their zero points, in operand order:
//! - ADD/SUB: `a' ± b'` where, in scale mode 1 (2), `a'` (`b'`) is `a · OPA_SCALE / 2^shift` double
//!   rounded at bit `31 − 20` (8-bit) or `31 − 15` (16-bit) — TFLite's left shift of the inputs —
//!   and the other operand is `· 2^(30 − that point)` (TFLite's larger input scale is exactly one
//!   half); in mode 0 both are multiplied by their 16-bit scale. Then the output stage with
//!   `OFM_SCALE`.
//! - MUL: `a · b`, then the output stage.
//! - MIN/MAX: `min(a, b)` / `max(a, b)`, then the output stage.
use npub_core::cmdstream::Reg;

use super::output::Output;
use crate::error::RunError;
use crate::fmap::{Dims, FeatureMap, Which};
use crate::machine::{Mem, Site};
use crate::rounding::{self, RoundMode};

const BROADCAST_H: u32 = 1 << 0;
const BROADCAST_W: u32 = 1 << 1;
const BROADCAST_C: u32 = 1 << 2;
const OPERAND_ORDER: u32 = 1 << 6;
const BROADCAST_SCALAR: u32 = 1 << 7;

/// Runs one ELEMENTWISE.
pub fn run(site: &Site<'_>, mem: &mut Mem<'_>, mode: u16) -> Result<(), RunError> {
    if !(0..=4).contains(&mode) {
        return Err(site.unsupported("this elementwise mode (only MUL, ADD, SUB, MIN, MAX are)"));
    }
    if site.get(Reg::IfmUpscale) & 0b11 != 0 {
        return Err(site.unsupported("IFM upscaling (IFM_UPSCALE)"));
    }
    let dims = Dims {
        h: site.m1(Reg::OfmHeightM1),
        w: site.m1(Reg::OfmWidthM1),
        c: site.m1(Reg::OfmDepthM1),
    };
    let ifm = FeatureMap::new(site, Which::Ifm)?;
    let ofm = FeatureMap::new(site, Which::Ofm)?;
    ofm.fits(mem, site, dims)?;
    mem.spend(site, 3 * dims.len() as u128)?;
    let b = site.get(Reg::Ifm2Broadcast);
    let a_vals = ifm.read(mem, site, dims)?;
    let (b_vals, b_dims, b_zp) = if b & BROADCAST_SCALAR != 0 {
        let ifm2 = FeatureMap::new(site, Which::Ifm2)?;
        let raw = site.get(Reg::Ifm2Scalar);
        let v = if ifm2.signed {
            i64::from(raw as u16 as i16)
        } else {
            i64::from(raw as u16)
        };
        (vec![v], Dims { h: 1, w: 1, c: 1 }, ifm2.zero_point)
    } else {
        let ifm2 = FeatureMap::new(site, Which::Ifm2)?;
        let d2 = Dims {
            h: if b & BROADCAST_H != 0 { 1 } else { dims.h },
            w: if b & BROADCAST_W != 0 { 1 } else { dims.w },
            c: if b & BROADCAST_C != 0 { 1 } else { dims.c },
        };
        (ifm2.read(mem, site, d2)?, d2, ifm2.zero_point)
    };
    let stage = Output::new(site, mem, &ofm)?;
    let scale = Scaling::new(site, &ifm, &stage)?;
    let swap = b & OPERAND_ORDER != 0;
    let mut out = vec![0i64; dims.len()];
    for y in 0..dims.h {
        for x in 0..dims.w {
            for c in 0..dims.c {
                let i = dims.at(y, x, c);
                let j = b_dims.at(
                    y.min(b_dims.h - 1),
                    x.min(b_dims.w - 1),
                    c.min(b_dims.c - 1),
                );
                let p = a_vals[i] - ifm.zero_point;
                let q = b_vals[j] - b_zp;
                let (a, b) = if swap { (q, p) } else { (p, q) };
                // 32-bit operands can make products and sums that no i64 holds: saturate (the
                // output stage clamps far below either bound).
                let v = match mode {
                    0 => (i128::from(a) * i128::from(b))
                        .clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                        as i64,
                    1 => scale.a(a).saturating_add(scale.b(b)),
                    2 => scale.a(a).saturating_sub(scale.b(b)),
                    3 => a.min(b),
                    _ => a.max(b),
                };
                out[i] = stage.apply(v, scale.ofm_scale, scale.ofm_shift);
            }
        }
    }
    ofm.write(mem, site, dims, &out)
}

/// The input scaling of ADD/SUB.
struct Scaling {
    mode: u32,
    opa: (u32, u32),
    opb: u32,
    point: u32,
    round: RoundMode,
    ofm_scale: u32,
    ofm_shift: u32,
}

impl Scaling {
    fn new(site: &Site<'_>, ifm: &FeatureMap, stage: &Output) -> Result<Scaling, RunError> {
        let mode = (ifm.precision >> 8) & 0b11;
        if mode == 3 {
            return Err(site.bad(Reg::IfmPrecision, ifm.precision, "scale mode 3 is reserved"));
        }
        let round = RoundMode::from_bits((ifm.precision >> 14) & 0b11).ok_or_else(|| {
            site.bad(
                Reg::IfmPrecision,
                ifm.precision,
                "rounding mode 3 is reserved",
            )
        })?;
        let _ = stage.mode();
        Ok(Scaling {
            mode,
            opa: (site.get(Reg::OpaScale), site.param(Reg::OpaScale)),
            opb: site.get(Reg::OpbScale),
            point: if ifm.elem == 1 { 31 - 20 } else { 31 - 15 },
            round,
            ofm_scale: site.get(Reg::OfmScale),
            ofm_shift: site.param(Reg::OfmScale),
        })
    }

    fn rescaled(&self, x: i64) -> i64 {
        rounding::scale(x, self.opa.0, self.opa.1, self.round, self.point)
    }

    /// The operand that is not rescaled: TFLite's `(x << 20)` (15 for 16-bit) times the larger
    /// input's multiplier, which is exactly one half, so `x · 2^(30 − point)`; the NPU does not
    /// read `OPB_SCALE` for it (Vela leaves it 0).
    fn other(&self, x: i64) -> i64 {
        x << (30 - self.point)
    }

    #[inline]
    fn a(&self, x: i64) -> i64 {
        match self.mode {
            0 => x.saturating_mul(i64::from(self.opa.0 as u16)),
            1 => self.rescaled(x),
            _ => self.other(x),
        }
    }

    #[inline]
    fn b(&self, x: i64) -> i64 {
        match self.mode {
            0 => x.saturating_mul(i64::from(self.opb as u16)),
            2 => self.rescaled(x),
            _ => self.other(x),
        }
    }
}
