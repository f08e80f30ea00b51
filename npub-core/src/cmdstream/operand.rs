//! Which operand of an operation an access belongs to, and where it lands: named by the
//! checker's accesses, the stream's summary and the errors alike, so this file imports nothing of
//! the crate.
use core::fmt;

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
