//! Feature maps as the NPU addresses them: up to four tiles, NHWC or NHCWB16, 8/16/32-bit
//! elements, read into and written from dense NHWC `i64` buffers.
//!
//! | register (IFM / IFM2 / OFM) | meaning                                                  |
//! |-----------------------------|----------------------------------------------------------|
//! | `*_REGION`                  | the base pointer (region) the tiles are in               |
//! | `*_BASE0..3`                | byte offset of each tile                                 |
//! | `*_HEIGHT0_M1`, `*_HEIGHT1_M1`, `*_WIDTH0_M1` | the tile split (see below)             |
//! | `*_STRIDE_X/Y/C`            | byte strides (signed); `C` between 16-channel bricks      |
//! | `*_PRECISION`               | bit 0 signed; element size bits 3:2 (IFM) or 2:1 (OFM); layout bits 7:6 |
//! | `*_ZERO_POINT`              | subtracted on read (IFM) or added on write (OFM)          |
//!
//! A point `(y, x)` is in tile 0 (`x < w0, y < h0`), 2 (`x < w0, y ≥ h0`, rows from `h0`),
//! 1 (`x ≥ w0, y < h1`, columns from `w0`) or 3 (`x ≥ w0, y ≥ h1`). Its byte address is
//! `base + y·STRIDE_Y + x·STRIDE_X + c·elem` (NHWC) or
//! `base + y·STRIDE_Y + x·STRIDE_X + ⌊c/16⌋·STRIDE_C + (c mod 16)·elem` (NHCWB16), with `y`, `x`
//! local to the tile.
use npub_core::cmdstream::Reg;

use crate::error::RunError;
use crate::machine::{Mem, Site};

/// Which feature map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The input feature map.
    Ifm,
    /// The second input (binary elementwise).
    Ifm2,
    /// The output feature map.
    Ofm,
}

struct Regs {
    region: Reg,
    bases: [Reg; 4],
    height0: Reg,
    height1: Reg,
    width0: Reg,
    stride: [Reg; 3],
    precision: Reg,
    zero_point: Reg,
    size_shift: u32,
}

const fn regs(which: Which) -> Regs {
    match which {
        Which::Ifm => Regs {
            region: Reg::IfmRegion,
            bases: [Reg::IfmBase0, Reg::IfmBase1, Reg::IfmBase2, Reg::IfmBase3],
            height0: Reg::IfmHeight0M1,
            height1: Reg::IfmHeight1M1,
            width0: Reg::IfmWidth0M1,
            stride: [Reg::IfmStrideX, Reg::IfmStrideY, Reg::IfmStrideC],
            precision: Reg::IfmPrecision,
            zero_point: Reg::IfmZeroPoint,
            size_shift: 2,
        },
        Which::Ifm2 => Regs {
            region: Reg::Ifm2Region,
            bases: [
                Reg::Ifm2Base0,
                Reg::Ifm2Base1,
                Reg::Ifm2Base2,
                Reg::Ifm2Base3,
            ],
            height0: Reg::Ifm2Height0M1,
            height1: Reg::Ifm2Height1M1,
            width0: Reg::Ifm2Width0M1,
            stride: [Reg::Ifm2StrideX, Reg::Ifm2StrideY, Reg::Ifm2StrideC],
            precision: Reg::Ifm2Precision,
            zero_point: Reg::Ifm2ZeroPoint,
            size_shift: 2,
        },
        Which::Ofm => Regs {
            region: Reg::OfmRegion,
            bases: [Reg::OfmBase0, Reg::OfmBase1, Reg::OfmBase2, Reg::OfmBase3],
            height0: Reg::OfmHeight0M1,
            height1: Reg::OfmHeight1M1,
            width0: Reg::OfmWidth0M1,
            stride: [Reg::OfmStrideX, Reg::OfmStrideY, Reg::OfmStrideC],
            precision: Reg::OfmPrecision,
            zero_point: Reg::OfmZeroPoint,
            size_shift: 1,
        },
    }
}

