//! [`Blob`]: a validated, zero-copy view of an NPU1 pack.
use super::{Accel, HEADER_BYTES, Header, REGION_DESC_BYTES, RegionDesc, checks};
use crate::{Error, FormatError, fnv};

/// A validated NPU1 pack, borrowed in place: nothing is copied, and every accessor returns a slice of
/// the original buffer. A `Blob` exists only if every check of [`Blob::parse`] passed, so its
/// accessors never need to re-check bounds.
#[derive(Debug, Clone, Copy)]
pub struct Blob<'a> {
    bytes: &'a [u8],
    header: Header,
}

impl<'a> Blob<'a> {
    /// Runs checks 1–9 of the loader, in the spec's order (see [`crate::format`]), and returns the
    /// view, or the first check that failed.
    ///
    /// Costs one FNV-1a pass over the payload plus a walk of `region_count` descriptors; no
    /// allocation.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let header = Self::parse_structure(bytes)?;
        let payload = &bytes[HEADER_BYTES as usize..];
        checks::checksum(header.checksum, fnv::fnv1a32(payload))?;
        Ok(Self { bytes, header })
    }

    /// Checks 1–9 like [`Blob::parse`], with the payload's FNV-1a supplied by a caller that already
    /// computed it in its own single pass over the bytes (a device hashing flash once for SHA-256 and
    /// FNV-1a together). The checks and their order are `parse`'s; only the hashing is skipped.
    ///
    /// The caller vouches that `payload_fnv` is FNV-1a of `bytes[32..]`; pass anything else and the
    /// checksum check means nothing.
    pub fn parse_prehashed(bytes: &'a [u8], payload_fnv: u32) -> Result<Self, Error> {
        let header = Self::parse_structure(bytes)?;
        checks::checksum(header.checksum, payload_fnv)?;
        Ok(Self { bytes, header })
    }

    /// Checks 1–8 (everything but the checksum), shared with callers that hash the payload
    /// themselves in the same pass as something else (the device re-reading flash).
    pub fn parse_structure(bytes: &[u8]) -> Result<Header, Error> {
        let len = bytes.len() as u64;
        checks::length(len)?;
        let h = Header::read(bytes).ok_or(Error::Format(FormatError::TooShort { len }))?;
        checks::magic(h.magic)?;
        checks::version(h.version)?;
        checks::total_bytes(h.total_bytes, len)?;
        checks::region_table(h.region_count, h.total_bytes)?;
        checks::command_stream(h.cmd_offset, h.cmd_bytes, h.total_bytes)?;
        for index in 0..h.region_count {
            let desc = read_desc(bytes, index).ok_or(Error::Format(
                FormatError::RegionTableOutOfBounds {
                    region_count: h.region_count,
                    table_end: h.region_table_end(),
                    total_bytes: h.total_bytes,
                },
            ))?;
            checks::region(&desc, h.total_bytes)?;
        }
        Ok(h)
    }

    /// The decoded header.
    pub const fn header(&self) -> Header {
        self.header
    }

    /// The accelerator configuration (informational).
    pub const fn accel(&self) -> Accel {
        self.header.accel()
    }

    /// The whole pack.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The Vela command stream, in place (what QBASE points at).
    pub fn command_stream(&self) -> &'a [u8] {
        let start = self.header.cmd_offset as usize;
        // In bounds: check 7 passed.
        &self.bytes[start..start + self.header.cmd_bytes as usize]
    }

    /// Number of region descriptors.
    pub const fn region_count(&self) -> u32 {
        self.header.region_count
    }

    /// Descriptor `index` (its BASEP slot), or `None` past the table.
    pub fn region(&self, index: u32) -> Option<RegionDesc> {
        if index >= self.header.region_count {
            return None;
        }
        read_desc(self.bytes, index)
    }

    /// The descriptors in table (BASEP) order.
    pub fn regions(&self) -> Regions<'a> {
        Regions {
            bytes: self.bytes,
            next: 0,
            count: self.header.region_count,
        }
    }

    /// A BAKED region's bytes, in place; `None` for a RUNTIME region or an index past the table.
    pub fn baked_bytes(&self, index: u32) -> Option<&'a [u8]> {
        let desc = self.region(index)?;
        if !desc.is_baked() {
            return None;
        }
        let start = desc.data_offset as usize;
        // In bounds: check 8 passed for every descriptor.
        self.bytes.get(start..start + desc.size as usize)
    }
}

fn read_desc(bytes: &[u8], index: u32) -> Option<RegionDesc> {
    let start = (HEADER_BYTES as usize).checked_add((index as usize).checked_mul(16)?)?;
    let end = start.checked_add(REGION_DESC_BYTES as usize)?;
    RegionDesc::read(index, bytes.get(start..end)?)
}

/// Iterator over a blob's region descriptors, in BASEP order.
#[derive(Debug, Clone)]
pub struct Regions<'a> {
    bytes: &'a [u8],
    next: u32,
    count: u32,
}

impl Iterator for Regions<'_> {
    type Item = RegionDesc;

    fn next(&mut self) -> Option<RegionDesc> {
        if self.next >= self.count {
            return None;
        }
        let d = read_desc(self.bytes, self.next);
        self.next += 1;
        d
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Regions<'_> {}
