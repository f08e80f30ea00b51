//! The state journal: every change of [`State`] is a new self-checking record, written twice and
//! read back, so that a power cut at any instant leaves either the old state or the new one —
//! never a mix, never none — and one misread never moves the state backwards.
//!
//! ## Banks, units, sessions
//!
//! Two banks of whole erase sectors, each an array of **units** of two record slots: a commit
//! writes the same record into both slots of the next unit, then reads both back. The newest
//! record (the highest record sequence that decodes) is the state.
//!
//! A power cycle's first commit never appends to a bank that was written before the power cycle:
//! it erases the bank that does *not* hold the newest record and starts there (a **session**).
//! After a reboot the agent cannot know whether the program it was doing when the power failed
//! left cells that still read erased, so it never programs a slot that it has not itself seen
//! erased. Within a session units are used in order, each at most once.
//!
//! Sequences: unit `u` of a session bank carries `base + u`, and a session's `base` is above
//! every sequence the bank it keeps could hold (the newest record's sequence + units per bank).
//! So every record carries a sequence above every slot consumed before it — torn, misread or
//! never read back — and two records never share a sequence unless one of them was erased.
//!
//! | what the flash holds at mount                       | mount finds                                   |
//! |-----------------------------------------------------|-----------------------------------------------|
//! | a commit cut before its first copy                   | the old state                                 |
//! | a commit cut in its first copy (torn)                | the old state, or the new if the torn copy decodes (it is then the only copy: see below) |
//! | a commit cut in its second copy                      | the new state from the first copy             |
//! | a commit cut before its second copy                  | the new state from the first copy; but when it was a session's first record (the previous state in the other bank), the previous state, and the record's bank is erased: that first copy may be one cut at its very end, weak, and committing it again would erase the bank holding the previous state |
//! | **a torn record that reads valid later**             | it carries a sequence below every record committed after it, so it never beats them; while it *is* the newest it is the in-flight state, old or new, and mount re-commits it (below) |
//! | **a misread record** (one read glitch)               | a record that does not decode is read again ([`MISREAD_REREADS`] times) before it is believed torn; and its twin holds the same state |
//! | **a torn record that reads blank**                   | the old state; the slot is never programmed again: the next session erases first |
//! | **a torn record that reads torn (or blank) at mount and valid at a later mount** | the old state at the first mount; before that power cycle erases anything without a commit of its own (a resumed download), the state is committed again in a new session ([`Journal::seal`]), whose sequences are above the torn slot's: it can no longer come back |
//! | a torn session erase                                 | the old state: the erased bank never holds the newest record |
//! | a record that decodes but breaks the layout (a pack longer than the slot, an active slot that is not confirmed, …) | corruption: skipped like a torn record, never acted on |
//!
//! When the newest record is found in one copy only (its commit was cut, or one copy rotted),
//! [`Agent::open`](crate::Agent::open) commits it again at once, in a fresh session: a state the
//! device has acted on must not flip back when a weak torn copy reads differently next time.
//!
//! A commit reads both copies back; a copy that does not read back as written (after re-reads)
//! consumes its unit and the commit is made again in the next unit, up to [`COMMIT_ATTEMPTS`]
//! times. So a commit that returned `Ok` has two copies that read back right.
//!
//! Cost: 256 bytes of flash per state change instead of 128, a bank holds half as many states,
//! and a power cycle that changes the state erases one bank (a device that boots and changes
//! nothing erases nothing). With 100 000-cycle NOR and two banks used in turn, that is 200 000
//! power cycles with a state change, besides one erase per `units per bank` state changes.
//!
//! ## Record (128 bytes, little-endian)
//!
//! | Offset | Size | Field           | Meaning                                                         |
//! |--------|------|-----------------|-----------------------------------------------------------------|
//! | 0      | 4    | `magic`         | [`RECORD_MAGIC`], bytes `4e 50 4a 32` ("NPJ2")                   |
//! | 4      | 4    | `seq`           | record sequence: above every record slot consumed before it     |
//! | 8      | 8    | `last_sequence` | highest manifest sequence whose install started (anti-replay)   |
//! | 16     | 1    | `active`        | 0 = slot A, 1 = slot B, `0xFF` = none                           |
//! | 17     | 1    | `retries`       | local retries left for the install of `last_sequence`           |
//! | 18     | 2    | reserved        | 0                                                               |
//! | 20     | 52   | slot A          | slot entry, below                                               |
//! | 72     | 52   | slot B          | slot entry                                                      |
//! | 124    | 4    | `crc`           | CRC-32 (IEEE) of bytes 0..124; with a device key their MAC (`seal.rs`) |
//!
//! Slot entry (52 bytes):
//!
//! | Offset | Size | Field        | Meaning                                                            |
//! |--------|------|--------------|--------------------------------------------------------------------|
//! | 0      | 1    | `status`     | 0 empty, 1 receiving, 2 pending, 3 confirmed, 4 failed             |
//! | 1      | 1    | `boots_left` | pending: trial boots left; otherwise 0                             |
//! | 2      | 2    | reserved     | 0                                                                  |
//! | 4      | 4    | `len`        | pack length                                                        |
//! | 8      | 8    | `sequence`   | the pack's manifest sequence                                       |
//! | 16     | 4    | `written`    | receiving: durable bytes from the slot's start; otherwise 0        |
//! | 20     | 32   | `sha256`     | the pack's SHA-256 from its manifest                               |
//!
//! Stability: this layout is version 2 of the journal (the magic's last byte; version 1 had one
//! copy per commit, no `retries` and no failed status). A firmware that changes it must bump the
//! magic; an unknown magic reads as "no record", after which boot finds the packs again from the
//! slot descriptors and the replay floor from the monotonic counter.
use embedded_storage::nor_flash::NorFlash;

