//! The 32-byte header: eight little-endian words.
use super::le::word;
use super::{Accel, HEADER_BYTES};

/// The header's eight words, decoded but not yet judged (see [`super::Blob::parse`] for that).
///
/// | Word | Offset | Field          |
/// |------|--------|----------------|
/// | 0    | 0      | `magic`        |
/// | 1    | 4      | `version`      |
/// | 2    | 8      | `total_bytes`  |
/// | 3    | 12     | `region_count` |
/// | 4    | 16     | `cmd_offset`   |
/// | 5    | 20     | `cmd_bytes`    |
/// | 6    | 24     | `accel`        |
/// | 7    | 28     | `checksum`     |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub struct Header {
    /// Word 0: must be [`super::MAGIC`].
    pub magic: u32,
    /// Word 1: must be [`super::VERSION`].
    pub version: u32,
    /// Word 2: the whole blob's length.
    pub total_bytes: u32,
    /// Word 3: number of region descriptors.
    pub region_count: u32,
    /// Word 4: byte offset of the command stream.
    pub cmd_offset: u32,
    /// Word 5: command-stream length in bytes.
    pub cmd_bytes: u32,
    /// Word 6: the accelerator-config word, see [`Accel`].
    pub accel: u32,
    /// Word 7: FNV-1a 32 over bytes `32..total_bytes`.
    pub checksum: u32,
}

impl Header {
    /// Decodes the first 32 bytes of `bytes`, or `None` if there are fewer.
    pub fn read(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < HEADER_BYTES as usize {
            return None;
        }
        let w = |i: usize| word(bytes, i * 4);
        Some(Self {
            magic: w(0)?,
            version: w(1)?,
            total_bytes: w(2)?,
            region_count: w(3)?,
            cmd_offset: w(4)?,
            cmd_bytes: w(5)?,
            accel: w(6)?,
            checksum: w(7)?,
        })
    }

    /// The header as its 32 on-the-wire bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES as usize] {
        let mut out = [0u8; HEADER_BYTES as usize];
        for (i, w) in self.words().iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The eight words in on-the-wire order.
    pub const fn words(&self) -> [u32; 8] {
        [
            self.magic,
            self.version,
            self.total_bytes,
            self.region_count,
            self.cmd_offset,
            self.cmd_bytes,
            self.accel,
            self.checksum,
        ]
    }

    /// The decoded accelerator config (informational).
    pub const fn accel(&self) -> Accel {
        Accel::from_word(self.accel)
    }

    /// Byte offset of the region table's end: `32 + 16 × region_count`, in 64 bits so that a hostile
    /// count cannot wrap.
    pub const fn region_table_end(&self) -> u64 {
        HEADER_BYTES as u64 + super::REGION_DESC_BYTES as u64 * self.region_count as u64
    }
}
