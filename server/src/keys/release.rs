//! What this server knows of release trust (issue 34, `docs/release.md`): the release keys and
//! policies that the release records it stores (keyring updates of actions 4 to 8) give devices,
//! replayed in sequence order with the devices' rules. The server holds only public keys: it can
//! verify a release signature by a key those records added, never make one, and it cannot verify
//! the records themselves (their root, the release root, is in device firmware, not here).
//!
//! | used by                                  | for                                                       |
//! |------------------------------------------|-----------------------------------------------------------|
//! | `POST …/release-signatures`, uploads      | each signature by a key of [`KnownRelease`]: revoked or not, the ed25519 signature |
//! | deployments and rollbacks                 | [`KnownRelease::meets`]: the bundle meets the rule devices will apply |
//! | `POST /api/v1/keys/updates`               | [`KnownRelease::apply`] on a copy: a record devices would refuse is refused here |
use npub_core::manifest::KeyId;
use npub_core::release::{
    self, DeviceReleaseTrust, ReleaseChange, ReleaseFacts, TrustChange, TrustUpdate,
};
use npub_core::{Accel, Error as CoreError};

use crate::db::Conn;
use crate::http::error::ApiError;

/// The release trust a device provisioned with no factory release key reaches by applying every
/// release record this server stores: the devices' own type, so a record that would overflow a
/// device's trust is refused here as it would be there.
#[derive(Debug, Clone, Default)]
pub struct KnownRelease {
    trust: DeviceReleaseTrust,
}

impl KnownRelease {
    /// Replays the stored release records (keyring updates of actions 4 to 8), in sequence order.
    /// A stored record that no longer applies is skipped with a warning: it was checked when it
    /// was uploaded.
    pub async fn load(conn: &mut Conn) -> Result<Self, ApiError> {
        let rows: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT sequence, record FROM keyring_updates ORDER BY sequence")
                .fetch_all(&mut *conn)
                .await?;
        let mut known = Self::default();
        for (sequence, record) in rows {
            let Ok((_, update)) = TrustUpdate::decode(&record) else {
                continue;
            };
            if let TrustChange::Release(change) = update.change
                && let Err(e) = known.apply(change)
            {
                tracing::warn!(sequence, error = %e, "a stored release record no longer applies");
            }
        }
        Ok(known)
    }

    /// Applies one release change with the devices' replay rules: a change whose effect is
    /// already there (adding a key held, revoking one not held or already revoked) changes
    /// nothing; a revoked key is never trusted again; a full trust refuses the next key or policy.
    pub fn apply(&mut self, change: ReleaseChange) -> Result<(), CoreError> {
        let trust = &mut self.trust;
        let keys =
            |revoke: Option<KeyId>, add: Option<[u8; 32]>, trust: &mut DeviceReleaseTrust| {
                let revoke = revoke.filter(|&id| trust.key(id).is_some_and(|e| !e.is_revoked()));
                let add = add.filter(|k| trust.key(KeyId::of(k)).is_none_or(|e| e.is_revoked()));
                // Both halves are checked on a copy before either is kept, as a device does.
                let mut next = trust.clone();
                if let Some(id) = revoke {
                    next.revoke_key(id)?;
                }
                if let Some(key) = add {
                    next.add_key(&key)?;
                }
                *trust = next;
                Ok(())
            };
        match change {
            ReleaseChange::AddKey { public_key } => keys(None, Some(public_key), trust),
            ReleaseChange::RevokeKey { key_id } => keys(Some(key_id), None, trust),
            ReleaseChange::ReplaceKey { revoke, public_key } => {
                keys(Some(revoke), Some(public_key), trust)
            }
            ReleaseChange::SetPolicy(policy) => trust.set_policy(policy),
            ReleaseChange::RemovePolicy { model } => {
                trust.remove_policy(model);
                Ok(())
            }
        }
    }

    /// True once any release record was stored: devices that applied them need release
    /// signatures for every model.
    pub fn is_active(&self) -> bool {
        self.trust.is_active()
    }

