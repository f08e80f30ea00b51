//! The keyring in flash: the signing keys the device trusts and the sequence of the last keyring
//! update it applied, kept so that a key revoked once stays revoked across power cycles.
//!
//! ## Area, banks, copies
//!
//! Two banks of `keyring_bank_bytes` each ([`Layout::keyring`](crate::Layout)); a bank holds one
//! record, written twice (copy 0 at the bank's start, copy 1 right after it) and read back. A
//! commit never touches the bank holding the newest record that is in both copies (the newest
//! *durable* record): it erases the other bank, programs both copies there and reads them back.
//! The newest record is the highest `generation` that decodes. Keyring updates are rare (an
//! operator's rotation), so one erase per commit costs nothing that matters.
//!
//! | what the area holds at power-on                  | mount finds                                          |
//! |--------------------------------------------------|------------------------------------------------------|
//! | nothing (a factory-fresh device)                  | nothing: the agent uses the factory keyring, writes nothing |
//! | a commit cut in its erase or before its first copy | the old keyring                                     |
//! | a commit cut in its first copy (torn)              | the old keyring, or the new one if the torn copy decodes; then it is in one copy and is committed again into its own bank (below) |
//! | a commit cut in or before its second copy          | the new keyring from the first copy, committed again |
//! | a misread copy (one read glitch)                   | a copy that does not decode is read again ([`MISREAD_REREADS`] times) before it is believed torn; and its twin holds the same record |
//! | a record that decodes but is not a keyring (a key twice, an invalid point) | skipped like a torn copy      |
//!
//! A newest record found in one copy only is committed again *into its own bank* (the rule
//! above: it is not durable, so the other bank, which holds the previous durable record, is
//! kept). A cut during that leaves the previous record: old or new, never neither. A device
//! that comes back with the old keyring fetches the updates again at its next poll, before it
//! verifies a manifest, because the server's announced sequence is above its own.
//!
//! ## Record (512 bytes, little-endian)
//!
//! | Offset | Size   | Field             | Meaning                                                  |
//! |-------:|-------:|-------------------|----------------------------------------------------------|
//! |      0 |      4 | `magic`           | [`KEYRING_MAGIC`], bytes `4e 50 4b 52` ("NPKR")           |
//! |      4 |      4 | `generation`      | above the generation of every record the area held at the commit |
//! |      8 |      8 | `update_sequence` | sequence of the last keyring update applied (0: none)    |
//! |     16 |      1 | `count`           | entries in use, at most [`KEYRING_CAPACITY`]             |
//! |     17 |      3 | reserved          | 0                                                        |
//! |     20 | 36 × 12 | entries          | `public_key` (32), `revoked` (1: 0 or 1), reserved (3)   |
//! |    452 |     56 | reserved          | 0                                                        |
//! |    508 |      4 | `crc`             | CRC-32 (IEEE) of bytes 0..508                            |
//!
//! Key ids are not stored: they are derived from the public keys. Stability: version 1 of this
//! layout (the magic's last byte); a firmware that changes it must change the magic. An unknown
//! magic reads as "nothing stored": the factory keyring, then the updates again from the server.
use embedded_storage::nor_flash::NorFlash;
use npub_core::manifest::Keyring;

use crate::error::Error;
use crate::layout::Layout;
use crate::record;

/// Keys a device's keyring holds, trusted and revoked (a revoked key keeps its entry for good).
pub const KEYRING_CAPACITY: usize = 12;
/// Root keys (which sign keyring updates) a device is built with: the server's, and one spare
/// for an offline root.
pub const MAX_ROOTS: usize = 2;
pub use crate::record::KEYRING_RECORD_BYTES;
/// `"NPKR"` little-endian: a keyring record of version 1 of this layout.
pub const KEYRING_MAGIC: u32 = 0x524B_504E;
pub use crate::record::MISREAD_REREADS;
/// Erase-program-read-back rounds one commit may use when copies do not read back right.
pub const COMMIT_ATTEMPTS: usize = 3;

/// The keyring type the agent keeps.
pub type DeviceKeyring = Keyring<KEYRING_CAPACITY>;

const ENTRIES_AT: usize = 20;
const ENTRY_BYTES: usize = 36;
const CRC_AT: usize = KEYRING_RECORD_BYTES - 4;
const _: () = assert!(ENTRIES_AT + KEYRING_CAPACITY * ENTRY_BYTES <= CRC_AT);

/// What the firmware trusts before any keyring update: the factory signing keys (used only
/// while the keyring area holds nothing) and the root keys that sign keyring updates. A plain
/// value, so that firmware builds it from keys read at start-up as easily as from constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust {
    factory: [[u8; 32]; KEYRING_CAPACITY],
    factory_count: usize,
    roots: [[u8; 32]; MAX_ROOTS],
    root_count: usize,
}

