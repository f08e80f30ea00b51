//! Release keys and policies enter a device's trust through the same root-signed keyring
//! updates as signing keys: the 144-byte NPK1 record of `manifest/rotation.rs`, in the same
//! sequence, fetched from the same endpoint, applied in the same order.
//!
//! Version 1 of the record is unchanged: actions 1 to 3 keep their layout and meaning, and a
//! record of those actions is applied exactly as before. Actions 4 to 8 are new, and reuse the
//! record's fields (the table is on [`ReleaseChange`]). A firmware that predates them refuses
//! them by their action ("action 4 is not …"), and so holds installs, which is the safe way to
//! fail: such a device cannot enforce a release policy.
//!
//! [`apply_update`] applies either kind, all or nothing, to a signing [`Keyring`] and a
//! [`ReleaseTrust`] that share the keyring's update sequence. A release record must be signed
//! by a *release root*: a root the firmware accepts for release records, which should be one
//! the server never holds (the server's own root would otherwise let whoever holds its data
//! directory add a release key). Signing-key records keep using the firmware's roots.
use super::constants::RELEASE_ACTIONS;
use super::model_id::ModelId;
use super::policy::ReleasePolicy;
use super::trust::ReleaseTrust;
use crate::manifest::rotation::{array, envelope, off, u32_at, u64_at};
use crate::manifest::{
    KeyId, Keyring, KeyringChange, KeyringUpdate, ROTATION_DOMAIN, ROTATION_MAGIC,
    ROTATION_SIGNED_BYTES, ROTATION_VERSION, signature,
};
use crate::{Error, KeyringError, ReleaseError};

/// What a release action (4 to 8) does to the release trust. On the wire (version-1 NPK1 record,
/// the fields of `manifest::KeyringUpdate`; bytes 0..24, `issued_at` and `signature` as there):
///
/// | `action` | name                    | bytes 28..32 (`reserved`)                 | bytes 32..40 (`revoke_key_id`) | bytes 40..72 (`add_public_key`) |
/// |---------:|-------------------------|-------------------------------------------|--------------------------------|---------------------------------|
/// | 1, 2, 3  | signing key add, revoke, replace | 0                                | as before                      | as before                       |
/// | 4        | release key add         | 0                                         | 0                              | the release public key          |
/// | 5        | release key revoke      | 0                                         | the release key's id           | 0                               |
/// | 6        | release key replace     | 0                                         | the key to revoke              | the key to trust                |
/// | 7        | release policy          | `threshold` (u8), `key_count` (u8), 0, 0  | `model_id` (zeros: default)    | `key_count` key ids (8 bytes each), then zeros |
/// | 8        | release policy remove   | 0                                         | `model_id` (zeros: default)    | 0                               |
///
/// Bytes 28..72 of action 7 are exactly [`ReleasePolicy::encode`]. Every field an action does
/// not use must be zero (`KeyringError::UpdateUnusedFieldNotZero`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseChange {
    /// Action 4: trust a release key.
    AddKey {
        /// The key to trust.
        public_key: [u8; 32],
    },
    /// Action 5: revoke a release key, for good.
    RevokeKey {
        /// The key to revoke.
        key_id: KeyId,
    },
    /// Action 6: revoke one release key and trust another, atomically. Policies that named the
    /// revoked key keep naming it (and it no longer counts): send the new policy after it.
    ReplaceKey {
        /// The key to revoke.
        revoke: KeyId,
        /// The key to trust.
        public_key: [u8; 32],
    },
    /// Action 7: a model's policy (or the default one), replacing the one it had.
    SetPolicy(ReleasePolicy),
    /// Action 8: remove a model's policy (it falls back to the default one).
    RemovePolicy {
        /// The model ([`ModelId::DEFAULT`]: the default policy).
        model: ModelId,
    },
}

impl ReleaseChange {
    const ADD_KEY: u32 = 4;
    const REVOKE_KEY: u32 = 5;
    const REPLACE_KEY: u32 = 6;
    const SET_POLICY: u32 = 7;
    const REMOVE_POLICY: u32 = 8;

    fn action(&self) -> u32 {
        match self {
            Self::AddKey { .. } => Self::ADD_KEY,
            Self::RevokeKey { .. } => Self::REVOKE_KEY,
            Self::ReplaceKey { .. } => Self::REPLACE_KEY,
            Self::SetPolicy(_) => Self::SET_POLICY,
            Self::RemovePolicy { .. } => Self::REMOVE_POLICY,
        }
    }
}

const _: () = assert!(
    *RELEASE_ACTIONS.start() == ReleaseChange::ADD_KEY
        && *RELEASE_ACTIONS.end() == ReleaseChange::REMOVE_POLICY
);

/// Either kind of change a keyring update makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustChange {
    /// Actions 1 to 3: the signing keyring.
    Keyring(KeyringChange),
    /// Actions 4 to 8: the release trust.
    Release(ReleaseChange),
}