    /// The release key `key_id`, if a stored record added it: its public key and whether a later
    /// one revoked it.
    pub fn key(&self, key_id: KeyId) -> Option<(&[u8; 32], bool)> {
        self.trust
            .key(key_id)
            .map(|e| (e.public_key(), e.is_revoked()))
    }

    /// What model `name` needs, in words: "2 of 1a2b…, 3c4d…" (its policy or the default one),
    /// "1 by any release key", or "at least one release signature" when no record was stored.
    pub fn rule_for(&self, name: &str) -> String {
        match self.trust.applies_to(name) {
            release::Applies::Policy(p) => format!(
                "{} of the release keys {}",
                p.threshold(),
                p.keys()
                    .iter()
                    .map(KeyId::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            release::Applies::AnyKey => "1 by any trusted release key".into(),
            release::Applies::Nothing => "at least one release signature".into(),
        }
    }

    /// *k* for model `name`: its policy's threshold, 1 without one (any key, or no record).
    pub fn threshold_for(&self, name: &str) -> u8 {
        self.trust.applies_to(name).threshold().max(1)
    }

    /// The *n* keys of the policy model `name` is held to (its own or the default one); empty
    /// when no policy applies (any trusted release key counts).
    pub fn policy_keys_for(&self, name: &str) -> Vec<KeyId> {
        match self.trust.applies_to(name) {
            release::Applies::Policy(p) => p.keys().to_vec(),
            _ => Vec::new(),
        }
    }

    /// Whether `bundle` (empty: none) meets the rule devices that applied the stored records hold
    /// `facts.model_name` to (npub-core's `release::check`, the device's own); with no record
    /// stored, the server knows no key and asks for one signature at least. `Err` says why not.
    pub fn meets(&self, bundle: &[u8], facts: &ReleaseFacts<'_>) -> Result<(), String> {
        if !self.trust.is_active() {
            if bundle.is_empty() {
                return Err("it has no release signature".into());
            }
            return release::Bundle::parse(bundle)
                .map(|_| ())
                .map_err(|e| e.to_string());
        }
        release::check(&self.trust, bundle, facts)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A version's facts, owned, as a release must name them.
#[derive(Debug, Clone)]
pub struct VersionFacts {
    /// The pack's SHA-256.
    pub pack_sha256: [u8; 32],
    /// The model's name.
    pub model: String,
    /// The version.
    pub version: String,
    /// The pack's NPU1 accel word.
    pub accel: u32,
    /// The IO digest (zeros: none declared).
    pub io_digest: [u8; 32],
    /// SHA-256 of the version's self-test record ("NPS1"), which its version-2 manifests sign
    /// and devices hold a release to; all zeros when it has none (version-1 manifests).
    pub selftest_digest: [u8; 32],
}

/// The digest of "no self-test": what a version without a golden vector's release names.
pub const NO_SELFTEST: [u8; 32] = [0; 32];

impl VersionFacts {
    /// From a `versions` row's hex digests; `None` when one is not 64 hex digits.
    pub fn of_row(
        model: &str,
        version: &str,
        sha256: &str,
        accel: i64,
        io_digest: Option<&str>,
        selftest_digest: Option<[u8; 32]>,
    ) -> Option<Self> {
        let decode = |hex: &str| -> Option<[u8; 32]> {
            crate::store::from_hex(hex).and_then(|b| b.try_into().ok())
        };
        Some(Self {
            pack_sha256: decode(sha256)?,
            model: model.to_owned(),
            version: version.to_owned(),
            accel: accel as u32,
            io_digest: match io_digest {
                Some(hex) => decode(hex)?,
                None => [0; 32],
            },
            selftest_digest: selftest_digest.unwrap_or(NO_SELFTEST),
        })
    }

    /// As npub-core's check takes them.
    pub fn facts(&self) -> ReleaseFacts<'_> {
        ReleaseFacts {
            pack_sha256: &self.pack_sha256,
            model_name: &self.model,
            model_version: &self.version,
            accel: Accel::from_word(self.accel),
            io_digest: &self.io_digest,
            selftest_digest: &self.selftest_digest,
        }
    }
}