/// The extent of a feature map an operation touches, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Rows.
    pub h: usize,
    /// Columns.
    pub w: usize,
    /// Channels.
    pub c: usize,
}

impl Dims {
    /// Elements.
    pub fn len(&self) -> usize {
        self.h * self.w * self.c
    }

    /// Dense NHWC index.
    #[inline]
    pub fn at(&self, y: usize, x: usize, c: usize) -> usize {
        (y * self.w + x) * self.c + c
    }
}

/// One feature map's addressing, read from the register file.
#[derive(Debug, Clone, Copy)]
pub struct FeatureMap {
    region: u8,
    bases: [i64; 4],
    h0: usize,
    h1: usize,
    w0: usize,
    stride_x: i64,
    stride_y: i64,
    stride_c: i64,
    /// Bytes per element: 1, 2 or 4.
    pub elem: usize,
    /// Signed elements.
    pub signed: bool,
    brick: bool,
    /// The zero point register, sign-extended from 16 bits for signed maps.
    pub zero_point: i64,
    /// PRECISION bits 15:14 (rounding) and 9:8 (IFM scale mode) stay available to the caller.
    pub precision: u32,
}

impl FeatureMap {
    /// Reads the registers of `which` (the verifier proved the address-deciding ones were set).
    pub fn new(site: &Site<'_>, which: Which) -> Result<Self, RunError> {
        let r = regs(which);
        let precision = site.get(r.precision);
        let elem = match (precision >> r.size_shift) & 0b11 {
            0 => 1,
            1 => 2,
            2 => 4,
            _ => {
                return Err(site.bad(
                    r.precision,
                    precision,
                    "64-bit elements are not a feature-map precision",
                ));
            }
        };
        let signed = precision & 1 == 1;
        let zp = site.get(r.zero_point);
        let zero_point = if signed {
            i64::from(zp as u16 as i16)
        } else {
            i64::from(zp as u16)
        };
        let mut bases = [0i64; 4];
        for (b, reg) in bases.iter_mut().zip(r.bases) {
            *b = i64::from(site.get(reg));
        }
        let signed_reg = |reg| i64::from(site.get(reg) as i32);
        Ok(FeatureMap {
            region: site.get(r.region) as u8,
            bases,
            h0: site.get(r.height0) as usize + 1,
            h1: site.get(r.height1) as usize + 1,
            w0: site.get(r.width0) as usize + 1,
            stride_x: signed_reg(r.stride[0]),
            stride_y: signed_reg(r.stride[1]),
            stride_c: signed_reg(r.stride[2]),
            elem,
            signed,
            brick: (precision >> 6) & 0b11 == 1,
            zero_point,
            precision,
        })
    }

    /// The smallest and largest value an element holds.
    pub fn range(&self) -> (i64, i64) {
        let bits = 8 * self.elem as u32;
        if self.signed {
            (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
        } else {
            (0, (1i64 << bits) - 1)
        }
    }

    /// Byte address of element `(y, x, c)` inside the region.
    #[inline]
    fn address(&self, y: usize, x: usize, c: usize) -> i64 {
        let (tile, y, x) = if x < self.w0 {
            if y < self.h0 {
                (0, y, x)
            } else {
                (2, y - self.h0, x)
            }
        } else if y < self.h1 {
            (1, y, x - self.w0)
        } else {
            (3, y - self.h1, x - self.w0)
        };
        let (y, x, c) = (y as i64, x as i64, c as i64);
        let e = self.elem as i64;
        let base = self.bases[tile] + y * self.stride_y + x * self.stride_x;
        if self.brick {
            base + (c / 16) * self.stride_c + (c % 16) * e
        } else {
            base + c * e
        }
    }

    /// The runs of contiguous channels at `(y, x)`: `(first channel, count, byte address)`: all
    /// channels at once for NHWC, one brick of up to 16 for NHCWB16.
    #[inline]
    fn runs(&self, y: usize, x: usize, c: usize) -> impl Iterator<Item = (usize, usize, i64)> + '_ {
        let base = self.address(y, x, 0);
        let step = if self.brick { 16 } else { c.max(1) };
        (0..c).step_by(step).map(move |c0| {
            let n = step.min(c - c0);
            let a = if self.brick {
                base + (c0 as i64 / 16) * self.stride_c
            } else {
                base
            };
            (c0, n, a)
        })
    }