use crate::error::Error;
use crate::ids::{PackId, Slot};
use crate::layout::Layout;
use crate::record;
use crate::seal::DeviceKey;
use crate::state::{SlotState, State, Status};

/// One record's size: a power of two, so any `WRITE_SIZE` up to 128 divides it.
pub const RECORD_BYTES: usize = record::JOURNAL_RECORD_BYTES;
/// A commit's footprint: two copies of its record.
pub const UNIT_BYTES: usize = record::COPIES * RECORD_BYTES;
/// `"NPJ2"` little-endian: a record of version 2 of this layout.
pub const RECORD_MAGIC: u32 = 0x324A_504E;
pub use crate::record::MISREAD_REREADS;
/// Units one commit may use when copies do not read back right.
pub const COMMIT_ATTEMPTS: usize = 3;

const SLOT_ENTRY_BYTES: usize = 52;
const SLOT_ENTRY_AT: [usize; 2] = [20, 72];
const CRC_AT: usize = 124;
const _: () = assert!(SLOT_ENTRY_AT[1] + SLOT_ENTRY_BYTES == CRC_AT && CRC_AT + 4 == RECORD_BYTES);

const STATUS_EMPTY: u8 = 0;
const STATUS_RECEIVING: u8 = 1;
const STATUS_PENDING: u8 = 2;
const STATUS_CONFIRMED: u8 = 3;
const STATUS_FAILED: u8 = 4;
const NO_SLOT: u8 = 0xFF;

/// The mounted journal: the current state, where it came from, and where the next record goes.
#[derive(Debug, Clone)]
pub(crate) struct Journal {
    state: State,
    /// The bank holding the newest durable record, and that record's sequence.
    newest: Option<(usize, u32)>,
    /// This power cycle's bank, once a commit started one.
    session: Option<Session>,
    /// The newest record was found in one copy only: commit it again.
    single_copy: bool,
    /// A bank whose only record was a lone copy of a session's first commit, set aside at mount
    /// for the previous state in the other bank: erase it before anything else.
    discard: Option<usize>,
    /// What the records are authenticated under (`seal.rs`).
    key: Option<DeviceKey>,
}

#[derive(Debug, Clone, Copy)]
struct Session {
    bank: usize,
    base: u32,
    /// The next unit to use (may equal the bank's capacity: full).
    next: u32,
    /// Whether a commit of this session has two good copies in `bank`.
    holds_newest: bool,
}

/// What reading one record slot gave.
enum Read {
    Blank,
    /// The buffer holds a record that decodes.
    Record,
    Bad,
}

