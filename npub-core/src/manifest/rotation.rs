//! Keyring updates: records signed by a root key that add, revoke or replace signing keys, so a
//! leaked signing key is retired without reflashing the device.
//!
//! Version 1 is 144 bytes, fixed width, little-endian; the table is on [`KeyringUpdate`].
//!
//! The device applies an update all or nothing: every check (the signature, the sequence, the
//! added key being valid and fitting) passes before the keyring changes. Updates have their own
//! sequence, separate from manifests', so an old update (re-adding a key since revoked, say)
//! cannot be replayed; and a revoked key can never be added again whatever the sequence. An update
//! whose effect the keyring already has (adding a key it trusts, revoking one it never knew) is
//! applied as a no-op: a device provisioned after several rotations, with the then-active key as
//! its factory keyring, replays the history from sequence 1 and must not stop at the first one.
use super::constants::{ROTATION_BYTES, ROTATION_MAGIC, ROTATION_SIGNED_BYTES, ROTATION_VERSION};
use super::signature;
use super::{KeyId, Keyring};
use crate::release::RELEASE_ACTIONS;
use crate::{Error, KeyringError};

/// Prepended to the signed bytes: a root signature over an update can never pass for a manifest's.
pub const ROTATION_DOMAIN: &[u8] = b"npub/keyring-update/v1\0";

/// Field offsets, in the order of the table on [`KeyringUpdate`] (the release actions give some of
/// them other meanings: `release/update.rs`).
pub(crate) mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const ROOT_KEY_ID: usize = 8;
    pub const SEQUENCE: usize = 16;
    pub const ACTION: usize = 24;
    pub const RESERVED: usize = 28;
    pub const REVOKE_KEY_ID: usize = 32;
    pub const ADD_PUBLIC_KEY: usize = 40;
    pub const ISSUED_AT: usize = 72;
    pub const SIGNATURE: usize = 80;
}
const _: () = assert!(off::SIGNATURE == ROTATION_SIGNED_BYTES);

/// What an update does to the keyring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringChange {
    /// Action 1: trust a new key.
    Add {
        /// The key to trust.
        public_key: [u8; 32],
    },
    /// Action 2: revoke a key.
    Revoke {
        /// The key to revoke.
        key_id: KeyId,
    },
    /// Action 3: revoke one key and trust another, atomically (the usual rotation).
    Replace {
        /// The key to revoke.
        revoke: KeyId,
        /// The key to trust.
        public_key: [u8; 32],
    },
}

impl KeyringChange {
    const ADD: u32 = 1;
    const REVOKE: u32 = 2;
    const REPLACE: u32 = 3;

    fn action(&self) -> u32 {
        match self {
            Self::Add { .. } => Self::ADD,
            Self::Revoke { .. } => Self::REVOKE,
            Self::Replace { .. } => Self::REPLACE,
        }
    }
}

/// A keyring update's fields, before signing or after decoding. On the wire:
///
/// | Offset | Size | Field            | Meaning                                                           |
/// |-------:|-----:|------------------|-------------------------------------------------------------------|
/// |      0 |    4 | `magic`          | bytes `4e 50 4b 31` ("NPK1"), word [`ROTATION_MAGIC`]              |
/// |      4 |    4 | `version`        | [`ROTATION_VERSION`] = 1                                           |
/// |      8 |    8 | `root_key_id`    | [`KeyId`] of the root key that signed it                           |
/// |     16 |    8 | `sequence`       | update sequence, strictly above the keyring's last applied one   |
/// |     24 |    4 | `action`         | 1 add, 2 revoke, 3 replace (revoke then add, atomically); 4–8 change release keys and policies (`release::ReleaseChange`, whose table gives bytes 28..72 their meaning for those) |
/// |     28 |    4 | `reserved`       | 0                                                                 |
/// |     32 |    8 | `revoke_key_id`  | key to revoke (actions 2, 3); zeros otherwise                     |
/// |     40 |   32 | `add_public_key` | ed25519 public key to trust (actions 1, 3); zeros otherwise       |
/// |     72 |    8 | `issued_at`      | unix seconds when signed (informational)                          |
/// |     80 |   64 | `signature`      | ed25519 by the root key over [`ROTATION_DOMAIN`] ‖ bytes `0..80`  |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyringUpdate {
    /// Update sequence, ≥ 1.
    pub sequence: u64,
    /// The change.
    pub change: KeyringChange,
    /// Unix seconds when signed.
    pub issued_at: u64,
}

