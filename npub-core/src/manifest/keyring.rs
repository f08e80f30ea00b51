//! The device's trust store: a fixed number of signing keys, each trusted or revoked.
//!
//! The table is on [`KeyEntry`].
//!
//! Revocation is permanent and keeps its entry: a revoked key that dropped out of the keyring
//! could be added back by replaying the update that first added it, so it stays, marked. Capacity
//! is a const generic so that the whole keyring is a plain value the firmware places where it
//! likes (and persists; [`Keyring::entries`] and [`Keyring::update_sequence`] are all its state).
//!
//! Root keys, which sign keyring updates, are not in the keyring: they are built into the firmware
//! and passed to [`Keyring::apply_update`].
use super::KeyId;
use super::signature::verifying_key;
use crate::{Error, KeyringError};

/// One key the device knows.
///
/// | Entry field  | Size | Meaning                                                         |
/// |--------------|-----:|-----------------------------------------------------------------|
/// | `key_id`     |    8 | [`KeyId::of`] the public key; derived, never chosen            |
/// | `public_key` |   32 | ed25519 public key, checked on entry: a valid point, not weak   |
/// | `revoked`    |    1 | once set, never cleared                                         |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyEntry {
    key_id: KeyId,
    public_key: [u8; 32],
    revoked: bool,
}

impl KeyEntry {
    /// The key's id.
    pub fn key_id(&self) -> KeyId {
        self.key_id
    }

    /// The ed25519 public key.
    pub fn public_key(&self) -> &[u8; 32] {
        &self.public_key
    }

    /// True once the key has been revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoked
    }
}

/// A fixed-capacity keyring of signing keys, with the sequence of the last keyring update applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring<const N: usize> {
    entries: [Option<KeyEntry>; N],
    update_sequence: u64,
}

impl<const N: usize> Default for Keyring<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Keyring<N> {
    /// An empty keyring that has applied no update.
    pub const fn new() -> Self {
        Self {
            entries: [None; N],
            update_sequence: 0,
        }
    }

    /// Provisioning (factory, or restoring from flash): trusts `public_key`. Refuses an invalid or
    /// weak key, one already present or revoked, and a full keyring.
    pub fn add(&mut self, public_key: &[u8; 32]) -> Result<KeyId, Error> {
        let slot = self.check_add(public_key)?;
        let key_id = KeyId::of(public_key);
        self.entries[slot] = Some(KeyEntry {
            key_id,
            public_key: *public_key,
            revoked: false,
        });
        Ok(key_id)
    }

    /// Provisioning or restoring: marks `key_id` revoked, for good.
    pub fn revoke(&mut self, key_id: KeyId) -> Result<(), Error> {
        let slot = self.check_revoke(key_id)?;
        if let Some(entry) = self.entries[slot].as_mut() {
            entry.revoked = true;
        }
        Ok(())
    }

    /// Restoring from flash: the sequence of the last keyring update this keyring applied.
    pub fn set_update_sequence(&mut self, sequence: u64) {
        self.update_sequence = sequence;
    }

    /// The sequence of the last keyring update applied (0: none yet).
    pub fn update_sequence(&self) -> u64 {
        self.update_sequence
    }

    /// The entry for `key_id`, trusted or revoked.
    pub fn get(&self, key_id: KeyId) -> Option<&KeyEntry> {
        self.entries.iter().flatten().find(|e| e.key_id == key_id)
    }

    /// Every entry, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = &KeyEntry> {
        self.entries.iter().flatten()
    }

    /// The keyring's capacity.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The slot `public_key` would take, or why it cannot be added. Changes nothing.
    pub(crate) fn check_add(&self, public_key: &[u8; 32]) -> Result<usize, Error> {
        verifying_key(public_key)?;
        let key_id = KeyId::of(public_key);
        match self.get(key_id) {
            Some(e) if e.revoked => {
                return Err(Error::Keyring(KeyringError::KeyRevoked { key_id }));
            }
            Some(_) => return Err(Error::Keyring(KeyringError::Duplicate { key_id })),
            None => {}
        }
        self.entries
            .iter()
            .position(Option::is_none)
            .ok_or(Error::Keyring(KeyringError::Full { capacity: N as u32 }))
    }

    /// The slot holding the trusted key `key_id`, or why it cannot be revoked. Changes nothing.
    pub(crate) fn check_revoke(&self, key_id: KeyId) -> Result<usize, Error> {
        let slot = self
            .entries
            .iter()
            .position(|e| e.is_some_and(|e| e.key_id == key_id))
            .ok_or(Error::Keyring(KeyringError::UnknownKey { key_id }))?;
        if self.entries[slot].is_some_and(|e| e.revoked) {
            return Err(Error::Keyring(KeyringError::KeyRevoked { key_id }));
        }
        Ok(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyError;
    use crate::keypair::KeyPair;

    fn key(n: u8) -> [u8; 32] {
        KeyPair::from_seed([n; 32]).public_key()
    }

    #[test]
    fn adds_finds_and_revokes() {
        let mut ring = Keyring::<2>::new();
        let id = ring.add(&key(1)).unwrap();
        assert_eq!(id, KeyId::of(&key(1)));
        assert!(!ring.get(id).unwrap().is_revoked());
        ring.revoke(id).unwrap();
        assert!(ring.get(id).unwrap().is_revoked());
        assert_eq!(ring.entries().count(), 1);
    }

    #[test]
    fn rejects_a_key_added_twice() {
        let mut ring = Keyring::<2>::new();
        let id = ring.add(&key(1)).unwrap();
        assert_eq!(
            ring.add(&key(1)),
            Err(Error::Keyring(KeyringError::Duplicate { key_id: id }))
        );
    }

    #[test]
    fn rejects_re_adding_a_revoked_key() {
        let mut ring = Keyring::<2>::new();
        let id = ring.add(&key(1)).unwrap();
        ring.revoke(id).unwrap();
        assert_eq!(
            ring.add(&key(1)),
            Err(Error::Keyring(KeyringError::KeyRevoked { key_id: id }))
        );
        assert_eq!(
            ring.revoke(id),
            Err(Error::Keyring(KeyringError::KeyRevoked { key_id: id }))
        );
    }

    #[test]
    fn rejects_a_key_past_capacity_even_after_revocations() {
        let mut ring = Keyring::<1>::new();
        let id = ring.add(&key(1)).unwrap();
        ring.revoke(id).unwrap();
        assert_eq!(
            ring.add(&key(2)),
            Err(Error::Keyring(KeyringError::Full { capacity: 1 }))
        );
    }

    #[test]
    fn rejects_revoking_an_unknown_key() {
        let mut ring = Keyring::<1>::new();
        let id = KeyId([7; 8]);
        assert_eq!(
            ring.revoke(id),
            Err(Error::Keyring(KeyringError::UnknownKey { key_id: id }))
        );
    }

    #[test]
    fn rejects_small_order_and_invalid_public_keys() {
        let mut ring = Keyring::<1>::new();
        // The identity point (y = 1) has order 1: every signature would "verify" under it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(
            ring.add(&identity),
            Err(Error::Key(KeyError::Weak {
                key_id: KeyId::of(&identity)
            }))
        );
        // y = 2 is not the y-coordinate of any point on edwards25519.
        let mut not_a_point = [0u8; 32];
        not_a_point[0] = 2;
        assert_eq!(
            ring.add(&not_a_point),
            Err(Error::Key(KeyError::Invalid {
                key_id: KeyId::of(&not_a_point)
            }))
        );
    }
}
