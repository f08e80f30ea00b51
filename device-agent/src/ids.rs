//! The small shared names every part of the agent uses: which slot, which pack, which NPU register.
//! A leaf: it imports nothing of the crate, so the error type and every module can name these
//! without a circle.
use core::fmt;

/// One of the two pack slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The first slot.
    A,
    /// The second slot.
    B,
}

impl Slot {
    /// Both slots, in index order.
    pub const ALL: [Slot; 2] = [Slot::A, Slot::B];

    /// 0 for A, 1 for B: the index in the journal's slot table.
    pub const fn index(self) -> usize {
        match self {
            Slot::A => 0,
            Slot::B => 1,
        }
    }

    /// The slot with index `i` (0 or 1).
    pub const fn from_index(i: u8) -> Option<Slot> {
        match i {
            0 => Some(Slot::A),
            1 => Some(Slot::B),
            _ => None,
        }
    }

    /// The other slot.
    pub const fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    /// "A" or "B", for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Slot::A => "A",
            Slot::B => "B",
        }
    }
}

/// Which pack a slot holds (or is receiving): what the signed manifest said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackId {
    /// The manifest's deployment sequence.
    pub sequence: u64,
    /// The pack's length in bytes.
    pub len: u32,
    /// SHA-256 of the pack's bytes.
    pub sha256: [u8; 32],
}

impl PackId {
    /// The identity of "no pack" (all zero), stored for empty slots.
    pub const NONE: PackId = PackId {
        sequence: 0,
        len: 0,
        sha256: [0; 32],
    };
}

/// A register the binding writes, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Register {
    /// The command-stream base.
    Qbase,
    /// A base pointer, BASEP0..BASEP7.
    Basep(u8),
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Register::Qbase => f.write_str("QBASE"),
            Register::Basep(n) => write!(f, "BASEP{n}"),
        }
    }
}
