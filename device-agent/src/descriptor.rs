//! Slot descriptors: what a slot holds, beside the slot, so that boot can bind a pack that
//! verifies even when the journal is lost.
//!
//! A slot's last erase sector ([`Layout::descriptor`]) holds:
//!
//! | Offset | Size | Content                                                                     |
//! |--------|------|-----------------------------------------------------------------------------|
//! | 0      | 128  | the descriptor record, below; programmed once the slot verified in flash, before the journal says *pending* |
//! | 128    | 128  | the *confirmed* mark: all `0x00`, programmed after the journal says *confirmed* |
//! | 256    | 128  | the *revoked* mark: all `0x00`, programmed after the journal gives the pending pack up |
//! | 384    | 128  | unused (0xFF)                                                               |
//! | 512    | 512  | the *stored manifest*, below: only on sectors of at least 1 KiB ([`Layout::stores_manifest`]); programmed just before the record |
//!
//! Record (128 bytes, little-endian):
//!
//! | Offset | Size | Field      | Meaning                                   |
//! |--------|------|------------|-------------------------------------------|
//! | 0      | 4    | `magic`    | [`DESCRIPTOR_MAGIC`], bytes `4e 50 44 31` ("NPD1") |
//! | 4      | 4    | `len`      | the pack's length                          |
//! | 8      | 8    | `sequence` | its manifest sequence                      |
//! | 16     | 32   | `sha256`   | its SHA-256 from the manifest              |
//! | 48     | 32   | `selftest_digest` | SHA-256 of the self-test record stored after the pack (the version-2 manifest's `selftest_digest`); 0: none |
//! | 80     | 4    | `selftest_len` | the record's length; 0 exactly when `selftest_digest` is 0 |
//! | 84     | 40   | reserved   | 0                                          |
//! | 124    | 4    | `crc`      | CRC-32 of bytes 0..124; with a device key their MAC (`seal.rs`) |
//!
//! Stored manifest (512 bytes at sector offset 512, little-endian): the signed manifest the slot
//! was installed from, as received, so that boot can verify its signature again
//! ([`Layout::boot_check`]). Any manifest npub-core's parser accepts, up to
//! [`MAX_STORED_MANIFEST_BYTES`]; the parser, not this part, knows its versions.
//!
//! | Offset  | Size      | Field      | Meaning                                          |
//! |---------|-----------|------------|--------------------------------------------------|
//! | 0       | 4         | `magic`    | [`STORED_MANIFEST_MAGIC`], bytes `4e 53 4d 31` ("NSM1") |
//! | 4       | 4         | `len`      | the manifest's length, 1..=[`MAX_STORED_MANIFEST_BYTES`] |
//! | 8       | `len`     | `manifest` | its bytes                                        |
//! | 8+`len` | 500−`len` | padding    | 0                                                |
//! | 508     | 4         | `crc`      | CRC-32 of bytes 0..508; with a device key their MAC (`seal.rs`), as every other trust record |
//!
//! Order of the writes to the sector, and what a power cut after each leaves:
//!
//! | # | write (who)                                        | journal after it      | a cut right after it                                    |
//! |---|----------------------------------------------------|-----------------------|---------------------------------------------------------|
//! | 1 | erase the sector (install step 2, and every resume) | *receiving*           | the slot describes nothing; the resume erases again      |
//! | 2 | the stored manifest, read back (step 5)            | *receiving*           | a manifest with no record: no descriptor; the resume erases again |
//! | 3 | the record, read back (step 5)                     | *receiving*           | a descriptor of a slot that verified; the resume erases again |
//! | 4 | —                                                  | *pending*             | boot puts the pack on trial (its stored manifest is whole) |
//! | 5 | the confirmed or the revoked mark                  | *confirmed* / *failed* | as the journal says; the mark only matters without it   |
//!
//! The self-test record ("NPS1") lies in the slot's pack area at [`selftest_offset`]: the first
//! erase sector after the pack, so that fetching it again never erases pack bytes.
//!
//! The sector is erased whenever an install (or a resumed one) starts on the slot, before any
//! pack byte is erased, so a descriptor never describes bytes that are being replaced. Each part
//! is programmed at most once between erases: the stored manifest and the record once per
//! install, each mark on the one journal transition that calls for it, and the journal is
//! written *first*, so a cut inside a mark leaves a journal that never asks for that mark again.
//! The journal stays the authority: descriptors are read only when it holds no record at all,
//! and the stored manifest only by the boot check. A mark counts as set when most of three reads
//! of it see a programmed bit (one glitch cannot set it; a torn mark usually is set).
use embedded_storage::nor_flash::NorFlash;

