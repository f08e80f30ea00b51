//! What each operation reads and writes, from the register file at the moment it is issued.
//!
//! | operation   | registers it reads (beyond the feature maps')                          | accesses |
//! |-------------|------------------------------------------------------------------------|----------|
//! | CONV        | OFM shape, kernel size and stride, pads, upscale, weight/scale ranges   | IFM tiles, WEIGHT, SCALE, OFM tiles |
//! | DEPTHWISE   | as CONV                                                                | as CONV |
//! | POOL        | OFM shape, kernel size and stride, pads, upscale                        | IFM tiles, OFM tiles |
//! | ELEMENTWISE | OFM shape, upscale, and for binary modes `IFM2_BROADCAST`                | IFM tiles, IFM2 tiles unless scalar, OFM tiles |
//! | DMA_START   | `DMA0_SRC/DST_REGION`, `DMA0_SRC/DST`, `DMA0_LEN`                       | DMA src, DMA dst |
//!
//! A feature map reads its REGION, PRECISION, `HEIGHT0`/`WIDTH0` (and `HEIGHT1` when it is split in
//! width), `STRIDE_X`/`STRIDE_Y` (and `STRIDE_C` for NHCWB16), and `BASEk` of each tile present.
//! Only registers that decide an address are required to have been set; the rest (zero points,
//! activation, block config, …) may legitimately be left from earlier in the stream, and a stale
//! value cannot move an access.
//!
//! Extents:
//! - OFM: `OFM_HEIGHT_M1 + 1` × `OFM_WIDTH_M1 + 1` × `OFM_DEPTH_M1 + 1`.
//! - IFM for CONV/DEPTHWISE/POOL: per axis `(OFM − 1)·stride + kernel − pads` (see
//!   [`sweep_extent`], clamped to at least 1); for ELEMENTWISE the OFM's height and width. Depth is
//!   `IFM_DEPTH_M1 + 1`. With `IFM_UPSCALE` nearest or transpose (2×) the IFM is
//!   [`upscale_source`] of that — a small over-approximation, never an under-count.
//! - IFM2: the OFM's height and width and the larger of IFM and OFM depth, each 1 along a
//!   broadcast axis (`IFM2_BROADCAST` bits 0–2); nothing at all if bit 7 (scalar) is set.
//!
//! Fail-closed choices: an unknown POOL or ELEMENTWISE mode, a DMA_START param other than 0
//! (channel 0, mode 0: all the U55 has), a 2-D/3-D DMA (stride mode ≠ 0: Vela emits 1-D only and
//! this checker does not model `DMA0_SKIP`/`SIZE`), a reserved upscale mode, element size or
//! layout, and a region field above 7 are all rejected.
use super::access::{self, Memory, Site};
use super::opcodes::{ElementwiseArity, Operation, POOL_MODES, elementwise_arity};
use super::operand::{Operand, Target};
use super::ranges::{
    Extent, Geometry, Layout, Split, kernel_strides, needs_height1, sweep_extent, tile_bytes,
    tiles, upscale_source,
};
use super::registers::{Reg, RegisterFile};
use super::summary::StreamSummary;
use crate::format::MAX_BASE_POINTERS;
use crate::{Error, StreamError};

/// `IFM2_BROADCAST` bits.
const BROADCAST_H: u32 = 1 << 0;
const BROADCAST_W: u32 = 1 << 1;
const BROADCAST_C: u32 = 1 << 2;
const BROADCAST_SCALAR: u32 = 1 << 7;

/// `DMA0_*_REGION` fields: region bits 7:0, internal (SHRAM) bit 8, stride mode bits 10:9.
const DMA_REGION_MASK: u32 = 0xFF;
const DMA_INTERNAL: u32 = 1 << 8;
const DMA_STRIDE_MODE_SHIFT: u32 = 9;
const DMA_RESERVED_SHIFT: u32 = 11;

/// PRECISION bits 7:6: the layout.
const FORMAT_SHIFT: u32 = 6;