/// A keyring update of any action, before signing or after decoding: the signing-key updates
/// of [`KeyringUpdate`] and the release ones of [`ReleaseChange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustUpdate {
    /// Update sequence, ≥ 1, shared by both kinds.
    pub sequence: u64,
    /// The change.
    pub change: TrustChange,
    /// Unix seconds when signed.
    pub issued_at: u64,
}

impl TrustUpdate {
    /// The signed part (bytes `0..80`) for root key `root_key_id`.
    pub fn encode(&self, root_key_id: KeyId) -> [u8; ROTATION_SIGNED_BYTES] {
        let release = match self.change {
            TrustChange::Keyring(change) => {
                return KeyringUpdate {
                    sequence: self.sequence,
                    change,
                    issued_at: self.issued_at,
                }
                .encode(root_key_id);
            }
            TrustChange::Release(release) => release,
        };
        let mut out = [0u8; ROTATION_SIGNED_BYTES];
        let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
        put(off::MAGIC, &ROTATION_MAGIC.to_le_bytes());
        put(off::VERSION, &ROTATION_VERSION.to_le_bytes());
        put(off::ROOT_KEY_ID, &root_key_id.0);
        put(off::SEQUENCE, &self.sequence.to_le_bytes());
        put(off::ACTION, &release.action().to_le_bytes());
        match release {
            ReleaseChange::AddKey { public_key } => put(off::ADD_PUBLIC_KEY, &public_key),
            ReleaseChange::RevokeKey { key_id } => put(off::REVOKE_KEY_ID, &key_id.0),
            ReleaseChange::ReplaceKey { revoke, public_key } => {
                put(off::REVOKE_KEY_ID, &revoke.0);
                put(off::ADD_PUBLIC_KEY, &public_key);
            }
            ReleaseChange::SetPolicy(policy) => put(off::RESERVED, &policy.encode()),
            ReleaseChange::RemovePolicy { model } => put(off::REVOKE_KEY_ID, &model.0),
        }
        put(off::ISSUED_AT, &self.issued_at.to_le_bytes());
        out
    }

    /// Decodes a whole record of any action, checking length, magic, version, the action, and
    /// the fields it uses (a policy's) and does not use (zero). Does **not** check the signature
    /// ([`apply_update`] does).
    pub fn decode(bytes: &[u8]) -> Result<(KeyId, Self), Error> {
        let (root_key_id, ..) = envelope(bytes)?;
        let action = u32_at(bytes, off::ACTION);
        if !RELEASE_ACTIONS.contains(&action) {
            let (root_key_id, update) = KeyringUpdate::decode(bytes)?;
            let update = TrustUpdate {
                sequence: update.sequence,
                change: TrustChange::Keyring(update.change),
                issued_at: update.issued_at,
            };
            return Ok((root_key_id, update));
        }
        let update = TrustUpdate {
            sequence: u64_at(bytes, off::SEQUENCE),
            change: TrustChange::Release(decode_release(bytes, action)?),
            issued_at: u64_at(bytes, off::ISSUED_AT),
        };
        Ok((root_key_id, update))
    }
}

/// The release change of a record whose length, magic, version and action (4 to 8) are checked.
fn decode_release(bytes: &[u8], action: u32) -> Result<ReleaseChange, Error> {
    let revoke = KeyId(array(bytes, off::REVOKE_KEY_ID));
    let add: [u8; 32] = array(bytes, off::ADD_PUBLIC_KEY);
    let reserved = &bytes[off::RESERVED..off::RESERVED + 4];
    // (change, uses reserved, uses revoke_key_id, uses add_public_key)
    let (change, uses) = match action {
        ReleaseChange::ADD_KEY => (
            ReleaseChange::AddKey { public_key: add },
            [false, false, true],
        ),
        ReleaseChange::REVOKE_KEY => (
            ReleaseChange::RevokeKey { key_id: revoke },
            [false, true, false],
        ),
        ReleaseChange::REPLACE_KEY => (
            ReleaseChange::ReplaceKey {
                revoke,
                public_key: add,
            },
            [false, true, true],
        ),
        ReleaseChange::SET_POLICY => {
            let encoded = array(bytes, off::RESERVED);
            (
                ReleaseChange::SetPolicy(ReleasePolicy::decode(&encoded)?),
                [true, true, true],
            )
        }
        ReleaseChange::REMOVE_POLICY => (
            ReleaseChange::RemovePolicy {
                model: ModelId(revoke.0),
            },
            [false, true, false],
        ),
        _ => return Err(KeyringError::UpdateBadAction { action }.into()),
    };
    let fields = [
        ("reserved", reserved),
        ("revoke_key_id", &revoke.0[..]),
        ("add_public_key", &add[..]),
    ];
    for ((field, value), used) in fields.into_iter().zip(uses) {
        if !used && value.iter().any(|&b| b != 0) {
            return Err(KeyringError::UpdateUnusedFieldNotZero { field }.into());
        }
    }
    Ok(change)
}

