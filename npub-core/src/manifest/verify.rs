//! Device-side verification: bytes in, a [`VerifiedManifest`] out only when every check passes.
use super::constants::{MANIFEST_MAX_BYTES, MANIFEST_VERSION_2};
use super::layout::ManifestView;
use super::{KeyId, Keyring, signature, text};
use crate::{Accel, Error, ManifestError};

/// What the device knows about itself and its history: the inputs of [`verify`] other than the
/// manifest and the keyring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The device's hardware class (never 0).
    pub hw_class: u32,
    /// The device's NPU configuration.
    pub accel: Accel,
    /// Bytes available in the slot a pack is written to.
    pub slot_bytes: u32,
    /// The sequence of the last manifest the device accepted (0 on a fresh device).
    pub last_sequence: u64,
    /// Unix seconds, when the device knows the time; `None` skips the expiry check.
    pub now: Option<u64>,
}

/// A manifest that passed every check of [`verify`] for one device. Its fields are private and
/// [`verify`] is the only constructor, so holding one proves the checks ran: an install takes a
/// `VerifiedManifest` ([`super::PackCheck::new`]), never bytes.
///
/// It holds either version: a version-1 manifest's 280 bytes are followed by zeros, and the
/// `version` word says how many of the bytes are the manifest's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedManifest {
    bytes: [u8; MANIFEST_MAX_BYTES],
}

/// Verifies `bytes` as a manifest for the device described by `keyring` and `policy`.
///
/// The checks, in order; the first failure is returned:
///
/// | # | check                                                   | stops                        | `Error` |
/// |---|---------------------------------------------------------|------------------------------|---------|
/// | 1 | exactly 280 (version 1) or 312 (version 2) bytes        | truncation, smuggled trailer | `ManifestError::WrongLength` |
/// | 2 | magic "NPM1"                                            | a foreign file               | `ManifestError::BadMagic` |
/// | 3 | version 1 or 2                                          | misread layout               | `ManifestError::UnsupportedVersion` |
/// | 3½ | the length is that version's                           | a layout read as the other   | `ManifestError::VersionLength` |
/// | 4 | `key_id` in the keyring                                 | arbitrary installation       | `ManifestError::UnknownKey` |
/// | 5 | that key not revoked                                    | key compromise               | `ManifestError::KeyRevoked` |
/// | 6 | ed25519 (strict) over the version's domain ‖ bytes 0..216 (v1) or 0..248 (v2) | forgery, tampering, unsigned, a self-test swapped | `ManifestError::BadSignature` |
/// | 7 | every field valid on its own ([`super::ManifestFields::check`], text fields; v2: `selftest_digest` not all zeros) | signer mistakes | `ManifestText*`, `ManifestError::SequenceZero`, `ManifestError::SelfTestDigestZero`, … |
/// | 8 | `sequence` > `policy.last_sequence`                     | rollback, replay             | `ManifestError::Replayed` |
/// | 9 | `hw_class` = the device's                               | wrong hardware               | `ManifestError::WrongHardware` |
/// | 10 | `accel` = the device's                                 | a stream for another NPU     | `ManifestError::WrongAccel` |
/// | 11 | `pack_len` ≤ the slot                                  | slot overflow                | `ManifestError::PackTooLarge` |
/// | 12 | not expired, when `policy.now` is known                | freeze                       | `ManifestError::Expired` |
///
/// Nothing but the magic, the version and the key id is interpreted before the signature has
/// verified: every later decision is made on bytes the key holder wrote.
pub fn verify<const N: usize>(
    bytes: &[u8],
    keyring: &Keyring<N>,
    policy: &Policy,
) -> Result<VerifiedManifest, Error> {
    let view = ManifestView::new(bytes)?;
    let key_id = view.key_id();
    let entry = keyring
        .get(key_id)
        .ok_or(Error::Manifest(ManifestError::UnknownKey { key_id }))?;
    if entry.is_revoked() {
        return Err(Error::Manifest(ManifestError::KeyRevoked { key_id }));
    }
    signature::check(
        entry.public_key(),
        view.domain(),
        view.signed_bytes(),
        view.signature(),
        Error::Manifest(ManifestError::BadSignature { key_id }),
    )?;
    accept(view, policy)
}

/// Checks 7–12, on bytes whose signature has verified. Out of line so that its locals (the
/// decoded fields, the copy it returns) are not on the stack while the signature is checked.
#[inline(never)]
fn accept(view: ManifestView<'_>, policy: &Policy) -> Result<VerifiedManifest, Error> {
    let fields = view.fields()?;
    if fields.sequence <= policy.last_sequence {
        return Err(Error::Manifest(ManifestError::Replayed {
            sequence: fields.sequence,
            last: policy.last_sequence,
        }));
    }
    if fields.hw_class != policy.hw_class {
        return Err(Error::Manifest(ManifestError::WrongHardware {
            manifest: fields.hw_class,
            device: policy.hw_class,
        }));
    }
    if fields.accel != policy.accel {
        return Err(Error::Manifest(ManifestError::WrongAccel {
            manifest: fields.accel.word(),
            device: policy.accel.word(),
        }));
    }
    if fields.pack_len > policy.slot_bytes {
        return Err(Error::Manifest(ManifestError::PackTooLarge {
            len: fields.pack_len,
            slot: policy.slot_bytes,
        }));
    }
    if let Some(now) = policy.now {
        if fields.expires_at != 0 && now >= fields.expires_at {
            return Err(Error::Manifest(ManifestError::Expired {
                expires_at: fields.expires_at,
                now,
            }));
        }
    }
    let mut bytes = [0u8; MANIFEST_MAX_BYTES];
    let given = view.as_bytes();
    bytes[..given.len()].copy_from_slice(given);
    Ok(VerifiedManifest { bytes })
}