impl Journal {
    /// Reads both banks and recovers the newest state (or [`State::FACTORY`] on a blank device).
    /// Programs nothing.
    #[inline(never)]
    pub(crate) fn mount<F: NorFlash>(
        flash: &mut F,
        layout: &Layout,
        key: Option<&DeviceKey>,
    ) -> Result<Self, Error> {
        const {
            assert!(
                RECORD_BYTES % F::WRITE_SIZE == 0,
                "WRITE_SIZE must divide a journal record"
            );
            assert!(
                RECORD_BYTES % F::READ_SIZE == 0,
                "READ_SIZE must divide a journal record"
            );
        }
        let capacity = layout.pack_capacity::<F>();
        // (record sequence, bank, found in one copy only, that copy may be torn); the records
        // themselves are kept as bytes (a valid record's bytes and its state are one to one), the
        // newest in `records[0]`, the runner-up in `records[1]`, and only the winner is decoded.
        let mut newest: Option<(u32, usize, bool, bool)> = None;
        let mut runner_up: Option<(u32, usize, bool, bool)> = None;
        let mut records = [[0u8; RECORD_BYTES]; 2];
        let mut copies = [[0u8; RECORD_BYTES]; 2];
        for bank in 0..2 {
            for unit in 0..units_per_bank(layout) {
                let mut found = [false; 2];
                let mut second_blank = false;
                for (copy, buf) in copies.iter_mut().enumerate() {
                    let at = record_offset(layout, bank, unit, copy);
                    match read_record(flash, at, (capacity, key), buf)? {
                        Read::Record => found[copy] = true,
                        Read::Blank => second_blank = copy == 1,
                        Read::Bad => {}
                    }
                }
                // The first copy decodes and the second was never begun: the cut may have torn
                // the first copy itself, which may read differently next time.
                let weak = found == [true, false] && second_blank;
                let (pick, both) = match found {
                    [true, true] => (0, copies[0] == copies[1]),
                    [true, false] => (0, false),
                    [false, true] => (1, false),
                    [false, false] => continue,
                };
                let seq = record::word(&copies[pick], 4);
                let record = (seq, bank, !both, weak);
                if newest.is_none_or(|(n, ..)| seq > n) {
                    runner_up = newest;
                    newest = Some(record);
                    records = [copies[pick], records[0]];
                } else if runner_up.is_none_or(|(r, ..)| seq > r) {
                    runner_up = Some(record);
                    records[1] = copies[pick];
                }
            }
        }
        // A newest record whose first copy decodes and whose second was never begun may be a
        // commit cut inside its first copy: that copy may be weak, reading valid now and torn at
        // the next mount. When the previous state is in the other bank (the record was a
        // session's first), committing the record again would erase that bank while the only
        // trace of the newer state is the weak copy, and a cut in between would leave no state
        // at all. The commit was never acknowledged, so the previous state stands, and the
        // record's bank is erased before anything else is written, so that the copy cannot read
        // valid later. (A second copy that is torn, not blank, proves the first one complete:
        // that record is committed again as usual.)
        let mut discard = None;
        if let (Some(n), Some(r)) = (newest, runner_up) {
            if n.3 && r.1 != n.1 {
                discard = Some(n.1);
                newest = Some(r);
                records[0] = records[1];
            }
        }
        // The winner decoded when it was read, so it decodes again; were it not to, the journal
        // would mount as holding no record (boot then rebuilds from the slot descriptors).
        let found = newest.zip(decode(&records[0], capacity, key));
        let key = key.copied();
        Ok(match found {
            Some(((seq, bank, single_copy, _), (_, state))) => Journal {
                state,
                newest: Some((bank, seq)),
                session: None,
                single_copy,
                discard,
                key,
            },
            None => Journal {
                state: State::FACTORY,
                newest: None,
                session: None,
                single_copy: false,
                discard,
                key,
            },
        })
    }

    /// The state the newest record holds.
    pub(crate) const fn state(&self) -> &State {
        &self.state
    }

    /// Whether any record was found at mount (or committed since).
    pub(crate) const fn has_records(&self) -> bool {
        self.newest.is_some()
    }

    /// Whether the newest record exists in one copy only, and should be committed again.
    pub(crate) const fn needs_refresh(&self) -> bool {
        self.single_copy
    }