/// The registers of one feature map.
struct FeatureMap {
    region: Reg,
    bases: [Reg; 4],
    height0: Reg,
    height1: Reg,
    width0: Reg,
    stride_x: Reg,
    stride_y: Reg,
    stride_c: Reg,
    precision: Reg,
    /// Where PRECISION keeps the 2-bit element size: bits 3:2 for IFM/IFM2, 2:1 for OFM.
    size_shift: u32,
    operand: fn(u8) -> Operand,
}

const IFM: FeatureMap = FeatureMap {
    region: Reg::IfmRegion,
    bases: [Reg::IfmBase0, Reg::IfmBase1, Reg::IfmBase2, Reg::IfmBase3],
    height0: Reg::IfmHeight0M1,
    height1: Reg::IfmHeight1M1,
    width0: Reg::IfmWidth0M1,
    stride_x: Reg::IfmStrideX,
    stride_y: Reg::IfmStrideY,
    stride_c: Reg::IfmStrideC,
    precision: Reg::IfmPrecision,
    size_shift: 2,
    operand: Operand::IfmTile,
};

const IFM2: FeatureMap = FeatureMap {
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
    stride_x: Reg::Ifm2StrideX,
    stride_y: Reg::Ifm2StrideY,
    stride_c: Reg::Ifm2StrideC,
    precision: Reg::Ifm2Precision,
    size_shift: 2,
    operand: Operand::Ifm2Tile,
};

const OFM: FeatureMap = FeatureMap {
    region: Reg::OfmRegion,
    bases: [Reg::OfmBase0, Reg::OfmBase1, Reg::OfmBase2, Reg::OfmBase3],
    height0: Reg::OfmHeight0M1,
    height1: Reg::OfmHeight1M1,
    width0: Reg::OfmWidth0M1,
    stride_x: Reg::OfmStrideX,
    stride_y: Reg::OfmStrideY,
    stride_c: Reg::OfmStrideC,
    precision: Reg::OfmPrecision,
    size_shift: 1,
    operand: Operand::OfmTile,
};

/// One operation being checked.
pub struct Exec<'a> {
    regs: &'a RegisterFile,
    mem: &'a Memory<'a>,
    summary: &'a mut StreamSummary,
    site: Site,
}

impl<'a> Exec<'a> {
    /// The operation `op` at byte `offset`, seeing `regs`.
    pub fn new(
        regs: &'a RegisterFile,
        mem: &'a Memory<'a>,
        summary: &'a mut StreamSummary,
        offset: u32,
        op: Operation,
    ) -> Self {
        Self {
            regs,
            mem,
            summary,
            site: Site { offset, op },
        }
    }

    /// Checks every access of the operation, given its command's param.
    pub fn run(mut self, param: u16) -> Result<(), Error> {
        match self.site.op {
            Operation::DmaStart => self.dma(param),
            Operation::Pool if param >= POOL_MODES => {
                Err(self.bad_param(param, "not a pooling mode (0 MAX, 1 AVERAGE, 2 REDUCE_SUM)"))
            }
            Operation::Elementwise => match elementwise_arity(param) {
                Some(arity) => self.block(Some(arity)),
                None => Err(self.bad_param(param, "not an Ethos-U55 elementwise mode (0..9)")),
            },
            Operation::Conv | Operation::Depthwise | Operation::Pool => self.block(None),
        }
    }

