//! NPU1's numbers, as `NPU1-format.txt` names them (`k_ra8_npu_blob_*`), and the Ethos-U55 limit
//! binding checks. A leaf: every file of the format imports these, and they import nothing.

/// `k_ra8_npu_blob_magic`: little-endian bytes `4e 50 55 31`, so a hexdump reads "NPU1".
pub const MAGIC: u32 = 0x3155_504E;
/// `k_ra8_npu_blob_version`. Bumped on any incompatible layout change.
pub const VERSION: u32 = 1;
/// `k_ra8_npu_blob_header_bytes`: eight words.
pub const HEADER_BYTES: u32 = 32;
/// `k_ra8_npu_blob_region_desc_bytes`: four words.
pub const REGION_DESC_BYTES: u32 = 16;
/// `k_ra8_npu_blob_arena_align`: Ethos-U55 tensor arenas are 16-byte aligned.
pub const ARENA_ALIGN: u32 = 16;
/// `k_ra8_npu_blob_rflag_baked`: the region's bytes are present in the blob at `data_offset`.
pub const FLAG_BAKED: u32 = 1 << 0;
/// Every flag bit version 1 defines.
pub const KNOWN_FLAGS: u32 = FLAG_BAKED;
/// The Ethos-U55 has eight base-pointer registers, BASEP0..BASEP7 (region fields in commands are
/// 3 bits wide), so it can bind at most this many regions.
pub const MAX_BASE_POINTERS: usize = 8;
