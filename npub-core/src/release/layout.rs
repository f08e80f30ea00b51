//! The version-1 release signature: 288 bytes, fixed width, little-endian.
//!
//! The table is on [`ReleaseView`], the zero-copy view every read goes through. A release
//! signature says "the holder of this release key released *this* pack as *this* model and
//! version, for *this* NPU, with *these* IO bindings and self-test": it is made where the model
//! is built, by a key the server never holds, and a device that has release keys installs a pack
//! only with enough of them (`check.rs`).
use super::constants::{RELEASE_BYTES, RELEASE_MAGIC, RELEASE_SIGNED_BYTES, RELEASE_VERSION};
use crate::manifest::{KeyId, MODEL_NAME_BYTES, MODEL_VERSION_BYTES, text};
use crate::{Accel, Error, ManifestError, ReleaseError};

/// Prepended to the signed bytes before signing: a release signature can never pass for a
/// manifest's or a keyring update's, even when one key were used for several roles.
pub const RELEASE_DOMAIN: &[u8] = b"npub/release/v1\0";

/// Field offsets, in the order of the table on [`ReleaseView`].
pub(crate) mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const KEY_ID: usize = 8;
    pub const PACK_SHA256: usize = 16;
    pub const MODEL_NAME: usize = 48;
    pub const MODEL_VERSION: usize = 112;
    pub const ACCEL: usize = 144;
    pub const RESERVED: usize = 148;
    pub const IO_DIGEST: usize = 152;
    pub const SELFTEST_DIGEST: usize = 184;
    pub const SIGNED_AT: usize = 216;
    pub const SIGNATURE: usize = 224;
}

/// Bytes `16..216`: what a release is (pack, model, version, accelerator, IO, self-test), the
/// part every signature of one bundle shares.
pub(crate) const RELEASE_FIELDS: core::ops::Range<usize> = off::PACK_SHA256..off::SIGNED_AT;

// The table is the layout: if a width changes, the offsets after it must move too.
const _: () = {
    assert!(off::MODEL_NAME == off::PACK_SHA256 + 32);
    assert!(off::MODEL_VERSION == off::MODEL_NAME + MODEL_NAME_BYTES);
    assert!(off::ACCEL == off::MODEL_VERSION + MODEL_VERSION_BYTES);
    assert!(off::SELFTEST_DIGEST == off::IO_DIGEST + 32);
    assert!(off::SIGNED_AT == off::SELFTEST_DIGEST + 32);
    assert!(off::SIGNATURE == off::SIGNED_AT + 8);
    assert!(off::SIGNATURE == RELEASE_SIGNED_BYTES);
};

/// Field names as the errors report them.
const MODEL_NAME_FIELD: &str = "model_name";
const MODEL_VERSION_FIELD: &str = "model_version";

/// A zero-copy view of one release signature inside a bundle whose magic, version and reserved
/// word have been checked — and nothing else: its signature has **not** been verified, so
/// nothing read through it is to be trusted until [`super::check`] has.
///
/// | Offset | Size | Field             | Meaning and valid range                                         |
/// |-------:|-----:|-------------------|-----------------------------------------------------------------|
/// |      0 |    4 | `magic`           | bytes `4e 50 52 31` ("NPR1"), word [`RELEASE_MAGIC`]             |
/// |      4 |    4 | `version`         | [`RELEASE_VERSION`] = 1; anything else is refused                |
/// |      8 |    8 | `key_id`          | [`KeyId`] of the release key that signed                         |
/// |     16 |   32 | `pack_sha256`     | SHA-256 of the whole pack, as in the manifest                    |
/// |     48 |   64 | `model_name`      | UTF-8, 1..=64 bytes, zero-padded, no control characters (the manifest's rules) |
/// |    112 |   32 | `model_version`   | UTF-8, 1..=32 bytes, zero-padded, no control characters          |
/// |    144 |    4 | `accel`           | NPU1 `accel` word the stream was compiled for; 0 refused         |
/// |    148 |    4 | `reserved`        | 0                                                               |
/// |    152 |   32 | `io_digest`       | the pack's IO-bindings digest, as in the manifest; all zeros = none |
/// |    184 |   32 | `selftest_digest` | SHA-256 of the self-test delivered with the pack; all zeros = none |
/// |    216 |    8 | `signed_at`       | unix seconds when signed (informational)                         |
/// |    224 |   64 | `signature`       | ed25519 over [`RELEASE_DOMAIN`] ‖ bytes `0..224`                 |
///
/// All integers little-endian. The signature covers every byte before it. Text fields have the
/// manifest's one encoding each, so a device compares a release's name and version with the
/// manifest's byte for byte, without decoding them.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseView<'a> {
    bytes: &'a [u8; RELEASE_BYTES],
}