    fn block(&mut self, elementwise: Option<ElementwiseArity>) -> Result<(), Error> {
        let ofm = Extent {
            h: self.m1(Reg::OfmHeightM1)?,
            w: self.m1(Reg::OfmWidthM1)?,
            c: self.m1(Reg::OfmDepthM1)?,
        };
        let upscale = self.get(Reg::IfmUpscale)?;
        let (h, w) = match elementwise {
            Some(_) => (ofm.h, ofm.w),
            None => self.kernel_sweep(ofm)?,
        };
        let (h, w) = match upscale & 0b11 {
            0 => (h, w),
            1 | 2 => (upscale_source(h), upscale_source(w)),
            _ => {
                return Err(self.invalid(
                    Reg::IfmUpscale,
                    upscale,
                    "upscale mode 3 is reserved (0 none, 1 nearest, 2 transpose)",
                ));
            }
        };
        let ifm = Extent {
            h,
            w,
            c: self.m1(Reg::IfmDepthM1)?,
        };
        self.feature_map(&IFM, ifm)?;

        if elementwise == Some(ElementwiseArity::Binary) {
            let b = self.get(Reg::Ifm2Broadcast)?;
            if b & BROADCAST_SCALAR == 0 {
                let ifm2 = Extent {
                    h: if b & BROADCAST_H != 0 { 1 } else { ofm.h },
                    w: if b & BROADCAST_W != 0 { 1 } else { ofm.w },
                    c: if b & BROADCAST_C != 0 {
                        1
                    } else {
                        ifm.c.max(ofm.c)
                    },
                };
                self.feature_map(&IFM2, ifm2)?;
            }
        }

        if matches!(self.site.op, Operation::Conv | Operation::Depthwise) {
            self.linear(
                Operand::Weight,
                Reg::WeightRegion,
                Reg::WeightBase,
                Reg::WeightLength,
            )?;
            self.linear(
                Operand::Scale,
                Reg::ScaleRegion,
                Reg::ScaleBase,
                Reg::ScaleLength,
            )?;
            // The second core's ranges exist only on U65-512; if a stream sets them, check them.
            if self.is_set(Reg::Weight1Base) || self.is_set(Reg::Weight1Length) {
                self.linear(
                    Operand::Weight1,
                    Reg::WeightRegion,
                    Reg::Weight1Base,
                    Reg::Weight1Length,
                )?;
            }
            if self.is_set(Reg::Scale1Base) || self.is_set(Reg::Scale1Length) {
                self.linear(
                    Operand::Scale1,
                    Reg::ScaleRegion,
                    Reg::Scale1Base,
                    Reg::Scale1Length,
                )?;
            }
        }

        self.feature_map(&OFM, ofm)
    }

    /// IFM rows × columns a kernel sweep reads to produce `ofm`.
    fn kernel_sweep(&self, ofm: Extent) -> Result<(u32, u32), Error> {
        let kw = self.m1(Reg::KernelWidthM1)?;
        let kh = self.m1(Reg::KernelHeightM1)?;
        let (sx, sy) = kernel_strides(self.get(Reg::KernelStride)?);
        let top = self.get(Reg::IfmPadTop)?;
        let bottom = self.get(Reg::IfmPadBottom)?;
        let left = self.get(Reg::IfmPadLeft)?;
        let right = self.get(Reg::IfmPadRight)?;
        Ok((
            sweep_extent(ofm.h, sy, kh, top, bottom),
            sweep_extent(ofm.w, sx, kw, left, right),
        ))
    }

    fn feature_map(&mut self, fm: &FeatureMap, ext: Extent) -> Result<(), Error> {
        let region = self.region(fm.region)?;
        let geometry = self.geometry(fm)?;
        let h0 = self.m1(fm.height0)?;
        let w0 = self.m1(fm.width0)?;
        let h1 = if needs_height1(ext, w0) {
            self.m1(fm.height1)?
        } else {
            // Not read: only tiles 1 and 3 (right of WIDTH0) use it.
            h0
        };
        for (k, tile) in tiles(ext, Split { h0, h1, w0 }).into_iter().enumerate() {
            let Some((rows, cols)) = tile else { continue };
            let base = i64::from(self.get(fm.bases[k])?);
            let (lo, end) = tile_bytes(&geometry, rows, cols, ext.c);
            self.access(
                (fm.operand)(k as u8),
                Target::Region(region),
                base + lo,
                base + end,
            )?;
        }
        Ok(())
    }

    fn geometry(&self, fm: &FeatureMap) -> Result<Geometry, Error> {
        let p = self.get(fm.precision)?;
        let elem = match (p >> fm.size_shift) & 0b11 {
            0 => 1,
            1 => 2,
            2 => 4,
            _ => {
                return Err(self.invalid(
                    fm.precision,
                    p,
                    "element size field 3 is reserved (0: 8, 1: 16, 2: 32 bits)",
                ));
            }
        };
        let layout = match (p >> FORMAT_SHIFT) & 0b11 {
            0 => Layout::Nhwc,
            1 => Layout::Nhcwb16,
            _ => {
                return Err(self.invalid(
                    fm.precision,
                    p,
                    "format (bits 7:6) is neither 0 (NHWC) nor 1 (NHCWB16)",
                ));
            }
        };
        let stride_c = match layout {
            Layout::Nhcwb16 => self.signed(fm.stride_c)?,
            Layout::Nhwc => 0,
        };
        Ok(Geometry {
            layout,
            elem,
            stride_x: self.signed(fm.stride_x)?,
            stride_y: self.signed(fm.stride_y)?,
            stride_c,
        })
    }

