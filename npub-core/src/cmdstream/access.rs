//! One access — an operand's byte range in a region or in SHRAM — checked against the memory map.
use core::fmt;

use super::opcodes::Operation;
use super::summary::{Span, StreamSummary};
use crate::Error;
use crate::format::MAX_BASE_POINTERS;

/// Which operand of an operation an access belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Input feature map, tile 0..3.
    IfmTile(u8),
    /// Second input feature map (binary elementwise), tile 0..3.
    Ifm2Tile(u8),
    /// Output feature map, tile 0..3.
    OfmTile(u8),
    /// `[WEIGHT_BASE, WEIGHT_BASE + WEIGHT_LENGTH)`.
    Weight,
    /// `[SCALE_BASE, SCALE_BASE + SCALE_LENGTH)`.
    Scale,
    /// `[WEIGHT1_BASE, +WEIGHT1_LENGTH)`: the second core's weights (U65-512), if the stream sets them.
    Weight1,
    /// `[SCALE1_BASE, +SCALE1_LENGTH)`: the second core's scales (U65-512), if the stream sets them.
    Scale1,
    /// `[DMA0_SRC, DMA0_SRC + DMA0_LEN)`.
    DmaSrc,
    /// `[DMA0_DST, DMA0_DST + DMA0_LEN)`.
    DmaDst,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IfmTile(k) => write!(f, "IFM tile {k}"),
            Self::Ifm2Tile(k) => write!(f, "IFM2 tile {k}"),
            Self::OfmTile(k) => write!(f, "OFM tile {k}"),
            Self::Weight => f.write_str("WEIGHT"),
            Self::Scale => f.write_str("SCALE"),
            Self::Weight1 => f.write_str("WEIGHT1"),
            Self::Scale1 => f.write_str("SCALE1"),
            Self::DmaSrc => f.write_str("DMA src"),
            Self::DmaDst => f.write_str("DMA dst"),
        }
    }
}

/// Where an access lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// Region *n*, addressed through base pointer BASEP*n* (0..7).
    Region(u8),
    /// The NPU's internal shared buffer (a DMA with the "internal" bit set).
    Shram,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Region(r) => write!(f, "region {r}"),
            Self::Shram => f.write_str("SHRAM"),
        }
    }
}

/// The sizes the stream is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Memory<'a> {
    regions: &'a [u32],
    shram: u32,
}

impl<'a> Memory<'a> {
    /// Region *n* has size `regions[n]`; only the first [`MAX_BASE_POINTERS`] can be addressed.
    pub fn new(regions: &'a [u32], shram: u32) -> Self {
        let n = regions.len().min(MAX_BASE_POINTERS);
        Self {
            regions: &regions[..n],
            shram,
        }
    }
}

/// Where in the stream an access is made: for errors.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// Byte offset of the operation's command.
    pub offset: u32,
    /// The operation.
    pub op: Operation,
}

/// Checks `[start, end)` of `operand` against `target` and adds it to `summary`.
///
/// An empty range (`start ≥ end`: a zero length) touches nothing and is accepted without looking
/// at its target. Otherwise the region must have a descriptor and the whole range must lie inside
/// its size (a region of size 0 therefore rejects every access).
pub fn check(
    mem: &Memory<'_>,
    summary: &mut StreamSummary,
    site: Site,
    operand: Operand,
    target: Target,
    start: i64,
    end: i64,
) -> Result<(), Error> {
    if start >= end {
        return Ok(());
    }
    let size = match target {
        Target::Region(r) => *mem
            .regions
            .get(usize::from(r))
            .ok_or(Error::CmdRegionMissing {
                offset: site.offset,
                op: site.op,
                operand,
                region: r,
                regions: mem.regions.len() as u32,
            })?,
        Target::Shram => mem.shram,
    };
    if start < 0 || end > i64::from(size) {
        return Err(Error::CmdOutOfRange {
            offset: site.offset,
            op: site.op,
            operand,
            start,
            end,
            target,
            size,
        });
    }
    // Both in [0, size], size a u32.
    summary.record(
        target,
        Span {
            start: start as u32,
            end: end as u32,
        },
    );
    Ok(())
}
