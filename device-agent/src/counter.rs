//! The replay floor's second home: a counter that only goes up, outside the journal.
//!
//! The journal is mutable flash: it can be erased (a bad firmware, a flash tool, a layout
//! change), and then a device that kept its anti-replay state only there would take sequence 1
//! again. So the agent also raises a [`MonotonicCounter`] to every manifest sequence it consumes,
//! before it erases anything for that manifest, and takes `max(counter, journal)` as its floor.
//! The journal code never sees the counter and has no way to lower it.
//!
//! | implementation   | where                                                                      |
//! |------------------|----------------------------------------------------------------------------|
//! | [`NorCounter`]   | two erase sectors of any `NorFlash` (the RA8P1's data flash, a write-once area, or on the host the NOR emulation): an append-only log of values, the largest valid one wins |
//! | your own         | an OTP / monotonic-counter peripheral: implement the trait                 |
//! | [`JournalOnly`]  | none: the floor lives in the journal only (boards without a counter, the QEMU demo) |
//!
//! ## `NorCounter` entry (32 bytes, little-endian)
//!
//! | Offset | Size | Field     | Meaning                                      |
//! |--------|------|-----------|----------------------------------------------|
//! | 0      | 4    | `magic`   | [`COUNTER_MAGIC`], bytes `4e 50 43 31` ("NPC1") |
//! | 4      | 4    | reserved  | 0                                            |
//! | 8      | 8    | `value`   | the counter's value                          |
//! | 16     | 8    | `!value`  | its complement                               |
//! | 24     | 4    | `crc`     | CRC-32 of bytes 0..24                        |
//! | 28     | 4    | reserved  | 0                                            |
//!
//! The same rules as the journal, for the same reasons: a power cycle's first raise erases the
//! sector that does not hold the largest value and starts there (so no entry is ever programmed
//! twice, even one whose torn program reads blank); the sector holding the largest value is never
//! erased; an entry is read back after it is programmed and one that reads back wrong costs its
//! place, not the raise; an entry that does not decode is read again before it is believed torn.
//! A raise that returned `Ok` therefore survives any power cut and any single misread.
use embedded_storage::nor_flash::NorFlash;

use crate::error::{CounterError, Error};

/// How far above the replay floor one manifest may be (2³²): more deployments than any fleet
/// issues between two polls of one device, and few enough that a leaked signing key needs 2³²
/// installs, one after another, to drive the floor to `u64::MAX` (see `docs/manifest.md`).
pub const MAX_SEQUENCE_STEP: u64 = 1 << 32;

/// A counter that never goes down.
pub trait MonotonicCounter {
    /// The counter's value (0 for a counter never raised).
    fn read(&mut self) -> Result<u64, CounterError>;

    /// Raises the counter to `value` if it is below; never lowers it. On `Ok` the value is
    /// durable; on `Err` the counter holds its old value or `value`.
    fn raise(&mut self, value: u64) -> Result<(), CounterError>;
}

/// No counter: the replay floor lives in the journal alone, and is lost with it.
#[derive(Debug, Clone, Copy, Default)]
pub struct JournalOnly;

impl MonotonicCounter for JournalOnly {
    fn read(&mut self) -> Result<u64, CounterError> {
        Ok(0)
    }

    fn raise(&mut self, _value: u64) -> Result<(), CounterError> {
        Ok(())
    }
}

/// One entry's size.
pub const ENTRY_BYTES: usize = 32;
/// `"NPC1"` little-endian.
pub const COUNTER_MAGIC: u32 = 0x3143_504E;
/// Reads of an entry that does not decode, after the first.
const MISREAD_REREADS: usize = 2;
/// Entries one raise may use when they do not read back right.
const RAISE_ATTEMPTS: usize = 3;

/// A monotonic counter in two erase sectors of a NOR flash (see the module's table).
#[derive(Debug)]
pub struct NorCounter<G> {
    flash: G,
    at: u32,
    /// Value and sector of the largest entry, once mounted.
    mounted: Option<(u64, usize)>,
    /// This power cycle's sector and its next entry, once a raise started one.
    session: Option<(usize, u32, bool)>,
}