use crate::error::Error;
use crate::ids::{PackId, Slot};
use crate::layout::Layout;
use crate::record;
use crate::seal::DeviceKey;

/// `"NPD1"` little-endian.
pub const DESCRIPTOR_MAGIC: u32 = 0x3144_504E;
/// `"NSM1"` little-endian: the stored manifest's magic (not "NPS1", the self-test record's).
pub const STORED_MANIFEST_MAGIC: u32 = 0x314D_534E;
/// The longest manifest the stored-manifest part keeps (today's are 280 bytes).
pub const MAX_STORED_MANIFEST_BYTES: usize = 448;
/// The stored manifest's offset in the descriptor sector.
const STORED_AT: u32 = 512;
/// The stored-manifest part's size.
pub(crate) const STORED_BYTES: usize = 512;
const STORED_BODY_AT: usize = 8;
const PART_BYTES: usize = 128;
const CONFIRMED_AT: u32 = 128;
const REVOKED_AT: u32 = 256;
const CRC_AT: usize = 124;
const SELFTEST_DIGEST_AT: usize = 48;
const SELFTEST_LEN_AT: usize = 80;
const RESERVED_AT: usize = 84;

/// The self-test record a slot holds beside its pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SelfTestRef {
    /// Its SHA-256 (the manifest's `selftest_digest`).
    pub(crate) digest: [u8; 32],
    /// Its length.
    pub(crate) len: u32,
}

/// Slot offset of the self-test record of a pack `pack_len` bytes long on a flash of type
/// `F`: the next erase boundary.
pub(crate) const fn selftest_offset<F: NorFlash>(pack_len: u32) -> u64 {
    let erase = F::ERASE_SIZE as u64;
    (pack_len as u64).div_ceil(erase) * erase
}

/// What a slot's descriptor says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub(crate) pack: PackId,
    pub(crate) selftest: Option<SelfTestRef>,
    pub(crate) confirmed: bool,
    pub(crate) revoked: bool,
}

/// Erases `slot`'s descriptor sector: the slot describes nothing until [`write`].
pub(crate) fn erase<F: NorFlash>(flash: &mut F, layout: &Layout, slot: Slot) -> Result<(), Error> {
    let at = layout.descriptor::<F>(slot);
    flash.erase(at, at + F::ERASE_SIZE as u32)?;
    Ok(())
}

/// Programs the record for `pack` (on a sector [`erase`]d in this power cycle) and reads it back.
pub(crate) fn write<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
    pack: &PackId,
    selftest: Option<&SelfTestRef>,
    key: Option<&DeviceKey>,
) -> Result<(), Error> {
    let at = layout.descriptor::<F>(slot);
    let record = encode(pack, selftest, key);
    if record::program(flash, &[at], &record, &mut [0u8; PART_BYTES])? {
        Ok(())
    } else {
        Err(Error::DescriptorReadBack { slot })
    }
}

/// Programs the stored manifest `manifest` (on a sector [`erase`]d in this power cycle, before
/// [`write`]) and reads it back, in `buf` (at least 2 × [`STORED_BYTES`]: the part, then the
/// read-back's). Nothing on a flash whose sectors have no room for it.
pub(crate) fn write_manifest<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
    manifest: &[u8],
    key: Option<&DeviceKey>,
    buf: &mut [u8],
) -> Result<(), Error> {
    if !layout.stores_manifest::<F>() {
        return Ok(());
    }
    if manifest.len() > MAX_STORED_MANIFEST_BYTES || buf.len() < 2 * STORED_BYTES {
        // Longer than the part keeps (no parser today makes one): the boot check would refuse
        // the slot for good, so the install fails as a local fault would.
        return Err(Error::DescriptorReadBack { slot });
    }
    let (part, scratch) = buf.split_at_mut(STORED_BYTES);
    let scratch = &mut scratch[..STORED_BYTES];
    encode_stored(part, manifest, key);
    let at = layout.descriptor::<F>(slot) + STORED_AT;
    if record::program(flash, &[at], part, scratch)? {
        Ok(())
    } else {
        Err(Error::DescriptorReadBack { slot })
    }
}