impl<'a> ReleaseView<'a> {
    /// Checks the magic, the version and the reserved word of the signature at `index` of a
    /// bundle, in that order.
    pub(crate) fn new(bytes: &'a [u8; RELEASE_BYTES], index: u8) -> Result<Self, Error> {
        let view = Self { bytes };
        let magic = view.u32_at(off::MAGIC);
        if magic != RELEASE_MAGIC {
            return Err(ReleaseError::SignatureBadMagic {
                index,
                found: magic,
            }
            .into());
        }
        let version = view.u32_at(off::VERSION);
        if version != RELEASE_VERSION {
            return Err(ReleaseError::SignatureUnsupportedVersion {
                index,
                found: version,
            }
            .into());
        }
        if view.u32_at(off::RESERVED) != 0 {
            return Err(ReleaseError::SignatureReservedNotZero { index }.into());
        }
        Ok(view)
    }

    /// A view of bytes that already passed [`ReleaseView::new`] (a parsed bundle's).
    pub(crate) fn of_checked(bytes: &'a [u8; RELEASE_BYTES]) -> Self {
        Self { bytes }
    }

    /// All the bytes.
    pub fn as_bytes(&self) -> &'a [u8; RELEASE_BYTES] {
        self.bytes
    }

    /// Bytes `0..224`, the ones the signature covers.
    pub fn signed_bytes(&self) -> &'a [u8] {
        &self.bytes[..RELEASE_SIGNED_BYTES]
    }

    /// The 64-byte signature.
    pub fn signature(&self) -> &'a [u8; 64] {
        let bytes: &'a [u8; RELEASE_BYTES] = self.bytes;
        let (_, signature) = bytes.split_at(off::SIGNATURE);
        // The split leaves exactly 64 bytes (a const assert ties the offsets together).
        signature.try_into().unwrap_or(&[0; 64])
    }

    /// The release key's id.
    pub fn key_id(&self) -> KeyId {
        KeyId(self.array(off::KEY_ID))
    }

    /// The pack's SHA-256 it signs.
    pub fn pack_sha256(&self) -> [u8; 32] {
        self.array(off::PACK_SHA256)
    }

    /// The `model_name` field, raw (64 bytes, zero-padded).
    pub fn model_name_raw(&self) -> &'a [u8] {
        let bytes: &'a [u8; RELEASE_BYTES] = self.bytes;
        &bytes[off::MODEL_NAME..off::MODEL_NAME + MODEL_NAME_BYTES]
    }

    /// The `model_version` field, raw (32 bytes, zero-padded).
    pub fn model_version_raw(&self) -> &'a [u8] {
        let bytes: &'a [u8; RELEASE_BYTES] = self.bytes;
        &bytes[off::MODEL_VERSION..off::MODEL_VERSION + MODEL_VERSION_BYTES]
    }

    /// The raw accelerator word.
    pub fn accel_word(&self) -> u32 {
        self.u32_at(off::ACCEL)
    }

    /// The IO-bindings digest (all zeros: none).
    pub fn io_digest(&self) -> [u8; 32] {
        self.array(off::IO_DIGEST)
    }

    /// The self-test digest (all zeros: none).
    pub fn selftest_digest(&self) -> [u8; 32] {
        self.array(off::SELFTEST_DIGEST)
    }

    /// Unix seconds when signed.
    pub fn signed_at(&self) -> u64 {
        u64::from_le_bytes(self.array(off::SIGNED_AT))
    }

    /// Bytes `16..216`, what the release is: equal in every signature of one bundle.
    pub(crate) fn release_fields(&self) -> &'a [u8] {
        let bytes: &'a [u8; RELEASE_BYTES] = self.bytes;
        &bytes[RELEASE_FIELDS]
    }

    /// Decodes every field and checks each one's own validity (text fields, a named
    /// accelerator), for a host that shows a release. Says nothing about authenticity. A device
    /// never needs this: it compares the raw fields with the manifest's.
    pub fn fields(&self) -> Result<ReleaseFields<'a>, Error> {
        let fields = ReleaseFields {
            pack_sha256: self.pack_sha256(),
            model_name: text::decode(MODEL_NAME_FIELD, self.model_name_raw())
                .map_err(as_release)?,
            model_version: text::decode(MODEL_VERSION_FIELD, self.model_version_raw())
                .map_err(as_release)?,
            accel: Accel::from_word(self.accel_word()),
            io_digest: self.io_digest(),
            selftest_digest: self.selftest_digest(),
            signed_at: self.signed_at(),
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
}