    /// Erases the bank mount set aside (see [`Journal::mount`]), if any. Until it is erased, no
    /// commit is made: the bank's lone copy could otherwise outrank it at a later mount.
    pub(crate) fn erase_discarded<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
    ) -> Result<(), Error> {
        if let Some(bank) = self.discard {
            let start = layout.bank(bank);
            flash.erase(start, start + layout.journal_bank_bytes)?;
            self.discard = None;
        }
        Ok(())
    }

    /// Adopts `state` in memory without writing it (the floor from the monotonic counter, a
    /// state rebuilt from the slot descriptors): the next commit makes it durable.
    pub(crate) fn assume(&mut self, state: State) {
        self.state = state;
    }

    /// Commits the state again, in a fresh session, unless this power cycle has committed
    /// already. A record the last power cycle tore may have read as torn (or blank) at mount and
    /// read valid later; were it the newest then, it would bring back a state the device has
    /// since acted against (say, a slot pending whose descriptor sector this power cycle erased).
    /// A session's records carry sequences above every slot of the other bank, so after this no
    /// earlier slot can ever beat the state the device acts on. Called before the first erase of
    /// a power cycle that changes nothing in the journal first (a resumed download).
    pub(crate) fn seal<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
    ) -> Result<(), Error> {
        if self.session.is_some() {
            return Ok(());
        }
        let state = self.state;
        self.commit(flash, layout, state)
    }

    /// Makes `state` durable: two copies in the next unit, both read back. On `Ok` the new state
    /// survives any later power cut and any single misread. On `Err` the journal holds the
    /// previous state or the new one, and this value holds the previous one.
    pub(crate) fn commit<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
        state: State,
    ) -> Result<(), Error> {
        self.erase_discarded(flash, layout)?;
        for _ in 0..COMMIT_ATTEMPTS {
            let (bank, unit, seq) = self.next_unit(flash, layout)?;
            let record = encode(seq, &state, self.key.as_ref());
            if self.write_unit(flash, layout, bank, unit, &record)? {
                self.state = state;
                self.newest = Some((bank, seq));
                self.single_copy = false;
                if let Some(s) = &mut self.session {
                    s.holds_newest = true;
                }
                return Ok(());
            }
        }
        Err(Error::JournalReadBack)
    }

    /// The unit the next record goes to, erasing a bank first when a session starts or its bank
    /// is full. The unit is consumed whatever happens to the program.
    #[inline(never)]
    fn next_unit<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
    ) -> Result<(usize, u32, u32), Error> {
        let units = units_per_bank(layout);
        let session = match self.session {
            Some(s) if s.next < units => s,
            Some(s) => {
                // Full: the other bank holds only older records, unless no commit of this
                // session ever read back right (then the other bank holds the newest one).
                if !s.holds_newest {
                    return Err(Error::JournalReadBack);
                }
                let base = s.base.checked_add(units).ok_or(Error::JournalExhausted)?;
                self.start(flash, layout, 1 - s.bank, base)?
            }
            None => {
                let (bank, base) = match self.newest {
                    Some((bank, seq)) => (
                        1 - bank,
                        seq.checked_add(units).ok_or(Error::JournalExhausted)?,
                    ),
                    None => (0, 1),
                };
                self.start(flash, layout, bank, base)?
            }
        };
        let unit = session.next;
        let seq = session
            .base
            .checked_add(unit)
            .ok_or(Error::JournalExhausted)?;
        self.session = Some(Session {
            next: unit + 1,
            ..session
        });
        Ok((session.bank, unit, seq))
    }

    fn start<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
        bank: usize,
        base: u32,
    ) -> Result<Session, Error> {
        // Forget the session first: if the erase fails, the next commit erases again.
        self.session = None;
        let start = layout.bank(bank);
        flash.erase(start, start + layout.journal_bank_bytes)?;
        Ok(Session {
            bank,
            base,
            next: 0,
            holds_newest: false,
        })
    }

    /// Programs both copies of `record` in `unit` and reads them back; `Ok(false)` when a copy
    /// does not read back as written.
    fn write_unit<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
        bank: usize,
        unit: u32,
        record: &[u8; RECORD_BYTES],
    ) -> Result<bool, Error> {
        let copies = [0, 1].map(|copy| record_offset(layout, bank, unit, copy));
        record::program(flash, &copies, record, &mut [0u8; RECORD_BYTES])
    }
}

/// Reads the record slot at `at` into `buf`, reading again when it does not check. (A blank read
/// is not read again: a torn copy that reads blank now is the old state, which a cut allows.)
fn read_record<F: NorFlash>(
    flash: &mut F,
    at: u32,
    (capacity, key): (u32, Option<&DeviceKey>),
    buf: &mut [u8; RECORD_BYTES],
) -> Result<Read, Error> {
    Ok(match record::read(flash, at, buf, RECORD_MAGIC, key)? {
        record::Read::Blank => Read::Blank,
        record::Read::Framed if decode(buf, capacity, key).is_some() => Read::Record,
        record::Read::Framed | record::Read::Bad => Read::Bad,
    })
}

