//! Errors of the NPU1 container (`format/`): the loader's checks 1–11 as `NPU1-format.txt` numbers them, streaming and building.
use core::fmt;

/// The NPU1 container, as `format/` parses, streams, binds and builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// Check 1: fewer bytes than the 32-byte header.
    TooShort {
        /// Bytes available.
        len: u64,
    },
    /// Check 2: word 0 is not `0x3155504E`.
    BadMagic {
        /// The word found.
        found: u32,
    },
    /// Check 3: word 1 is not 1. Unknown revisions are never best-effort parsed.
    UnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// Check 4: `total_bytes` disagrees with the real length of the buffer (or, streaming, with the
    /// length the caller expects).
    TotalBytesMismatch {
        /// Word 2 as stored.
        total_bytes: u32,
        /// The real length.
        actual: u64,
    },
    /// Check 5: the region table `[32, 32 + 16 × region_count)` runs past `total_bytes`.
    RegionTableOutOfBounds {
        /// Word 3 as stored.
        region_count: u32,
        /// `32 + 16 × region_count`, computed without wrapping.
        table_end: u64,
        /// Word 2.
        total_bytes: u32,
    },
    /// Check 6: `cmd_bytes` is 0: the NPU would be pointed at an empty stream.
    EmptyCommandStream,
    /// Check 7: `[cmd_offset, cmd_offset + cmd_bytes)` runs past `total_bytes`.
    CommandStreamOutOfBounds {
        /// Word 4.
        cmd_offset: u32,
        /// Word 5.
        cmd_bytes: u32,
        /// Word 2.
        total_bytes: u32,
    },
    /// Check 8: a descriptor sets flag bits version 1 does not define.
    UnknownRegionFlags {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// The flags word.
        flags: u32,
    },
    /// Check 8: a BAKED descriptor's `[data_offset, data_offset + size)` runs past `total_bytes`.
    BakedRegionOutOfBounds {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// Word 3 of the descriptor.
        data_offset: u32,
        /// Word 2 of the descriptor.
        size: u32,
        /// Header word 2.
        total_bytes: u32,
    },
    /// Check 9: the payload's FNV-1a differs from the header's `checksum` (bit rot, a torn write).
    ChecksumMismatch {
        /// Header word 7.
        stored: u32,
        /// FNV-1a 32 of bytes `32..total_bytes`.
        computed: u32,
    },
    /// Check 10 (bind): more regions than the Ethos-U55 has base pointers.
    TooManyRegions {
        /// `region_count`.
        region_count: u32,
        /// Base pointers available ([`crate::format::MAX_BASE_POINTERS`]).
        max: u32,
    },
    /// Check 11 (bind): a RUNTIME region does not fit what remains of the arena after alignment.
    ArenaTooSmall {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// The region's size.
        size: u32,
        /// Where in the arena the region would start, after 16-byte alignment of its real address.
        offset: u64,
        /// The arena's length.
        arena_len: u64,
    },
    /// Streaming: more bytes arrived than the blob's expected length.
    StreamOverrun {
        /// The length the validator was told to expect.
        expected: u32,
    },
    /// Building: the blob would be larger than a `u32` can describe.
    PackTooLarge {
        /// The length it would have had.
        bytes: u64,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(
                f,
                "NPU1 header: the buffer is {len} bytes, shorter than the 32-byte header"
            ),
            Self::BadMagic { found } => write!(
                f,
                "NPU1 header: magic is {found:#010x}, expected 0x3155504e (\"NPU1\"): not an NPU1 pack"
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "NPU1 header: version is {found}, this loader reads only version 1"
            ),
            Self::TotalBytesMismatch {
                total_bytes,
                actual,
            } => write!(
                f,
                "NPU1 header: total_bytes is {total_bytes} but the pack is {actual} bytes long \
                 (truncated or padded?)"
            ),
            Self::RegionTableOutOfBounds {
                region_count,
                table_end,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: region_count {region_count} needs a region table [32, {table_end}), \
                 which runs past total_bytes {total_bytes}"
            ),
            Self::EmptyCommandStream => {
                f.write_str("NPU1 header: cmd_bytes is 0; the command stream must not be empty")
            }
            Self::CommandStreamOutOfBounds {
                cmd_offset,
                cmd_bytes,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: command stream [{cmd_offset}, {}) (cmd_offset {cmd_offset} + cmd_bytes \
                 {cmd_bytes}) runs past total_bytes {total_bytes}",
                u64::from(cmd_offset) + u64::from(cmd_bytes)
            ),
            Self::UnknownRegionFlags { region, flags } => write!(
                f,
                "region {region}: flags {flags:#010x} set bits other than BAKED (0x1), which \
                 version 1 does not define"
            ),
            Self::BakedRegionOutOfBounds {
                region,
                data_offset,
                size,
                total_bytes,
            } => write!(
                f,
                "region {region}: baked data [{data_offset}, {}) (data_offset {data_offset} + size \
                 {size}) runs past total_bytes {total_bytes}",
                u64::from(data_offset) + u64::from(size)
            ),
            Self::ChecksumMismatch { stored, computed } => write!(
                f,
                "NPU1 payload: FNV-1a of bytes 32.. is {computed:#010x} but the header's checksum is \
                 {stored:#010x} (corrupted in transit or in flash)"
            ),
            Self::TooManyRegions { region_count, max } => write!(
                f,
                "NPU1 region table: {region_count} regions, but the Ethos-U55 has only {max} base \
                 pointers (BASEP0..BASEP{})",
                max.saturating_sub(1)
            ),
            Self::ArenaTooSmall {
                region,
                size,
                offset,
                arena_len,
            } => write!(
                f,
                "region {region}: runtime size {size} at arena offset {offset} (after 16-byte \
                 alignment) needs {} bytes, but the arena is {arena_len} bytes",
                offset + u64::from(size)
            ),
            Self::StreamOverrun { expected } => write!(
                f,
                "NPU1 stream: more bytes arrived than the expected {expected}"
            ),
            Self::PackTooLarge { bytes } => write!(
                f,
                "NPU1 builder: the pack would be {bytes} bytes, more than total_bytes (u32) can say"
            ),
        }
    }
}

impl core::error::Error for FormatError {}