impl KeyringUpdate {
    /// The signed part (bytes `0..80`) for root key `root_key_id`.
    pub fn encode(&self, root_key_id: KeyId) -> [u8; ROTATION_SIGNED_BYTES] {
        let mut out = [0u8; ROTATION_SIGNED_BYTES];
        let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
        put(off::MAGIC, &ROTATION_MAGIC.to_le_bytes());
        put(off::VERSION, &ROTATION_VERSION.to_le_bytes());
        put(off::ROOT_KEY_ID, &root_key_id.0);
        put(off::SEQUENCE, &self.sequence.to_le_bytes());
        put(off::ACTION, &self.change.action().to_le_bytes());
        match self.change {
            KeyringChange::Add { public_key } => put(off::ADD_PUBLIC_KEY, &public_key),
            KeyringChange::Revoke { key_id } => put(off::REVOKE_KEY_ID, &key_id.0),
            KeyringChange::Replace { revoke, public_key } => {
                put(off::REVOKE_KEY_ID, &revoke.0);
                put(off::ADD_PUBLIC_KEY, &public_key);
            }
        }
        put(off::ISSUED_AT, &self.issued_at.to_le_bytes());
        out
    }

    /// Decodes a whole record, checking length, magic, version, the action and that the fields
    /// it does not use are zero. Does **not** check the signature ([`Keyring::apply_update`] does).
    pub fn decode(bytes: &[u8]) -> Result<(KeyId, Self), Error> {
        let (root_key_id, ..) = envelope(bytes)?;
        let revoke = KeyId(array(bytes, off::REVOKE_KEY_ID));
        let add: [u8; 32] = array(bytes, off::ADD_PUBLIC_KEY);
        let action = u32_at(bytes, off::ACTION);
        let (uses_revoke, uses_add, change) = match action {
            KeyringChange::ADD => (false, true, KeyringChange::Add { public_key: add }),
            KeyringChange::REVOKE => (true, false, KeyringChange::Revoke { key_id: revoke }),
            KeyringChange::REPLACE => (
                true,
                true,
                KeyringChange::Replace {
                    revoke,
                    public_key: add,
                },
            ),
            _ if RELEASE_ACTIONS.contains(&action) => {
                return Err(Error::Keyring(KeyringError::UpdateReleaseAction { action }));
            }
            _ => return Err(Error::Keyring(KeyringError::UpdateBadAction { action })),
        };
        let unused_not_zero = [
            (true, "reserved", &bytes[off::RESERVED..off::RESERVED + 4]),
            (!uses_revoke, "revoke_key_id", &revoke.0[..]),
            (!uses_add, "add_public_key", &add[..]),
        ];
        for (unused, field, value) in unused_not_zero {
            if unused && value.iter().any(|&b| b != 0) {
                return Err(Error::Keyring(KeyringError::UpdateUnusedFieldNotZero {
                    field,
                }));
            }
        }
        let update = KeyringUpdate {
            sequence: u64_at(bytes, off::SEQUENCE),
            change,
            issued_at: u64_at(bytes, off::ISSUED_AT),
        };
        Ok((root_key_id, update))
    }
}

impl<const N: usize> Keyring<N> {
    /// Applies a root-signed keyring update, all or nothing. `roots` are the device's root public
    /// keys (built into the firmware). On success the keyring's update sequence becomes the
    /// record's; the caller persists the keyring.
    ///
    /// Checks, in order: length, magic and version; the root key is one of `roots`; the
    /// signature; then, on signed bytes only, the rest of the format ([`KeyringUpdate::decode`]),
    /// the sequence above [`Keyring::update_sequence`], and the change itself (the revoked key
    /// present and trusted, the added key valid, new, never revoked, and a free entry for it).
    pub fn apply_update(&mut self, record: &[u8], roots: &[[u8; 32]]) -> Result<(), Error> {
        let (root_id, signed, signature) = envelope(record)?;
        let root = roots
            .iter()
            .find(|r| KeyId::of(r) == root_id)
            .ok_or(Error::Keyring(KeyringError::UpdateUnknownRootKey {
                key_id: root_id,
            }))?;
        signature::check(
            root,
            ROTATION_DOMAIN,
            signed,
            signature,
            Error::Keyring(KeyringError::UpdateBadSignature { key_id: root_id }),
        )?;
        self.apply_signed(record)
    }