/// Reads `slot`'s stored manifest into `buf` (at least [`STORED_BYTES`]): the range of `buf`
/// that holds the manifest's bytes, or `None` when the part is blank, torn, rewritten without
/// the device key or malformed (read again when it does not check).
pub(crate) fn read_manifest<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
    key: Option<&DeviceKey>,
    buf: &mut [u8],
) -> Result<Option<core::ops::Range<usize>>, Error> {
    if !layout.stores_manifest::<F>() {
        return Ok(None);
    }
    let part = &mut buf[..STORED_BYTES];
    let at = layout.descriptor::<F>(slot) + STORED_AT;
    if record::read(flash, at, part, STORED_MANIFEST_MAGIC, key)? != record::Read::Framed {
        return Ok(None);
    }
    Ok(stored_range(part))
}

#[cfg(test)]
fn decode_stored(part: &[u8], key: Option<&DeviceKey>) -> Option<core::ops::Range<usize>> {
    if !record::is_framed(part, STORED_MANIFEST_MAGIC, key) {
        return None;
    }
    stored_range(part)
}

/// Frames `manifest` (at most [`MAX_STORED_MANIFEST_BYTES`]) as the stored-manifest `part`.
fn encode_stored(part: &mut [u8], manifest: &[u8], key: Option<&DeviceKey>) {
    let end = STORED_BODY_AT + manifest.len();
    part[4..STORED_BODY_AT].copy_from_slice(&(manifest.len() as u32).to_le_bytes());
    part[STORED_BODY_AT..end].copy_from_slice(manifest);
    part[end..].fill(0);
    record::frame(part, STORED_MANIFEST_MAGIC, key);
}

/// Where a framed stored-manifest part keeps its manifest: its length in range and the padding
/// zero, or `None`.
fn stored_range(part: &[u8]) -> Option<core::ops::Range<usize>> {
    let len = record::word(part, 4) as usize;
    if len == 0 || len > MAX_STORED_MANIFEST_BYTES {
        return None;
    }
    let end = STORED_BODY_AT + len;
    part[end..STORED_BYTES - 4]
        .iter()
        .all(|&b| b == 0)
        .then_some(STORED_BODY_AT..end)
}

/// Programs the confirmed mark (after the journal confirmed the slot's pending pack).
pub(crate) fn mark_confirmed<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
) -> Result<(), Error> {
    flash.write(
        layout.descriptor::<F>(slot) + CONFIRMED_AT,
        &[0; PART_BYTES],
    )?;
    Ok(())
}

/// Programs the revoked mark (after the journal gave the slot's pending pack up).
pub(crate) fn mark_revoked<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
) -> Result<(), Error> {
    flash.write(layout.descriptor::<F>(slot) + REVOKED_AT, &[0; PART_BYTES])?;
    Ok(())
}

/// `slot`'s descriptor, if its record decodes (read again when it does not).
pub(crate) fn read<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    slot: Slot,
    key: Option<&DeviceKey>,
) -> Result<Option<Descriptor>, Error> {
    let at = layout.descriptor::<F>(slot);
    let mut buf = [0u8; PART_BYTES];
    if record::read(flash, at, &mut buf, DESCRIPTOR_MAGIC, key)? != record::Read::Framed {
        return Ok(None);
    }
    let Some((pack, selftest)) = decode(&buf, layout.pack_capacity::<F>(), key) else {
        return Ok(None);
    };
    if let Some(t) = &selftest {
        let end = selftest_offset::<F>(pack.len) + u64::from(t.len);
        if end > u64::from(layout.pack_capacity::<F>()) {
            return Ok(None);
        }
    }
    Ok(Some(Descriptor {
        pack,
        selftest,
        confirmed: mark_set(flash, at + CONFIRMED_AT)?,
        revoked: mark_set(flash, at + REVOKED_AT)?,
    }))
}

fn mark_set<F: NorFlash>(flash: &mut F, at: u32) -> Result<bool, Error> {
    let mut buf = [0u8; PART_BYTES];
    let mut touched = 0;
    for _ in 0..3 {
        flash.read(at, &mut buf)?;
        if buf.iter().any(|&b| b != 0xFF) {
            touched += 1;
        }
    }
    Ok(touched >= 2)
}

fn encode(
    pack: &PackId,
    selftest: Option<&SelfTestRef>,
    key: Option<&DeviceKey>,
) -> [u8; PART_BYTES] {
    let mut r = [0u8; PART_BYTES];
    r[4..8].copy_from_slice(&pack.len.to_le_bytes());
    r[8..16].copy_from_slice(&pack.sequence.to_le_bytes());
    r[16..48].copy_from_slice(&pack.sha256);
    if let Some(t) = selftest {
        r[SELFTEST_DIGEST_AT..SELFTEST_LEN_AT].copy_from_slice(&t.digest);
        r[SELFTEST_LEN_AT..RESERVED_AT].copy_from_slice(&t.len.to_le_bytes());
    }
    record::frame(&mut r, DESCRIPTOR_MAGIC, key);
    r
}