impl<G: NorFlash> NorCounter<G> {
    /// A counter in the two sectors of `flash` from offset `at` (erase-aligned). Reads nothing yet.
    pub fn new(flash: G, at: u32) -> Self {
        const {
            assert!(
                ENTRY_BYTES % G::WRITE_SIZE == 0 && G::ERASE_SIZE % ENTRY_BYTES == 0,
                "a counter entry must be whole program units and divide a sector"
            );
        }
        assert!(
            at as usize % G::ERASE_SIZE == 0 && at as usize + 2 * G::ERASE_SIZE <= flash.capacity(),
            "counter: two erase sectors from {at:#x} must fit the flash, erase-aligned"
        );
        Self {
            flash,
            at,
            mounted: None,
            session: None,
        }
    }

    /// The flash, to read.
    pub fn flash(&self) -> &G {
        &self.flash
    }

    /// The flash, to reach its driver (fault injection); writing through it bypasses the counter.
    pub fn flash_mut(&mut self) -> &mut G {
        &mut self.flash
    }

    /// Gives the flash back (a test "reboots" by making a new counter on it).
    pub fn into_flash(self) -> G {
        self.flash
    }

    fn entries() -> u32 {
        (G::ERASE_SIZE / ENTRY_BYTES) as u32
    }

    fn entry_at(&self, sector: usize, entry: u32) -> u32 {
        self.at + (sector * G::ERASE_SIZE) as u32 + entry * ENTRY_BYTES as u32
    }

    fn mount(&mut self) -> Result<(u64, usize), CounterError> {
        if let Some(m) = self.mounted {
            return Ok(m);
        }
        let mut best = (0u64, 0usize);
        let mut buf = [0u8; ENTRY_BYTES];
        for sector in 0..2 {
            for entry in 0..Self::entries() {
                let at = self.entry_at(sector, entry);
                for _ in 0..=MISREAD_REREADS {
                    self.flash.read(at, &mut buf).map_err(flash_error)?;
                    if let Some(v) = decode(&buf) {
                        if v > best.0 {
                            best = (v, sector);
                        }
                        break;
                    }
                }
            }
        }
        self.mounted = Some(best);
        Ok(best)
    }

    /// The sector and entry the next value goes to, erasing a sector when a power cycle's first
    /// raise starts or the current sector is full.
    fn next_entry(&mut self) -> Result<(usize, u32), CounterError> {
        let (_, largest) = self.mount()?;
        let sector = match self.session {
            Some((sector, next, wrote)) if next < Self::entries() => {
                self.session = Some((sector, next + 1, wrote));
                return Ok((sector, next));
            }
            Some((sector, _, wrote)) => {
                if !wrote {
                    return Err(CounterError::ReadBack);
                }
                1 - sector
            }
            None => 1 - largest,
        };
        self.session = None;
        let start = self.at + (sector * G::ERASE_SIZE) as u32;
        self.flash
            .erase(start, start + G::ERASE_SIZE as u32)
            .map_err(flash_error)?;
        self.session = Some((sector, 1, false));
        Ok((sector, 0))
    }
}

impl<G: NorFlash> MonotonicCounter for NorCounter<G> {
    fn read(&mut self) -> Result<u64, CounterError> {
        self.mount().map(|(v, _)| v)
    }

    fn raise(&mut self, value: u64) -> Result<(), CounterError> {
        if value <= self.mount()?.0 {
            return Ok(());
        }
        let entry = encode(value);
        let mut buf = [0u8; ENTRY_BYTES];
        for _ in 0..RAISE_ATTEMPTS {
            let (sector, index) = self.next_entry()?;
            let at = self.entry_at(sector, index);
            self.flash.write(at, &entry).map_err(flash_error)?;
            let mut good = false;
            for _ in 0..=MISREAD_REREADS {
                self.flash.read(at, &mut buf).map_err(flash_error)?;
                if buf == entry {
                    good = true;
                    break;
                }
            }
            if good {
                self.mounted = Some((value, sector));
                if let Some((s, next, _)) = self.session {
                    self.session = Some((s, next, true));
                }
                return Ok(());
            }
        }
        Err(CounterError::ReadBack)
    }
}

fn flash_error<E: embedded_storage::nor_flash::NorFlashError>(e: E) -> CounterError {
    CounterError::Flash(e.kind())
}

impl From<CounterError> for Error {
    fn from(e: CounterError) -> Self {
        Error::Counter(e)
    }
}

