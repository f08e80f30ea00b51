//! The map the poll snapshot finds a device in, keyed by the SHA-256 of its token.
//!
//! The key is already a cryptographic hash, so the map's hash of it is its own bits folded to 64
//! (a few XORs) instead of SipHash over 40 bytes on every poll. Flooding is not possible: every
//! key in the map is the digest of a token the server generated from 256 random bits, and a
//! request only looks a key up, so the probe length any lookup can meet is set by those random
//! digests, whatever token an attacker sends.
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// SHA-256 of a device token: what the snapshot finds a device by.
pub type TokenDigest = [u8; 32];

/// Values (the snapshot's devices) by token digest.
pub type TokenIndex<V> = HashMap<TokenDigest, V, DigestHash>;

/// An empty [`TokenIndex`] with room for `n` values.
pub fn with_capacity<V>(n: usize) -> TokenIndex<V> {
    HashMap::with_capacity_and_hasher(n, DigestHash)
}

/// Builds a [`DigestHasher`].
#[derive(Debug, Default, Clone, Copy)]
pub struct DigestHash;

impl BuildHasher for DigestHash {
    type Hasher = DigestHasher;

    fn build_hasher(&self) -> DigestHasher {
        DigestHasher(0)
    }
}

/// Folds what it is given, 8 bytes at a time, into 64 bits: for a digest (and the length that
/// `Hash` for an array writes before it), uniform bits in, uniform bits out.
#[derive(Debug)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(23) ^ u64::from_le_bytes(word);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    #[test]
    fn spreads_digests_over_every_bit() {
        // hashbrown takes the bucket from the low bits and a tag from the top 7: both must vary.
        let hashes: Vec<u64> = (0..4096u32)
            .map(|i| {
                let digest: TokenDigest = Sha256::digest(i.to_le_bytes()).into();
                DigestHash.hash_one(digest)
            })
            .collect();
        let low: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
        let top: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(
            low.len() > 2400,
            "{} distinct low 12-bit buckets",
            low.len()
        );
        assert_eq!(top.len(), 128);
    }
}
