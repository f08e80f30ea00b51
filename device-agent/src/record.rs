//! A self-checking record on NOR, shared by the journal, the keyring store and the slot
//! descriptors: how one is framed, programmed and read back, and read again after a misread.
//!
//! | Offset     | Size | Field   | Meaning                                                |
//! |------------|------|---------|--------------------------------------------------------|
//! | 0          | 4    | `magic` | the record kind and its layout version, little-endian  |
//! | 4          | n−8  | body    | the kind's own fields (journal.rs, keystore.rs, descriptor.rs) |
//! | n−4        | 4    | `crc`   | CRC-32 (IEEE) of bytes 0..n−4; with a device key, the first 4 bytes of their HMAC-SHA256 instead (`seal.rs`) |
//!
//! | rule                                                   | why                                                    |
//! |--------------------------------------------------------|--------------------------------------------------------|
//! | a copy that does not check is read again, [`MISREAD_REREADS`] times, before it is believed torn | one glitch spoils one read                 |
//! | a copy that reads blank is not read again               | a torn program that reads blank is the old state, which a cut allows |
//! | a program is read back, with the same re-reads, and only a read-back that matches byte for byte counts | a bit that did not take, or flipped at once, must cost the caller a place (a unit, a bank, an attempt), not the commit |
//!
//! The functions are generic over the flash only (one copy of each per flash type in the
//! firmware image): the kinds differ in their bodies, decoded by their own modules from the
//! bytes these functions leave in the caller's buffer.
use embedded_storage::nor_flash::NorFlash;

use crate::error::Error;
use crate::seal::DeviceKey;

/// A journal record's size (its table is in `journal.rs`): a power of two, so any `WRITE_SIZE` up
/// to 128 divides it. Here, not in `journal.rs`, because the layout's checks need it too.
pub const JOURNAL_RECORD_BYTES: usize = 128;
/// A keyring record's size (its table is in `keystore.rs`): a power of two, so any `WRITE_SIZE`
/// up to 512 divides it.
pub const KEYRING_RECORD_BYTES: usize = 512;
/// Copies of its record a commit programs, journal and keyring alike: one may tear, the other
/// stands.
pub const COPIES: usize = 2;

/// Reads of a record that does not check (or does not read back), after the first: one glitch
/// spoils one read.
pub const MISREAD_REREADS: usize = 2;

/// What reading one copy gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// Every byte `0xFF`: never programmed (or a torn program that left nothing).
    Blank,
    /// Magic and check word check: the buffer holds the record, for its kind to decode.
    Framed,
    /// Neither, after every re-read: torn, rotted or another layout.
    Bad,
}

/// The check word of `body` (a record without its last word): its CRC-32, or under `key` its
/// MAC (`seal.rs`).
fn check_word(body: &[u8], key: Option<&DeviceKey>) -> u32 {
    match key {
        None => crate::crc::crc32(body),
        Some(key) => key.check_word(body),
    }
}

/// Frames `record` (magic in its first word, the check word in its last).
pub(crate) fn frame(record: &mut [u8], magic: u32, key: Option<&DeviceKey>) {
    record[..4].copy_from_slice(&magic.to_le_bytes());
    let crc_at = record.len() - 4;
    let check = check_word(&record[..crc_at], key);
    record[crc_at..].copy_from_slice(&check.to_le_bytes());
}

/// Whether `record` carries `magic` and a check word that checks (under `key`, if any).
pub(crate) fn is_framed(record: &[u8], magic: u32, key: Option<&DeviceKey>) -> bool {
    let crc_at = record.len() - 4;
    word(record, 0) == magic && word(record, crc_at) == check_word(&record[..crc_at], key)
}

/// The little-endian word at `at`.
pub(crate) fn word(record: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&record[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Reads the copy at `at` into `buf` (its length is the record's), again when it is not framed
/// with `magic` (under `key`: a record whose MAC fails is read as a torn one).
#[inline(never)]
pub(crate) fn read<F: NorFlash>(
    flash: &mut F,
    at: u32,
    buf: &mut [u8],
    magic: u32,
    key: Option<&DeviceKey>,
) -> Result<Read, Error> {
    for _ in 0..=MISREAD_REREADS {
        flash.read(at, buf)?;
        if buf.iter().all(|&b| b == 0xFF) {
            return Ok(Read::Blank);
        }
        if is_framed(buf, magic, key) {
            return Ok(Read::Framed);
        }
    }
    Ok(Read::Bad)
}

/// Programs `record` at every offset of `copies`, then reads each back into `scratch` (as long as
/// `record`); `Ok(false)` when one does not read back as written, after re-reads.
#[inline(never)]
pub(crate) fn program<F: NorFlash>(
    flash: &mut F,
    copies: &[u32],
    record: &[u8],
    scratch: &mut [u8],
) -> Result<bool, Error> {
    for &at in copies {
        flash.write(at, record)?;
    }
    for &at in copies {
        let mut good = false;
        for _ in 0..=MISREAD_REREADS {
            flash.read(at, scratch)?;
            if scratch == record {
                good = true;
                break;
            }
        }
        if !good {
            return Ok(false);
        }
    }
    Ok(true)
}