impl Trust {
    /// Trusts nothing: every manifest and every keyring update is refused.
    pub const NONE: Trust = Trust {
        factory: [[0; 32]; KEYRING_CAPACITY],
        factory_count: 0,
        roots: [[0; 32]; MAX_ROOTS],
        root_count: 0,
    };

    /// `factory` signing keys and `roots`. Refuses more than [`KEYRING_CAPACITY`] factory keys or
    /// [`MAX_ROOTS`] roots, and a factory keyring npub-core refuses (an invalid or weak key, one
    /// twice).
    #[inline(never)]
    pub fn new(factory: &[[u8; 32]], roots: &[[u8; 32]]) -> Result<Self, Error> {
        if factory.len() > KEYRING_CAPACITY {
            return Err(Error::TooManyKeys {
                what: "factory signing keys",
                count: factory.len(),
                max: KEYRING_CAPACITY,
            });
        }
        if roots.len() > MAX_ROOTS {
            return Err(Error::TooManyKeys {
                what: "root keys",
                count: roots.len(),
                max: MAX_ROOTS,
            });
        }
        let mut trust = Trust::NONE;
        trust.factory[..factory.len()].copy_from_slice(factory);
        trust.factory_count = factory.len();
        trust.roots[..roots.len()].copy_from_slice(roots);
        trust.root_count = roots.len();
        trust.factory_keyring()?;
        Ok(trust)
    }

    /// The root keys.
    pub fn roots(&self) -> &[[u8; 32]] {
        &self.roots[..self.root_count]
    }

    /// The factory signing keys.
    pub fn factory(&self) -> &[[u8; 32]] {
        &self.factory[..self.factory_count]
    }

    /// The keyring a device starts with when its keyring area holds nothing.
    pub fn factory_keyring(&self) -> Result<DeviceKeyring, Error> {
        let mut keyring = DeviceKeyring::new();
        for key in self.factory() {
            keyring.add(key).map_err(Error::Rejected)?;
        }
        Ok(keyring)
    }
}

/// Where the newest record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Newest {
    bank: usize,
    generation: u32,
    /// Found in both copies of its bank.
    durable: bool,
}

/// The mounted keyring area: where the newest record is, and so where the next one goes.
#[derive(Debug, Clone)]
pub(crate) struct KeyStore {
    newest: Option<Newest>,
}

impl KeyStore {
    /// Reads both banks: the store and the newest keyring (`None`: the area holds nothing).
    /// Programs nothing. A layout without a keyring area mounts empty.
    #[inline(never)]
    pub(crate) fn mount<F: NorFlash>(
        flash: &mut F,
        layout: &Layout,
    ) -> Result<(Self, Option<DeviceKeyring>), Error> {
        const {
            assert!(
                KEYRING_RECORD_BYTES % F::WRITE_SIZE == 0,
                "WRITE_SIZE must divide a keyring record"
            );
            assert!(
                KEYRING_RECORD_BYTES % F::READ_SIZE == 0,
                "READ_SIZE must divide a keyring record"
            );
        }
        // Copies are compared and chosen as bytes (a record's bytes and its keyring are one to
        // one), and only the newest is decoded into the keyring it returns.
        let mut newest: Option<Newest> = None;
        let mut copies = [[0u8; KEYRING_RECORD_BYTES]; 2];
        let mut best = [0u8; KEYRING_RECORD_BYTES];
        if layout.has_keyring() {
            for bank in 0..2 {
                let mut found = [None; 2];
                for (copy, buf) in copies.iter_mut().enumerate() {
                    found[copy] = read_copy(flash, record_offset(layout, bank, copy), buf)?;
                }
                let (pick, durable) = match found {
                    [Some(_), Some(_)] if copies[0] == copies[1] => (0, true),
                    [Some(a), Some(b)] => (usize::from(b > a), false),
                    [Some(_), None] => (0, false),
                    [None, Some(_)] => (1, false),
                    [None, None] => continue,
                };
                let generation = record::word(&copies[pick], 4);
                if newest.is_none_or(|n| generation > n.generation) {
                    newest = Some(Newest {
                        bank,
                        generation,
                        durable,
                    });
                    best = copies[pick];
                }
            }
        }
        let keyring = newest.and_then(|_| decode(&best)).map(|(_, k)| k);
        let newest = newest.filter(|_| keyring.is_some());
        Ok((KeyStore { newest }, keyring))
    }

    /// Whether the newest record is in one copy only, and should be committed again.
    pub(crate) fn needs_refresh(&self) -> bool {
        self.newest.is_some_and(|n| !n.durable)
    }

