//! The crate's one error type.
//!
//! Every input npub-core rejects has its own variant, and its `Display` names the structure, the field
//! and the numbers involved, so that an operator reading a server's 422 or a device's status report
//! knows exactly what was wrong and where.
//!
//! The type is `Copy` and `no_std`: a device reports it without allocating.
use core::fmt;

/// Everything npub-core can reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    // ----- NPU1 container (format/) -----------------------------------------------------------
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
    // ----- Ethos-U55 command stream (cmdstream/) ------------------------------------------------
    // ----- signed manifests and keys (manifest/, keys/) ------------------------------------------
    // ----- Vela import (vela/, std) --------------------------------------------------------------
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            // ----- NPU1 container ----------------------------------------------------------------
            Error::TooShort { len } => write!(
                f,
                "NPU1 header: the buffer is {len} bytes, shorter than the 32-byte header"
            ),
            Error::BadMagic { found } => write!(
                f,
                "NPU1 header: magic is {found:#010x}, expected 0x3155504e (\"NPU1\"): not an NPU1 pack"
            ),
            Error::UnsupportedVersion { found } => write!(
                f,
                "NPU1 header: version is {found}, this loader reads only version 1"
            ),
            Error::TotalBytesMismatch {
                total_bytes,
                actual,
            } => write!(
                f,
                "NPU1 header: total_bytes is {total_bytes} but the pack is {actual} bytes long \
                 (truncated or padded?)"
            ),
            Error::RegionTableOutOfBounds {
                region_count,
                table_end,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: region_count {region_count} needs a region table [32, {table_end}), \
                 which runs past total_bytes {total_bytes}"
            ),
            Error::EmptyCommandStream => {
                f.write_str("NPU1 header: cmd_bytes is 0; the command stream must not be empty")
            }
            Error::CommandStreamOutOfBounds {
                cmd_offset,
                cmd_bytes,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: command stream [{cmd_offset}, {}) (cmd_offset {cmd_offset} + cmd_bytes \
                 {cmd_bytes}) runs past total_bytes {total_bytes}",
                u64::from(cmd_offset) + u64::from(cmd_bytes)
            ),
            Error::UnknownRegionFlags { region, flags } => write!(
                f,
                "region {region}: flags {flags:#010x} set bits other than BAKED (0x1), which \
                 version 1 does not define"
            ),
            Error::BakedRegionOutOfBounds {
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
            Error::ChecksumMismatch { stored, computed } => write!(
                f,
                "NPU1 payload: FNV-1a of bytes 32.. is {computed:#010x} but the header's checksum is \
                 {stored:#010x} (corrupted in transit or in flash)"
            ),
            Error::TooManyRegions { region_count, max } => write!(
                f,
                "NPU1 region table: {region_count} regions, but the Ethos-U55 has only {max} base \
                 pointers (BASEP0..BASEP{})",
                max.saturating_sub(1)
            ),
            Error::ArenaTooSmall {
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
            Error::StreamOverrun { expected } => write!(
                f,
                "NPU1 stream: more bytes arrived than the expected {expected}"
            ),
            Error::PackTooLarge { bytes } => write!(
                f,
                "NPU1 builder: the pack would be {bytes} bytes, more than total_bytes (u32) can say"
            ),
            // ----- Ethos-U55 command stream ----------------------------------------------------------
            // ----- signed manifests and keys ---------------------------------------------------------
            // ----- Vela import -----------------------------------------------------------------------
        }
    }
}

impl core::error::Error for Error {}
