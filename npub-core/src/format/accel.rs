//! The `accel` header word: which accelerator configuration Vela compiled for.

/// The accelerator configuration a pack was compiled for (header word 6).
///
/// **Informational, never a reason to reject**: a stream compiled for a larger MAC configuration
/// simply fails the device's compatibility check in the signed manifest, which is where that decision
/// belongs. An unassigned value is kept and reported as [`Accel::Unknown`].
///
/// | word | config           | MACs/cycle | SHRAM  | Vela `--accelerator-config` |
/// |------|------------------|-----------:|-------:|-----------------------------|
/// | 0    | unspecified      |          – |      – | (the seed's worked example) |
/// | 1    | Ethos-U55-32     |         32 | 16 KiB | `ethos-u55-32`              |
/// | 2    | Ethos-U55-64     |         64 | 16 KiB | `ethos-u55-64`              |
/// | 3    | Ethos-U55-128    |        128 | 24 KiB | `ethos-u55-128`             |
/// | 4    | Ethos-U55-256    |        256 | 48 KiB | `ethos-u55-256`             |
/// | 5    | Ethos-U65-256    |        256 | 48 KiB | `ethos-u65-256`             |
/// | 6    | Ethos-U65-512    |        512 | 48 KiB per core | `ethos-u65-512` |
/// | else | unknown          |          – |      – |                             |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum Accel {
    /// 0: the producer did not say.
    Unspecified,
    /// 1: Ethos-U55, 32 MACs/cycle.
    EthosU55_32,
    /// 2: Ethos-U55, 64 MACs/cycle.
    EthosU55_64,
    /// 3: Ethos-U55, 128 MACs/cycle.
    EthosU55_128,
    /// 4: Ethos-U55, 256 MACs/cycle (the RA8P1's NPU).
    EthosU55_256,
    /// 5: Ethos-U65, 256 MACs/cycle.
    EthosU65_256,
    /// 6: Ethos-U65, 512 MACs/cycle.
    EthosU65_512,
    /// Any other word, kept as read.
    Unknown(u32),
}

impl Accel {
    /// Every named configuration, in word order.
    pub const ALL: [Accel; 7] = [
        Accel::Unspecified,
        Accel::EthosU55_32,
        Accel::EthosU55_64,
        Accel::EthosU55_128,
        Accel::EthosU55_256,
        Accel::EthosU65_256,
        Accel::EthosU65_512,
    ];

    /// Decodes header word 6.
    pub const fn from_word(w: u32) -> Self {
        match w {
            0 => Self::Unspecified,
            1 => Self::EthosU55_32,
            2 => Self::EthosU55_64,
            3 => Self::EthosU55_128,
            4 => Self::EthosU55_256,
            5 => Self::EthosU65_256,
            6 => Self::EthosU65_512,
            other => Self::Unknown(other),
        }
    }

    /// The header word.
    pub const fn word(self) -> u32 {
        match self {
            Self::Unspecified => 0,
            Self::EthosU55_32 => 1,
            Self::EthosU55_64 => 2,
            Self::EthosU55_128 => 3,
            Self::EthosU55_256 => 4,
            Self::EthosU65_256 => 5,
            Self::EthosU65_512 => 6,
            Self::Unknown(w) => w,
        }
    }

    /// Vela's name for the configuration (`ethos-u55-256`, …), or "unspecified"/"unknown".
    pub const fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::EthosU55_32 => "ethos-u55-32",
            Self::EthosU55_64 => "ethos-u55-64",
            Self::EthosU55_128 => "ethos-u55-128",
            Self::EthosU55_256 => "ethos-u55-256",
            Self::EthosU65_256 => "ethos-u65-256",
            Self::EthosU65_512 => "ethos-u65-512",
            Self::Unknown(_) => "unknown",
        }
    }

    /// The configuration with Vela's name `name`, if it is one of the named ones.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// MACs per cycle, when known.
    pub const fn macs(self) -> Option<u32> {
        match self {
            Self::EthosU55_32 => Some(32),
            Self::EthosU55_64 => Some(64),
            Self::EthosU55_128 => Some(128),
            Self::EthosU55_256 | Self::EthosU65_256 => Some(256),
            Self::EthosU65_512 => Some(512),
            Self::Unspecified | Self::Unknown(_) => None,
        }
    }

    /// True for the Ethos-U55 family (eight base pointers, COP1 driver payloads).
    pub const fn is_u55(self) -> bool {
        matches!(
            self,
            Self::EthosU55_32 | Self::EthosU55_64 | Self::EthosU55_128 | Self::EthosU55_256
        )
    }
}

impl core::fmt::Display for Accel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Unknown(w) => write!(f, "unknown ({w:#x})"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(feature = "std")]
impl serde::Serialize for Accel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips() {
        for w in [0, 1, 2, 3, 4, 5, 6, 7, 0x3008, u32::MAX] {
            assert_eq!(Accel::from_word(w).word(), w);
        }
        assert_eq!(Accel::from_word(99), Accel::Unknown(99));
        assert_eq!(Accel::from_name("ethos-u55-256"), Some(Accel::EthosU55_256));
    }
}
