//! The bundle: every release signature of one release in one blob, so that a threshold (*k* of
//! *n*) travels beside the manifest as one file (`PACK.release`) and one HTTP body.
//!
//! The table is on [`Bundle`]. Parsing is zero-copy and checks the whole blob before anything
//! is read through it: a bundle is its header and exactly `count` signatures, at most
//! [`MAX_BUNDLE_SIGNATURES`]; every signature is a version-1 "NPR1" record; no key signs twice;
//! and every signature signs the same release (bytes 16..216 equal), so that the first one's
//! fields are the bundle's. Nothing here verifies a signature: [`super::check`] does.
use super::constants::{
    BUNDLE_HEADER_BYTES, BUNDLE_MAGIC, BUNDLE_VERSION, MAX_BUNDLE_BYTES, MAX_BUNDLE_SIGNATURES,
    RELEASE_BYTES,
};
use super::layout::ReleaseView;
use crate::{Error, ReleaseError};

/// Field offsets of the header.
mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const COUNT: usize = 8;
    pub const RESERVED: usize = 12;
}
const _: () = assert!(off::RESERVED + 4 == BUNDLE_HEADER_BYTES);

/// A parsed bundle of release signatures (a zero-copy view of the caller's bytes).
///
/// | Offset | Size        | Field        | Meaning                                                    |
/// |-------:|------------:|--------------|------------------------------------------------------------|
/// |      0 |           4 | `magic`      | bytes `4e 50 52 42` ("NPRB"), word [`BUNDLE_MAGIC`]         |
/// |      4 |           4 | `version`    | [`BUNDLE_VERSION`] = 1                                      |
/// |      8 |           4 | `count`      | signatures that follow, 1..=[`MAX_BUNDLE_SIGNATURES`]      |
/// |     12 |           4 | `reserved`   | 0                                                          |
/// |     16 | 288 × count | `signatures` | release signatures (the table on [`ReleaseView`]), distinct keys, one release |
///
/// The bundle is exactly `16 + 288 × count` bytes, at most [`MAX_BUNDLE_BYTES`] (1,168). The
/// header is not signed and needs not be: each signature covers itself, and a forged count or
/// order can only drop or reorder signatures, which a threshold does not depend on.
#[derive(Debug, Clone, Copy)]
pub struct Bundle<'a> {
    signatures: &'a [u8],
}

