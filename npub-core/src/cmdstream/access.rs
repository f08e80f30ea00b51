//! One access — an operand's byte range in a region or in SHRAM — checked against the memory map.
use super::opcodes::Operation;
use super::operand::{Operand, Target};
use super::summary::{Span, StreamSummary};
use crate::format::MAX_BASE_POINTERS;
use crate::{Error, StreamError};

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
    let size =
        match target {
            Target::Region(r) => *mem.regions.get(usize::from(r)).ok_or(Error::Stream(
                StreamError::RegionMissing {
                    offset: site.offset,
                    op: site.op,
                    operand,
                    region: r,
                    regions: mem.regions.len() as u32,
                },
            ))?,
            Target::Shram => mem.shram,
        };
    if start < 0 || end > i64::from(size) {
        return Err(Error::Stream(StreamError::OutOfRange {
            offset: site.offset,
            op: site.op,
            operand,
            start,
            end,
            target,
            size,
        }));
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