fn units_per_bank(layout: &Layout) -> u32 {
    layout.journal_bank_bytes / UNIT_BYTES as u32
}

fn record_offset(layout: &Layout, bank: usize, unit: u32, copy: usize) -> u32 {
    layout.bank(bank) + unit * UNIT_BYTES as u32 + (copy * RECORD_BYTES) as u32
}

/// The record bytes for `state` with record sequence `seq` (see the module's table).
#[inline(never)]
pub(crate) fn encode(seq: u32, state: &State, key: Option<&DeviceKey>) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[4..8].copy_from_slice(&seq.to_le_bytes());
    r[8..16].copy_from_slice(&state.last_sequence().to_le_bytes());
    r[16] = state.active().map_or(NO_SLOT, |s| s.index() as u8);
    r[17] = state.retries();
    for slot in Slot::ALL {
        let at = SLOT_ENTRY_AT[slot.index()];
        encode_slot(&state.slot(slot), &mut r[at..at + SLOT_ENTRY_BYTES]);
    }
    record::frame(&mut r, RECORD_MAGIC, key);
    r
}

fn encode_slot(s: &SlotState, out: &mut [u8]) {
    let (status, boots_left, written) = match s.status() {
        Status::Empty => (STATUS_EMPTY, 0, 0),
        Status::Receiving { written } => (STATUS_RECEIVING, 0, written),
        Status::Pending { boots_left } => (STATUS_PENDING, boots_left, 0),
        Status::Confirmed => (STATUS_CONFIRMED, 0, 0),
        Status::Failed => (STATUS_FAILED, 0, 0),
    };
    let pack = s.pack();
    out[0] = status;
    out[1] = boots_left;
    out[4..8].copy_from_slice(&pack.len.to_le_bytes());
    out[8..16].copy_from_slice(&pack.sequence.to_le_bytes());
    out[16..20].copy_from_slice(&written.to_le_bytes());
    out[20..52].copy_from_slice(&pack.sha256);
}

/// The record's sequence and state, or `None` when it is not a valid version-2 record for slots
/// of `pack_capacity` bytes (torn, half-erased, bit-rotted, never written, or inconsistent).
#[inline(never)]
pub(crate) fn decode(
    r: &[u8; RECORD_BYTES],
    pack_capacity: u32,
    key: Option<&DeviceKey>,
) -> Option<(u32, State)> {
    if !record::is_framed(r, RECORD_MAGIC, key) || r[18..20] != [0; 2] {
        return None;
    }
    let active = match r[16] {
        NO_SLOT => None,
        i => Some(Slot::from_index(i)?),
    };
    let mut slots = [SlotState::EMPTY; 2];
    for slot in Slot::ALL {
        let at = SLOT_ENTRY_AT[slot.index()];
        slots[slot.index()] = decode_slot(&r[at..at + SLOT_ENTRY_BYTES])?;
    }
    let state = State::from_parts(u64_at(r, 8), r[17], active, slots);
    state
        .is_consistent(pack_capacity)
        .then_some((record::word(r, 4), state))
}