    /// `[BASE, BASE + LENGTH)` in the region of `region`.
    fn linear(&mut self, operand: Operand, region: Reg, base: Reg, len: Reg) -> Result<(), Error> {
        let region = self.region(region)?;
        let start = i64::from(self.get(base)?);
        let end = start + i64::from(self.get(len)?);
        self.access(operand, Target::Region(region), start, end)
    }

    fn dma(&mut self, param: u16) -> Result<(), Error> {
        if param != 0 {
            return Err(self.bad_param(
                param,
                "the Ethos-U55 has DMA channel 0, mode 0 only (param = channel·16 + mode)",
            ));
        }
        let len = i64::from(self.get(Reg::Dma0Len)?);
        let src = self.dma_target(Reg::Dma0SrcRegion)?;
        let s = i64::from(self.get(Reg::Dma0Src)?);
        self.access(Operand::DmaSrc, src, s, s + len)?;
        let dst = self.dma_target(Reg::Dma0DstRegion)?;
        let d = i64::from(self.get(Reg::Dma0Dst)?);
        self.access(Operand::DmaDst, dst, d, d + len)
    }

    fn dma_target(&self, reg: Reg) -> Result<Target, Error> {
        let v = self.get(reg)?;
        if v >> DMA_RESERVED_SHIFT != 0 {
            return Err(self.invalid(reg, v, "reserved bits 15:11 are set"));
        }
        if (v >> DMA_STRIDE_MODE_SHIFT) & 0b11 != 0 {
            return Err(self.invalid(
                reg,
                v,
                "2-D/3-D DMA (stride mode, bits 10:9) is not modelled by this checker; \
                 Vela emits 1-D DMA only",
            ));
        }
        if v & DMA_INTERNAL != 0 {
            return Ok(Target::Shram);
        }
        let r = v & DMA_REGION_MASK;
        if r as usize >= MAX_BASE_POINTERS {
            return Err(self.invalid(reg, v, "region is above 7 (BASEP0..BASEP7)"));
        }
        Ok(Target::Region(r as u8))
    }

    fn region(&self, reg: Reg) -> Result<u8, Error> {
        let v = self.get(reg)?;
        if v as usize >= MAX_BASE_POINTERS {
            return Err(self.invalid(reg, v, "region is above 7 (BASEP0..BASEP7)"));
        }
        Ok(v as u8)
    }

    fn access(
        &mut self,
        operand: Operand,
        target: Target,
        start: i64,
        end: i64,
    ) -> Result<(), Error> {
        access::check(
            self.mem,
            self.summary,
            self.site,
            operand,
            target,
            start,
            end,
        )
    }

    fn is_set(&self, reg: Reg) -> bool {
        self.regs.read(reg).is_some()
    }

    fn get(&self, reg: Reg) -> Result<u32, Error> {
        self.regs
            .read(reg)
            .ok_or(Error::Stream(StreamError::UnsetRegister {
                offset: self.site.offset,
                op: self.site.op,
                reg,
            }))
    }

    /// A `*_M1` register plus one (at most 65 536).
    fn m1(&self, reg: Reg) -> Result<u32, Error> {
        Ok(self.get(reg)? + 1)
    }

    /// A stride: the data word as a signed 32-bit number.
    fn signed(&self, reg: Reg) -> Result<i64, Error> {
        Ok(i64::from(self.get(reg)? as i32))
    }

    fn invalid(&self, reg: Reg, value: u32, problem: &'static str) -> Error {
        Error::Stream(StreamError::InvalidRegister {
            offset: self.site.offset,
            op: self.site.op,
            reg,
            value,
            problem,
        })
    }

    fn bad_param(&self, param: u16, problem: &'static str) -> Error {
        Error::Stream(StreamError::BadOperationParam {
            offset: self.site.offset,
            op: self.site.op,
            param,
            problem,
        })
    }
}
