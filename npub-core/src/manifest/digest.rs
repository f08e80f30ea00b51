//! SHA-256 of packs, and the short form errors carry.
use core::fmt;

use sha2::{Digest, Sha256};

/// Bytes of a SHA-256 an error carries: enough to tell two packs apart in a report, small enough
/// to keep [`crate::Error`] a few words wide.
pub const SHA256_PREFIX_BYTES: usize = 8;

/// The first bytes of a SHA-256; `Display` is lowercase hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Prefix(pub [u8; SHA256_PREFIX_BYTES]);

impl Sha256Prefix {
    /// The prefix of `digest`.
    pub fn of(digest: &[u8; 32]) -> Self {
        let mut p = [0u8; SHA256_PREFIX_BYTES];
        p.copy_from_slice(&digest[..SHA256_PREFIX_BYTES]);
        Sha256Prefix(p)
    }
}

impl fmt::Display for Sha256Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::hex::write(f, &self.0)
    }
}

/// SHA-256 of `bytes` in one call (a whole pack on the host).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_fips_180_abc_vector() {
        let d = sha256(b"abc");
        assert_eq!(
            Sha256Prefix::of(&d),
            Sha256Prefix([0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea])
        );
        assert_eq!(std::format!("{}", Sha256Prefix::of(&d)), "ba7816bf8f01cfea");
    }
}
