//! The manifest: version 1 (280 bytes) and version 2 (312 bytes, with a self-test digest), fixed
//! width, little-endian, no variable-length parsing.
//!
//! The tables are on [`ManifestView`], the zero-copy view every read goes through.
//!
//! Every multi-byte integer is little-endian; the 8-byte fields sit at 8-byte offsets. The
//! signature covers every byte before it, so nothing in a manifest is unsigned, and a manifest is
//! exactly its version's length ([`MANIFEST_BYTES`], [`MANIFEST_V2_BYTES`]): trailing bytes are
//! refused rather than ignored.
use super::KeyId;
use super::constants::{
    MANIFEST_BYTES, MANIFEST_MAGIC, MANIFEST_V2_BYTES, MANIFEST_VERSION, MANIFEST_VERSION_2,
    SELFTEST_DIGEST_BYTES, SIGNATURE_BYTES, SIGNED_BYTES, SIGNED_BYTES_V2,
};
use super::text;
use crate::{Accel, Error, ManifestError};

/// Width of `model_name`: room for a descriptive name, small enough for the device to keep.
pub const MODEL_NAME_BYTES: usize = 64;
/// Width of `model_version`: a semver with pre-release and build metadata fits.
pub const MODEL_VERSION_BYTES: usize = 32;
/// Prepended to the signed bytes before signing, so that a manifest signature can never be passed
/// off as the signature of anything else a key signs (a keyring update, another protocol).
pub const MANIFEST_DOMAIN: &[u8] = b"npub/manifest/v1\0";
/// The version-2 domain: a version-2 signature is never valid over a version-1 manifest's bytes
/// (or the other way round), whatever the bytes.
pub const MANIFEST_DOMAIN_V2: &[u8] = b"npub/manifest/v2\0";

/// Field offsets, in the order of the table on [`ManifestView`].
pub(crate) mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const KEY_ID: usize = 8;
    pub const SEQUENCE: usize = 16;
    pub const MODEL_NAME: usize = 24;
    pub const MODEL_VERSION: usize = 88;
    pub const ACCEL: usize = 120;
    pub const HW_CLASS: usize = 124;
    pub const PACK_LEN: usize = 128;
    pub const PACK_CHECKSUM: usize = 132;
    pub const PACK_SHA256: usize = 136;
    pub const IO_DIGEST: usize = 168;
    pub const ISSUED_AT: usize = 200;
    pub const EXPIRES_AT: usize = 208;
    /// Version 1's signature; version 2's `selftest_digest`.
    pub const SIGNATURE: usize = 216;
    pub const SELFTEST_DIGEST: usize = 216;
    pub const SIGNATURE_V2: usize = 248;
}

// The table is the layout: if a width changes, the offsets after it must move too.
const _: () = {
    assert!(off::MODEL_VERSION == off::MODEL_NAME + MODEL_NAME_BYTES);
    assert!(off::ACCEL == off::MODEL_VERSION + MODEL_VERSION_BYTES);
    assert!(off::IO_DIGEST == off::PACK_SHA256 + 32);
    assert!(off::ISSUED_AT == off::IO_DIGEST + 32);
    assert!(off::SIGNATURE == off::EXPIRES_AT + 8);
    assert!(off::SIGNATURE == SIGNED_BYTES);
    assert!(off::SIGNATURE_V2 == off::SELFTEST_DIGEST + SELFTEST_DIGEST_BYTES);
    assert!(off::SIGNATURE_V2 == SIGNED_BYTES_V2);
    assert!(MANIFEST_V2_BYTES == off::SIGNATURE_V2 + SIGNATURE_BYTES);
};

/// Field names as the errors report them.
pub(crate) const MODEL_NAME_FIELD: &str = "model_name";
pub(crate) const MODEL_VERSION_FIELD: &str = "model_version";

