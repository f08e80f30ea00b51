//! The self-test delivered with a pack: a golden input and the SHA-256 of the outputs the
//! functional model (`npu-model`) computes for it. A device runs the input on its NPU after an
//! install and confirms the pack only when its outputs hash to the same digest. A release
//! signature's `selftest_digest` is the SHA-256 of the whole record ([`SelfTest::digest`]), so
//! the self-test is as released as the pack.
//!
//! | Offset | Size | Field           | Meaning and valid range                                         |
//! |-------:|-----:|-----------------|-----------------------------------------------------------------|
//! |      0 |    4 | `magic`         | bytes `4e 50 53 31` ("NPS1"), word [`SELFTEST_MAGIC`]            |
//! |      4 |    4 | `version`       | [`SELFTEST_VERSION`] = 1; anything else is refused               |
//! |      8 |   32 | `output_sha256` | SHA-256 of every model output's bytes, in the model's output order, concatenated |
//! |     40 |    4 | `input_bytes`   | *n*, ≤ [`MAX_SELFTEST_INPUT_BYTES`]; the record is exactly 48 + *n* bytes |
//! |     44 |    4 | `reserved`      | 0                                                               |
//! |     48 |  *n* | `input`         | every model input's bytes, in the model's input order, concatenated |
//!
//! All integers little-endian. Nothing in the record is signed by itself: it is trusted only
//! through a digest that a signature covers.
use sha2::{Digest, Sha256};

use super::constants::{
    MAX_SELFTEST_INPUT_BYTES, SELFTEST_HEADER_BYTES, SELFTEST_MAGIC, SELFTEST_VERSION,
};
use crate::{Error, ReleaseError};

/// A checked self-test record (zero-copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfTest<'a> {
    bytes: &'a [u8],
}

impl<'a> SelfTest<'a> {
    /// Checks the length, magic, version, reserved word and that the record is exactly its
    /// header and its input, in that order.
    pub fn parse(bytes: &'a [u8]) -> Result<SelfTest<'a>, Error> {
        if bytes.len() < SELFTEST_HEADER_BYTES {
            return Err(ReleaseError::SelfTestTooShort {
                len: bytes.len() as u32,
            }
            .into());
        }
        let word = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        if word(0) != SELFTEST_MAGIC {
            return Err(ReleaseError::SelfTestBadMagic { found: word(0) }.into());
        }
        if word(4) != SELFTEST_VERSION {
            return Err(ReleaseError::SelfTestUnsupportedVersion { found: word(4) }.into());
        }
        if word(44) != 0 {
            return Err(ReleaseError::SelfTestReservedNotZero.into());
        }
        let input = word(40);
        if input > MAX_SELFTEST_INPUT_BYTES {
            return Err(ReleaseError::SelfTestInputTooLarge { bytes: input }.into());
        }
        let want = SELFTEST_HEADER_BYTES as u64 + u64::from(input);
        if bytes.len() as u64 != want {
            return Err(ReleaseError::SelfTestLength {
                declared: input,
                len: bytes.len() as u64,
            }
            .into());
        }
        Ok(SelfTest { bytes })
    }

    /// The expected SHA-256 of the outputs.
    pub fn output_sha256(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(&self.bytes[8..40]);
        out
    }

    /// The golden input.
    pub fn input(&self) -> &'a [u8] {
        &self.bytes[SELFTEST_HEADER_BYTES..]
    }

    /// The whole record.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// SHA-256 of the whole record: what a release signature's `selftest_digest` names.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.bytes).into()
    }
}

/// Encodes a self-test record (`None`: the input is larger than [`MAX_SELFTEST_INPUT_BYTES`]).
#[cfg(feature = "alloc")]
pub fn encode_selftest(input: &[u8], output_sha256: &[u8; 32]) -> Option<alloc::vec::Vec<u8>> {
    let n = u32::try_from(input.len())
        .ok()
        .filter(|&n| n <= MAX_SELFTEST_INPUT_BYTES)?;
    let mut out = alloc::vec::Vec::with_capacity(SELFTEST_HEADER_BYTES + input.len());
    out.extend_from_slice(&SELFTEST_MAGIC.to_le_bytes());
    out.extend_from_slice(&SELFTEST_VERSION.to_le_bytes());
    out.extend_from_slice(output_sha256);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(input);
    Some(out)
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;

    fn record() -> alloc::vec::Vec<u8> {
        encode_selftest(&[1, 2, 3, 4, 5], &[7; 32]).unwrap()
    }

    fn refused(bytes: &[u8]) -> ReleaseError {
        match SelfTest::parse(bytes) {
            Err(Error::Release(e)) => e,
            other => panic!("not refused as a release error: {other:?}"),
        }
    }

    #[test]
    fn a_record_reads_back_what_was_encoded() {
        let bytes = record();
        let t = SelfTest::parse(&bytes).unwrap();
        assert_eq!(t.input(), &[1, 2, 3, 4, 5]);
        assert_eq!(t.output_sha256(), [7; 32]);
        assert_eq!(t.digest(), <[u8; 32]>::from(Sha256::digest(&bytes)));
        assert_eq!(&bytes[..4], b"NPS1");
    }

    #[test]
    fn rejects_selftest_too_short() {
        assert_eq!(
            refused(&record()[..47]),
            ReleaseError::SelfTestTooShort { len: 47 }
        );
    }

    #[test]
    fn rejects_selftest_bad_magic() {
        let mut b = record();
        b[0] = b'X';
        assert!(matches!(refused(&b), ReleaseError::SelfTestBadMagic { .. }));
    }

    #[test]
    fn rejects_selftest_unsupported_version() {
        let mut b = record();
        b[4] = 2;
        assert_eq!(
            refused(&b),
            ReleaseError::SelfTestUnsupportedVersion { found: 2 }
        );
    }

    #[test]
    fn rejects_selftest_reserved_not_zero() {
        let mut b = record();
        b[44] = 1;
        assert_eq!(refused(&b), ReleaseError::SelfTestReservedNotZero);
    }

    #[test]
    fn rejects_selftest_input_too_large() {
        let mut b = record();
        b[40..44].copy_from_slice(&(MAX_SELFTEST_INPUT_BYTES + 1).to_le_bytes());
        assert_eq!(
            refused(&b),
            ReleaseError::SelfTestInputTooLarge {
                bytes: MAX_SELFTEST_INPUT_BYTES + 1
            }
        );
    }

    #[test]
    fn rejects_selftest_length_other_than_declared() {
        let mut b = record();
        b.push(0);
        assert_eq!(
            refused(&b),
            ReleaseError::SelfTestLength {
                declared: 5,
                len: 54
            }
        );
        assert_eq!(
            refused(&record()[..52]),
            ReleaseError::SelfTestLength {
                declared: 5,
                len: 52
            }
        );
    }
}
