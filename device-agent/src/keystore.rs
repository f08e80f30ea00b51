//! The keyring in flash: the signing keys the device trusts and the sequence of the last keyring
//! update it applied, kept so that a key revoked once stays revoked across power cycles; and
//! beside it, in the same commit, the release trust (release keys and policies, issue 34).
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
//! |     17 |      1 | `release`         | 1: a release record of this generation is in the bank (below); else 0 |
//! |     18 |      2 | reserved          | 0                                                        |
//! |     20 | 36 × 12 | entries          | `public_key` (32), `revoked` (1: 0 or 1), reserved (3)   |
//! |    452 |     56 | reserved          | 0                                                        |
//! |    508 |      4 | `crc`             | CRC-32 (IEEE) of bytes 0..508; with a device key their MAC (`seal.rs`) |
//!
//! Key ids are not stored: they are derived from the public keys. Stability: version 1 of this
//! layout (the magic's last byte); a firmware that changes it must change the magic. An unknown
//! magic reads as "nothing stored": the factory keyring, then the updates again from the server.
//! Byte 17 (`release`, 0 or 1) was reserved before release signatures and is 0 while the
//! release trust is inactive, so such a device writes exactly the records it wrote before.
//!
//! ## The release trust (issue 34)
//!
//! While the device's release trust is active (a release key or policy: factory, or from a
//! root-signed record), each commit also writes a release record into the same bank, two copies
//! right after the keyring's, **before** the keyring's copies, and sets the keyring record's
//! `release` byte. The keyring record stays the commit point: a bank whose keyring record says
//! `release` 1 counts only if one copy of its release record decodes with the same
//! `generation` (else it is skipped like a torn copy, and the other bank's durable record
//! stands). So the keyring, its update sequence and the release trust change together, old or
//! new, never a mix. A bank then needs [`RELEASE_BANK_BYTES`] (a layout with smaller banks and
//! an active release trust fails the commit with `Error::ReleaseTrustNoRoom`).
//!
//! | Offset | Size   | Field             | Meaning                                                  |
//! |-------:|-------:|-------------------|----------------------------------------------------------|
//! |      0 |      4 | `magic`           | [`RELEASE_MAGIC`], bytes `4e 50 52 54` ("NPRT")           |
//! |      4 |      4 | `generation`      | the keyring record's, in the same bank                   |
//! |      8 |      1 | `key_count`       | release keys, at most `DEVICE_RELEASE_KEYS` (8)          |
//! |      9 |      1 | `policy_count`    | policies, at most `DEVICE_RELEASE_POLICIES` (8)          |
//! |     10 |      2 | reserved          | 0                                                        |
//! |     12 | 33 × 8 | keys              | `public_key` (32), `revoked` (1: 0 or 1)                  |
//! |    276 | 44 × 8 | policies          | npub-core's `ReleasePolicy::encode` (44 bytes each)       |
//! |    628 |    136 | reserved          | 0                                                        |
//! |    764 |      4 | `crc`             | CRC-32 (IEEE) of bytes 0..764; with a device key their MAC |
use embedded_storage::nor_flash::NorFlash;
use npub_core::manifest::Keyring;
use npub_core::release::{
    DEVICE_RELEASE_KEYS, DEVICE_RELEASE_POLICIES, DeviceReleaseTrust, POLICY_BYTES, ReleasePolicy,
};

use crate::error::Error;
use crate::layout::Layout;
use crate::record;
use crate::seal::DeviceKey;

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

/// `"NPRT"` little-endian: a release-trust record of version 1 of its layout.
pub const RELEASE_MAGIC: u32 = 0x5452_504E;
/// A release-trust record's size: a multiple of 256, so any `WRITE_SIZE` up to 256 divides it.
pub const RELEASE_RECORD_BYTES: usize = 768;
/// The bank size a layout needs to keep an active release trust: the keyring record and the
/// release record, two copies each.
pub const RELEASE_BANK_BYTES: usize = 2 * KEYRING_RECORD_BYTES + 2 * RELEASE_RECORD_BYTES;
/// Release keys the factory trust may hold (the rest of the capacity is for rotations).
pub const MAX_FACTORY_RELEASE_KEYS: usize = 4;

const RELEASE_KEYS_AT: usize = 12;
const RELEASE_KEY_BYTES: usize = 33;
const RELEASE_POLICIES_AT: usize = RELEASE_KEYS_AT + DEVICE_RELEASE_KEYS * RELEASE_KEY_BYTES;
const _: () = assert!(
    RELEASE_POLICIES_AT + DEVICE_RELEASE_POLICIES * POLICY_BYTES <= RELEASE_RECORD_BYTES - 4
);

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
    release: [[u8; 32]; MAX_FACTORY_RELEASE_KEYS],
    release_count: usize,
    release_roots: [[u8; 32]; MAX_ROOTS],
    release_root_count: usize,
    device_key: Option<DeviceKey>,
}

