//! A device's release trust: the release keys it holds (trusted or revoked) and the release
//! policies, beside the signing keyring and changed by the same root-signed keyring updates.
//!
//! The table is on [`ReleaseTrust`]. Release keys follow the signing keyring's rules (they *are*
//! a [`Keyring`]): checked on entry, revocation permanent and keeping the entry. Policies are
//! one per model id; setting a model's policy again replaces it.
//!
//! A trust with no key entry and no policy is *inactive*: the device installs as it did before
//! release signatures existed. Once a key or a policy is in it, it never becomes inactive again
//! (entries are never removed), so revoking every release key stops installs rather than
//! switching the check off.
use super::model_id::ModelId;
use super::policy::ReleasePolicy;
use crate::manifest::{KeyEntry, KeyId, Keyring};
use crate::{Error, KeyringError, ReleaseError};

/// Which rule a model is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies<'a> {
    /// The trust is inactive: no release signature is required.
    Nothing,
    /// A policy: the model's own, or the default one (in the trust, not copied).
    Policy(&'a ReleasePolicy),
    /// No policy for the model and no default policy: one signature by any trusted release key.
    AnyKey,
}

impl Applies<'_> {
    /// *k*: the valid signatures needed (0 when nothing is required).
    pub fn threshold(&self) -> u8 {
        match self {
            Applies::Nothing => 0,
            Applies::Policy(p) => p.threshold(),
            Applies::AnyKey => 1,
        }
    }
}

/// The release keys and policies a device holds.
///
/// | Part       | Size (`K` keys, `P` policies)     | Meaning                                           |
/// |------------|-----------------------------------|---------------------------------------------------|
/// | `keys`     | a [`Keyring<K>`](Keyring): `K` × (key id 8, public key 32, revoked 1) | release keys, trusted or revoked for good |
/// | `policies` | `P` × an optional [`ReleasePolicy`] (44 bytes encoded) | at most one per model id, the default (id 0) included |
///
/// With [`super::DEVICE_RELEASE_KEYS`] = 8 and [`super::DEVICE_RELEASE_POLICIES`] = 8 the
/// whole value is 680 bytes of RAM, on a Cortex-M as on the host (it holds no pointer; the test
/// `device_trust_fits_in_ram` holds it to 768), and its flash form is 8 × 33 + 8 × 44 = 616 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTrust<const K: usize, const P: usize> {
    keys: Keyring<K>,
    policies: [Option<ReleasePolicy>; P],
}

impl<const K: usize, const P: usize> Default for ReleaseTrust<K, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const K: usize, const P: usize> ReleaseTrust<K, P> {
    /// No release key, no policy: inactive.
    pub const fn new() -> Self {
        Self {
            keys: Keyring::new(),
            policies: [None; P],
        }
    }

    /// True once any release key (even revoked) or policy is held: from then on every install
    /// needs release signatures.
    pub fn is_active(&self) -> bool {
        self.keys.entries().next().is_some() || self.policies().next().is_some()
    }

    /// Provisioning (the release trust file) or restoring from flash: trusts `public_key` as a
    /// release key. Refuses an invalid or weak key, one already present or revoked, and a full
    /// trust.
    pub fn add_key(&mut self, public_key: &[u8; 32]) -> Result<KeyId, Error> {
        self.keys.add(public_key).map_err(as_release)
    }

    /// Restoring from flash: marks the release key `key_id` revoked, for good.
    pub fn revoke_key(&mut self, key_id: KeyId) -> Result<(), Error> {
        self.keys.revoke(key_id).map_err(as_release)
    }

    /// The release key `key_id`, trusted or revoked.
    pub fn key(&self, key_id: KeyId) -> Option<&KeyEntry> {
        self.keys.get(key_id)
    }

    /// Every release key, in slot order (what a device persists, with [`Self::policies`]).
    pub fn keys(&self) -> impl Iterator<Item = &KeyEntry> {
        self.keys.entries()
    }

    /// Provisioning, restoring, or a root-signed update: `policy` becomes its model's policy,
    /// replacing the one it had. Refuses a new model when every entry is in use.
    pub fn set_policy(&mut self, policy: ReleasePolicy) -> Result<(), Error> {
        let slot = self.policy_slot(policy.model())?;
        self.policies[slot] = Some(policy);
        Ok(())
    }

    /// The slot `model`'s policy takes: its current one, or a free one.
    pub(crate) fn policy_slot(&self, model: ModelId) -> Result<usize, Error> {
        let own = self
            .policies
            .iter()
            .position(|p| p.is_some_and(|p| p.model() == model));
        own.or_else(|| self.policies.iter().position(Option::is_none))
            .ok_or(Error::Release(ReleaseError::PoliciesFull {
                capacity: P as u32,
            }))
    }

    /// Removes `model`'s policy (the default one for [`ModelId::DEFAULT`]); the model falls back
    /// to the default policy. Removing a policy that is not there changes nothing.
    pub fn remove_policy(&mut self, model: ModelId) {
        for slot in &mut self.policies {
            if slot.is_some_and(|p| p.model() == model) {
                *slot = None;
            }
        }
    }

    /// Every policy held, in slot order.
    pub fn policies(&self) -> impl Iterator<Item = &ReleasePolicy> {
        self.policies.iter().flatten()
    }

