//! The kernel of CONV, DEPTHWISE and POOL: size, stride, dilation, padding, and the IFM extent
//! they read.
//!
//! | register          | bits                                                              |
//! |-------------------|-------------------------------------------------------------------|
//! | `KERNEL_WIDTH_M1`, `KERNEL_HEIGHT_M1` | the *dilated* extent minus one               |
//! | `KERNEL_STRIDE`   | 0 x stride lsb, 1 y stride lsb, 2 part-kernel-first weight order, 3 x dilation, 4 y dilation, 6 x stride msb, 9 y stride msb |
//! | `IFM_PAD_TOP/LEFT/RIGHT/BOTTOM` | padding; the IFM extent is `(OFM − 1)·stride + kernel − pads` |
use npub_core::cmdstream::Reg;

use crate::error::RunError;
use crate::fmap::Dims;
use crate::machine::Site;

/// A kernel sweep.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    /// Undilated width and height.
    pub w: usize,
    /// Undilated height.
    pub h: usize,
    /// Strides.
    pub stride_x: usize,
    /// Strides.
    pub stride_y: usize,
    /// Dilation (1 or 2).
    pub dil_x: usize,
    /// Dilation (1 or 2).
    pub dil_y: usize,
    /// Padding before the first row / column.
    pub pad_top: usize,
    /// Padding before the first column.
    pub pad_left: usize,
    /// Any padding at all.
    pub padded: bool,
    /// Part-kernel-first weight order.
    pub part_kernel: bool,
}

impl Kernel {
    /// Reads the kernel registers and returns it with the IFM rows × columns it sweeps to
    /// produce `ofm`.
    pub fn new(site: &Site<'_>, ofm: Dims) -> Result<(Kernel, usize, usize), RunError> {
        if site.get(Reg::IfmUpscale) & 0b11 != 0 {
            return Err(site.unsupported("IFM upscaling (IFM_UPSCALE)"));
        }
        let s = site.get(Reg::KernelStride);
        let stride_x = 1 + (s & 1) as usize + 2 * ((s >> 6) & 1) as usize;
        let stride_y = 1 + ((s >> 1) & 1) as usize + 2 * ((s >> 9) & 1) as usize;
        let dil_x = 1 + ((s >> 3) & 1) as usize;
        let dil_y = 1 + ((s >> 4) & 1) as usize;
        let kw_d = site.m1(Reg::KernelWidthM1);
        let kh_d = site.m1(Reg::KernelHeightM1);
        let [top, left, right, bottom] = [
            Reg::IfmPadTop,
            Reg::IfmPadLeft,
            Reg::IfmPadRight,
            Reg::IfmPadBottom,
        ]
        .map(|r| site.get(r) as usize);
        let extent = |out: usize, stride: usize, k: usize, a: usize, b: usize| {
            ((out - 1) * stride + k).saturating_sub(a + b).max(1)
        };
        let ih = extent(ofm.h, stride_y, kh_d, top, bottom);
        let iw = extent(ofm.w, stride_x, kw_d, left, right);
        Ok((
            Kernel {
                w: (kw_d - 1) / dil_x + 1,
                h: (kh_d - 1) / dil_y + 1,
                stride_x,
                stride_y,
                dil_x,
                dil_y,
                pad_top: top,
                pad_left: left,
                padded: top + left + right + bottom > 0,
                part_kernel: (s >> 2) & 1 == 1,
            },
            ih,
            iw,
        ))
    }

    /// The IFM row (or column) kernel tap `k` of output `o` reads, `None` in the padding.
    #[inline]
    pub fn tap(
        o: usize,
        stride: usize,
        k: usize,
        dil: usize,
        pad: usize,
        extent: usize,
    ) -> Option<usize> {
        (o * stride + k * dil)
            .checked_sub(pad)
            .filter(|&i| i < extent)
    }
}