/// A zero-copy view of a manifest whose length, magic and version have been checked — and nothing
/// else: its signature has **not** been verified, so nothing read through it is to be trusted.
/// Only [`super::verify`] turns one into a [`super::VerifiedManifest`].
///
/// Version 1, [`MANIFEST_BYTES`] = 280 bytes:
///
/// | Offset | Size | Field           | Meaning and valid range                                                  |
/// |-------:|-----:|-----------------|--------------------------------------------------------------------------|
/// |      0 |    4 | `magic`         | bytes `4e 50 4d 31` ("NPM1"), word [`MANIFEST_MAGIC`]                     |
/// |      4 |    4 | `version`       | [`MANIFEST_VERSION`] = 1; anything else is refused, never best-effort read |
/// |      8 |    8 | `key_id`        | [`KeyId`] of the signing key (see [`KeyId::of`])                          |
/// |     16 |    8 | `sequence`      | deployment sequence, u64, ≥ 1, strictly above the last one accepted      |
/// |     24 |   64 | `model_name`    | UTF-8, 1..=64 bytes, zero-padded, no control characters                  |
/// |     88 |   32 | `model_version` | UTF-8, 1..=32 bytes, zero-padded, no control characters                  |
/// |    120 |    4 | `accel`         | NPU1 `accel` word ([`Accel`]) the stream needs; 0 (unspecified) refused   |
/// |    124 |    4 | `hw_class`      | hardware class id (see `docs/manifest.md`); 0 is reserved, never matches |
/// |    128 |    4 | `pack_len`      | the pack's length in bytes (NPU1 `total_bytes`), ≥ 32, ≤ the device slot |
/// |    132 |    4 | `pack_checksum` | the pack's NPU1 header word 7 (FNV-1a of its payload), cross-checked     |
/// |    136 |   32 | `pack_sha256`   | SHA-256 of the whole pack, all `pack_len` bytes                          |
/// |    168 |   32 | `io_digest`     | digest of the pack's IO bindings; all zeros = none declared              |
/// |    200 |    8 | `issued_at`     | unix seconds when signed (informational)                                 |
/// |    208 |    8 | `expires_at`    | unix seconds from which the manifest is refused; 0 = never; else > `issued_at` |
/// |    216 |   64 | `signature`     | ed25519 over [`MANIFEST_DOMAIN`] ‖ bytes `0..216`                        |
///
/// Version 2, [`MANIFEST_V2_BYTES`] = 312 bytes: bytes `0..216` as in version 1 (with `version`
/// = [`MANIFEST_VERSION_2`]), then
///
/// | Offset | Size | Field             | Meaning and valid range                                                |
/// |-------:|-----:|-------------------|------------------------------------------------------------------------|
/// |    216 |   32 | `selftest_digest` | SHA-256 of the pack's whole self-test record ("NPS1", `release::SelfTest`); never all zeros |
/// |    248 |   64 | `signature`       | ed25519 over [`MANIFEST_DOMAIN_V2`] ‖ bytes `0..248`                   |
///
/// The digest is the one a release signature's `selftest_digest` names, so the record a device
/// fetches beside the pack is as signed as the pack.
#[derive(Debug, Clone, Copy)]
pub struct ManifestView<'a> {
    /// [`MANIFEST_BYTES`] or [`MANIFEST_V2_BYTES`] long, as the `version` word says.
    bytes: &'a [u8],
}

