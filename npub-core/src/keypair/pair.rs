//! An ed25519 key pair: generated from the operating system's CSPRNG, or from a seed; signs a
//! domain ‖ body.
use core::fmt;

use ed25519_dalek::{Signer, SigningKey};
use zeroize::Zeroize;

use crate::manifest::KeyId;

/// An ed25519 key pair. The secret half is wiped from memory when dropped, and `Debug` shows only
/// the key id.
pub struct KeyPair {
    signing: SigningKey,
}

impl KeyPair {
    /// A new key pair from the operating system's random number generator.
    pub fn generate() -> std::io::Result<Self> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| std::io::Error::other(format!("operating-system RNG: {e}")))?;
        let pair = Self::from_seed(seed);
        seed.zeroize();
        Ok(pair)
    }

    /// The key pair whose secret seed is `seed` (tests, and reading key files).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            signing: SigningKey::from_bytes(&seed),
        }
    }

    /// The 32-byte public key.
    pub fn public_key(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    /// The public key's id.
    pub fn key_id(&self) -> KeyId {
        KeyId::of(&self.public_key())
    }

    /// The secret seed, for writing the key file.
    pub(crate) fn seed(&self) -> [u8; 32] {
        self.signing.to_bytes()
    }

    /// The signature over `domain ‖ body`.
    pub(crate) fn sign(&self, domain: &[u8], body: &[u8]) -> [u8; 64] {
        let mut message = Vec::with_capacity(domain.len() + body.len());
        message.extend_from_slice(domain);
        message.extend_from_slice(body);
        self.signing.sign(&message).to_bytes()
    }
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair")
            .field("key_id", &format_args!("{}", self.key_id()))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let pair = KeyPair::from_seed([0x5a; 32]);
        let shown = format!("{pair:?}");
        assert!(shown.contains(&pair.key_id().to_string()), "{shown}");
        assert!(!shown.contains("5a5a"), "{shown}");
    }

    #[test]
    fn generated_keys_differ() {
        let a = KeyPair::generate().unwrap();
        let b = KeyPair::generate().unwrap();
        assert_ne!(a.public_key(), b.public_key());
    }
}
