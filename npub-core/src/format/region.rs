//! Region descriptors: one per Ethos-U55 base pointer, in BASEP order.
use super::le::word;
use super::{FLAG_BAKED, REGION_DESC_BYTES};

/// What a region holds. **Informational only**: the command stream addresses regions by their index
/// in the table (their BASEP*n* slot), never by role, so the loader reports the role and does nothing
/// else with it. An unknown value is kept, reported as [`Role::Unknown`], and is no reason to reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// 0: weights, scales, LUTs (Vela's `read_only`); normally BAKED.
    Weights,
    /// 1: the tensor arena (Vela's `scratch` and `scratch_fast`); RUNTIME.
    Scratch,
    /// 2: an input tensor in its own region.
    Input,
    /// 3: an output tensor in its own region.
    Output,
    /// 4: anything else.
    Other,
    /// A value version 1 does not name; kept as read.
    Unknown(u32),
}

impl Role {
    /// Decodes the role word.
    pub const fn from_word(w: u32) -> Self {
        match w {
            0 => Self::Weights,
            1 => Self::Scratch,
            2 => Self::Input,
            3 => Self::Output,
            4 => Self::Other,
            other => Self::Unknown(other),
        }
    }

    /// The on-the-wire word.
    pub const fn word(self) -> u32 {
        match self {
            Self::Weights => 0,
            Self::Scratch => 1,
            Self::Input => 2,
            Self::Output => 3,
            Self::Other => 4,
            Self::Unknown(w) => w,
        }
    }

    /// A short lower-case name ("weights", …, "unknown").
    pub const fn name(self) -> &'static str {
        match self {
            Self::Weights => "weights",
            Self::Scratch => "scratch",
            Self::Input => "input",
            Self::Output => "output",
            Self::Other => "other",
            Self::Unknown(_) => "unknown",
        }
    }
}

impl core::fmt::Display for Role {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Unknown(w) => write!(f, "unknown ({w})"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(feature = "std")]
impl serde::Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One 16-byte region descriptor.
///
/// | Word | Offset | Field         |
/// |------|--------|---------------|
/// | 0    | 0      | `role`        |
/// | 1    | 4      | `flags`       |
/// | 2    | 8      | `size`        |
/// | 3    | 12     | `data_offset` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub struct RegionDesc {
    /// Position in the table: the BASEP*n* slot this region binds to.
    pub index: u32,
    /// Word 0, decoded. Informational.
    pub role: Role,
    /// Word 1 as stored.
    pub flags: u32,
    /// Word 2: size in bytes.
    pub size: u32,
    /// Word 3: offset of the baked bytes; meaningless unless [`RegionDesc::is_baked`].
    pub data_offset: u32,
}

impl RegionDesc {
    /// Decodes descriptor `index` from the first 16 bytes of `bytes` without judging it (the loader
    /// judges; reports and tools read), or `None` if `bytes` is shorter.
    pub fn read(index: u32, bytes: &[u8]) -> Option<Self> {
        if bytes.len() < REGION_DESC_BYTES as usize {
            return None;
        }
        Some(Self {
            index,
            role: Role::from_word(word(bytes, 0)?),
            flags: word(bytes, 4)?,
            size: word(bytes, 8)?,
            data_offset: word(bytes, 12)?,
        })
    }

    /// The descriptor as its 16 on-the-wire bytes.
    pub fn to_bytes(&self) -> [u8; REGION_DESC_BYTES as usize] {
        let mut out = [0u8; REGION_DESC_BYTES as usize];
        let words = [self.role.word(), self.flags, self.size, self.data_offset];
        for (i, w) in words.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// BAKED: the bytes live inside the blob at `data_offset` and are used in place.
    pub const fn is_baked(&self) -> bool {
        self.flags & FLAG_BAKED != 0
    }

    /// End of the baked bytes, `data_offset + size`, in 64 bits so it cannot wrap.
    pub const fn data_end(&self) -> u64 {
        self.data_offset as u64 + self.size as u64
    }
}