    /// The part of [`Keyring::apply_update`] after the signature. Out of line so that the decoded
    /// record is not on the stack while the signature is checked.
    #[inline(never)]
    pub(crate) fn apply_signed(&mut self, record: &[u8]) -> Result<(), Error> {
        let (_, update) = KeyringUpdate::decode(record)?;
        self.check_update_sequence(update.sequence)?;
        let (revoke, add) = match update.change {
            KeyringChange::Add { public_key } => (None, Some(public_key)),
            KeyringChange::Revoke { key_id } => (Some(key_id), None),
            KeyringChange::Replace { revoke, public_key } => (Some(revoke), Some(public_key)),
        };
        self.change(revoke, add)?;
        self.set_update_sequence(update.sequence);
        Ok(())
    }

    /// Refuses an update whose sequence is not above the last one applied (a replay).
    pub(crate) fn check_update_sequence(&self, sequence: u64) -> Result<(), Error> {
        if sequence <= self.update_sequence() {
            return Err(Error::Keyring(KeyringError::UpdateReplayed {
                sequence,
                last: self.update_sequence(),
            }));
        }
        Ok(())
    }

    /// Revokes `revoke` and trusts `add`, all or nothing, as a root-signed update does (signing
    /// keys here; release keys through the same rules in `release/`).
    ///
    /// A device provisioned after some rotations replays the whole history from sequence 1
    /// with a factory keyring that already reflects part of it: a change whose effect is
    /// already there (its key already trusted, or a key to revoke it never knew) changes
    /// nothing and is still applied, so the device catches up. A revoked key is never added
    /// back: that stays refused.
    pub(crate) fn change(
        &mut self,
        revoke: Option<KeyId>,
        add: Option<[u8; 32]>,
    ) -> Result<(), Error> {
        let revoke = revoke.filter(|&id| self.get(id).is_some_and(|e| !e.is_revoked()));
        let add = add.filter(|key| self.get(KeyId::of(key)).is_none_or(|e| e.is_revoked()));
        // Both halves are checked before either happens; revoking frees no entry.
        if let Some(id) = revoke {
            self.check_revoke(id)?;
        }
        if let Some(key) = &add {
            self.check_add(key)?;
        }
        if let Some(id) = revoke {
            self.revoke(id)?;
        }
        if let Some(key) = &add {
            self.add(key)?;
        }
        Ok(())
    }
}

/// Length, magic and version; then the root key id, the signed bytes and the signature.
pub(crate) fn envelope(record: &[u8]) -> Result<(KeyId, &[u8], &[u8; 64]), Error> {
    let bytes: &[u8; ROTATION_BYTES] = record.try_into().map_err(|_| {
        Error::Keyring(KeyringError::UpdateWrongLength {
            len: record.len() as u64,
        })
    })?;
    let magic = u32_at(bytes, off::MAGIC);
    if magic != ROTATION_MAGIC {
        return Err(Error::Keyring(KeyringError::UpdateBadMagic {
            found: magic,
        }));
    }
    let version = u32_at(bytes, off::VERSION);
    if version != ROTATION_VERSION {
        return Err(Error::Keyring(KeyringError::UpdateUnsupportedVersion {
            found: version,
        }));
    }
    let (signed, signature) = bytes.split_at(off::SIGNATURE);
    let signature = signature.try_into().map_err(|_| {
        Error::Keyring(KeyringError::UpdateWrongLength {
            len: record.len() as u64,
        })
    })?;
    Ok((KeyId(array(bytes, off::ROOT_KEY_ID)), signed, signature))
}

pub(crate) fn array<const M: usize>(bytes: &[u8], at: usize) -> [u8; M] {
    let mut out = [0u8; M];
    out.copy_from_slice(&bytes[at..at + M]);
    out
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(bytes, at))
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(bytes, at))
}