    /// Reads `dims` elements (raw values, zero point not subtracted) into a dense NHWC buffer.
    ///
    /// Refuses a map whose elements would outnumber its region's bytes: elements of a map the
    /// NPU reads never share bytes, and this bounds the buffer by the pack's own regions.
    pub fn read(&self, mem: &Mem<'_>, site: &Site<'_>, dims: Dims) -> Result<Vec<i64>, RunError> {
        let region = mem.region(self.region);
        self.check_size(region.len(), site, dims)?;
        let mut out = vec![0i64; dims.len()];
        for y in 0..dims.h {
            for x in 0..dims.w {
                let at = dims.at(y, x, 0);
                for (c0, n, a) in self.runs(y, x, dims.c) {
                    let bytes = self.bytes(region, a, n, site)?;
                    for (v, b) in out[at + c0..at + c0 + n]
                        .iter_mut()
                        .zip(bytes.chunks_exact(self.elem))
                    {
                        *v = self.value(b);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Writes a dense NHWC buffer of `dims` elements (already in range), recording `site` as the
    /// writer of every byte when the machine tracks writers.
    pub fn write(
        &self,
        mem: &mut Mem<'_>,
        site: &Site<'_>,
        dims: Dims,
        values: &[i64],
    ) -> Result<(), RunError> {
        self.check_size(mem.region(self.region).len(), site, dims)?;
        let mut buf = Vec::with_capacity(dims.c.min(16).max(dims.c) * self.elem);
        for y in 0..dims.h {
            for x in 0..dims.w {
                let at = dims.at(y, x, 0);
                for (c0, n, a) in self.runs(y, x, dims.c) {
                    buf.clear();
                    for v in &values[at + c0..at + c0 + n] {
                        buf.extend_from_slice(&v.to_le_bytes()[..self.elem]);
                    }
                    mem.store(self.region, a, &buf, site)?;
                }
            }
        }
        Ok(())
    }

    /// Refuses `dims` elements that would need more bytes than the map's region holds (see
    /// [`Self::read`]); every operation checks its OFM with it before allocating the result.
    pub fn fits(&self, mem: &Mem<'_>, site: &Site<'_>, dims: Dims) -> Result<(), RunError> {
        self.check_size(mem.region(self.region).len(), site, dims)
    }

    fn check_size(&self, region_len: usize, site: &Site<'_>, dims: Dims) -> Result<(), RunError> {
        let bytes = (dims.h as u128) * (dims.w as u128) * (dims.c as u128) * (self.elem as u128);
        if bytes > region_len as u128 {
            return Err(RunError::Unsupported {
                offset: site.offset,
                op: site.name,
                what: "a feature map with more element bytes than its region (overlapping elements)",
            });
        }
        Ok(())
    }

    #[inline]
    fn bytes<'r>(
        &self,
        region: &'r [u8],
        a: i64,
        n: usize,
        site: &Site<'_>,
    ) -> Result<&'r [u8], RunError> {
        usize::try_from(a)
            .ok()
            .and_then(|s| region.get(s..s.checked_add(n * self.elem)?))
            .ok_or(RunError::OutOfRange {
                offset: site.offset,
                op: site.name,
                region: self.region,
                address: a,
            })
    }

    #[inline]
    fn value(&self, b: &[u8]) -> i64 {
        match (self.elem, self.signed) {
            (1, true) => i64::from(b[0] as i8),
            (1, false) => i64::from(b[0]),
            (2, true) => i64::from(i16::from_le_bytes([b[0], b[1]])),
            (2, false) => i64::from(u16::from_le_bytes([b[0], b[1]])),
            (_, true) => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            (_, false) => i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        }
    }
}