impl Trust {
    /// Trusts nothing: every manifest and every keyring update is refused.
    pub const NONE: Trust = Trust {
        factory: [[0; 32]; KEYRING_CAPACITY],
        factory_count: 0,
        roots: [[0; 32]; MAX_ROOTS],
        root_count: 0,
        release: [[0; 32]; MAX_FACTORY_RELEASE_KEYS],
        release_count: 0,
        release_roots: [[0; 32]; MAX_ROOTS],
        release_root_count: 0,
        device_key: None,
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

    /// This trust with factory release keys (the release trust files) and the release roots
    /// (which alone may sign keyring updates of actions 4 to 8: release keys and policies).
    /// With no release key the release trust stays inactive until a root-signed record adds
    /// one, and the device installs as it did before release signatures. Refuses more than
    /// [`MAX_FACTORY_RELEASE_KEYS`] keys or [`MAX_ROOTS`] release roots, and keys npub-core
    /// refuses (invalid, weak, twice).
    #[inline(never)]
    pub fn with_release(
        mut self,
        keys: &[[u8; 32]],
        release_roots: &[[u8; 32]],
    ) -> Result<Self, Error> {
        if keys.len() > MAX_FACTORY_RELEASE_KEYS {
            return Err(Error::TooManyKeys {
                what: "factory release keys",
                count: keys.len(),
                max: MAX_FACTORY_RELEASE_KEYS,
            });
        }
        if release_roots.len() > MAX_ROOTS {
            return Err(Error::TooManyKeys {
                what: "release roots",
                count: release_roots.len(),
                max: MAX_ROOTS,
            });
        }
        self.release[..keys.len()].copy_from_slice(keys);
        self.release_count = keys.len();
        self.release_roots[..release_roots.len()].copy_from_slice(release_roots);
        self.release_root_count = release_roots.len();
        self.factory_release()?;
        Ok(self)
    }

    /// This trust with the device-unique key its state in flash (journal, keyring, release
    /// trust, slot descriptors) is authenticated under: each record's check word becomes a MAC
    /// under it instead of a CRC, and a record whose MAC fails is read as a torn one
    /// (`seal.rs` says what that protects against, and why the key must be there from the
    /// first boot).
    pub const fn with_device_key(mut self, key: DeviceKey) -> Self {
        self.device_key = Some(key);
        self
    }

    /// The device key, if the firmware supplied one.
    pub const fn device_key(&self) -> Option<&DeviceKey> {
        self.device_key.as_ref()
    }

    /// The release roots.
    pub fn release_roots(&self) -> &[[u8; 32]] {
        &self.release_roots[..self.release_root_count]
    }

    /// The factory release keys.
    pub fn release_keys(&self) -> &[[u8; 32]] {
        &self.release[..self.release_count]
    }

    /// The release trust a device starts with when its keyring area holds none: the factory
    /// release keys, no policy (one signature by any of them, `docs/release.md`).
    #[inline(never)]
    pub fn factory_release(&self) -> Result<DeviceReleaseTrust, Error> {
        let mut trust = DeviceReleaseTrust::new();
        for key in self.release_keys() {
            trust.add_key(key).map_err(Error::Rejected)?;
        }
        Ok(trust)
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
    /// What the records are authenticated under (`seal.rs`).
    key: Option<DeviceKey>,
}

impl KeyStore {
    /// Reads both banks: the store and the newest keyring (`None`: the area holds nothing).
    /// Programs nothing. A layout without a keyring area mounts empty.
    #[inline(never)]
    pub(crate) fn mount<F: NorFlash>(
        flash: &mut F,
        layout: &Layout,
        key: Option<&DeviceKey>,
    ) -> Result<(Self, Option<Stored>), Error> {
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
        let mut best_release = None;
        if layout.has_keyring() {
            for bank in 0..2 {
                let mut found = [None; 2];
                for (copy, buf) in copies.iter_mut().enumerate() {
                    found[copy] = read_copy(flash, record_offset(layout, bank, copy), buf, key)?;
                }
                let (pick, durable) = match found {
                    [Some(_), Some(_)] if copies[0] == copies[1] => (0, true),
                    [Some(a), Some(b)] => (usize::from(b > a), false),
                    [Some(_), None] => (0, false),
                    [None, Some(_)] => (1, false),
                    [None, None] => continue,
                };
                let generation = record::word(&copies[pick], 4);
                let release = if copies[pick][17] == 1 {
                    match read_release(flash, layout, bank, generation, key)? {
                        Some(release) => Some(release),
                        // Its release record never became whole: the commit did not reach its
                        // keyring copies, this bank is skipped like a torn copy.
                        None => continue,
                    }
                } else {
                    None
                };
                if newest.is_none_or(|n| generation > n.generation) {
                    newest = Some(Newest {
                        bank,
                        generation,
                        durable,
                    });
                    best = copies[pick];
                    best_release = release;
                }
            }
        }
        let keyring = newest.and_then(|_| decode(&best, key)).map(|(_, k)| k);
        let newest = newest.filter(|_| keyring.is_some());
        let stored = keyring.map(|keyring| Stored {
            keyring,
            release: best_release,
        });
        let key = key.copied();
        Ok((KeyStore { newest, key }, stored))
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
        release: &DeviceReleaseTrust,
    ) -> Result<(), Error> {
        if !layout.has_keyring() {
            return Ok(());
        }
        const {
            assert!(
                RELEASE_RECORD_BYTES % F::WRITE_SIZE == 0,
                "WRITE_SIZE must divide a release record"
            );
        }
        let active = release.is_active();
        if active && (layout.keyring_bank_bytes as usize) < RELEASE_BANK_BYTES {
            return Err(Error::ReleaseTrustNoRoom {
                bank_bytes: layout.keyring_bank_bytes,
                needed: RELEASE_BANK_BYTES as u32,
            });
        }
        let (bank, generation) = match self.newest {
            None => (0, 1),
            Some(n) => (
                if n.durable { 1 - n.bank } else { n.bank },
                n.generation.checked_add(1).ok_or(Error::KeyringExhausted)?,
            ),
        };
        let key = self.key;
        let mut record = encode(generation, keyring, key.as_ref());
        if active {
            record[17] = 1;
            record::frame(&mut record, KEYRING_MAGIC, key.as_ref());
        }
        for _ in 0..COMMIT_ATTEMPTS {
            let start = layout.keyring_bank(bank);
            if self.newest.is_some_and(|n| n.bank == bank) {
                // Erasing the bank that holds the newest (one-copy) record: from here on the
                // other bank's record is what the area holds.
                self.newest = None;
            }
            flash.erase(start, start + layout.keyring_bank_bytes)?;
            // The release record first: the keyring record, written next, is the commit point.
            if active && !program_release(flash, layout, (bank, generation), release, key.as_ref())?
            {
                continue;
            }
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
    key: Option<&DeviceKey>,
) -> Result<Option<u32>, Error> {
    Ok(match record::read(flash, at, buf, KEYRING_MAGIC, key)? {
        record::Read::Framed => decode(buf, key).map(|(generation, _)| generation),
        record::Read::Blank | record::Read::Bad => None,
    })
}

/// What the keyring area holds: the keyring, and the release trust when its record says one was
/// written beside it (`None`: the release trust was inactive at that commit; the factory release
/// trust stands in).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) keyring: DeviceKeyring,
    pub(crate) release: Option<DeviceReleaseTrust>,
}

fn release_offset(layout: &Layout, bank: usize, copy: usize) -> u32 {
    layout.keyring_bank(bank) + (2 * KEYRING_RECORD_BYTES + copy * RELEASE_RECORD_BYTES) as u32
}

/// The release trust in `bank` with `generation`, from either copy; `None` when neither holds
/// it (or the bank is too small to hold one).
#[inline(never)]
fn read_release<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    bank: usize,
    generation: u32,
    key: Option<&DeviceKey>,
) -> Result<Option<DeviceReleaseTrust>, Error> {
    if (layout.keyring_bank_bytes as usize) < RELEASE_BANK_BYTES {
        return Ok(None);
    }
    let mut buf = [0u8; RELEASE_RECORD_BYTES];
    for copy in 0..2 {
        let at = release_offset(layout, bank, copy);
        if record::read(flash, at, &mut buf, RELEASE_MAGIC, key)? == record::Read::Framed
            && record::word(&buf, 4) == generation
            && let Some(trust) = decode_release(&buf)
        {
            return Ok(Some(trust));
        }
    }
    Ok(None)
}

/// Programs both copies of the release record and reads them back.
#[inline(never)]
fn program_release<F: NorFlash>(
    flash: &mut F,
    layout: &Layout,
    (bank, generation): (usize, u32),
    release: &DeviceReleaseTrust,
    key: Option<&DeviceKey>,
) -> Result<bool, Error> {
    let record = encode_release(generation, release, key);
    let copies = [0, 1].map(|copy| release_offset(layout, bank, copy));
    record::program(flash, &copies, &record, &mut [0u8; RELEASE_RECORD_BYTES])
}

/// The release record for `trust` at `generation` (the module's second table).
pub(crate) fn encode_release(
    generation: u32,
    trust: &DeviceReleaseTrust,
    key: Option<&DeviceKey>,
) -> [u8; RELEASE_RECORD_BYTES] {
    let mut r = [0u8; RELEASE_RECORD_BYTES];
    r[4..8].copy_from_slice(&generation.to_le_bytes());
    let mut keys = 0;
    for (i, entry) in trust.keys().enumerate() {
        let at = RELEASE_KEYS_AT + i * RELEASE_KEY_BYTES;
        r[at..at + 32].copy_from_slice(entry.public_key());
        r[at + 32] = u8::from(entry.is_revoked());
        keys += 1;
    }
    let mut policies = 0;
    for (i, policy) in trust.policies().enumerate() {
        let at = RELEASE_POLICIES_AT + i * POLICY_BYTES;
        r[at..at + POLICY_BYTES].copy_from_slice(&policy.encode());
        policies += 1;
    }
    r[8] = keys;
    r[9] = policies;
    record::frame(&mut r, RELEASE_MAGIC, key);
    r
}

/// The release trust a framed release record holds, or `None` when it is not a valid one.
fn decode_release(r: &[u8; RELEASE_RECORD_BYTES]) -> Option<DeviceReleaseTrust> {
    let keys = usize::from(r[8]);
    let policies = usize::from(r[9]);
    if keys > DEVICE_RELEASE_KEYS || policies > DEVICE_RELEASE_POLICIES || r[10..12] != [0; 2] {
        return None;
    }
    let mut trust = DeviceReleaseTrust::new();
    for i in 0..keys {
        let at = RELEASE_KEYS_AT + i * RELEASE_KEY_BYTES;
        let mut key = [0u8; 32];
        key.copy_from_slice(&r[at..at + 32]);
        let id = trust.add_key(&key).ok()?;
        match r[at + 32] {
            0 => {}
            1 => trust.revoke_key(id).ok()?,
            _ => return None,
        }
    }
    for i in 0..policies {
        let at = RELEASE_POLICIES_AT + i * POLICY_BYTES;
        let mut bytes = [0u8; POLICY_BYTES];
        bytes.copy_from_slice(&r[at..at + POLICY_BYTES]);
        trust.set_policy(ReleasePolicy::decode(&bytes).ok()?).ok()?;
    }
    Some(trust)
}

fn record_offset(layout: &Layout, bank: usize, copy: usize) -> u32 {
    layout.keyring_bank(bank) + (copy * KEYRING_RECORD_BYTES) as u32
}

/// The record bytes for `keyring` at `generation` (see the module's table).
pub(crate) fn encode(
    generation: u32,
    keyring: &DeviceKeyring,
    key: Option<&DeviceKey>,
) -> [u8; KEYRING_RECORD_BYTES] {
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
    record::frame(&mut r, KEYRING_MAGIC, key);
    r
}

/// The generation and keyring a record holds, or `None` when it is not a whole, valid one.
fn decode(r: &[u8; KEYRING_RECORD_BYTES], key: Option<&DeviceKey>) -> Option<(u32, DeviceKeyring)> {
    if !record::is_framed(r, KEYRING_MAGIC, key) {
        return None;
    }
    let count = usize::from(r[16]);
    if count > KEYRING_CAPACITY || r[17] > 1 || r[18..20] != [0; 2] {
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
        let r = encode(3, &ring, None);
        assert_eq!(decode(&r, None), Some((3, ring.clone())));
        let mut bad = r;
        bad[40] ^= 1;
        assert_eq!(decode(&bad, None), None);
        // Under a device key: the same bytes with a MAC for the check word, and a CRC refused.
        let key = DeviceKey::new([9; 32]);
        let sealed = encode(3, &ring, Some(&key));
        assert_eq!(sealed[..CRC_AT], r[..CRC_AT]);
        assert_eq!(decode(&sealed, Some(&key)), Some((3, ring)));
        assert_eq!(decode(&r, Some(&key)), None, "a CRC is not a MAC");
        assert_eq!(decode(&sealed, Some(&DeviceKey::new([8; 32]))), None);
        assert_eq!(decode(&sealed, None), None, "a MAC is not a CRC");
    }
}
