//! The loader's checks, one function each, shared by [`super::Blob::parse`] (whole buffer) and
//! [`super::StreamValidator`] (bytes as they arrive) so that both reach the same verdict and the same
//! error. The numbering follows the table in [`super`].
use super::{HEADER_BYTES, KNOWN_FLAGS, MAGIC, RegionDesc, VERSION};
use crate::{Error, FormatError};

/// Check 1: the buffer holds at least a header.
pub(crate) fn length(len: u64) -> Result<(), Error> {
    if len < u64::from(HEADER_BYTES) {
        return Err(Error::Format(FormatError::TooShort { len }));
    }
    Ok(())
}

/// Check 2.
pub(crate) fn magic(found: u32) -> Result<(), Error> {
    if found != MAGIC {
        return Err(Error::Format(FormatError::BadMagic { found }));
    }
    Ok(())
}

/// Check 3.
pub(crate) fn version(found: u32) -> Result<(), Error> {
    if found != VERSION {
        return Err(Error::Format(FormatError::UnsupportedVersion { found }));
    }
    Ok(())
}

/// Check 4: `total_bytes` equals the real (or expected) length.
pub(crate) fn total_bytes(total_bytes: u32, actual: u64) -> Result<(), Error> {
    if u64::from(total_bytes) != actual {
        return Err(Error::Format(FormatError::TotalBytesMismatch {
            total_bytes,
            actual,
        }));
    }
    Ok(())
}

/// Check 5: `32 + 16 × region_count ≤ total_bytes`, in 64 bits.
pub(crate) fn region_table(region_count: u32, total_bytes: u32) -> Result<(), Error> {
    let table_end = u64::from(HEADER_BYTES) + 16 * u64::from(region_count);
    if table_end > u64::from(total_bytes) {
        return Err(Error::Format(FormatError::RegionTableOutOfBounds {
            region_count,
            table_end,
            total_bytes,
        }));
    }
    Ok(())
}

/// Checks 6 and 7: a non-empty command stream inside the blob.
pub(crate) fn command_stream(
    cmd_offset: u32,
    cmd_bytes: u32,
    total_bytes: u32,
) -> Result<(), Error> {
    if cmd_bytes == 0 {
        return Err(Error::Format(FormatError::EmptyCommandStream));
    }
    if u64::from(cmd_offset) + u64::from(cmd_bytes) > u64::from(total_bytes) {
        return Err(Error::Format(FormatError::CommandStreamOutOfBounds {
            cmd_offset,
            cmd_bytes,
            total_bytes,
        }));
    }
    Ok(())
}

/// Check 8, for one descriptor: known flags, and baked bytes inside the blob.
///
/// Overlap between regions (or with the tables or the stream) is deliberately not checked: each
/// region is bounded on its own, which is what memory safety needs; aliasing is a producer bug.
pub(crate) fn region(desc: &RegionDesc, total_bytes: u32) -> Result<(), Error> {
    if desc.flags & !KNOWN_FLAGS != 0 {
        return Err(Error::Format(FormatError::UnknownRegionFlags {
            region: desc.index,
            flags: desc.flags,
        }));
    }
    if desc.is_baked() && desc.data_end() > u64::from(total_bytes) {
        return Err(Error::Format(FormatError::BakedRegionOutOfBounds {
            region: desc.index,
            data_offset: desc.data_offset,
            size: desc.size,
            total_bytes,
        }));
    }
    Ok(())
}

/// Check 9.
pub(crate) fn checksum(stored: u32, computed: u32) -> Result<(), Error> {
    if stored != computed {
        return Err(Error::Format(FormatError::ChecksumMismatch {
            stored,
            computed,
        }));
    }
    Ok(())
}