    /// The rule `model_name` is held to: its own policy, else the default policy, else one
    /// signature by any trusted release key; nothing while the trust is inactive.
    pub fn applies_to(&self, model_name: &str) -> Applies<'_> {
        if !self.is_active() {
            return Applies::Nothing;
        }
        let model = ModelId::of(model_name);
        let find = |id: ModelId| self.policies().find(|p| p.model() == id);
        match find(model).or_else(|| find(ModelId::DEFAULT)) {
            Some(policy) => Applies::Policy(policy),
            None => Applies::AnyKey,
        }
    }

    /// A root-signed key change (release-add, -revoke, -replace), with the signing keyring's
    /// replay rules ([`Keyring`]'s `change`).
    pub(crate) fn change_keys(
        &mut self,
        revoke: Option<KeyId>,
        add: Option<[u8; 32]>,
    ) -> Result<(), Error> {
        self.keys.change(revoke, add).map_err(as_release)
    }
}

/// The signing keyring's errors, said of release keys.
fn as_release(e: Error) -> Error {
    let release = match e {
        Error::Keyring(KeyringError::Full { capacity }) => ReleaseError::KeysFull { capacity },
        Error::Keyring(KeyringError::KeyRevoked { key_id }) => {
            ReleaseError::KeyRevokedForGood { key_id }
        }
        Error::Keyring(KeyringError::Duplicate { key_id }) => {
            ReleaseError::KeyAlreadyTrusted { key_id }
        }
        Error::Keyring(KeyringError::UnknownKey { key_id }) => ReleaseError::NoSuchKey { key_id },
        other => return other,
    };
    release.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keypair::KeyPair;
    use crate::release::{DEVICE_RELEASE_KEYS, DEVICE_RELEASE_POLICIES};

    fn key(n: u8) -> [u8; 32] {
        KeyPair::from_seed([n; 32]).public_key()
    }

    #[test]
    fn device_trust_fits_in_ram() {
        let size =
            core::mem::size_of::<ReleaseTrust<DEVICE_RELEASE_KEYS, DEVICE_RELEASE_POLICIES>>();
        assert!(size <= 768, "{size} bytes");
    }

    #[test]
    fn is_inactive_until_a_key_or_a_policy_arrives_and_then_for_good() {
        let mut trust = ReleaseTrust::<2, 2>::new();
        assert!(!trust.is_active());
        assert_eq!(trust.applies_to("m"), Applies::Nothing);
        let id = trust.add_key(&key(1)).unwrap();
        assert_eq!(trust.applies_to("m"), Applies::AnyKey);
        trust.revoke_key(id).unwrap();
        assert!(
            trust.is_active(),
            "revoking every key must not switch the check off"
        );
        let mut only_policy = ReleaseTrust::<2, 2>::new();
        only_policy
            .set_policy(ReleasePolicy::new(ModelId::of("m"), 1, &[id]).unwrap())
            .unwrap();
        assert!(only_policy.is_active());
    }

    #[test]
    fn a_model_gets_its_own_policy_else_the_default_else_any_key() {
        let mut trust = ReleaseTrust::<2, 3>::new();
        let a = trust.add_key(&key(1)).unwrap();
        let b = trust.add_key(&key(2)).unwrap();
        let own = ReleasePolicy::new(ModelId::of("cam"), 2, &[a, b]).unwrap();
        trust.set_policy(own).unwrap();
        assert_eq!(trust.applies_to("cam"), Applies::Policy(&own));
        assert_eq!(trust.applies_to("mic"), Applies::AnyKey);
        let default = ReleasePolicy::new(ModelId::DEFAULT, 1, &[b]).unwrap();
        trust.set_policy(default).unwrap();
        assert_eq!(trust.applies_to("mic"), Applies::Policy(&default));
        // Setting a model's policy again replaces it, in the same entry.
        let again = ReleasePolicy::new(ModelId::of("cam"), 1, &[a]).unwrap();
        trust.set_policy(again).unwrap();
        assert_eq!(trust.policies().count(), 2);
        assert_eq!(trust.applies_to("cam"), Applies::Policy(&again));
        trust.remove_policy(ModelId::of("cam"));
        assert_eq!(trust.applies_to("cam"), Applies::Policy(&default));
        trust.remove_policy(ModelId::of("never-had-one"));
        assert_eq!(trust.policies().count(), 1);
    }

    #[test]
    fn rejects_a_policy_past_capacity() {
        let mut trust = ReleaseTrust::<1, 1>::new();
        let a = trust.add_key(&key(1)).unwrap();
        trust
            .set_policy(ReleasePolicy::new(ModelId::of("x"), 1, &[a]).unwrap())
            .unwrap();
        assert_eq!(
            trust.set_policy(ReleasePolicy::new(ModelId::of("y"), 1, &[a]).unwrap()),
            Err(Error::Release(ReleaseError::PoliciesFull { capacity: 1 }))
        );
    }

    #[test]
    fn rejects_release_keys_as_the_signing_keyring_does_in_release_terms() {
        let mut trust = ReleaseTrust::<1, 1>::new();
        let a = trust.add_key(&key(1)).unwrap();
        assert_eq!(
            trust.add_key(&key(1)),
            Err(Error::Release(ReleaseError::KeyAlreadyTrusted {
                key_id: a
            }))
        );
        assert_eq!(
            trust.add_key(&key(2)),
            Err(Error::Release(ReleaseError::KeysFull { capacity: 1 }))
        );
        trust.revoke_key(a).unwrap();
        assert_eq!(
            trust.add_key(&key(1)),
            Err(Error::Release(ReleaseError::KeyRevokedForGood {
                key_id: a
            }))
        );
        let unknown = KeyId([7; 8]);
        assert_eq!(
            trust.revoke_key(unknown),
            Err(Error::Release(ReleaseError::NoSuchKey { key_id: unknown }))
        );
    }
}
