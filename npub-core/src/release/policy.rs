//! A release policy: how many release signatures (*k*) from which release keys (up to
//! [`MAX_POLICY_KEYS`]) a model needs before a device installs it, as TUF's thresholds do.
//!
//! A policy is for one model (its [`ModelId`]) or is the default, for every model without one.
//! A device with release keys and no default policy applies "one signature by any trusted
//! release key" to the models without a policy (`trust.rs`). The table of its encoding is on
//! [`ReleasePolicy`].
use super::constants::{MAX_POLICY_KEYS, POLICY_BYTES};
use super::model_id::ModelId;
use crate::manifest::KeyId;
use crate::{Error, KeyringError, ReleaseError};

/// Offsets within the encoding.
mod off {
    pub const THRESHOLD: usize = 0;
    pub const KEY_COUNT: usize = 1;
    pub const RESERVED: usize = 2;
    pub const MODEL_ID: usize = 4;
    pub const KEY_IDS: usize = 12;
}
const _: () = assert!(off::KEY_IDS + super::MAX_POLICY_KEYS * 8 == POLICY_BYTES);

/// *k* of up to four release keys, for one model or the default.
///
/// Its encoding, [`POLICY_BYTES`] = 44 bytes, is bytes 28..72 of the keyring update that sets it
/// (action 7, `update.rs`), and what a device stores in flash:
///
/// | Offset | Size | Field       | Meaning                                                          |
/// |-------:|-----:|-------------|------------------------------------------------------------------|
/// |      0 |    1 | `threshold` | *k*: valid signatures needed, 1..=`key_count`                     |
/// |      1 |    1 | `key_count` | *n*: keys named, 1..=[`MAX_POLICY_KEYS`]                          |
/// |      2 |    2 | `reserved`  | 0                                                                |
/// |      4 |    8 | `model_id`  | [`ModelId::of`] the model name; all zeros = the default policy   |
/// |     12 |   32 | `key_ids`   | `key_count` distinct [`KeyId`]s, then zeros                       |
///
/// A policy may name a key the device does not hold (yet, or any more): such a key's signatures
/// are refused (`UnknownKey`) and so never count, and a policy is applied even so, so that a
/// device provisioned later replays the history of policies without stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleasePolicy {
    model: ModelId,
    threshold: u8,
    count: u8,
    keys: [KeyId; MAX_POLICY_KEYS],
}

impl ReleasePolicy {
    /// `threshold` of `keys` for `model` ([`ModelId::DEFAULT`]: the default policy). Refuses no
    /// key or more than [`MAX_POLICY_KEYS`], a key twice, and a threshold of 0 or above the
    /// number of keys.
    pub fn new(model: ModelId, threshold: u8, keys: &[KeyId]) -> Result<Self, Error> {
        if keys.is_empty() || keys.len() > MAX_POLICY_KEYS {
            return Err(ReleaseError::PolicyBadKeyCount {
                count: keys.len().min(u8::MAX as usize) as u8,
            }
            .into());
        }
        let count = keys.len() as u8;
        if threshold == 0 || threshold > count {
            return Err(ReleaseError::PolicyBadThreshold {
                threshold,
                keys: count,
            }
            .into());
        }
        for (i, key) in keys.iter().enumerate() {
            if keys[..i].contains(key) {
                return Err(ReleaseError::PolicyDuplicateKey { key_id: *key }.into());
            }
        }
        let mut all = [KeyId([0; 8]); MAX_POLICY_KEYS];
        all[..keys.len()].copy_from_slice(keys);
        Ok(Self {
            model,
            threshold,
            count,
            keys: all,
        })
    }

    /// The model it governs ([`ModelId::DEFAULT`]: every model without a policy of its own).
    pub fn model(&self) -> ModelId {
        self.model
    }

    /// *k*: valid signatures needed.
    pub fn threshold(&self) -> u8 {
        self.threshold
    }

    /// The release keys whose signatures count.
    pub fn keys(&self) -> &[KeyId] {
        &self.keys[..self.count as usize]
    }

    /// True when `key_id` is one of [`ReleasePolicy::keys`].
    pub fn names(&self, key_id: KeyId) -> bool {
        self.keys().contains(&key_id)
    }

    /// The 44-byte encoding (the table on [`ReleasePolicy`]).
    pub fn encode(&self) -> [u8; POLICY_BYTES] {
        let mut out = [0u8; POLICY_BYTES];
        out[off::THRESHOLD] = self.threshold;
        out[off::KEY_COUNT] = self.count;
        out[off::MODEL_ID..off::MODEL_ID + 8].copy_from_slice(&self.model.0);
        for (i, key) in self.keys().iter().enumerate() {
            let at = off::KEY_IDS + i * 8;
            out[at..at + 8].copy_from_slice(&key.0);
        }
        out
    }

