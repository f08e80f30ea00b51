//! Model ids: the short name a release policy uses for the model it governs.
//!
//! `model_id = SHA-256("npub/model-id/v1\0" ‖ model_name)[0..8]`, over the name's UTF-8 bytes.
//!
//! A policy travels in a 144-byte keyring update, which has no room for a 64-byte name; eight
//! bytes of a domain-separated hash do. The id only *selects* a policy: the signatures still sign
//! the full name, and the device compares the full name. All zeros is [`ModelId::DEFAULT`], the
//! policy for every model without one of its own (a name whose hash begins with eight zero bytes
//! would share it; the chance is 2⁻⁶⁴ per name).
use core::fmt;

use sha2::{Digest, Sha256};

/// Prepended to a model name before hashing it into its id.
pub const MODEL_ID_DOMAIN: &[u8] = b"npub/model-id/v1\0";
/// Bytes of SHA-256 kept.
pub const MODEL_ID_BYTES: usize = 8;

/// The id of a model name; `Display` is 16 lowercase hex digits, or `default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelId(pub [u8; MODEL_ID_BYTES]);

impl ModelId {
    /// The default policy's id: the models without a policy of their own.
    pub const DEFAULT: ModelId = ModelId([0; MODEL_ID_BYTES]);

    /// The id of `model_name`. Out of line, so that the SHA-256 state is in its own frame, not
    /// in a caller's that is live while a signature is checked (the device's stack figure).
    #[inline(never)]
    pub fn of(model_name: &str) -> Self {
        let digest = Sha256::new()
            .chain_update(MODEL_ID_DOMAIN)
            .chain_update(model_name.as_bytes())
            .finalize();
        let mut id = [0u8; MODEL_ID_BYTES];
        id.copy_from_slice(&digest[..MODEL_ID_BYTES]);
        ModelId(id)
    }

    /// True for [`ModelId::DEFAULT`].
    pub fn is_default(&self) -> bool {
        *self == Self::DEFAULT
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_default() {
            return f.write_str("default");
        }
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_the_domain_separated_hash_prefix_of_the_name() {
        let id = ModelId::of("person-detect");
        let full = Sha256::digest([MODEL_ID_DOMAIN, b"person-detect"].concat());
        assert_eq!(id.0, full[..8]);
        assert_ne!(id, ModelId::of("person-detect2"));
        assert!(!id.is_default());
        assert_eq!(std::format!("{}", ModelId::DEFAULT), "default");
        assert_eq!(std::format!("{id}").len(), 16);
    }
}
