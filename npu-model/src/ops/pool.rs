//! `NPU_OP_POOL`: MAX, AVERAGE and REDUCE_SUM over a kernel window, per channel.
//!
//! | mode         | value before the output stage                                          |
//! |--------------|------------------------------------------------------------------------|
//! | 0 MAX        | the largest `ifm − IFM_ZERO_POINT` of the taps inside the IFM, not scaled (`OFM_SCALE` is ignored) |
//! | 1 AVERAGE    | `Σ (ifm − IFM_ZERO_POINT)` of those taps, scaled by `OFM_SCALE`; with padding the NPU divides by the number of taps inside the IFM itself (see [`count_scale`]) |
//! | 2 REDUCE_SUM | `Σ (ifm − IFM_ZERO_POINT)`, scaled by `OFM_SCALE`                        |
use npub_core::cmdstream::Reg;

use super::kernel::Kernel;
use super::output::{OFM_POINT, Output};
use crate::error::RunError;
use crate::fmap::{Dims, FeatureMap, Which};
use crate::machine::{Mem, Site};
use crate::rounding::{self, RoundMode};

/// Runs one POOL.
pub fn run(site: &Site<'_>, mem: &mut Mem<'_>, mode: u16) -> Result<(), RunError> {
    let ofm_dims = Dims {
        h: site.m1(Reg::OfmHeightM1),
        w: site.m1(Reg::OfmWidthM1),
        c: site.m1(Reg::OfmDepthM1),
    };
    let (k, ih, iw) = Kernel::new(site, ofm_dims)?;
    let ifm = FeatureMap::new(site, Which::Ifm)?;
    let ofm = FeatureMap::new(site, Which::Ofm)?;
    ofm.fits(mem, site, ofm_dims)?;
    let ifm_dims = Dims {
        h: ih,
        w: iw,
        c: site.m1(Reg::IfmDepthM1),
    };
    if ifm_dims.c < ofm_dims.c {
        return Err(site.bad(
            Reg::IfmDepthM1,
            site.get(Reg::IfmDepthM1),
            "a POOL IFM has fewer channels than its OFM",
        ));
    }
    let taps = (ofm_dims.len() as u128) * (k.h as u128) * (k.w as u128);
    mem.spend(site, taps + ifm_dims.len() as u128)?;
    let input = ifm.read(mem, site, ifm_dims)?;
    let stage = Output::new(site, mem, &ofm)?;
    let scale = site.get(Reg::OfmScale);
    let shift = site.param(Reg::OfmScale);
    let mut out = vec![0i64; ofm_dims.len()];
    for oy in 0..ofm_dims.h {
        for ox in 0..ofm_dims.w {
            for c in 0..ofm_dims.c {
                let mut acc: i64 = 0;
                let mut max = i64::MIN;
                let mut taps = 0u32;
                for ky in 0..k.h {
                    let Some(iy) = Kernel::tap(oy, k.stride_y, ky, k.dil_y, k.pad_top, ih) else {
                        continue;
                    };
                    for kx in 0..k.w {
                        let Some(ix) = Kernel::tap(ox, k.stride_x, kx, k.dil_x, k.pad_left, iw)
                        else {
                            continue;
                        };
                        let v = input[ifm_dims.at(iy, ix, c)] - ifm.zero_point;
                        acc = acc.wrapping_add(v);
                        max = max.max(v);
                        taps += 1;
                    }
                }
                out[ofm_dims.at(oy, ox, c)] = match mode {
                    // MAX is not scaled: Vela 4 leaves a previous average's OFM_SCALE in place.
                    0 => stage.finish(if taps == 0 { 0 } else { max }),
                    1 if k.padded => {
                        let (s, sh) = count_scale(taps.max(1));
                        stage.finish(rounding::scale(acc, s, sh, RoundMode::Natural, OFM_POINT))
                    }
                    1 | 2 => stage.apply(acc, scale, shift),
                    _ => return Err(site.unsupported("a pooling mode other than 0, 1, 2")),
                };
            }
        }
    }
    ofm.write(mem, site, ofm_dims, &out)
}

/// The scale and shift that divide by `n` taps, as Vela computes them for an unpadded average
/// (`scale = ⌈(2^(31+e) + 2^e) / n⌉`, `shift = 31 + e`, `e` the bit length of `n − 1`); the
/// NPU applies the same division to the taps of a padded window.
pub fn count_scale(n: u32) -> (u32, u32) {
    let e = u32::BITS - (n - 1).leading_zeros();
    let num = (1u64 << (31 + e)) + (1u64 << e);
    (num.div_ceil(u64::from(n)) as u32, 31 + e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_scale_divides() {
        // 9 taps: e = 4 (frexp(8) = 0.5·2^4).
        let (s, sh) = count_scale(9);
        assert_eq!(sh, 35);
        assert_eq!(s, ((1u64 << 35) + 16).div_ceil(9) as u32);
        for n in 1..50u32 {
            let (s, sh) = count_scale(n);
            let q = (i128::from(n as i64 * 100) * i128::from(s)) >> sh;
            assert_eq!(q, 100, "{n}");
        }
    }
}
