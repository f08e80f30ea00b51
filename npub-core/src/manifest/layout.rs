//! The version-1 manifest: 280 bytes, fixed width, little-endian, no variable-length parsing.
//!
//! The table is on [`ManifestView`], the zero-copy view every read goes through.
//!
//! Every multi-byte integer is little-endian; the 8-byte fields sit at 8-byte offsets. The
//! signature covers every byte before it, so nothing in a manifest is unsigned, and a manifest is
//! exactly [`MANIFEST_BYTES`] long: trailing bytes are refused rather than ignored.
use super::KeyId;
use super::constants::{
    MANIFEST_BYTES, MANIFEST_MAGIC, MANIFEST_VERSION, SIGNATURE_BYTES, SIGNED_BYTES,
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
    pub const SIGNATURE: usize = 216;
}

// The table is the layout: if a width changes, the offsets after it must move too.
const _: () = {
    assert!(off::MODEL_VERSION == off::MODEL_NAME + MODEL_NAME_BYTES);
    assert!(off::ACCEL == off::MODEL_VERSION + MODEL_VERSION_BYTES);
    assert!(off::IO_DIGEST == off::PACK_SHA256 + 32);
    assert!(off::ISSUED_AT == off::IO_DIGEST + 32);
    assert!(off::SIGNATURE == off::EXPIRES_AT + 8);
    assert!(off::SIGNATURE == SIGNED_BYTES);
};

/// Field names as the errors report them.
pub(crate) const MODEL_NAME_FIELD: &str = "model_name";
pub(crate) const MODEL_VERSION_FIELD: &str = "model_version";

/// A zero-copy view of a manifest whose length, magic and version have been checked — and nothing
/// else: its signature has **not** been verified, so nothing read through it is to be trusted.
/// Only [`super::verify`] turns one into a [`super::VerifiedManifest`].
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
#[derive(Debug, Clone, Copy)]
pub struct ManifestView<'a> {
    bytes: &'a [u8; MANIFEST_BYTES],
}

impl<'a> ManifestView<'a> {
    /// Checks the length (exactly [`MANIFEST_BYTES`]), the magic and the version, in that order.
    pub fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let bytes: &[u8; MANIFEST_BYTES] = bytes.try_into().map_err(|_| {
            Error::Manifest(ManifestError::WrongLength {
                len: bytes.len() as u64,
            })
        })?;
        let view = Self { bytes };
        let magic = view.u32_at(off::MAGIC);
        if magic != MANIFEST_MAGIC {
            return Err(Error::Manifest(ManifestError::BadMagic { found: magic }));
        }
        let version = view.u32_at(off::VERSION);
        if version != MANIFEST_VERSION {
            return Err(Error::Manifest(ManifestError::UnsupportedVersion {
                found: version,
            }));
        }
        Ok(view)
    }

    /// A view of bytes that already passed [`ManifestView::new`] (a verified manifest's copy).
    pub(crate) fn of_checked(bytes: &'a [u8; MANIFEST_BYTES]) -> Self {
        Self { bytes }
    }

    /// All the bytes.
    pub fn as_bytes(&self) -> &'a [u8; MANIFEST_BYTES] {
        self.bytes
    }

    /// Bytes `0..216`, the ones the signature covers.
    pub fn signed_bytes(&self) -> &'a [u8] {
        &self.bytes[..SIGNED_BYTES]
    }

    /// The 64-byte signature.
    pub fn signature(&self) -> &'a [u8; SIGNATURE_BYTES] {
        let bytes: &'a [u8; MANIFEST_BYTES] = self.bytes;
        let (_, signature) = bytes.split_at(off::SIGNATURE);
        // The split leaves exactly SIGNATURE_BYTES (a const assert ties the offsets together).
        signature.try_into().unwrap_or(&[0; SIGNATURE_BYTES])
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
    pub fn fields(&self) -> Result<ManifestFields<'a>, Error> {
        let bytes: &'a [u8; MANIFEST_BYTES] = self.bytes;
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

    #[test]
    fn rejects_bad_magic_then_bad_version() {
        let mut m = whole(fields().encode(KeyId([9; 8])).unwrap());
        m[off::VERSION] = 2;
        assert_eq!(
            ManifestView::new(&m).unwrap_err(),
            Error::Manifest(ManifestError::UnsupportedVersion { found: 2 })
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