    /// Makes `keyring` durable (see the module's rules). On `Ok` it survives any later power cut
    /// and any single misread; on `Err` the area holds the previous durable keyring or this one.
    pub(crate) fn commit<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
        keyring: &DeviceKeyring,
    ) -> Result<(), Error> {
        if !layout.has_keyring() {
            return Ok(());
        }
        let (bank, generation) = match self.newest {
            None => (0, 1),
            Some(n) => (
                if n.durable { 1 - n.bank } else { n.bank },
                n.generation.checked_add(1).ok_or(Error::KeyringExhausted)?,
            ),
        };
        let record = encode(generation, keyring);
        for _ in 0..COMMIT_ATTEMPTS {
            let start = layout.keyring_bank(bank);
            if self.newest.is_some_and(|n| n.bank == bank) {
                // Erasing the bank that holds the newest (one-copy) record: from here on the
                // other bank's record is what the area holds.
                self.newest = None;
            }
            flash.erase(start, start + layout.keyring_bank_bytes)?;
            let copies = [0, 1].map(|copy| record_offset(layout, bank, copy));
            if record::program(flash, &copies, &record, &mut [0u8; KEYRING_RECORD_BYTES])? {
                self.newest = Some(Newest {
                    bank,
                    generation,
                    durable: true,
                });
                return Ok(());
            }
        }
        // The bank holds junk now; what the area holds is decided by the next mount. The next
        // commit goes to the same bank (not durable) with a generation above both.
        self.newest = Some(Newest {
            bank,
            generation,
            durable: false,
        });
        Err(Error::KeyringReadBack)
    }
}

/// Reads the copy at `at` into `buf`, again when it does not check: its generation when it holds
/// a keyring, `None` when it is blank or not a record.
fn read_copy<F: NorFlash>(
    flash: &mut F,
    at: u32,
    buf: &mut [u8; KEYRING_RECORD_BYTES],
) -> Result<Option<u32>, Error> {
    Ok(match record::read(flash, at, buf, KEYRING_MAGIC)? {
        record::Read::Framed => decode(buf).map(|(generation, _)| generation),
        record::Read::Blank | record::Read::Bad => None,
    })
}

fn record_offset(layout: &Layout, bank: usize, copy: usize) -> u32 {
    layout.keyring_bank(bank) + (copy * KEYRING_RECORD_BYTES) as u32
}

/// The record bytes for `keyring` at `generation` (see the module's table).
pub(crate) fn encode(generation: u32, keyring: &DeviceKeyring) -> [u8; KEYRING_RECORD_BYTES] {
    let mut r = [0u8; KEYRING_RECORD_BYTES];
    r[4..8].copy_from_slice(&generation.to_le_bytes());
    r[8..16].copy_from_slice(&keyring.update_sequence().to_le_bytes());
    let mut count = 0;
    for (i, entry) in keyring.entries().enumerate() {
        let at = ENTRIES_AT + i * ENTRY_BYTES;
        r[at..at + 32].copy_from_slice(entry.public_key());
        r[at + 32] = u8::from(entry.is_revoked());
        count += 1;
    }
    r[16] = count;
    record::frame(&mut r, KEYRING_MAGIC);
    r
}

/// The generation and keyring a record holds, or `None` when it is not a whole, valid one.
fn decode(r: &[u8; KEYRING_RECORD_BYTES]) -> Option<(u32, DeviceKeyring)> {
    if !record::is_framed(r, KEYRING_MAGIC) {
        return None;
    }
    let count = usize::from(r[16]);
    if count > KEYRING_CAPACITY || r[17..20] != [0; 3] {
        return None;
    }
    let mut keyring = DeviceKeyring::new();
    for i in 0..count {
        let at = ENTRIES_AT + i * ENTRY_BYTES;
        let mut key = [0u8; 32];
        key.copy_from_slice(&r[at..at + 32]);
        let id = keyring.add(&key).ok()?;
        match r[at + 32] {
            0 => {}
            1 => keyring.revoke(id).ok()?,
            _ => return None,
        }
    }
    let mut sequence = [0u8; 8];
    sequence.copy_from_slice(&r[8..16]);
    keyring.set_update_sequence(u64::from_le_bytes(sequence));
    Some((record::word(r, 4), keyring))
}

#[cfg(test)]
mod tests {
    use super::*;
    use npub_core::keypair::KeyPair;

    #[test]
    fn a_record_round_trips_with_revocations() {
        let mut ring = DeviceKeyring::new();
        let a = ring.add(&KeyPair::from_seed([1; 32]).public_key()).unwrap();
        ring.add(&KeyPair::from_seed([2; 32]).public_key()).unwrap();
        ring.revoke(a).unwrap();
        ring.set_update_sequence(7);
        let r = encode(3, &ring);
        assert_eq!(decode(&r), Some((3, ring)));
        let mut bad = r;
        bad[40] ^= 1;
        assert_eq!(decode(&bad), None);
    }
}