/// What a release says, except who signed it: what a signer fills in, and what a shown
/// signature decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFields<'a> {
    /// SHA-256 of the whole pack.
    pub pack_sha256: [u8; 32],
    /// Model name, as the manifests of its deployments will say it.
    pub model_name: &'a str,
    /// Model version, as the manifests will say it.
    pub model_version: &'a str,
    /// The accelerator configuration the command stream was compiled for (not `Unspecified`).
    pub accel: Accel,
    /// The pack's IO-bindings digest (`io_bindings::digest`); all zeros when it declares none.
    pub io_digest: [u8; 32],
    /// SHA-256 of the self-test delivered with the pack; all zeros when there is none.
    pub selftest_digest: [u8; 32],
    /// Unix seconds when signed.
    pub signed_at: u64,
}

impl ReleaseFields<'_> {
    /// Each field's own validity: a named accelerator (text fields are checked by encoding or
    /// decoding them).
    pub fn check(&self) -> Result<(), Error> {
        if self.accel == Accel::Unspecified {
            return Err(ReleaseError::AccelUnspecified.into());
        }
        Ok(())
    }

    /// The signed part of the signature (bytes `0..224`) for the release key `key_id`, after
    /// checking every field.
    pub fn encode(&self, key_id: KeyId) -> Result<[u8; RELEASE_SIGNED_BYTES], Error> {
        self.check()?;
        let mut out = [0u8; RELEASE_SIGNED_BYTES];
        put(&mut out, off::MAGIC, &RELEASE_MAGIC.to_le_bytes());
        put(&mut out, off::VERSION, &RELEASE_VERSION.to_le_bytes());
        put(&mut out, off::KEY_ID, &key_id.0);
        put(&mut out, off::PACK_SHA256, &self.pack_sha256);
        text::encode(
            MODEL_NAME_FIELD,
            self.model_name,
            &mut out[off::MODEL_NAME..off::MODEL_NAME + MODEL_NAME_BYTES],
        )
        .map_err(as_release)?;
        text::encode(
            MODEL_VERSION_FIELD,
            self.model_version,
            &mut out[off::MODEL_VERSION..off::MODEL_VERSION + MODEL_VERSION_BYTES],
        )
        .map_err(as_release)?;
        put(&mut out, off::ACCEL, &self.accel.word().to_le_bytes());
        put(&mut out, off::IO_DIGEST, &self.io_digest);
        put(&mut out, off::SELFTEST_DIGEST, &self.selftest_digest);
        put(&mut out, off::SIGNED_AT, &self.signed_at.to_le_bytes());
        Ok(out)
    }
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    out[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The manifest's text rules, reported as a release's.
fn as_release(e: Error) -> Error {
    let release = match e {
        Error::Manifest(ManifestError::TextEmpty { field }) => ReleaseError::TextEmpty { field },
        Error::Manifest(ManifestError::TextTooLong { field, len, max }) => {
            ReleaseError::TextTooLong { field, len, max }
        }
        Error::Manifest(ManifestError::TextNotUtf8 { field, offset }) => {
            ReleaseError::TextNotUtf8 { field, offset }
        }
        Error::Manifest(ManifestError::TextControlChar { field, offset }) => {
            ReleaseError::TextControlChar { field, offset }
        }
        Error::Manifest(ManifestError::TextBadPadding { field, offset }) => {
            ReleaseError::TextBadPadding { field, offset }
        }
        other => return other,
    };
    release.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn fields() -> ReleaseFields<'static> {
        ReleaseFields {
            pack_sha256: [0x11; 32],
            model_name: "person-detect",
            model_version: "1.2.0",
            accel: Accel::EthosU55_256,
            io_digest: [0x22; 32],
            selftest_digest: [0; 32],
            signed_at: 1_700_000_000,
        }
    }

    fn whole(body: [u8; RELEASE_SIGNED_BYTES]) -> [u8; RELEASE_BYTES] {
        let mut r = [0u8; RELEASE_BYTES];
        r[..RELEASE_SIGNED_BYTES].copy_from_slice(&body);
        r
    }

    #[test]
    fn fields_round_trip_through_the_table_offsets() {
        let r = whole(fields().encode(KeyId([9; 8])).unwrap());
        assert_eq!(&r[0..4], b"NPR1");
        assert_eq!(r[4], 1);
        assert_eq!(&r[8..16], &[9; 8]);
        assert_eq!(&r[16..48], &[0x11; 32]);
        assert_eq!(&r[48..61], b"person-detect");
        assert_eq!(&r[112..117], b"1.2.0");
        assert_eq!(r[144], 4);
        assert_eq!(&r[152..184], &[0x22; 32]);
        let view = ReleaseView::new(&r, 0).unwrap();
        assert_eq!(view.key_id(), KeyId([9; 8]));
        assert_eq!(view.fields().unwrap(), fields());
    }

    #[test]
    fn rejects_bad_magic_then_version_then_reserved() {
        let mut r = whole(fields().encode(KeyId([9; 8])).unwrap());
        r[off::RESERVED] = 1;
        assert_eq!(
            ReleaseView::new(&r, 2).unwrap_err(),
            Error::Release(ReleaseError::SignatureReservedNotZero { index: 2 })
        );
        r[off::VERSION] = 2;
        assert_eq!(
            ReleaseView::new(&r, 2).unwrap_err(),
            Error::Release(ReleaseError::SignatureUnsupportedVersion { index: 2, found: 2 })
        );
        r[0] = b'X';
        assert!(matches!(
            ReleaseView::new(&r, 1),
            Err(Error::Release(ReleaseError::SignatureBadMagic {
                index: 1,
                ..
            }))
        ));
    }

    #[test]
    fn rejects_an_unspecified_accelerator_and_bad_text() {
        let k = KeyId([1; 8]);
        let unspecified = ReleaseFields {
            accel: Accel::Unspecified,
            ..fields()
        };
        assert_eq!(
            unspecified.encode(k).unwrap_err(),
            Error::Release(ReleaseError::AccelUnspecified)
        );
        let empty = ReleaseFields {
            model_version: "",
            ..fields()
        };
        assert_eq!(
            empty.encode(k).unwrap_err(),
            Error::Release(ReleaseError::TextEmpty {
                field: "model_version"
            })
        );
        let long = "x".repeat(65);
        let too_long = ReleaseFields {
            model_name: &long,
            ..fields()
        };
        assert_eq!(
            too_long.encode(k).unwrap_err(),
            Error::Release(ReleaseError::TextTooLong {
                field: "model_name",
                len: 65,
                max: 64
            })
        );
        let mut r = whole(fields().encode(k).unwrap());
        r[off::MODEL_NAME + 20] = b'x'; // after the padding began
        assert_eq!(
            ReleaseView::new(&r, 0).unwrap().fields().unwrap_err(),
            Error::Release(ReleaseError::TextBadPadding {
                field: "model_name",
                offset: 20
            })
        );
    }
}
