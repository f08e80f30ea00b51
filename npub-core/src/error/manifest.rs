//! Errors of the signed manifest (`manifest/`): its layout and text, the signature, the device policy, and the pack it names.
use core::fmt;

use crate::manifest::{KeyId, Sha256Prefix};

/// The signed manifest and the pack it names (`manifest/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestError {
    /// A manifest is neither [`crate::manifest::MANIFEST_BYTES`] (version 1) nor
    /// [`crate::manifest::MANIFEST_V2_BYTES`] (version 2) long (truncated, or with trailing data
    /// a signature would not cover).
    WrongLength {
        /// Bytes given.
        len: u64,
    },
    /// Manifest bytes 0..4 are not "NPM1".
    BadMagic {
        /// The little-endian word found.
        found: u32,
    },
    /// Manifest `version` is neither [`crate::manifest::MANIFEST_VERSION`] (1) nor
    /// [`crate::manifest::MANIFEST_VERSION_2`].
    UnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// The manifest's length is one version's and its `version` word the other's (a version-1
    /// manifest with 32 bytes appended, or a version-2 one cut short): never read by either
    /// layout.
    VersionLength {
        /// The `version` word.
        version: u32,
        /// Bytes given.
        len: u64,
        /// Bytes that version has.
        expected: u64,
    },
    /// A version-2 manifest whose `selftest_digest` is all zeros: version 2 exists to carry a
    /// self-test, and a manifest without one is a version-1 manifest.
    SelfTestDigestZero,
    /// The manifest's `key_id` names no key in the device's keyring (arbitrary installation).
    UnknownKey {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// The manifest is signed by a key the keyring has revoked (key compromise).
    KeyRevoked {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// The ed25519 signature does not verify under the named key (forged, garbled or unsigned).
    BadSignature {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// A text field (`model_name`, `model_version`) is empty.
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
    /// A text field holds a control character (it would be printed in logs and terminals).
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
    /// `sequence` is 0; deployments count from 1, so that a fresh device (last accepted 0) takes
    /// the first one.
    SequenceZero,
    /// `hw_class` is 0, which is reserved and never names hardware (there is no "any").
    HardwareClassZero,
    /// `accel` is 0 (unspecified): a manifest must say which configuration the stream needs.
    AccelUnspecified,
    /// `pack_len` is shorter than an NPU1 header.
    PackTooShort {
        /// The `pack_len` field.
        len: u32,
    },
    /// `expires_at` is set but not after `issued_at`.
    BadExpiry {
        /// The `issued_at` field.
        issued_at: u64,
        /// The `expires_at` field.
        expires_at: u64,
    },
    /// `sequence` is not strictly above the last one the device accepted (rollback or replay).
    Replayed {
        /// The manifest's `sequence`.
        sequence: u64,
        /// The last sequence the device accepted.
        last: u64,
    },
    /// The manifest is for another hardware class.
    WrongHardware {
        /// The manifest's `hw_class`.
        manifest: u32,
        /// The device's hardware class.
        device: u32,
    },
    /// The manifest is for another accelerator configuration.
    WrongAccel {
        /// The manifest's `accel` word.
        manifest: u32,
        /// The device's accelerator word.
        device: u32,
    },
    /// The pack the manifest describes does not fit the device's slot.
    PackTooLarge {
        /// The `pack_len` field.
        len: u32,
        /// The slot's size in bytes.
        slot: u32,
    },
    /// The manifest has expired (freeze attack: an old manifest served past its lifetime).
    Expired {
        /// The `expires_at` field (unix seconds).
        expires_at: u64,
        /// The device's time (unix seconds).
        now: u64,
    },
    /// More pack bytes arrived than the manifest states (endless data); nothing past the stated
    /// length is hashed or kept.
    PackLongerThanManifest {
        /// The manifest's `pack_len`.
        expected: u32,
        /// Bytes received, counting the chunk that overran.
        received: u64,
    },
    /// The pack's own NPU1 header says it is `pack_total_bytes` long, but the manifest describes a
    /// pack of `manifest_pack_len` bytes: the manifest is for another pack (mix and match).
    PackLengthDiffersFromManifest {
        /// Word 2 (`total_bytes`) of the pack's header.
        pack_total_bytes: u32,
        /// The manifest's `pack_len`.
        manifest_pack_len: u32,
    },
    /// The pack ended before the manifest's length.
    PackShorterThanManifest {
        /// The manifest's `pack_len`.
        expected: u32,
        /// Bytes received.
        received: u64,
    },
    /// The pack's SHA-256 differs from the manifest's (wrong software, mix-and-match).
    PackHashMismatch {
        /// First bytes of the manifest's `pack_sha256`.
        manifest: Sha256Prefix,
        /// First bytes of the SHA-256 of the bytes received.
        computed: Sha256Prefix,
    },
    /// The pack's NPU1 header checksum (word 7) differs from the manifest's `pack_checksum`.
    PackChecksumMismatch {
        /// The manifest's `pack_checksum`.
        manifest: u32,
        /// Word 7 of the pack's header.
        pack: u32,
    },
    /// The IO bindings delivered with a pack are not the ones its manifest's `io_digest` names
    /// (all zeros on either side: no bindings).
    IoDigestMismatch {
        /// First bytes of the manifest's `io_digest`.
        manifest: Sha256Prefix,
        /// First bytes of the digest of the bindings given (zeros: none given).
        computed: Sha256Prefix,
    },
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::WrongLength { len } => write!(
                f,
                "manifest: {len} bytes, but a version-1 manifest is exactly {} bytes and a \
                 version-2 one {}",
                crate::manifest::MANIFEST_BYTES,
                crate::manifest::MANIFEST_V2_BYTES
            ),
            Self::BadMagic { found } => write!(
                f,
                "manifest: magic is {found:#010x}, expected {:#010x} (\"NPM1\"): not an npub manifest",
                crate::manifest::MANIFEST_MAGIC
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "manifest: version is {found}, this verifier reads only versions {} and {}",
                crate::manifest::MANIFEST_VERSION,
                crate::manifest::MANIFEST_VERSION_2
            ),
            Self::VersionLength {
                version,
                len,
                expected,
            } => write!(
                f,
                "manifest: version {version} is {expected} bytes long, but {len} were given"
            ),
            Self::SelfTestDigestZero => write!(
                f,
                "manifest: version 2 with an all-zero selftest_digest; a manifest without a \
                 self-test is version 1"
            ),
            Self::UnknownKey { key_id } => write!(
                f,
                "manifest: key_id {key_id} is not in the keyring; refusing a manifest from an \
                 unknown signer"
            ),
            Self::KeyRevoked { key_id } => write!(
                f,
                "manifest: key_id {key_id} has been revoked; refusing its signature"
            ),
            Self::BadSignature { key_id } => write!(
                f,
                "manifest: the ed25519 signature does not verify under key {key_id} \
                 (forged, garbled or unsigned)"
            ),
            Self::TextEmpty { field } => write!(f, "manifest: {field} is empty"),
            Self::TextTooLong { field, len, max } => write!(
                f,
                "manifest: {field} is {len} bytes of UTF-8, more than the field's {max}"
            ),
            Self::TextNotUtf8 { field, offset } => write!(
                f,
                "manifest: {field} is not valid UTF-8 (bad byte at offset {offset} of the field)"
            ),
            Self::TextControlChar { field, offset } => write!(
                f,
                "manifest: {field} holds a control character at offset {offset} of the field"
            ),
            Self::TextBadPadding { field, offset } => write!(
                f,
                "manifest: {field} has a non-zero byte at offset {offset}, after its zero \
                 padding began"
            ),
            Self::SequenceZero => {
                f.write_str("manifest: sequence is 0; deployment sequences start at 1")
            }
            Self::HardwareClassZero => {
                f.write_str("manifest: hw_class is 0, which is reserved and names no hardware")
            }
            Self::AccelUnspecified => f.write_str(
                "manifest: accel is 0 (unspecified); a manifest must name the accelerator \
                 configuration its command stream was compiled for",
            ),
            Self::PackTooShort { len } => write!(
                f,
                "manifest: pack_len {len} is shorter than the 32-byte NPU1 header"
            ),
            Self::BadExpiry {
                issued_at,
                expires_at,
            } => write!(
                f,
                "manifest: expires_at {expires_at} is not after issued_at {issued_at}"
            ),
            Self::Replayed { sequence, last } => write!(
                f,
                "manifest: sequence {sequence} is not above the last accepted sequence {last} \
                 (replayed or rolled-back manifest)"
            ),
            Self::WrongHardware { manifest, device } => write!(
                f,
                "manifest: hw_class is {manifest} but this device's hardware class is {device}"
            ),
            Self::WrongAccel { manifest, device } => write!(
                f,
                "manifest: accel is {} (word {manifest}) but this device's NPU is {} (word {device})",
                crate::Accel::from_word(manifest),
                crate::Accel::from_word(device)
            ),
            Self::PackTooLarge { len, slot } => write!(
                f,
                "manifest: pack_len {len} is larger than the device's {slot}-byte slot"
            ),
            Self::Expired { expires_at, now } => write!(
                f,
                "manifest: expired at {expires_at} (unix seconds); the device's time is {now}"
            ),
            Self::PackLongerThanManifest { expected, received } => write!(
                f,
                "pack: {received} bytes arrived but the manifest's pack_len is {expected}; \
                 download aborted"
            ),
            Self::PackLengthDiffersFromManifest {
                pack_total_bytes,
                manifest_pack_len,
            } => write!(
                f,
                "pack: the pack is {pack_total_bytes} bytes (its NPU1 total_bytes), but the \
                 manifest describes a pack of {manifest_pack_len} bytes: this manifest is for \
                 another pack"
            ),
            Self::PackShorterThanManifest { expected, received } => write!(
                f,
                "pack: the stream ended after {received} bytes, but the manifest's pack_len is \
                 {expected}"
            ),
            Self::PackHashMismatch { manifest, computed } => write!(
                f,
                "pack: SHA-256 is {computed}… but the manifest's pack_sha256 is {manifest}… \
                 (not the pack this manifest was signed for)"
            ),
            Self::PackChecksumMismatch { manifest, pack } => write!(
                f,
                "pack: NPU1 header checksum (word 7) is {pack:#010x} but the manifest's \
                 pack_checksum is {manifest:#010x}"
            ),
            Self::IoDigestMismatch { manifest, computed } => write!(
                f,
                "IO bindings: the manifest names bindings whose SHA-256 is {manifest}…, but the \
                 bindings beside the pack hash to {computed}… (all zeros: none on that side): \
                 not the bindings this manifest was signed with"
            ),
        }
    }
}

impl core::error::Error for ManifestError {}
