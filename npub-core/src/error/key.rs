//! Errors of signing keys (`manifest/`, `keypair/`): the public key itself and the key files.
use core::fmt;

use crate::manifest::KeyId;

/// A signing key or a key file (`manifest/`, `keypair/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// A public key is not a valid compressed Edwards point.
    Invalid {
        /// Its key id.
        key_id: KeyId,
    },
    /// A public key has small order: any signature "verifies" under it.
    Weak {
        /// Its key id.
        key_id: KeyId,
    },
    /// An external signer (`npub … --signer-cmd`) returned a signature that does not verify
    /// under the public key it was to sign with: another key, or another message.
    ExternalSignatureInvalid {
        /// The id of the key the signature was expected from.
        key_id: KeyId,
    },
    /// A private key file is readable or writable by group or others.
    FileTooOpen {
        /// Its permission bits.
        mode: u32,
    },
    /// A key file is not in the expected format.
    FileBadFormat {
        /// "secret" or "public".
        kind: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Invalid { key_id } => write!(
                f,
                "key {key_id}: the public key is not a valid ed25519 point"
            ),
            Self::Weak { key_id } => write!(
                f,
                "key {key_id}: the public key has small order; signatures under it mean nothing"
            ),
            Self::ExternalSignatureInvalid { key_id } => write!(
                f,
                "key {key_id}: the external signer's signature does not verify under this key \
                 (it signed with another key, or signed other bytes than it was given)"
            ),
            Self::FileTooOpen { mode } => write!(
                f,
                "private key file: mode {mode:04o} lets group or others access it; \
                 `chmod 600` it (and consider the key leaked)"
            ),
            Self::FileBadFormat { kind, problem } => {
                write!(f, "{kind} key file: {problem}")
            }
        }
    }
}

impl core::error::Error for KeyError {}
