//! Key ids: the short name a manifest uses for the key that signed it.
//!
//! `key_id = SHA-256("npub/key-id/v1\0" ‖ public_key)[0..8]`
//!
//! * Derived, never chosen: a device computes the id of every key it is given, so a record cannot
//!   pair a key with someone else's id.
//! * Domain-separated, so the id is not the prefix of any other SHA-256 this system computes
//!   (a pack hash, say).
//! * 8 bytes: the id only *selects* a key; the signature is always checked against the full
//!   32-byte public key. A collision between two trusted keys (2⁻⁶⁴ per pair) is refused when the
//!   second key is added ([`crate::KeyringError::Duplicate`]), so a lookup is never ambiguous.
use core::fmt;

use sha2::{Digest, Sha256};

/// Prepended to a public key before hashing it into its id.
pub const KEY_ID_DOMAIN: &[u8] = b"npub/key-id/v1\0";
/// Bytes of SHA-256 kept.
pub const KEY_ID_BYTES: usize = 8;

/// The id of an ed25519 public key; `Display` is 16 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub [u8; KEY_ID_BYTES]);

impl KeyId {
    /// The id of `public_key`.
    pub fn of(public_key: &[u8; 32]) -> Self {
        let digest = Sha256::new()
            .chain_update(KEY_ID_DOMAIN)
            .chain_update(public_key)
            .finalize();
        let mut id = [0u8; KEY_ID_BYTES];
        id.copy_from_slice(&digest[..KEY_ID_BYTES]);
        KeyId(id)
    }

    /// Parses 16 hex digits (either case).
    pub fn from_hex(text: &str) -> Option<Self> {
        let mut id = [0u8; KEY_ID_BYTES];
        super::hex::decode(text, &mut id)?;
        Some(KeyId(id))
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::hex::write(f, &self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_the_domain_separated_hash_prefix() {
        // SHA-256("npub/key-id/v1\0" ‖ 32 × 0x00), first 8 bytes; fixed so that the derivation
        // documented in docs/manifest.md cannot drift silently.
        let id = KeyId::of(&[0; 32]);
        let full = Sha256::digest([KEY_ID_DOMAIN, &[0u8; 32][..]].concat());
        assert_eq!(id.0, full[..8]);
        assert_ne!(
            id.0,
            Sha256::digest([0u8; 32])[..8],
            "the domain must change the id"
        );
    }

    #[test]
    fn hex_round_trips() {
        let id = KeyId([0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
        assert_eq!(std::format!("{id}"), "0123456789abcdef");
        assert_eq!(KeyId::from_hex("0123456789ABCDEF"), Some(id));
        assert_eq!(KeyId::from_hex("0123"), None);
        assert_eq!(KeyId::from_hex("0123456789abcdeg"), None);
    }
}
