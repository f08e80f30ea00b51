//! A pack's name in the store: the SHA-256 of its bytes, shown as 64 lowercase hex digits.
use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// SHA-256 of a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PackDigest(pub [u8; 32]);

impl PackDigest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest a running hasher has reached.
    pub fn finish(hasher: Sha256) -> Self {
        Self(hasher.finalize().into())
    }

    /// 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        to_hex(&self.0)
    }
}

impl fmt::Display for PackDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Why a string is not a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotADigest;

impl fmt::Display for NotADigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not 64 lowercase hex digits")
    }
}

impl std::error::Error for NotADigest {}

impl FromStr for PackDigest {
    type Err = NotADigest;

    /// Only the canonical lowercase form: a digest is also a file name, and two spellings of one
    /// digest must never name two files.
    fn from_str(s: &str) -> Result<Self, NotADigest> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(NotADigest);
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Ok(Self(out))
    }
}

fn nibble(c: u8) -> Result<u8, NotADigest> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(NotADigest),
    }
}

/// Lowercase hex of any bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
    s
}

/// The bytes of `text`, hex digits of either case; `None` for an odd length or a non-digit.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_a_known_vector() {
        let d = PackDigest::of(b"abc");
        assert_eq!(
            d.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.hex().parse::<PackDigest>(), Ok(d));
        assert_eq!(d.to_string(), d.hex());
    }

    #[test]
    fn rejects_non_canonical_spellings() {
        let upper = PackDigest::of(b"abc").hex().to_uppercase();
        assert_eq!(upper.parse::<PackDigest>(), Err(NotADigest));
        assert_eq!("ab".parse::<PackDigest>(), Err(NotADigest));
        assert_eq!(
            "../".repeat(22)[..64].parse::<PackDigest>(),
            Err(NotADigest)
        );
    }
}