fn encode(value: u64) -> [u8; ENTRY_BYTES] {
    let mut e = [0u8; ENTRY_BYTES];
    e[0..4].copy_from_slice(&COUNTER_MAGIC.to_le_bytes());
    e[8..16].copy_from_slice(&value.to_le_bytes());
    e[16..24].copy_from_slice(&(!value).to_le_bytes());
    let crc = crate::crc::crc32(&e[..24]);
    e[24..28].copy_from_slice(&crc.to_le_bytes());
    e
}

fn decode(e: &[u8; ENTRY_BYTES]) -> Option<u64> {
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&e[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let mut magic = [0u8; 4];
    magic.copy_from_slice(&e[0..4]);
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&e[24..28]);
    let ok = u32::from_le_bytes(magic) == COUNTER_MAGIC
        && e[4..8] == [0; 4]
        && e[28..32] == [0; 4]
        && word(16) == !word(8)
        && u32::from_le_bytes(crc) == crate::crc::crc32(&e[..24]);
    ok.then(|| word(8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nor_emu::{Cut, NorEmu};

    type Emu = NorEmu<16, 512>;

    fn reboot(c: NorCounter<Emu>) -> NorCounter<Emu> {
        let mut f = c.into_flash();
        f.power_on();
        NorCounter::new(f, 0)
    }

    #[test]
    fn an_entry_decodes_to_what_was_encoded_and_rejects_every_bit_flip() {
        let e = encode(0x0102_0304_0506_0708);
        assert_eq!(decode(&e), Some(0x0102_0304_0506_0708));
        for bit in 0..ENTRY_BYTES * 8 {
            let mut bad = e;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&bad), None, "bit {bit}");
        }
        assert_eq!(decode(&[0xFF; ENTRY_BYTES]), None);
    }

    #[test]
    fn never_goes_down_across_reboots_and_sector_changes() {
        let mut c = NorCounter::new(Emu::new(1024), 0);
        assert_eq!(c.read().unwrap(), 0);
        for v in 1..100u64 {
            c.raise(v * 3).unwrap();
            c.raise(v).unwrap();
            if v % 7 == 0 {
                c = reboot(c);
            }
            assert_eq!(c.read().unwrap(), v * 3);
        }
        let mut c = reboot(c);
        assert_eq!(c.read().unwrap(), 297);
        assert_eq!(c.flash().violations(), 0);
    }

    /// Every raise of a run that reboots in between, cut before each of its operations and
    /// inside each at every 4th byte; after each cut the counter reads the old value or the new
    /// one, and then any number of reboots (and a misread) never lower what a later raise made
    /// durable.
    #[test]
    fn survives_a_power_cut_at_every_operation_of_a_raise() {
        let values = [5u64, 9, 9, 400, u64::MAX - 1];
        let mut dry = NorCounter::new(Emu::new(1024), 0);
        let mut plan = Vec::new();
        for &v in &values {
            let before = dry.flash().ops();
            dry.raise(v).unwrap();
            plan.push((v, before, dry.flash().log()[before as usize..].to_vec()));
            dry = reboot(dry);
        }
        let mut cuts = 0;
        for (i, (v, first, ops)) in plan.iter().enumerate() {
            let old = if i == 0 { 0 } else { values[i - 1] };
            for (n, op) in ops.iter().enumerate() {
                let op_no = first + n as u64;
                let mut points = vec![Cut::BeforeOp(op_no)];
                points.extend((0..op.len).step_by(4).map(|after_bytes| Cut::During {
                    op: op_no,
                    after_bytes,
                }));
                for (k, &cut) in points.iter().enumerate() {
                    let mut c = NorCounter::new(Emu::new(1024), 0);
                    c.flash.seed(k as u64 + op_no * 1000);
                    for &earlier in &values[..i] {
                        c.raise(earlier).unwrap();
                        c = reboot(c);
                    }
                    c.flash.cut(cut);
                    assert!(c.raise(*v).is_err(), "{cut:?} never happened");
                    let mut c = reboot(c);
                    let seen = c.read().unwrap();
                    assert!(seen == old || seen == *v, "{cut:?}: read {seen}");
                    c.raise(*v).unwrap();
                    for _ in 0..3 {
                        c = reboot(c);
                        let at = c.at;
                        c.flash.glitch_read(at + 9, 1);
                        assert_eq!(c.read().unwrap(), *v, "{cut:?}");
                    }
                    assert_eq!(c.flash().violations(), 0, "{cut:?}");
                    cuts += 1;
                }
            }
        }
        assert!(cuts > 50, "{cuts} cut points");
    }
}