    /// Decodes the 44-byte encoding, with every check of [`ReleasePolicy::new`] and the unused
    /// bytes zero.
    pub fn decode(bytes: &[u8; POLICY_BYTES]) -> Result<Self, Error> {
        if bytes[off::RESERVED..off::MODEL_ID] != [0, 0] {
            return Err(KeyringError::UpdateUnusedFieldNotZero {
                field: "policy reserved",
            }
            .into());
        }
        let count = bytes[off::KEY_COUNT] as usize;
        let mut keys = [KeyId([0; 8]); MAX_POLICY_KEYS];
        for (i, key) in keys.iter_mut().enumerate() {
            let at = off::KEY_IDS + i * 8;
            key.0.copy_from_slice(&bytes[at..at + 8]);
        }
        let mut model = [0u8; 8];
        model.copy_from_slice(&bytes[off::MODEL_ID..off::MODEL_ID + 8]);
        if count == 0 || count > MAX_POLICY_KEYS {
            return Err(ReleaseError::PolicyBadKeyCount { count: count as u8 }.into());
        }
        let policy = Self::new(ModelId(model), bytes[off::THRESHOLD], &keys[..count])?;
        if keys[count..].iter().any(|k| k.0 != [0; 8]) {
            return Err(KeyringError::UpdateUnusedFieldNotZero {
                field: "policy key_ids past key_count",
            }
            .into());
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> KeyId {
        KeyId([n; 8])
    }

    #[test]
    fn encodes_through_the_table_offsets_and_back() {
        let model = ModelId::of("person-detect");
        let p = ReleasePolicy::new(model, 2, &[id(1), id(2), id(3)]).unwrap();
        let bytes = p.encode();
        assert_eq!(bytes[0], 2);
        assert_eq!(bytes[1], 3);
        assert_eq!(&bytes[4..12], &model.0);
        assert_eq!(&bytes[12..20], &[1; 8]);
        assert_eq!(&bytes[28..36], &[3; 8]);
        assert_eq!(&bytes[36..44], &[0; 8]);
        assert_eq!(ReleasePolicy::decode(&bytes), Ok(p));
        assert!(p.names(id(2)) && !p.names(id(4)));
    }

    #[test]
    fn rejects_no_key_too_many_keys_and_a_key_twice() {
        let m = ModelId::DEFAULT;
        assert_eq!(
            ReleasePolicy::new(m, 1, &[]),
            Err(Error::Release(ReleaseError::PolicyBadKeyCount { count: 0 }))
        );
        assert_eq!(
            ReleasePolicy::new(m, 1, &[id(1), id(2), id(3), id(4), id(5)]),
            Err(Error::Release(ReleaseError::PolicyBadKeyCount { count: 5 }))
        );
        assert_eq!(
            ReleasePolicy::new(m, 1, &[id(1), id(2), id(1)]),
            Err(Error::Release(ReleaseError::PolicyDuplicateKey {
                key_id: id(1)
            }))
        );
    }

    #[test]
    fn rejects_a_threshold_of_zero_or_above_the_keys() {
        let m = ModelId::DEFAULT;
        assert_eq!(
            ReleasePolicy::new(m, 0, &[id(1)]),
            Err(Error::Release(ReleaseError::PolicyBadThreshold {
                threshold: 0,
                keys: 1
            }))
        );
        assert_eq!(
            ReleasePolicy::new(m, 3, &[id(1), id(2)]),
            Err(Error::Release(ReleaseError::PolicyBadThreshold {
                threshold: 3,
                keys: 2
            }))
        );
    }

    #[test]
    fn rejects_encodings_with_stray_bytes_or_a_bad_count() {
        let p = ReleasePolicy::new(ModelId::DEFAULT, 1, &[id(1)]).unwrap();
        let mut bytes = p.encode();
        bytes[2] = 1;
        assert!(matches!(
            ReleasePolicy::decode(&bytes),
            Err(Error::Keyring(
                KeyringError::UpdateUnusedFieldNotZero { .. }
            ))
        ));
        let mut bytes = p.encode();
        bytes[20] = 1; // the second key slot, past key_count 1
        assert!(matches!(
            ReleasePolicy::decode(&bytes),
            Err(Error::Keyring(
                KeyringError::UpdateUnusedFieldNotZero { .. }
            ))
        ));
        let mut bytes = p.encode();
        bytes[1] = 9;
        assert_eq!(
            ReleasePolicy::decode(&bytes),
            Err(Error::Release(ReleaseError::PolicyBadKeyCount { count: 9 }))
        );
        bytes[1] = 0;
        assert_eq!(
            ReleasePolicy::decode(&bytes),
            Err(Error::Release(ReleaseError::PolicyBadKeyCount { count: 0 }))
        );
    }
}
