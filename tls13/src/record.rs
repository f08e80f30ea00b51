//! The record layer (RFC 8446 §5): AES-128-GCM protection of one direction, in place in the
//! caller's buffers.
//!
//! A record on the wire:
//!
//! | bytes | field                                                           |
//! |-------|-----------------------------------------------------------------|
//! | 1     | content type (23 application_data once protected)               |
//! | 2     | legacy version, 0x0303                                          |
//! | 2     | length of what follows, at most 2^14 + 256 ([`MAX_CIPHERTEXT`]) |
//! | n     | ciphertext of (content, real content type, zero padding)        |
//! | 16    | GCM tag                                                         |
//!
//! The nonce is the IV XOR the record's sequence number (big-endian, left-padded to 12 bytes);
//! the additional data is the 5-byte header.
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce, Tag};

use crate::error::Refusal;
use crate::schedule::{IV_LEN, Secret, traffic_keys};

pub const HEADER_LEN: usize = 5;
pub const TAG_LEN: usize = 16;
/// The longest plaintext of one record (RFC 8446 §5.1).
pub const MAX_PLAINTEXT: usize = 1 << 14;
/// The longest record body a peer may send (§5.2: 2^14 + 256).
pub const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 256;

pub const CHANGE_CIPHER_SPEC: u8 = 20;
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;

/// The keys of one direction and its sequence number.
pub struct Protection {
    aead: Aes128Gcm,
    iv: [u8; IV_LEN],
    seq: u64,
}

impl Protection {
    pub fn new(secret: &Secret) -> Self {
        let (key, iv) = traffic_keys(secret);
        Self {
            aead: Aes128Gcm::new(&key.into()),
            iv,
            seq: 0,
        }
    }

    fn nonce(&mut self) -> Result<Nonce<aes_gcm::aead::consts::U12>, Refusal> {
        let mut nonce = self.iv;
        for (n, s) in nonce[IV_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq = self.seq.checked_add(1).ok_or(Refusal::SequenceExhausted)?;
        Ok(nonce.into())
    }

    /// Protects `record[HEADER_LEN..HEADER_LEN + len]` as a record of `content_type`: writes
    /// the header, the inner type and the tag around it; the record's whole length.
    pub fn seal(
        &mut self,
        record: &mut [u8],
        len: usize,
        content_type: u8,
    ) -> Result<usize, SealError> {
        let body = len.checked_add(1 + TAG_LEN).ok_or(SealError::TooLong)?;
        let total = body.checked_add(HEADER_LEN).ok_or(SealError::TooLong)?;
        if len > MAX_PLAINTEXT || total > record.len() {
            return Err(SealError::TooLong);
        }
        record[HEADER_LEN + len] = content_type;
        let body_len = u16::try_from(body).map_err(|_| SealError::TooLong)?;
        let [hi, lo] = body_len.to_be_bytes();
        let header = [APPLICATION_DATA, 3, 3, hi, lo];
        record[..HEADER_LEN].copy_from_slice(&header);
        let nonce = self.nonce().map_err(|_| SealError::Exhausted)?;
        let plain_end = HEADER_LEN + len + 1;
        let tag = self
            .aead
            .encrypt_in_place_detached(&nonce, &header, &mut record[HEADER_LEN..plain_end])
            .map_err(|_| SealError::TooLong)?;
        record[plain_end..total].copy_from_slice(&tag);
        Ok(total)
    }

    /// Opens the protected record `record` (header and body) in place: its real content type
    /// and the length of its content, which starts at `HEADER_LEN`.
    pub fn open(&mut self, record: &mut [u8]) -> Result<(u8, usize), Refusal> {
        let (header, body) = record.split_at_mut(HEADER_LEN);
        let text_len = body
            .len()
            .checked_sub(TAG_LEN)
            .ok_or(Refusal::BadRecordMac)?;
        let (text, tag) = body.split_at_mut(text_len);
        let nonce = self.nonce()?;
        self.aead
            .decrypt_in_place_detached(&nonce, header, text, Tag::from_slice(tag))
            .map_err(|_| Refusal::BadRecordMac)?;
        // The real type is the last non-zero byte; what follows it is padding.
        let end = text
            .iter()
            .rposition(|&b| b != 0)
            .ok_or(Refusal::NoContentType)?;
        if end > MAX_PLAINTEXT {
            return Err(Refusal::RecordTooLong);
        }
        Ok((text[end], end))
    }
}

/// A record this side could not protect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealError {
    /// It does not fit the write buffer (or a record).
    TooLong,
    /// The sequence number would wrap.
    Exhausted,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Protection, Protection) {
        let secret = [7u8; 32];
        (Protection::new(&secret), Protection::new(&secret))
    }

    #[test]
    fn a_sealed_record_opens_to_its_content_and_type() {
        let (mut tx, mut rx) = pair();
        let mut buf = [0u8; 64];
        buf[HEADER_LEN..HEADER_LEN + 5].copy_from_slice(b"hello");
        let n = tx.seal(&mut buf, 5, HANDSHAKE).unwrap();
        assert_eq!(n, HEADER_LEN + 5 + 1 + TAG_LEN);
        assert_eq!(rx.open(&mut buf[..n]), Ok((HANDSHAKE, 5)));
        assert_eq!(&buf[HEADER_LEN..HEADER_LEN + 5], b"hello");
    }

    #[test]
    fn rejects_a_tampered_record() {
        let (mut tx, mut rx) = pair();
        let mut buf = [0u8; 64];
        let n = tx.seal(&mut buf, 5, APPLICATION_DATA).unwrap();
        buf[HEADER_LEN + 2] ^= 1;
        assert_eq!(rx.open(&mut buf[..n]), Err(Refusal::BadRecordMac));
    }

    #[test]
    fn rejects_a_replayed_record() {
        let (mut tx, mut rx) = pair();
        let mut buf = [0u8; 64];
        let n = tx.seal(&mut buf, 5, APPLICATION_DATA).unwrap();
        let copy = buf;
        rx.open(&mut buf[..n]).unwrap();
        let mut again = copy;
        assert_eq!(rx.open(&mut again[..n]), Err(Refusal::BadRecordMac));
    }

    #[test]
    fn rejects_a_record_of_padding_only() {
        let (mut tx, mut rx) = pair();
        let mut buf = [0u8; 64];
        let n = tx.seal(&mut buf, 3, 0).unwrap();
        assert_eq!(rx.open(&mut buf[..n]), Err(Refusal::NoContentType));
    }

    #[test]
    fn rejects_a_record_shorter_than_its_tag() {
        let (_, mut rx) = pair();
        let mut buf = [23u8, 3, 3, 0, 4, 1, 2, 3, 4];
        assert_eq!(rx.open(&mut buf), Err(Refusal::BadRecordMac));
    }
}
