//! Errors of release signatures (`release/`): a signature's and a bundle's layout, the policy
//! check a device runs before it installs, and the release trust's root-signed records.
use core::fmt;

use crate::manifest::{KeyId, Sha256Prefix};
use crate::release::{
    BUNDLE_HEADER_BYTES, BUNDLE_MAGIC, BUNDLE_VERSION, MAX_BUNDLE_BYTES, MAX_BUNDLE_SIGNATURES,
    MAX_POLICY_KEYS, MAX_SELFTEST_INPUT_BYTES, RELEASE_BYTES, RELEASE_MAGIC, RELEASE_VERSION,
    SELFTEST_HEADER_BYTES,
};

/// Release signatures, their bundle, the release policy and the release trust (`release/`).
///
/// `index` is a signature's position in its bundle, from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseError {
    /// A bundle is shorter than its 16-byte header.
    BundleTooShort {
        /// Bytes given.
        len: u32,
    },
    /// A bundle is longer than [`MAX_BUNDLE_BYTES`].
    BundleTooLong {
        /// Bytes given.
        len: u64,
    },
    /// Bundle bytes 0..4 are not "NPRB".
    BundleBadMagic {
        /// The little-endian word found.
        found: u32,
    },
    /// Bundle `version` is not [`BUNDLE_VERSION`].
    BundleUnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// Bundle bytes 12..16 are not zero.
    BundleReservedNotZero,
    /// A bundle's `count` is 0: a bundle carries at least one signature.
    BundleEmpty,
    /// A bundle's `count` is above [`MAX_BUNDLE_SIGNATURES`].
    BundleTooManySignatures {
        /// The `count` field.
        count: u32,
    },
    /// A bundle is not exactly its header plus `count` signatures long.
    BundleWrongLength {
        /// Bytes given.
        len: u32,
        /// The `count` field.
        count: u32,
    },
    /// A signature's bytes 0..4 are not "NPR1".
    SignatureBadMagic {
        /// Its position in the bundle.
        index: u8,
        /// The little-endian word found.
        found: u32,
    },
    /// A signature's `version` is not [`RELEASE_VERSION`].
    SignatureUnsupportedVersion {
        /// Its position in the bundle.
        index: u8,
        /// The word found.
        found: u32,
    },
    /// A signature's `reserved` word is not zero.
    SignatureReservedNotZero {
        /// Its position in the bundle.
        index: u8,
    },
    /// Two signatures of one bundle name the same key: a key counts once towards a threshold.
    BundleDuplicateKey {
        /// The position of the second one.
        index: u8,
        /// The key.
        key_id: KeyId,
    },
    /// A signature of a bundle signs another release (pack, model, version, accelerator, IO or
    /// self-test digest) than the bundle's first: a bundle is the signatures of one release.
    BundleMixed {
        /// Its position in the bundle.
        index: u8,
    },
    /// A release names accelerator 0 (unspecified): a release is for one NPU configuration.
    AccelUnspecified,
    /// A text field (`model_name`, `model_version`) of a release is empty.
    TextEmpty {
        /// Which field.
        field: &'static str,
    },
    /// A text field does not fit its fixed width (signing side).
    TextTooLong {
        /// Which field.
        field: &'static str,
        /// Its UTF-8 length.
        len: u32,
        /// The field's width.
        max: u32,
    },
    /// A text field is not valid UTF-8.
    TextNotUtf8 {
        /// Which field.
        field: &'static str,
        /// Offset of the first bad byte within the field.
        offset: u32,
    },
    /// A text field holds a control character.
    TextControlChar {
        /// Which field.
        field: &'static str,
        /// Offset of the character within the field.
        offset: u32,
    },
    /// A text field has a non-zero byte after its zero padding began.
    TextBadPadding {
        /// Which field.
        field: &'static str,
        /// Offset of the non-zero byte within the field.
        offset: u32,
    },
    /// Release signatures are required and the deployment carries none.
    Missing {
        /// Valid signatures the model's policy needs.
        needed: u8,
    },
    /// Every signature checked out, but there are fewer than the policy's threshold.
    TooFewSignatures {
        /// Valid signatures the model's policy needs (its *k*).
        needed: u8,
        /// Valid signatures found.
        found: u8,
    },
    /// A signature is by a key the device's release trust does not hold.
    UnknownKey {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A signature is by a release key that was revoked.
    KeyRevoked {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A signature is by a trusted release key that the model's policy does not name.
    KeyNotInPolicy {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A signature's ed25519 signature does not verify under its key (forged, garbled, edited).
    BadSignature {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A genuine signature over another pack (its SHA-256 differs from the manifest's).
    OtherPack {
        /// Its position in the bundle.
        index: u8,
        /// First bytes of the SHA-256 it signs.
        signed: Sha256Prefix,
        /// First bytes of the manifest's `pack_sha256`.
        pack: Sha256Prefix,
    },
    /// A genuine signature for another model name than the manifest's.
    OtherModel {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A genuine signature for another version than the manifest's `model_version`.
    OtherVersion {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A genuine signature for another accelerator than the manifest's.
    OtherAccel {
        /// Its position in the bundle.
        index: u8,
        /// The accelerator word it signs.
        signed: u32,
        /// The manifest's.
        manifest: u32,
    },
    /// A genuine signature over other IO bindings than the manifest's `io_digest`.
    OtherIoDigest {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A genuine signature over another self-test digest than the one delivered with the pack.
    OtherSelfTest {
        /// Its position in the bundle.
        index: u8,
        /// The signature's `key_id`.
        key_id: KeyId,
    },
    /// A self-test record shorter than its 48-byte header.
    SelfTestTooShort {
        /// Bytes given.
        len: u32,
    },
    /// A self-test record whose magic is not "NPS1".
    SelfTestBadMagic {
        /// The word found.
        found: u32,
    },
    /// A self-test record of another version than 1.
    SelfTestUnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A self-test record whose reserved word is not 0.
    SelfTestReservedNotZero,
    /// A self-test record whose input is larger than `MAX_SELFTEST_INPUT_BYTES`.
    SelfTestInputTooLarge {
        /// The declared input bytes.
        bytes: u32,
    },
    /// A self-test record that is not exactly its header and its declared input.
    SelfTestLength {
        /// The declared input bytes.
        declared: u32,
        /// The record's length.
        len: u64,
    },
    /// A policy names no key, or more than [`MAX_POLICY_KEYS`].
    PolicyBadKeyCount {
        /// Keys named.
        count: u8,
    },
    /// A policy's threshold is 0 or above the number of keys it names.
    PolicyBadThreshold {
        /// The threshold (*k*).
        threshold: u8,
        /// Keys named (*n*).
        keys: u8,
    },
    /// A policy names a key twice.
    PolicyDuplicateKey {
        /// The key.
        key_id: KeyId,
    },
    /// The release trust has no room for another model's policy.
    PoliciesFull {
        /// Policies it holds.
        capacity: u32,
    },
    /// The release trust has no free key entry (revoked keys keep theirs).
    KeysFull {
        /// Keys it holds.
        capacity: u32,
    },
    /// The release trust already holds this key.
    KeyAlreadyTrusted {
        /// The key.
        key_id: KeyId,
    },
    /// The release trust holds no key with this id (restoring a revocation).
    NoSuchKey {
        /// The key.
        key_id: KeyId,
    },
    /// A release key was revoked, and revocation is permanent: it cannot be added again.
    KeyRevokedForGood {
        /// The key.
        key_id: KeyId,
    },
    /// A keyring update that changes release keys or policies is signed by a root this device
    /// accepts for signing keys only, not for releases.
    RootNotReleaseRoot {
        /// The record's `root_key_id`.
        key_id: KeyId,
    },
}

impl fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BundleTooShort { len } => write!(
                f,
                "release bundle: {len} bytes, shorter than its {BUNDLE_HEADER_BYTES}-byte header"
            ),
            Self::BundleTooLong { len } => write!(
                f,
                "release bundle: {len} bytes, above the limit of {MAX_BUNDLE_BYTES} \
                 ({MAX_BUNDLE_SIGNATURES} signatures)"
            ),
            Self::BundleBadMagic { found } => write!(
                f,
                "release bundle: magic is {found:#010x}, expected {BUNDLE_MAGIC:#010x} (\"NPRB\")"
            ),
            Self::BundleUnsupportedVersion { found } => write!(
                f,
                "release bundle: version is {found}, this verifier reads only version \
                 {BUNDLE_VERSION}"
            ),
            Self::BundleReservedNotZero => {
                f.write_str("release bundle: reserved bytes 12..16 must be zero")
            }
            Self::BundleEmpty => f.write_str("release bundle: count is 0, it carries no signature"),
            Self::BundleTooManySignatures { count } => write!(
                f,
                "release bundle: count is {count}, at most {MAX_BUNDLE_SIGNATURES} signatures fit"
            ),
            Self::BundleWrongLength { len, count } => write!(
                f,
                "release bundle: {len} bytes, but {count} signatures make exactly {} bytes",
                BUNDLE_HEADER_BYTES as u64 + u64::from(count) * RELEASE_BYTES as u64
            ),
            Self::SignatureBadMagic { index, found } => write!(
                f,
                "release signature {index}: magic is {found:#010x}, expected {RELEASE_MAGIC:#010x} \
                 (\"NPR1\")"
            ),
            Self::SignatureUnsupportedVersion { index, found } => write!(
                f,
                "release signature {index}: version is {found}, this verifier reads only version \
                 {RELEASE_VERSION}"
            ),
            Self::SignatureReservedNotZero { index } => {
                write!(
                    f,
                    "release signature {index}: reserved bytes 148..152 must be zero"
                )
            }
            Self::BundleDuplicateKey { index, key_id } => write!(
                f,
                "release signature {index}: key {key_id} already signed this bundle (a key counts \
                 once)"
            ),
            Self::BundleMixed { index } => write!(
                f,
                "release signature {index}: signs another release than signature 0 (a bundle holds \
                 the signatures of one pack, model, version and accelerator)"
            ),
            Self::AccelUnspecified => f.write_str(
                "release: accel is 0 (unspecified); a release names the NPU configuration its \
                 command stream was compiled for",
            ),
            Self::TextEmpty { field } => write!(f, "release: {field} is empty"),
            Self::TextTooLong { field, len, max } => write!(
                f,
                "release: {field} is {len} bytes of UTF-8, more than the field's {max}"
            ),
            Self::TextNotUtf8 { field, offset } => write!(
                f,
                "release: {field} is not valid UTF-8 (bad byte at offset {offset} of the field)"
            ),
            Self::TextControlChar { field, offset } => write!(
                f,
                "release: {field} holds a control character at offset {offset} of the field"
            ),
            Self::TextBadPadding { field, offset } => write!(
                f,
                "release: {field} has a non-zero byte at offset {offset}, after its zero padding \
                 began"
            ),
            Self::Missing { needed } => write!(
                f,
                "release: this model needs {needed} release signature(s) and the deployment \
                 carries none"
            ),
            Self::TooFewSignatures { needed, found } => write!(
                f,
                "release: too few valid release signatures: the model's policy needs {needed}, \
                 found {found}"
            ),
            Self::UnknownKey { index, key_id } => write!(
                f,
                "release signature {index}: key {key_id} is not one of the trusted release keys"
            ),
            Self::KeyRevoked { index, key_id } => write!(
                f,
                "release signature {index}: release key {key_id} was revoked"
            ),
            Self::KeyNotInPolicy { index, key_id } => write!(
                f,
                "release signature {index}: release key {key_id} is not one the model's policy \
                 names"
            ),
            Self::BadSignature { index, key_id } => write!(
                f,
                "release signature {index}: the ed25519 signature does not verify under release \
                 key {key_id}"
            ),
            Self::OtherPack {
                index,
                signed,
                pack,
            } => write!(
                f,
                "release signature {index}: signed over pack sha256 {signed}…, the manifest's \
                 pack is {pack}…"
            ),
            Self::OtherModel { index, key_id } => write!(
                f,
                "release signature {index} (key {key_id}): released another model than the \
                 manifest names"
            ),
            Self::OtherVersion { index, key_id } => write!(
                f,
                "release signature {index} (key {key_id}): released another version than the \
                 manifest's model_version"
            ),
            Self::OtherAccel {
                index,
                signed,
                manifest,
            } => write!(
                f,
                "release signature {index}: released for accel {signed}, the manifest says \
                 {manifest}"
            ),
            Self::OtherIoDigest { index, key_id } => write!(
                f,
                "release signature {index} (key {key_id}): released other IO bindings than the \
                 manifest's io_digest"
            ),
            Self::OtherSelfTest { index, key_id } => write!(
                f,
                "release signature {index} (key {key_id}): released another self-test digest than \
                 the one delivered with the pack"
            ),
            Self::SelfTestTooShort { len } => write!(
                f,
                "self-test record: {len} bytes, shorter than its {}-byte header",
                SELFTEST_HEADER_BYTES
            ),
            Self::SelfTestBadMagic { found } => {
                write!(f, "self-test record: magic is {found:#010x}, not \"NPS1\"")
            }
            Self::SelfTestUnsupportedVersion { found } => {
                write!(
                    f,
                    "self-test record: version {found} is not supported (only 1)"
                )
            }
            Self::SelfTestReservedNotZero => {
                f.write_str("self-test record: the reserved word (bytes 44..48) is not 0")
            }
            Self::SelfTestInputTooLarge { bytes } => write!(
                f,
                "self-test record: a {bytes}-byte input is larger than the {} bytes allowed",
                MAX_SELFTEST_INPUT_BYTES
            ),
            Self::SelfTestLength { declared, len } => write!(
                f,
                "self-test record: {len} bytes, but its header and its declared {declared}-byte \
                 input make {}",
                SELFTEST_HEADER_BYTES as u64 + u64::from(declared)
            ),
            Self::PolicyBadKeyCount { count } => write!(
                f,
                "release policy: names {count} keys, expected 1 to {MAX_POLICY_KEYS}"
            ),
            Self::PolicyBadThreshold { threshold, keys } => write!(
                f,
                "release policy: threshold {threshold} of {keys} keys (expected 1 to {keys})"
            ),
            Self::PolicyDuplicateKey { key_id } => {
                write!(f, "release policy: names key {key_id} twice")
            }
            Self::PoliciesFull { capacity } => {
                write!(f, "release trust: all {capacity} policy entries are in use")
            }
            Self::KeysFull { capacity } => write!(
                f,
                "release trust: all {capacity} release-key entries are in use (revoked keys keep \
                 theirs)"
            ),
            Self::KeyAlreadyTrusted { key_id } => {
                write!(f, "release trust: release key {key_id} is already present")
            }
            Self::NoSuchKey { key_id } => {
                write!(f, "release trust: no release key {key_id} to revoke")
            }
            Self::KeyRevokedForGood { key_id } => write!(
                f,
                "release trust: release key {key_id} was revoked, and revocation is permanent"
            ),
            Self::RootNotReleaseRoot { key_id } => write!(
                f,
                "keyring update: root key {key_id} may change signing keys but not release keys \
                 or policies (it is not one of this device's release roots)"
            ),
        }
    }
}

impl core::error::Error for ReleaseError {}