/// Applies a root-signed keyring update of any action, all or nothing: actions 1 to 3 to the
/// signing `keyring` exactly as [`Keyring::apply_update`] does, actions 4 to 8 to `release`.
/// Both kinds share the keyring's update sequence, which becomes the record's on success; the
/// caller persists the keyring and the release trust together.
///
/// `roots` are the roots that may sign signing-key updates (the firmware's, as today);
/// `release_roots` those that may sign release updates. The action is read before the
/// signature only to choose between the two lists; the chosen root's signature covers it.
///
/// Checks, in order: length, magic and version; the root key is in the list for the action
/// (`KeyringError::UpdateUnknownRootKey`, or `ReleaseError::RootNotReleaseRoot` for a root that
/// may sign only signing-key updates); the signature (`KeyringError::UpdateBadSignature`); then,
/// on signed bytes only, the rest of the format ([`TrustUpdate::decode`]), the sequence
/// (`KeyringError::UpdateReplayed`), and the change itself (release keys: the signing keyring's
/// rules, in release terms: `ReleaseError::KeysFull`, `KeyRevokedForGood`, `KeyError::Invalid`,
/// `KeyError::Weak`; a policy: `ReleaseError::PoliciesFull`). A release-key or policy change
/// whose effect is already there (adding a key held, revoking one never known, removing a
/// policy that is not there) is applied as a no-op, so that a device provisioned later replays
/// the history from sequence 1.
pub fn apply_update<const N: usize, const K: usize, const P: usize>(
    keyring: &mut Keyring<N>,
    release: &mut ReleaseTrust<K, P>,
    record: &[u8],
    roots: &[[u8; 32]],
    release_roots: &[[u8; 32]],
) -> Result<(), Error> {
    let (root_id, ..) = envelope(record)?;
    let is_release = RELEASE_ACTIONS.contains(&u32_at(record, off::ACTION));
    let allowed = if is_release { release_roots } else { roots };
    let known = |list: &[[u8; 32]]| list.iter().any(|r| KeyId::of(r) == root_id);
    if is_release && !known(release_roots) && known(roots) {
        return Err(ReleaseError::RootNotReleaseRoot { key_id: root_id }.into());
    }
    check_update_signature(record, allowed)?;
    if is_release {
        apply_release_signed(keyring, release, record)
    } else {
        keyring.apply_signed(record)
    }
}

/// Checks a keyring update's length, magic and version, and that one of `roots` signed it
/// (`KeyringError::UpdateUnknownRootKey`, `UpdateBadSignature`); returns that root's id.
/// Nothing else: neither the fields nor the sequence (a server checking a record uploaded by an
/// operator, `npub keyring show --root`).
pub fn check_update_signature(record: &[u8], roots: &[[u8; 32]]) -> Result<KeyId, Error> {
    let (root_id, signed, sig) = envelope(record)?;
    let root = roots
        .iter()
        .find(|r| KeyId::of(r) == root_id)
        .ok_or(KeyringError::UpdateUnknownRootKey { key_id: root_id })?;
    signature::check(
        root,
        ROTATION_DOMAIN,
        signed,
        sig,
        KeyringError::UpdateBadSignature { key_id: root_id }.into(),
    )?;
    Ok(root_id)
}

/// The part of [`apply_update`] after the signature, for a release action. Out of line so that
/// the decoded record is not on the stack while the signature is checked.
#[inline(never)]
fn apply_release_signed<const N: usize, const K: usize, const P: usize>(
    keyring: &mut Keyring<N>,
    release: &mut ReleaseTrust<K, P>,
    record: &[u8],
) -> Result<(), Error> {
    let (_, update) = TrustUpdate::decode(record)?;
    let TrustChange::Release(change) = update.change else {
        // Unreachable: the caller saw a release action.
        return Err(KeyringError::UpdateBadAction {
            action: u32_at(record, off::ACTION),
        }
        .into());
    };
    keyring.check_update_sequence(update.sequence)?;
    match change {
        ReleaseChange::AddKey { public_key } => release.change_keys(None, Some(public_key))?,
        ReleaseChange::RevokeKey { key_id } => release.change_keys(Some(key_id), None)?,
        ReleaseChange::ReplaceKey { revoke, public_key } => {
            release.change_keys(Some(revoke), Some(public_key))?
        }
        ReleaseChange::SetPolicy(policy) => release.set_policy(policy)?,
        ReleaseChange::RemovePolicy { model } => release.remove_policy(model),
    }
    keyring.set_update_sequence(update.sequence);
    Ok(())
}