impl<'a> Bundle<'a> {
    /// Checks the whole bundle, in order: length at least the header and at most
    /// [`MAX_BUNDLE_BYTES`]; magic, version, reserved word; `count` between 1 and
    /// [`MAX_BUNDLE_SIGNATURES`]; the exact length; then each signature's magic, version and
    /// reserved word, that its key did not sign before it, and that it signs the first one's
    /// release.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let bad = |e: ReleaseError| Err(Error::Release(e));
        if bytes.len() < BUNDLE_HEADER_BYTES {
            return bad(ReleaseError::BundleTooShort {
                len: bytes.len() as u32,
            });
        }
        if bytes.len() > MAX_BUNDLE_BYTES {
            return bad(ReleaseError::BundleTooLong {
                len: bytes.len() as u64,
            });
        }
        let (header, signatures) = bytes.split_at(BUNDLE_HEADER_BYTES);
        let word = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&header[at..at + 4]);
            u32::from_le_bytes(w)
        };
        let magic = word(off::MAGIC);
        if magic != BUNDLE_MAGIC {
            return bad(ReleaseError::BundleBadMagic { found: magic });
        }
        let version = word(off::VERSION);
        if version != BUNDLE_VERSION {
            return bad(ReleaseError::BundleUnsupportedVersion { found: version });
        }
        if word(off::RESERVED) != 0 {
            return bad(ReleaseError::BundleReservedNotZero);
        }
        let count = word(off::COUNT);
        if count == 0 {
            return bad(ReleaseError::BundleEmpty);
        }
        if count as usize > MAX_BUNDLE_SIGNATURES {
            return bad(ReleaseError::BundleTooManySignatures { count });
        }
        // count ≤ 4: the product cannot overflow.
        if signatures.len() != count as usize * RELEASE_BYTES {
            return bad(ReleaseError::BundleWrongLength {
                len: bytes.len() as u32,
                count,
            });
        }
        let bundle = Bundle { signatures };
        bundle.check_signatures()?;
        Ok(bundle)
    }

    /// Each signature's own envelope, distinct keys, one release.
    fn check_signatures(&self) -> Result<(), Error> {
        let mut first: Option<ReleaseView<'a>> = None;
        for (index, raw) in self.raw().enumerate() {
            let index = index as u8;
            let view = ReleaseView::new(raw, index)?;
            let key_id = view.key_id();
            if self
                .raw()
                .take(index as usize)
                .any(|earlier| ReleaseView::of_checked(earlier).key_id() == key_id)
            {
                return Err(ReleaseError::BundleDuplicateKey { index, key_id }.into());
            }
            match first {
                None => first = Some(view),
                Some(first) if first.release_fields() != view.release_fields() => {
                    return Err(ReleaseError::BundleMixed { index }.into());
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Each signature's 288 bytes, in order.
    fn raw(&self) -> impl Iterator<Item = &'a [u8; RELEASE_BYTES]> + use<'a> {
        let signatures: &'a [u8] = self.signatures;
        signatures
            .chunks_exact(RELEASE_BYTES)
            .filter_map(|chunk| chunk.try_into().ok())
    }

    /// The signatures, in order (each checked by [`Bundle::parse`], none verified).
    pub fn signatures(&self) -> impl Iterator<Item = ReleaseView<'a>> + use<'a> {
        self.raw().map(ReleaseView::of_checked)
    }

    /// How many signatures it carries (1..=[`MAX_BUNDLE_SIGNATURES`]).
    pub fn len(&self) -> usize {
        self.signatures.len() / RELEASE_BYTES
    }

    /// Never true for a parsed bundle; here because `len` is.
    pub fn is_empty(&self) -> bool {
        self.signatures.is_empty()
    }

    /// The first signature, whose release fields are every signature's.
    pub fn first(&self) -> ReleaseView<'a> {
        let signatures: &'a [u8] = self.signatures;
        // parse() guarantees at least one whole signature.
        let raw: &'a [u8; RELEASE_BYTES] = signatures.first_chunk().unwrap_or(&[0; RELEASE_BYTES]);
        ReleaseView::of_checked(raw)
    }
}

/// The header of a bundle of `count` signatures.
#[cfg(feature = "alloc")]
fn header(count: usize) -> [u8; BUNDLE_HEADER_BYTES] {
    let mut out = [0u8; BUNDLE_HEADER_BYTES];
    out[off::MAGIC..off::MAGIC + 4].copy_from_slice(&BUNDLE_MAGIC.to_le_bytes());
    out[off::VERSION..off::VERSION + 4].copy_from_slice(&BUNDLE_VERSION.to_le_bytes());
    out[off::COUNT..off::COUNT + 4].copy_from_slice(&(count as u32).to_le_bytes());
    out
}

/// A bundle of `signatures`, in that order, checked as [`Bundle::parse`] checks it (host side:
/// the CLI writes one, the server stores one).
#[cfg(feature = "alloc")]
pub fn encode_bundle(signatures: &[[u8; RELEASE_BYTES]]) -> Result<alloc::vec::Vec<u8>, Error> {
    let count = signatures.len().min(MAX_BUNDLE_SIGNATURES + 1);
    let mut out = alloc::vec::Vec::with_capacity(BUNDLE_HEADER_BYTES + count * RELEASE_BYTES);
    out.extend_from_slice(&header(signatures.len()));
    for signature in signatures.iter().take(count) {
        out.extend_from_slice(signature);
    }
    if signatures.len() > MAX_BUNDLE_SIGNATURES {
        return Err(ReleaseError::BundleTooManySignatures {
            count: signatures.len().min(u32::MAX as usize) as u32,
        }
        .into());
    }
    Bundle::parse(&out)?;
    Ok(out)
}

/// `first`'s signatures, then those of `second` by keys `first` has no signature of: a second
/// signer's bundle (or lone signature, as a one-signature bundle) added to the first's. Both
/// must parse, sign the same release, and fit [`MAX_BUNDLE_SIGNATURES`] together.
#[cfg(feature = "alloc")]
pub fn merge_bundles(first: &[u8], second: &[u8]) -> Result<alloc::vec::Vec<u8>, Error> {
    let a = Bundle::parse(first)?;
    let b = Bundle::parse(second)?;
    let mut all: alloc::vec::Vec<[u8; RELEASE_BYTES]> =
        a.signatures().map(|s| *s.as_bytes()).collect();
    for signature in b.signatures() {
        if !a.signatures().any(|s| s.key_id() == signature.key_id()) {
            all.push(*signature.as_bytes());
        }
    }
    encode_bundle(&all)
}
