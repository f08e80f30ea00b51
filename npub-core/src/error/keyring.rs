//! Errors of the keyring and its root-signed updates (`manifest/keyring.rs`, `manifest/rotation.rs`).
use core::fmt;

use crate::manifest::KeyId;

/// The keyring and its root-signed updates (`manifest/keyring.rs`, `manifest/rotation.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyringError {
    /// The keyring has no free entry (revoked keys keep theirs, so that they stay revoked).
    Full {
        /// The keyring's capacity.
        capacity: u32,
    },
    /// The keyring already holds a key with this id.
    Duplicate {
        /// The key id.
        key_id: KeyId,
    },
    /// The keyring holds no key with this id (a revocation names an unknown key).
    UnknownKey {
        /// The key id.
        key_id: KeyId,
    },
    /// The key was revoked: revocation is permanent, it can be neither re-added nor re-revoked.
    KeyRevoked {
        /// The key id.
        key_id: KeyId,
    },
    /// A keyring-update record is not exactly [`crate::manifest::ROTATION_BYTES`] long.
    UpdateWrongLength {
        /// Bytes given.
        len: u64,
    },
    /// Keyring-update bytes 0..4 are not "NPK1".
    UpdateBadMagic {
        /// The little-endian word found.
        found: u32,
    },
    /// Keyring-update `version` is not [`crate::manifest::ROTATION_VERSION`].
    UpdateUnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// The keyring update is signed by a key that is not one of the device's root keys.
    UpdateUnknownRootKey {
        /// The record's `root_key_id`.
        key_id: KeyId,
    },
    /// The keyring update's signature does not verify under the named root key.
    UpdateBadSignature {
        /// The record's `root_key_id`.
        key_id: KeyId,
    },
    /// The keyring update's `sequence` is not above the last one applied (replayed update).
    UpdateReplayed {
        /// The record's `sequence`.
        sequence: u64,
        /// The keyring's last applied update sequence.
        last: u64,
    },
    /// The keyring update's `action` is none of 1 (add), 2 (revoke), 3 (replace) and the release
    /// actions 4 to 8.
    UpdateBadAction {
        /// The word found.
        action: u32,
    },
    /// The keyring update changes release keys or policies (actions 4 to 8), which only
    /// `release::apply_update` applies: a signing keyring alone cannot.
    UpdateReleaseAction {
        /// The word found.
        action: u32,
    },
    /// A keyring-update field the action does not use is not all zeros.
    UpdateUnusedFieldNotZero {
        /// Which field.
        field: &'static str,
    },
}

impl fmt::Display for KeyringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Full { capacity } => write!(
                f,
                "keyring: all {capacity} entries are in use (revoked keys keep theirs)"
            ),
            Self::Duplicate { key_id } => {
                write!(f, "keyring: key {key_id} is already present")
            }
            Self::UnknownKey { key_id } => {
                write!(f, "keyring: no key {key_id} to revoke")
            }
            Self::KeyRevoked { key_id } => write!(
                f,
                "keyring: key {key_id} was revoked, and revocation is permanent"
            ),
            Self::UpdateWrongLength { len } => write!(
                f,
                "keyring update: {len} bytes, but a version-1 record is exactly {} bytes",
                crate::manifest::ROTATION_BYTES
            ),
            Self::UpdateBadMagic { found } => write!(
                f,
                "keyring update: magic is {found:#010x}, expected {:#010x} (\"NPK1\")",
                crate::manifest::ROTATION_MAGIC
            ),
            Self::UpdateUnsupportedVersion { found } => write!(
                f,
                "keyring update: version is {found}, this verifier reads only version {}",
                crate::manifest::ROTATION_VERSION
            ),
            Self::UpdateUnknownRootKey { key_id } => write!(
                f,
                "keyring update: root_key_id {key_id} is not one of this device's root keys"
            ),
            Self::UpdateBadSignature { key_id } => write!(
                f,
                "keyring update: the ed25519 signature does not verify under root key {key_id}"
            ),
            Self::UpdateReplayed { sequence, last } => write!(
                f,
                "keyring update: sequence {sequence} is not above the last applied update {last}"
            ),
            Self::UpdateBadAction { action } => write!(
                f,
                "keyring update: action {action} is not 1 (add), 2 (revoke), 3 (replace) or a release \
                 action (4 to 8)"
            ),
            Self::UpdateReleaseAction { action } => write!(
                f,
                "keyring update: action {action} changes release keys or policies, and this \
                 keyring applies signing-key updates only"
            ),
            Self::UpdateUnusedFieldNotZero { field } => write!(
                f,
                "keyring update: {field} must be all zeros for this action"
            ),
        }
    }
}

impl core::error::Error for KeyringError {}