impl<'a> ManifestView<'a> {
    /// Checks the length (one version's: [`MANIFEST_BYTES`] or [`MANIFEST_V2_BYTES`]), the
    /// magic, the version, and that the length is that version's, in that order.
    pub fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let len = bytes.len();
        if len != MANIFEST_BYTES && len != MANIFEST_V2_BYTES {
            return Err(Error::Manifest(ManifestError::WrongLength {
                len: len as u64,
            }));
        }
        let view = Self { bytes };
        let magic = view.u32_at(off::MAGIC);
        if magic != MANIFEST_MAGIC {
            return Err(Error::Manifest(ManifestError::BadMagic { found: magic }));
        }
        let version = view.u32_at(off::VERSION);
        let expected = match version {
            MANIFEST_VERSION => MANIFEST_BYTES,
            MANIFEST_VERSION_2 => MANIFEST_V2_BYTES,
            found => return Err(Error::Manifest(ManifestError::UnsupportedVersion { found })),
        };
        if len != expected {
            return Err(Error::Manifest(ManifestError::VersionLength {
                version,
                len: len as u64,
                expected: expected as u64,
            }));
        }
        Ok(view)
    }

    /// A view of bytes that already passed [`ManifestView::new`] (a verified manifest's copy).
    pub(crate) fn of_checked(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// All the bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The layout version: [`MANIFEST_VERSION`] or [`MANIFEST_VERSION_2`].
    pub fn version(&self) -> u32 {
        self.u32_at(off::VERSION)
    }

    /// Where the signature starts: bytes before it are the ones it covers.
    fn signature_at(&self) -> usize {
        if self.version() == MANIFEST_VERSION_2 {
            off::SIGNATURE_V2
        } else {
            off::SIGNATURE
        }
    }

    /// The domain the signature is made over: one per version.
    pub fn domain(&self) -> &'static [u8] {
        if self.version() == MANIFEST_VERSION_2 {
            MANIFEST_DOMAIN_V2
        } else {
            MANIFEST_DOMAIN
        }
    }

    /// The bytes the signature covers: `0..216` (version 1) or `0..248` (version 2).
    pub fn signed_bytes(&self) -> &'a [u8] {
        let bytes: &'a [u8] = self.bytes;
        &bytes[..self.signature_at()]
    }

    /// The 64-byte signature.
    pub fn signature(&self) -> &'a [u8; SIGNATURE_BYTES] {
        let bytes: &'a [u8] = self.bytes;
        let (_, signature) = bytes.split_at(self.signature_at());
        // The split leaves exactly SIGNATURE_BYTES (`new` checked the version's length).
        signature.try_into().unwrap_or(&[0; SIGNATURE_BYTES])
    }

    /// The self-test record's SHA-256 (version 2); `None` for a version-1 manifest.
    pub fn selftest_digest(&self) -> Option<[u8; 32]> {
        (self.version() == MANIFEST_VERSION_2).then(|| self.array(off::SELFTEST_DIGEST))
    }

    /// The signing key's id.
    pub fn key_id(&self) -> KeyId {
        KeyId(self.array(off::KEY_ID))
    }

    /// The deployment sequence.
    pub fn sequence(&self) -> u64 {
        self.u64_at(off::SEQUENCE)
    }

    /// The raw accelerator word.
    pub fn accel_word(&self) -> u32 {
        self.u32_at(off::ACCEL)
    }

    /// The hardware class id.
    pub fn hw_class(&self) -> u32 {
        self.u32_at(off::HW_CLASS)
    }

    /// The pack's stated length.
    pub fn pack_len(&self) -> u32 {
        self.u32_at(off::PACK_LEN)
    }

    /// The pack's stated NPU1 header checksum.
    pub fn pack_checksum(&self) -> u32 {
        self.u32_at(off::PACK_CHECKSUM)
    }

    /// The pack's stated SHA-256.
    pub fn pack_sha256(&self) -> [u8; 32] {
        self.array(off::PACK_SHA256)
    }

    /// The digest of the pack's IO bindings (all zeros: none declared).
    pub fn io_digest(&self) -> [u8; 32] {
        self.array(off::IO_DIGEST)
    }

    /// Unix seconds when signed.
    pub fn issued_at(&self) -> u64 {
        self.u64_at(off::ISSUED_AT)
    }

    /// Unix seconds of expiry; 0 = never.
    pub fn expires_at(&self) -> u64 {
        self.u64_at(off::EXPIRES_AT)
    }

    /// Decodes every field and checks each one's own validity (text fields, non-zero sequence and
    /// hardware class, a named accelerator, a pack at least a header long, expiry after issue).
    /// Says nothing about authenticity or about this device: that is [`super::verify`]'s job.
    /// A version-2 manifest's `selftest_digest` must not be all zeros.
    pub fn fields(&self) -> Result<ManifestFields<'a>, Error> {
        let bytes: &'a [u8] = self.bytes;
        let fields = ManifestFields {
            sequence: self.sequence(),
            model_name: text::decode(
                MODEL_NAME_FIELD,
                &bytes[off::MODEL_NAME..off::MODEL_NAME + MODEL_NAME_BYTES],
            )?,
            model_version: text::decode(
                MODEL_VERSION_FIELD,
                &bytes[off::MODEL_VERSION..off::MODEL_VERSION + MODEL_VERSION_BYTES],
            )?,
            accel: Accel::from_word(self.accel_word()),
            hw_class: self.hw_class(),
            pack_len: self.pack_len(),
            pack_checksum: self.pack_checksum(),
            pack_sha256: self.pack_sha256(),
            io_digest: self.io_digest(),
            issued_at: self.issued_at(),
            expires_at: self.expires_at(),
        };
        fields.check()?;
        if self.selftest_digest() == Some([0; SELFTEST_DIGEST_BYTES]) {
            return Err(Error::Manifest(ManifestError::SelfTestDigestZero));
        }
        Ok(fields)
    }

    fn array<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[at..at + N]);
        out
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.array(at))
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.array(at))
    }
}

