//! The NPU1 container, bit-exact to `NPU1-format.txt` (version 1).
//!
//! A `.npub` holds a Vela command stream, a region-descriptor table describing the Ethos-U55 tensor
//! arenas (index *n* of the table is base pointer BASEP*n*), and the baked weights. Loading one is a
//! table walk and a few pointer assignments; nothing is parsed beyond fixed-width words and nothing is
//! allocated.
//!
//! ## Layout
//!
//! All fields are little-endian `u32` words; offsets are absolute from byte 0 of the blob.
//!
//! | Word | Offset | Field          | Meaning and valid range                                             |
//! |------|--------|----------------|---------------------------------------------------------------------|
//! | 0    | 0      | `magic`        | [`MAGIC`] = `0x3155504E`, bytes `4e 50 55 31` ("NPU1")              |
//! | 1    | 4      | `version`      | [`VERSION`] = 1; any other value is rejected, never best-effort read |
//! | 2    | 8      | `total_bytes`  | whole blob length; must equal the real buffer length                |
//! | 3    | 12     | `region_count` | descriptors that follow; `32 + 16 × region_count ≤ total_bytes`    |
//! | 4    | 16     | `cmd_offset`   | byte offset of the command stream                                   |
//! | 5    | 20     | `cmd_bytes`    | command-stream length; `> 0`; `cmd_offset + cmd_bytes ≤ total_bytes` |
//! | 6    | 24     | `accel`        | accelerator config ([`Accel`]); informational, never rejected       |
//! | 7    | 28     | `checksum`     | FNV-1a 32 over bytes `32..total_bytes` (the payload, not the header) |
//!
//! The region table follows at byte 32, [`REGION_DESC_BYTES`] = 16 bytes per descriptor:
//!
//! | Word | Offset | Field         | Meaning                                                            |
//! |------|--------|---------------|--------------------------------------------------------------------|
//! | 0    | 0      | `role`        | [`Role`]: 0 weights, 1 scratch, 2 input, 3 output, 4 other; informational |
//! | 1    | 4      | `flags`       | bit 0 [`FLAG_BAKED`]: the bytes are in the blob; other bits must be 0 |
//! | 2    | 8      | `size`        | region size in bytes                                               |
//! | 3    | 12     | `data_offset` | offset of the baked bytes when BAKED (`+ size ≤ total_bytes`); unused otherwise |
//!
//! The command stream and baked data are found by explicit offsets, not adjacency, so a producer may
//! order and pad them as alignment requires ([`build`] aligns both to 16).
//!
//! ## The loader's checks, in order
//!
//! [`Blob::parse`] and [`StreamValidator`] perform these in exactly this order and stop at the first
//! failure; [`bind`] adds the last two.
//!
//! | #  | check                                              | malformed-input row it answers          | `Error` |
//! |----|----------------------------------------------------|-----------------------------------------|---------|
//! | 1  | buffer ≥ 32 bytes                                  | buffer shorter than 32 bytes            | `TooShort` |
//! | 2  | magic                                              | wrong magic                             | `BadMagic` |
//! | 3  | version                                            | wrong version                           | `UnsupportedVersion` |
//! | 4  | `total_bytes` = buffer length                      | total_bytes ≠ real buffer length        | `TotalBytesMismatch` |
//! | 5  | `32 + 16 × region_count ≤ total_bytes`             | region_count huge                       | `RegionTableOutOfBounds` |
//! | 6  | `cmd_bytes > 0`                                    | cmd_bytes = 0                           | `EmptyCommandStream` |
//! | 7  | `cmd_offset + cmd_bytes ≤ total_bytes`             | cmd_offset + cmd_bytes > total_bytes    | `CommandStreamOutOfBounds` |
//! | 8  | per descriptor, in index order: flags known; BAKED `data_offset + size ≤ total_bytes` | BAKED data_offset + size > total_bytes | `UnknownRegionFlags`, `BakedRegionOutOfBounds` |
//! | 9  | FNV-1a of bytes `32..total_bytes` = `checksum`     | bit rot in the payload                  | `ChecksumMismatch` |
//! | 10 | (bind) at most 8 regions, one per BASEP*n*         | —                                       | `TooManyRegions` |
//! | 11 | (bind) each RUNTIME region fits what remains of the arena after 16-byte alignment | RUNTIME size larger than the arena | `ArenaTooSmall` |
//!
//! Decisions where the spec is silent, each tested:
//! - All structural checks (1–8) come before the checksum (9): a streaming loader knows them as soon
//!   as the tables have arrived, long before the last payload byte, and reaches the same verdict.
//! - Every `offset + size` is computed in 64 bits: a sum that would wrap a `u32` is out of bounds,
//!   never a small number.
//! - Flag bits other than BAKED are rejected (fail closed): an unknown bit may mean something this
//!   loader cannot honour, and version 1 defines none.
//! - A RUNTIME descriptor's `data_offset` is "unused": any value is accepted and ignored.
//! - Accepted by design, as the spec's table says: an unknown role (role is informational; binding is
//!   by index), overlapping baked regions (each is bounded on its own), and a payload modified with a
//!   recomputed checksum (FNV-1a is not authenticity: that is the signed manifest's job).
//! - `region_count = 0` is a valid blob (a stream that only uses registers, say) and binds nothing.
//!
//! There is no dual-version loader: a layout change bumps [`VERSION`] and replaces this module.

mod accel;
mod bind;
mod blob;
#[cfg(feature = "alloc")]
pub mod build;
mod checks;
mod constants;
pub mod cop1;
mod header;
pub(crate) mod le;
mod region;
mod stream;

pub use accel::Accel;
pub use bind::{BoundRegion, Job, arena_bytes_required, arena_bytes_required_aligned, bind};
pub use blob::{Blob, Regions};
pub use constants::{
    ARENA_ALIGN, FLAG_BAKED, HEADER_BYTES, KNOWN_FLAGS, MAGIC, MAX_BASE_POINTERS,
    REGION_DESC_BYTES, VERSION,
};
pub use header::Header;
pub use region::{RegionDesc, Role};
pub use stream::StreamValidator;
