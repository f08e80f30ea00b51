//! `NPU_OP_CONV` (CONV_2D, FULLY_CONNECTED) and `NPU_OP_DEPTHWISE`.
//!
//! `acc[o] = bias[o] + Σ (ifm − IFM_ZERO_POINT) · w[o][ky][kx][i]` over the kernel taps inside the
//! IFM (padding contributes nothing), then the output stage with the channel's scale and shift.
//! DEPTHWISE multiplies channel `o` of the IFM by channel `o` of the kernel.
use npub_core::cmdstream::Reg;

use super::kernel::Kernel;
use super::output::Output;
use super::weights::{self, Order};
use crate::error::RunError;
use crate::fmap::{Dims, FeatureMap, Which};
use crate::machine::{Mem, Site};

/// Runs one CONV or DEPTHWISE.
pub fn run(site: &Site<'_>, mem: &mut Mem<'_>, depthwise: bool) -> Result<(), RunError> {
    if site.is_set(Reg::Weight1Length) && site.get(Reg::Weight1Length) != 0 {
        return Err(site.unsupported("a second core's weight stream (WEIGHT1)"));
    }
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
    if depthwise && ifm_dims.c < ofm_dims.c {
        return Err(site.bad(
            Reg::IfmDepthM1,
            site.get(Reg::IfmDepthM1),
            "a DEPTHWISE IFM has fewer channels than its OFM",
        ));
    }
    let kin = if depthwise { 1 } else { ifm_dims.c };
    let taps = (ofm_dims.len() as u128) * (k.h as u128) * (k.w as u128);
    mem.spend(site, taps * kin as u128 + ifm_dims.len() as u128)?;
    let order = Order {
        ofm_depth: ofm_dims.c,
        ifm_depth: ifm_dims.c,
        kh: k.h,
        kw: k.w,
        dil_x: k.dil_x,
        dil_y: k.dil_y,
        ofm_block_depth: site.m1(Reg::OfmBlkDepthM1),
        ofm_ublock: if site.macs == 32 { 4 } else { 8 },
        depthwise,
        part_kernel: k.part_kernel && !depthwise,
        ifm16: ifm.elem == 2,
    };
    let stream = range(
        site,
        mem,
        Reg::WeightRegion,
        Reg::WeightBase,
        Reg::WeightLength,
    );
    let limit = mem.weight_limit();
    let w = site.cache.get_or_decode(site.offset, stream, &order, || {
        weights::decode(stream, &order, site, limit)
    })?;
    let sc = weights::scales(
        range(
            site,
            mem,
            Reg::ScaleRegion,
            Reg::ScaleBase,
            Reg::ScaleLength,
        ),
        ofm_dims.c,
        site,
    )?;
    let mut input = ifm.read(mem, site, ifm_dims)?;
    for v in &mut input {
        *v -= ifm.zero_point;
    }
    let out_stage = Output::new(site, mem, &ofm)?;
    // 8-bit IFMs minus their zero point fit 16 bits: the products then run on i16 lanes into
    // 32-bit accumulators, the NPU's (and TFLite's) accumulator width for 8-bit inputs.
    let narrow: Option<Vec<i16>> = if ifm.elem == 1 {
        input.iter().map(|&v| i16::try_from(v).ok()).collect()
    } else {
        None
    };
    let od = ofm_dims.c;
    let tap_len = od * kin;
    let mut out = vec![0i64; ofm_dims.len()];
    let mut acc32 = vec![0i32; od];
    let mut acc64 = vec![0i64; od];
    for oy in 0..ofm_dims.h {
        for ox in 0..ofm_dims.w {
            acc32.fill(0);
            acc64.fill(0);
            for ky in 0..k.h {
                let Some(iy) = Kernel::tap(oy, k.stride_y, ky, k.dil_y, k.pad_top, ih) else {
                    continue;
                };
                for kx in 0..k.w {
                    let Some(ix) = Kernel::tap(ox, k.stride_x, kx, k.dil_x, k.pad_left, iw) else {
                        continue;
                    };
                    let ibase = ifm_dims.at(iy, ix, 0);
                    let tap = ky * k.w + kx;
                    let wtap = &w[tap * tap_len..(tap + 1) * tap_len];
                    match (&narrow, depthwise) {
                        (Some(n), true) => {
                            for ((a, &x), &y) in
                                acc32.iter_mut().zip(&n[ibase..ibase + od]).zip(wtap)
                            {
                                *a = a.wrapping_add(i32::from(x) * i32::from(y));
                            }
                        }
                        (Some(n), false) => {
                            for (&x, wrow) in
                                n[ibase..ibase + kin].iter().zip(wtap.chunks_exact(od))
                            {
                                let x = i32::from(x);
                                for (a, &y) in acc32.iter_mut().zip(wrow) {
                                    *a = a.wrapping_add(x * i32::from(y));
                                }
                            }
                        }
                        (None, true) => {
                            for ((a, &x), &y) in
                                acc64.iter_mut().zip(&input[ibase..ibase + od]).zip(wtap)
                            {
                                *a = a.wrapping_add(x.wrapping_mul(i64::from(y)));
                            }
                        }
                        (None, false) => {
                            let row = &input[ibase..ibase + kin];
                            for (&x, wrow) in row.iter().zip(wtap.chunks_exact(od)) {
                                for (a, &y) in acc64.iter_mut().zip(wrow) {
                                    *a = a.wrapping_add(x.wrapping_mul(i64::from(y)));
                                }
                            }
                        }
                    }
                }
            }
            let at = ofm_dims.at(oy, ox, 0);
            for (o, s) in sc.iter().enumerate() {
                // Wrapping, like the NPU's own accumulators (a real stream never comes near).
                let acc = s
                    .bias
                    .wrapping_add(i64::from(acc32[o]))
                    .wrapping_add(acc64[o]);
                out[at + o] = out_stage.apply(acc, s.scale, s.shift);
            }
        }
    }
    ofm.write(mem, site, ofm_dims, &out)
}

/// `[BASE, BASE + LENGTH)` in the region `region` names (the verifier proved it inside).
pub fn range<'m>(site: &Site<'_>, mem: &'m Mem<'_>, region: Reg, base: Reg, len: Reg) -> &'m [u8] {
    let r = mem.region(site.get(region) as u8);
    let start = site.get(base) as usize;
    let end = start.saturating_add(site.get(len) as usize);
    r.get(start..end).unwrap_or(&[])
}