/// Everything a manifest says except who signed it: what the signer fills in, and what a
/// verified manifest decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestFields<'a> {
    /// Deployment sequence, ≥ 1. A rollback is a new manifest with a higher sequence.
    pub sequence: u64,
    /// Model name, 1..=[`MODEL_NAME_BYTES`] bytes of UTF-8 without control characters.
    pub model_name: &'a str,
    /// Model version, 1..=[`MODEL_VERSION_BYTES`] bytes of UTF-8 without control characters.
    pub model_version: &'a str,
    /// The accelerator configuration the command stream was compiled for (not `Unspecified`).
    pub accel: Accel,
    /// The hardware class the pack is for (not 0).
    pub hw_class: u32,
    /// The pack's length.
    pub pack_len: u32,
    /// The pack's NPU1 header checksum (word 7).
    pub pack_checksum: u32,
    /// SHA-256 of the whole pack.
    pub pack_sha256: [u8; 32],
    /// Digest of the pack's IO bindings; all zeros when the pack declares none.
    pub io_digest: [u8; 32],
    /// Unix seconds when signed.
    pub issued_at: u64,
    /// Unix seconds of expiry; 0 = never.
    pub expires_at: u64,
}

impl ManifestFields<'_> {
    /// Each field's own validity, in table order (text fields are checked by encoding or
    /// decoding them).
    pub fn check(&self) -> Result<(), Error> {
        if self.sequence == 0 {
            return Err(Error::Manifest(ManifestError::SequenceZero));
        }
        if self.accel == Accel::Unspecified {
            return Err(Error::Manifest(ManifestError::AccelUnspecified));
        }
        if self.hw_class == 0 {
            return Err(Error::Manifest(ManifestError::HardwareClassZero));
        }
        if self.pack_len < crate::format::HEADER_BYTES {
            return Err(Error::Manifest(ManifestError::PackTooShort {
                len: self.pack_len,
            }));
        }
        if self.expires_at != 0 && self.expires_at <= self.issued_at {
            return Err(Error::Manifest(ManifestError::BadExpiry {
                issued_at: self.issued_at,
                expires_at: self.expires_at,
            }));
        }
        Ok(())
    }

    /// The signed part of the manifest (bytes `0..216`), for the key `key_id`, after checking
    /// every field.
    pub fn encode(&self, key_id: KeyId) -> Result<[u8; SIGNED_BYTES], Error> {
        self.check()?;
        let mut out = [0u8; SIGNED_BYTES];
        put(&mut out, off::MAGIC, &MANIFEST_MAGIC.to_le_bytes());
        put(&mut out, off::VERSION, &MANIFEST_VERSION.to_le_bytes());
        put(&mut out, off::KEY_ID, &key_id.0);
        put(&mut out, off::SEQUENCE, &self.sequence.to_le_bytes());
        text::encode(
            MODEL_NAME_FIELD,
            self.model_name,
            &mut out[off::MODEL_NAME..off::MODEL_NAME + MODEL_NAME_BYTES],
        )?;
        text::encode(
            MODEL_VERSION_FIELD,
            self.model_version,
            &mut out[off::MODEL_VERSION..off::MODEL_VERSION + MODEL_VERSION_BYTES],
        )?;
        put(&mut out, off::ACCEL, &self.accel.word().to_le_bytes());
        put(&mut out, off::HW_CLASS, &self.hw_class.to_le_bytes());
        put(&mut out, off::PACK_LEN, &self.pack_len.to_le_bytes());
        put(
            &mut out,
            off::PACK_CHECKSUM,
            &self.pack_checksum.to_le_bytes(),
        );
        put(&mut out, off::PACK_SHA256, &self.pack_sha256);
        put(&mut out, off::IO_DIGEST, &self.io_digest);
        put(&mut out, off::ISSUED_AT, &self.issued_at.to_le_bytes());
        put(&mut out, off::EXPIRES_AT, &self.expires_at.to_le_bytes());
        Ok(out)
    }

    /// The signed part of a version-2 manifest (bytes `0..248`): [`ManifestFields::encode`]'s
    /// bytes with `version` 2, then `selftest_digest`, which must not be all zeros.
    pub fn encode_v2(
        &self,
        key_id: KeyId,
        selftest_digest: &[u8; SELFTEST_DIGEST_BYTES],
    ) -> Result<[u8; SIGNED_BYTES_V2], Error> {
        if *selftest_digest == [0; SELFTEST_DIGEST_BYTES] {
            return Err(Error::Manifest(ManifestError::SelfTestDigestZero));
        }
        let v1 = self.encode(key_id)?;
        let mut out = [0u8; SIGNED_BYTES_V2];
        out[..SIGNED_BYTES].copy_from_slice(&v1);
        put(&mut out, off::VERSION, &MANIFEST_VERSION_2.to_le_bytes());
        put(&mut out, off::SELFTEST_DIGEST, selftest_digest);
        Ok(out)
    }
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    out[at..at + bytes.len()].copy_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> ManifestFields<'static> {
        ManifestFields {
            sequence: 7,
            model_name: "person-detect",
            model_version: "1.2.0",
            accel: Accel::EthosU55_256,
            hw_class: 1,
            pack_len: 4096,
            pack_checksum: 0xdead_beef,
            pack_sha256: [0x11; 32],
            io_digest: [0x22; 32],
            issued_at: 1_700_000_000,
            expires_at: 1_800_000_000,
        }
    }

    fn whole(body: [u8; SIGNED_BYTES]) -> [u8; MANIFEST_BYTES] {
        let mut m = [0u8; MANIFEST_BYTES];
        m[..SIGNED_BYTES].copy_from_slice(&body);
        m
    }

    #[test]
    fn fields_round_trip_through_the_table_offsets() {
        let m = whole(fields().encode(KeyId([9; 8])).unwrap());
        assert_eq!(&m[0..4], b"NPM1");
        assert_eq!(m[off::SEQUENCE], 7);
        assert_eq!(&m[off::MODEL_NAME..off::MODEL_NAME + 13], b"person-detect");
        assert_eq!(m[off::ACCEL], 4);
        let view = ManifestView::new(&m).unwrap();
        assert_eq!(view.key_id(), KeyId([9; 8]));
        assert_eq!(view.fields().unwrap(), fields());
    }

    #[test]
    fn rejects_a_manifest_one_byte_short_or_long() {
        let m = whole(fields().encode(KeyId([9; 8])).unwrap());
        assert_eq!(
            ManifestView::new(&m[..MANIFEST_BYTES - 1]).unwrap_err(),
            Error::Manifest(ManifestError::WrongLength { len: 279 })
        );
        let mut long = [0u8; MANIFEST_BYTES + 1];
        long[..MANIFEST_BYTES].copy_from_slice(&m);
        assert_eq!(
            ManifestView::new(&long).unwrap_err(),
            Error::Manifest(ManifestError::WrongLength { len: 281 })
        );
    }

    fn whole_v2(body: [u8; SIGNED_BYTES_V2]) -> [u8; MANIFEST_V2_BYTES] {
        let mut m = [0u8; MANIFEST_V2_BYTES];
        m[..SIGNED_BYTES_V2].copy_from_slice(&body);
        m
    }

    #[test]
    fn a_version_2_manifest_round_trips_with_its_selftest_digest() {
        let m = whole_v2(fields().encode_v2(KeyId([9; 8]), &[0x5A; 32]).unwrap());
        assert_eq!(m[off::VERSION], 2);
        let view = ManifestView::new(&m).unwrap();
        assert_eq!(view.version(), MANIFEST_VERSION_2);
        assert_eq!(view.selftest_digest(), Some([0x5A; 32]));
        assert_eq!(view.signed_bytes().len(), SIGNED_BYTES_V2);
        assert_eq!(view.domain(), MANIFEST_DOMAIN_V2);
        assert_eq!(view.fields().unwrap(), fields());
        let v1 = whole(fields().encode(KeyId([9; 8])).unwrap());
        let view = ManifestView::new(&v1).unwrap();
        assert_eq!(view.selftest_digest(), None);
        assert_eq!(view.signed_bytes().len(), SIGNED_BYTES);
        assert_eq!(
            &m[..off::VERSION],
            &v1[..off::VERSION],
            "the fields before the version are shared"
        );
        assert_eq!(&m[8..SIGNED_BYTES], &v1[8..SIGNED_BYTES]);
    }

    #[test]
    fn rejects_a_version_2_manifest_with_a_zero_selftest_digest() {
        assert_eq!(
            fields().encode_v2(KeyId([9; 8]), &[0; 32]).unwrap_err(),
            Error::Manifest(ManifestError::SelfTestDigestZero)
        );
        let mut m = whole_v2(fields().encode_v2(KeyId([9; 8]), &[1; 32]).unwrap());
        m[off::SELFTEST_DIGEST..off::SIGNATURE_V2].fill(0);
        assert_eq!(
            ManifestView::new(&m).unwrap().fields().unwrap_err(),
            Error::Manifest(ManifestError::SelfTestDigestZero)
        );
    }

    #[test]
    fn rejects_a_length_of_the_other_version() {
        let mut v1 = [0u8; MANIFEST_V2_BYTES];
        v1[..SIGNED_BYTES].copy_from_slice(&fields().encode(KeyId([9; 8])).unwrap());
        assert_eq!(
            ManifestView::new(&v1).unwrap_err(),
            Error::Manifest(ManifestError::VersionLength {
                version: 1,
                len: 312,
                expected: 280
            })
        );
        let v2 = whole_v2(fields().encode_v2(KeyId([9; 8]), &[1; 32]).unwrap());
        assert_eq!(
            ManifestView::new(&v2[..MANIFEST_BYTES]).unwrap_err(),
            Error::Manifest(ManifestError::VersionLength {
                version: 2,
                len: 280,
                expected: 312
            })
        );
        assert_eq!(
            ManifestView::new(&v2[..MANIFEST_V2_BYTES - 1]).unwrap_err(),
            Error::Manifest(ManifestError::WrongLength { len: 311 })
        );
    }

    #[test]
    fn rejects_bad_magic_then_bad_version() {
        let mut m = whole(fields().encode(KeyId([9; 8])).unwrap());
        m[off::VERSION] = 3;
        assert_eq!(
            ManifestView::new(&m).unwrap_err(),
            Error::Manifest(ManifestError::UnsupportedVersion { found: 3 })
        );
        m[0] = b'X';
        assert!(matches!(
            ManifestView::new(&m),
            Err(Error::Manifest(ManifestError::BadMagic { .. }))
        ));
    }

    #[test]
    fn rejects_each_invalid_field() {
        let k = KeyId([1; 8]);
        let cases: [(ManifestFields<'static>, Error); 5] = [
            (
                ManifestFields {
                    sequence: 0,
                    ..fields()
                },
                Error::Manifest(ManifestError::SequenceZero),
            ),
            (
                ManifestFields {
                    accel: Accel::Unspecified,
                    ..fields()
                },
                Error::Manifest(ManifestError::AccelUnspecified),
            ),
            (
                ManifestFields {
                    hw_class: 0,
                    ..fields()
                },
                Error::Manifest(ManifestError::HardwareClassZero),
            ),
            (
                ManifestFields {
                    pack_len: 31,
                    ..fields()
                },
                Error::Manifest(ManifestError::PackTooShort { len: 31 }),
            ),
            (
                ManifestFields {
                    expires_at: 1_700_000_000,
                    ..fields()
                },
                Error::Manifest(ManifestError::BadExpiry {
                    issued_at: 1_700_000_000,
                    expires_at: 1_700_000_000,
                }),
            ),
        ];
        for (f, want) in cases {
            assert_eq!(f.encode(k).unwrap_err(), want);
        }
    }

    #[test]
    fn a_zero_expiry_means_never() {
        let f = ManifestFields {
            expires_at: 0,
            ..fields()
        };
        assert!(f.encode(KeyId([1; 8])).is_ok());
    }
}