impl VerifiedManifest {
    fn view(&self) -> ManifestView<'_> {
        ManifestView::of_checked(self.as_bytes())
    }

    /// The bytes as received (280 of version 1, 312 of version 2), to store beside the
    /// installed pack.
    pub fn as_bytes(&self) -> &[u8] {
        let len = if self.bytes[super::layout::off::VERSION] == MANIFEST_VERSION_2 as u8 {
            super::MANIFEST_V2_BYTES
        } else {
            super::MANIFEST_BYTES
        };
        &self.bytes[..len]
    }

    /// The layout version (1 or 2).
    pub fn version(&self) -> u32 {
        self.view().version()
    }

    /// The SHA-256 of the pack's self-test record ("NPS1") that the signature covers: `Some` for
    /// a version-2 manifest (never all zeros), `None` for a version-1 one, whose pack has no
    /// self-test to run.
    pub fn selftest_digest(&self) -> Option<[u8; 32]> {
        self.view().selftest_digest()
    }

    /// `selftest_digest` in place; all zeros for a version-1 manifest (what a release signature
    /// names for a pack without a self-test).
    pub fn selftest_digest_or_zeros(&self) -> &[u8; 32] {
        if self.version() == MANIFEST_VERSION_2 {
            digest_at(&self.bytes, super::layout::off::SELFTEST_DIGEST)
        } else {
            &[0; 32]
        }
    }

    /// The key that signed it.
    pub fn key_id(&self) -> KeyId {
        self.view().key_id()
    }

    /// The deployment sequence: what the device records as its last accepted one once the
    /// install completes.
    pub fn sequence(&self) -> u64 {
        self.view().sequence()
    }

    /// The model name.
    pub fn model_name(&self) -> &str {
        text_field(&self.bytes[super::layout::off::MODEL_NAME..][..super::MODEL_NAME_BYTES])
    }

    /// The model version.
    pub fn model_version(&self) -> &str {
        text_field(&self.bytes[super::layout::off::MODEL_VERSION..][..super::MODEL_VERSION_BYTES])
    }

    /// The accelerator configuration (the device's own).
    pub fn accel(&self) -> Accel {
        Accel::from_word(self.view().accel_word())
    }

    /// The hardware class (the device's own).
    pub fn hw_class(&self) -> u32 {
        self.view().hw_class()
    }

    /// The pack's length.
    pub fn pack_len(&self) -> u32 {
        self.view().pack_len()
    }

    /// The pack's NPU1 header checksum.
    pub fn pack_checksum(&self) -> u32 {
        self.view().pack_checksum()
    }

    /// The pack's SHA-256.
    pub fn pack_sha256(&self) -> [u8; 32] {
        self.view().pack_sha256()
    }

    /// The digest of the pack's IO bindings (all zeros: none declared).
    pub fn io_digest(&self) -> [u8; 32] {
        self.view().io_digest()
    }

    /// `pack_sha256` in place (the release check borrows it rather than copy it to its stack).
    pub(crate) fn pack_sha256_ref(&self) -> &[u8; 32] {
        digest_at(&self.bytes, super::layout::off::PACK_SHA256)
    }

    /// `io_digest` in place.
    pub(crate) fn io_digest_ref(&self) -> &[u8; 32] {
        digest_at(&self.bytes, super::layout::off::IO_DIGEST)
    }

    /// Checks the IO bindings delivered with the pack (their canonical encoding; `None` when the
    /// pack came without any) against `io_digest`: all zeros means "none", anything else must be
    /// the SHA-256 of exactly these bytes ([`crate::io_bindings::digest`]).
    pub fn check_io_bindings(&self, canonical: Option<&[u8]>) -> Result<(), Error> {
        let stated = self.io_digest();
        let computed = canonical.map_or([0; 32], super::sha256);
        if computed != stated {
            return Err(Error::Manifest(ManifestError::IoDigestMismatch {
                manifest: super::Sha256Prefix::of(&stated),
                computed: super::Sha256Prefix::of(&computed),
            }));
        }
        Ok(())
    }

    /// Unix seconds when signed.
    pub fn issued_at(&self) -> u64 {
        self.view().issued_at()
    }

    /// Unix seconds of expiry; 0 = never.
    pub fn expires_at(&self) -> u64 {
        self.view().expires_at()
    }
}

/// The 32 bytes at `at` (a digest field of the table).
fn digest_at(bytes: &[u8; MANIFEST_MAX_BYTES], at: usize) -> &[u8; 32] {
    let (_, rest) = bytes.split_at(at);
    rest.first_chunk().unwrap_or(&[0; 32])
}

/// A text field already validated by `verify`; empty (never reached) if it somehow were not.
fn text_field(raw: &[u8]) -> &str {
    text::decode("", raw).unwrap_or("")
}