fn decode_slot(e: &[u8]) -> Option<SlotState> {
    if e[2..4] != [0; 2] {
        return None;
    }
    let written = record::word(e, 16);
    let status = match (e[0], e[1], written) {
        (STATUS_EMPTY, 0, 0) => Status::Empty,
        (STATUS_RECEIVING, 0, w) => Status::Receiving { written: w },
        (STATUS_PENDING, b, 0) => Status::Pending { boots_left: b },
        (STATUS_CONFIRMED, 0, 0) => Status::Confirmed,
        (STATUS_FAILED, 0, 0) => Status::Failed,
        _ => return None,
    };
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(&e[20..52]);
    Some(SlotState::new(
        status,
        PackId {
            sequence: u64_at(e, 8),
            len: record::word(e, 4),
            sha256,
        },
    ))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nor_emu::{Cut, NorEmu};
    use embedded_storage::nor_flash::ReadNorFlash;

    type Emu = NorEmu<16, 512>;
    const CAPACITY: u32 = 100_000;

    fn layout() -> Layout {
        Layout::contiguous(0, 1024, 2048, 512, 0x8000_0000)
    }

    fn sample() -> State {
        let a = SlotState::new(
            Status::Receiving { written: 4096 },
            PackId {
                sequence: 9,
                len: 70_000,
                sha256: [0xAB; 32],
            },
        );
        let b = SlotState::new(
            Status::Confirmed,
            PackId {
                sequence: 8,
                len: 900,
                sha256: [0x5A; 32],
            },
        );
        State::from_parts(9, 1, Some(Slot::B), [a, b])
    }

    /// A state with `last_sequence` = `n`, so that states are easy to tell apart.
    fn numbered(n: u64) -> State {
        State::FACTORY.with_floor(n)
    }

    #[test]
    fn a_record_decodes_to_what_was_encoded() {
        let r = encode(77, &sample(), None);
        assert_eq!(decode(&r, CAPACITY, None), Some((77, sample())));
    }

    #[test]
    fn rejects_every_single_bit_flip() {
        let r = encode(3, &sample(), None);
        for bit in 0..RECORD_BYTES * 8 {
            let mut bad = r;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&bad, CAPACITY, None), None, "bit {bit}");
        }
    }

    #[test]
    fn rejects_a_blank_record() {
        assert_eq!(decode(&[0xFF; RECORD_BYTES], CAPACITY, None), None);
    }

    #[test]
    fn rejects_a_crc_valid_record_whose_pack_is_longer_than_the_slot() {
        let r = encode(3, &sample(), None);
        assert_eq!(decode(&r, 69_999, None), None);
    }

    #[test]
    fn rejects_a_crc_valid_record_whose_active_slot_is_not_confirmed() {
        let s = sample();
        let bad = State::from_parts(9, 0, Some(Slot::A), [s.slot(Slot::A), s.slot(Slot::B)]);
        assert_eq!(decode(&encode(3, &bad, None), CAPACITY, None), None);
    }

    #[test]
    fn commits_survive_a_reboot_and_a_bank_change() {
        let layout = layout();
        let mut flash = Emu::new(layout.end() as usize);
        for n in 1..=20 {
            let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
            j.commit(&mut flash, &layout, numbered(n)).unwrap();
            j.commit(&mut flash, &layout, numbered(n + 100)).unwrap();
            let j = Journal::mount(&mut flash, &layout, None).unwrap();
            assert_eq!(*j.state(), numbered(n + 100));
            assert!(!j.needs_refresh());
        }
        assert_eq!(flash.violations(), 0);
    }

    #[test]
    fn survives_a_misread_of_either_copy_at_mount() {
        let layout = layout();
        let mut flash = Emu::new(layout.end() as usize);
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        j.commit(&mut flash, &layout, numbered(1)).unwrap();
        j.commit(&mut flash, &layout, numbered(2)).unwrap();
        // Unit 1 of bank 0 holds state 2: one glitch in each copy, and a stuck bit in copy 0.
        flash.glitch_read(record_offset(&layout, 0, 1, 0) + 9, 3);
        flash.glitch_read(record_offset(&layout, 0, 1, 1) + 40, 0);
        let j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(2));
        assert!(!j.needs_refresh());
        flash.flip_on_read(record_offset(&layout, 0, 1, 0) + 9, 3);
        let j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(2));
        assert!(j.needs_refresh(), "one copy left: commit it again");
    }

    #[test]
    fn survives_a_lone_first_copy_of_a_sessions_first_commit() {
        // State 1 in bank 0; a new power cycle's first commit (state 2) starts a session in bank
        // 1 and is cut before its second copy: the first copy decodes, but it may be a copy cut
        // at its very end, weak. Committing it again would erase bank 0 while that copy is the
        // only trace of state 2; so state 1 stands, and bank 1 is erased before anything else.
        let layout = layout();
        let mut flash = Emu::new(layout.end() as usize);
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        j.commit(&mut flash, &layout, numbered(1)).unwrap();
        flash.power_on();
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        // The session erase, then the first copy; the second copy never starts.
        flash.cut(Cut::BeforeOp(flash.ops() + 2));
        assert!(j.commit(&mut flash, &layout, numbered(2)).is_err());
        flash.power_on();
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(1), "the previous state stands");
        assert!(!j.needs_refresh());
        let first_copy = record_offset(&layout, 1, 0, 0);
        let mut buf = [0u8; 4];
        flash.read(first_copy, &mut buf).unwrap();
        assert_ne!(
            buf, [0xFF; 4],
            "the lone copy is still there before the heal"
        );
        j.erase_discarded(&mut flash, &layout).unwrap();
        flash.read(first_copy, &mut buf).unwrap();
        assert_eq!(buf, [0xFF; 4], "its bank was erased");
        // It can no longer come back, and the next commit works.
        let j2 = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j2.state(), numbered(1));
        j.commit(&mut flash, &layout, numbered(3)).unwrap();
        let j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(3));
        assert_eq!(flash.violations(), 0);
    }

    #[test]
    fn survives_a_torn_second_copy_of_a_sessions_first_commit() {
        // The cut is inside the second copy: the first is complete, so state 2 is the state
        // (committed again at once, as for any record found in one copy).
        let layout = layout();
        let mut flash = Emu::new(layout.end() as usize);
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        j.commit(&mut flash, &layout, numbered(1)).unwrap();
        flash.power_on();
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        flash.cut(Cut::During {
            op: flash.ops() + 2,
            after_bytes: 100,
        });
        assert!(j.commit(&mut flash, &layout, numbered(2)).is_err());
        flash.power_on();
        let j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(2));
        assert!(j.needs_refresh());
    }

    #[test]
    fn a_torn_record_that_reads_valid_later_never_beats_a_later_commit() {
        let layout = layout();
        for seed in 0..32 {
            let mut flash = Emu::new(layout.end() as usize);
            flash.seed(seed);
            let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
            j.commit(&mut flash, &layout, numbered(1)).unwrap();
            // Cut inside the first copy of the next commit.
            flash.cut(Cut::During {
                op: flash.ops(),
                after_bytes: 64,
            });
            assert!(j.commit(&mut flash, &layout, numbered(2)).is_err());
            flash.power_on();
            let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
            let seen = *j.state();
            assert!(seen == numbered(1) || seen == numbered(2));
            j.commit(&mut flash, &layout, numbered(3)).unwrap();
            // However the torn copy reads from now on, the acknowledged commit stands.
            for _ in 0..8 {
                flash.power_on();
                let j = Journal::mount(&mut flash, &layout, None).unwrap();
                assert_eq!(*j.state(), numbered(3), "seed {seed}");
            }
            assert_eq!(flash.violations(), 0);
        }
    }

    #[test]
    fn a_torn_slot_that_reads_blank_is_never_programmed_again() {
        let layout = layout();
        for seed in 0..32 {
            let mut flash = Emu::new(layout.end() as usize);
            flash.seed(seed);
            let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
            j.commit(&mut flash, &layout, numbered(1)).unwrap();
            for n in 2..12 {
                // Every commit is cut at its first byte: the torn word may read blank.
                flash.cut(Cut::During {
                    op: flash.ops(),
                    after_bytes: 0,
                });
                let _ = j.commit(&mut flash, &layout, numbered(n));
                flash.power_on();
                j = Journal::mount(&mut flash, &layout, None).unwrap();
                j.commit(&mut flash, &layout, numbered(n + 100)).unwrap();
            }
            assert_eq!(flash.violations(), 0, "seed {seed}");
            let j = Journal::mount(&mut flash, &layout, None).unwrap();
            assert_eq!(*j.state(), numbered(111));
        }
    }

    #[test]
    fn a_copy_that_reads_back_wrong_costs_a_unit_not_the_commit() {
        let layout = layout();
        let mut flash = Emu::new(layout.end() as usize);
        let mut j = Journal::mount(&mut flash, &layout, None).unwrap();
        j.commit(&mut flash, &layout, numbered(1)).unwrap();
        // The next commit programs unit 1 of bank 0: a bit of its second copy rots at once.
        let at = record_offset(&layout, 0, 1, 1) + 20;
        flash.flip_stored_bit_after_op(flash.ops() + 1, at, 0);
        j.commit(&mut flash, &layout, numbered(2)).unwrap();
        // And a glitch on the first copy of the unit that holds it now.
        flash.glitch_read(record_offset(&layout, 0, 2, 0) + 9, 0);
        let j = Journal::mount(&mut flash, &layout, None).unwrap();
        assert_eq!(*j.state(), numbered(2));
        let mut buf = [0u8; RECORD_BYTES];
        flash
            .read(record_offset(&layout, 0, 2, 1), &mut buf)
            .unwrap();
        assert_eq!(
            decode(&buf, CAPACITY, None).map(|(_, s)| s),
            Some(numbered(2))
        );
    }
}