fn decode(
    r: &[u8; PART_BYTES],
    pack_capacity: u32,
    key: Option<&DeviceKey>,
) -> Option<(PackId, Option<SelfTestRef>)> {
    if !record::is_framed(r, DESCRIPTOR_MAGIC, key)
        || r[RESERVED_AT..CRC_AT].iter().any(|&b| b != 0)
    {
        return None;
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&r[SELFTEST_DIGEST_AT..SELFTEST_LEN_AT]);
    let selftest = match (digest == [0; 32], record::word(r, SELFTEST_LEN_AT)) {
        (true, 0) => None,
        (false, len) if len > 0 => Some(SelfTestRef { digest, len }),
        // A digest without a length, or a length without a digest.
        _ => return None,
    };
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&r[8..16]);
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(&r[16..48]);
    let pack = PackId {
        sequence: u64::from_le_bytes(seq),
        len: record::word(r, 4),
        sha256,
    };
    let min = npub_core::format::HEADER_BYTES;
    ((min..=pack_capacity).contains(&pack.len) && pack.sequence > 0).then_some((pack, selftest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_decodes_to_what_was_encoded_and_rejects_every_bit_flip() {
        let pack = PackId {
            sequence: 7,
            len: 900,
            sha256: [0x3C; 32],
        };
        let r = encode(&pack, None, None);
        assert_eq!(decode(&r, 1000, None), Some((pack, None)));
        assert_eq!(decode(&r, 899, None), None, "longer than the slot");
        let key = DeviceKey::new([5; 32]);
        assert_eq!(
            decode(&encode(&pack, None, Some(&key)), 1000, Some(&key)),
            Some((pack, None))
        );
        let t = SelfTestRef {
            digest: [0xA7; 32],
            len: 60,
        };
        let with = encode(&pack, Some(&t), None);
        assert_eq!(decode(&with, 1000, None), Some((pack, Some(t))));
        for bit in 0..PART_BYTES * 8 {
            let mut bad = with;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&bad, 1000, None), None, "bit {bit}");
        }
        assert_eq!(
            decode(&r, 1000, Some(&key)),
            None,
            "a CRC where a MAC belongs"
        );
        for bit in 0..PART_BYTES * 8 {
            let mut bad = r;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&bad, 1000, None), None, "bit {bit}");
        }
    }

    #[test]
    fn a_stored_manifest_of_any_length_decodes_and_rejects_every_bit_flip() {
        let key = DeviceKey::new([9; 32]);
        for len in [1, 280, 312, MAX_STORED_MANIFEST_BYTES] {
            let manifest: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let mut part = [0xFFu8; STORED_BYTES];
            encode_stored(&mut part, &manifest, None);
            let range = decode_stored(&part, None).expect("decodes");
            assert_eq!(&part[range], &manifest[..], "{len} bytes");
            assert_eq!(
                decode_stored(&part, Some(&key)),
                None,
                "a CRC where a MAC belongs"
            );
            let mut sealed = [0xFFu8; STORED_BYTES];
            encode_stored(&mut sealed, &manifest, Some(&key));
            assert!(decode_stored(&sealed, Some(&key)).is_some());
            assert_eq!(
                decode_stored(&sealed, None),
                None,
                "a MAC where a CRC belongs"
            );
            for bit in 0..STORED_BYTES * 8 {
                let mut bad = part;
                bad[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(decode_stored(&bad, None), None, "{len} bytes, bit {bit}");
            }
        }
    }

    #[test]
    fn rejects_a_stored_manifest_whose_length_runs_past_the_part() {
        let mut part = [0u8; STORED_BYTES];
        encode_stored(&mut part, &[1; 8], None);
        part[4..8].copy_from_slice(&(MAX_STORED_MANIFEST_BYTES as u32 + 1).to_le_bytes());
        record::frame(&mut part, STORED_MANIFEST_MAGIC, None);
        assert_eq!(decode_stored(&part, None), None);
        part[4..8].copy_from_slice(&0u32.to_le_bytes());
        record::frame(&mut part, STORED_MANIFEST_MAGIC, None);
        assert_eq!(decode_stored(&part, None), None);
    }
}
