//! The state journal: every change of [`State`] is a new self-checking record, appended, so that a
//! power cut at any instant leaves either the old state or the new one — never a mix, never none.
//!
//! ## Banks
//!
//! Two banks of whole erase sectors. Records are appended to the current bank; when it is full,
//! the *other* bank is erased and the new record becomes its first. The newest valid record (the
//! highest record sequence whose CRC holds) is the state:
//!
//! | power cut during …             | what the flash holds afterwards                    | mount finds            |
//! |--------------------------------|----------------------------------------------------|------------------------|
//! | a record's program (torn)      | the old records + one record that fails its CRC     | the old state          |
//! | the other bank's erase (torn)  | the full current bank + a half-erased older bank    | the old state: everything in the older bank has a lower sequence |
//! | nothing (between operations)   | old or new record complete                          | old or new state       |
//!
//! A slot that is not all `0xFF` is never programmed again (a torn record is skipped, not
//! rewritten), so no byte is ever programmed twice between erases.
//!
//! ## Record (128 bytes, little-endian)
//!
//! | Offset | Size | Field           | Meaning                                                         |
//! |--------|------|-----------------|-----------------------------------------------------------------|
//! | 0      | 4    | `magic`         | [`RECORD_MAGIC`], bytes `4e 50 4a 31` ("NPJ1")                   |
//! | 4      | 4    | `seq`           | record sequence: +1 per record, never reused                    |
//! | 8      | 8    | `last_sequence` | highest manifest sequence whose install started (anti-replay)   |
//! | 16     | 1    | `active`        | 0 = slot A, 1 = slot B, `0xFF` = none                           |
//! | 17     | 3    | reserved        | 0                                                               |
//! | 20     | 52   | slot A          | slot entry, below                                               |
//! | 72     | 52   | slot B          | slot entry                                                      |
//! | 124    | 4    | `crc`           | CRC-32 (IEEE) of bytes 0..124                                   |
//!
//! Slot entry (52 bytes):
//!
//! | Offset | Size | Field        | Meaning                                                            |
//! |--------|------|--------------|--------------------------------------------------------------------|
//! | 0      | 1    | `status`     | 0 empty, 1 receiving, 2 pending, 3 confirmed                       |
//! | 1      | 1    | `boots_left` | pending: trial boots left; otherwise 0                             |
//! | 2      | 2    | reserved     | 0                                                                  |
//! | 4      | 4    | `len`        | pack length                                                        |
//! | 8      | 8    | `sequence`   | the pack's manifest sequence                                       |
//! | 16     | 4    | `written`    | receiving: durable bytes from the slot's start; otherwise 0        |
//! | 20     | 32   | `sha256`     | the pack's SHA-256 from its manifest                               |
//!
//! Stability: this layout is version 1 of the journal (the magic's last byte). A firmware that
//! changes it must bump the magic; an unknown magic reads as "no record", which would forget the
//! installed packs, so a change also needs a one-time migration in that firmware.
use embedded_storage::nor_flash::NorFlash;

use crate::error::Error;
use crate::layout::{Layout, Slot};
use crate::state::{PackId, SlotState, State, Status};

/// One record's size: a power of two, so any `WRITE_SIZE` up to 128 divides it.
pub const RECORD_BYTES: usize = 128;
/// `"NPJ1"` little-endian: a record of version 1 of this layout.
pub const RECORD_MAGIC: u32 = 0x314A_504E;

const SLOT_ENTRY_BYTES: usize = 52;
const SLOT_ENTRY_AT: [usize; 2] = [20, 72];
const CRC_AT: usize = 124;

const STATUS_EMPTY: u8 = 0;
const STATUS_RECEIVING: u8 = 1;
const STATUS_PENDING: u8 = 2;
const STATUS_CONFIRMED: u8 = 3;
const NO_SLOT: u8 = 0xFF;

/// The mounted journal: the current state and where the next record goes.
#[derive(Debug, Clone)]
pub struct Journal {
    state: State,
    /// Sequence of the newest valid record (0: none yet).
    seq: u32,
    /// The bank the next record is appended to.
    bank: usize,
    /// Index of the next free record in `bank` (may equal the bank's capacity: full).
    next: u32,
}

/// Where a newest-valid-record candidate was found.
#[derive(Clone, Copy)]
struct Found {
    seq: u32,
    bank: usize,
    state: State,
}

impl Journal {
    /// Reads both banks and recovers the newest valid state (or [`State::FACTORY`] on a blank
    /// device).
    pub fn mount<F: NorFlash>(flash: &mut F, layout: &Layout) -> Result<Self, Error> {
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
        let per_bank = records_per_bank(layout);
        let mut newest: Option<Found> = None;
        // Records in use in each bank: one past the last slot that is not blank.
        let mut used = [0u32; 2];
        let mut buf = [0u8; RECORD_BYTES];
        for (bank, used) in used.iter_mut().enumerate() {
            for i in 0..per_bank {
                flash.read(record_offset(layout, bank, i), &mut buf)?;
                if buf.iter().all(|&b| b == 0xFF) {
                    continue;
                }
                *used = i + 1;
                if let Some((seq, state)) = decode(&buf) {
                    if newest.is_none_or(|n| seq > n.seq) {
                        newest = Some(Found { seq, bank, state });
                    }
                }
            }
        }
        Ok(match newest {
            Some(f) => Journal {
                state: f.state,
                seq: f.seq,
                bank: f.bank,
                next: used[f.bank],
            },
            None => Journal {
                state: State::FACTORY,
                seq: 0,
                bank: 0,
                next: used[0],
            },
        })
    }

    /// The state the newest record holds.
    pub const fn state(&self) -> &State {
        &self.state
    }

    /// Makes `state` durable: appends one record (erasing the other bank first when this one is
    /// full). On `Ok` the new state survives any later power cut; on `Err` the journal still
    /// holds the previous state, and so does this value.
    pub fn commit<F: NorFlash>(
        &mut self,
        flash: &mut F,
        layout: &Layout,
        state: State,
    ) -> Result<(), Error> {
        let seq = self.seq.checked_add(1).ok_or(Error::JournalExhausted)?;
        if self.next >= records_per_bank(layout) {
            let other = 1 - self.bank;
            let start = layout.bank(other);
            flash.erase(start, start + layout.journal_bank_bytes)?;
            self.bank = other;
            self.next = 0;
        }
        let record = encode(seq, &state);
        let at = record_offset(layout, self.bank, self.next);
        // The slot is consumed even if the program fails half-way: it is never programmed twice.
        self.next += 1;
        flash.write(at, &record)?;
        self.seq = seq;
        self.state = state;
        Ok(())
    }
}

fn records_per_bank(layout: &Layout) -> u32 {
    layout.journal_bank_bytes / RECORD_BYTES as u32
}

fn record_offset(layout: &Layout, bank: usize, index: u32) -> u32 {
    layout.bank(bank) + index * RECORD_BYTES as u32
}

/// The record bytes for `state` with record sequence `seq` (see the module's table).
pub fn encode(seq: u32, state: &State) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
    r[4..8].copy_from_slice(&seq.to_le_bytes());
    r[8..16].copy_from_slice(&state.last_sequence.to_le_bytes());
    r[16] = state.active.map_or(NO_SLOT, |s| s.index() as u8);
    for slot in Slot::ALL {
        let at = SLOT_ENTRY_AT[slot.index()];
        encode_slot(&state.slot(slot), &mut r[at..at + SLOT_ENTRY_BYTES]);
    }
    let crc = crate::crc::crc32(&r[..CRC_AT]);
    r[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    r
}

fn encode_slot(s: &SlotState, out: &mut [u8]) {
    let (status, boots_left, written) = match s.status {
        Status::Empty => (STATUS_EMPTY, 0, 0),
        Status::Receiving { written } => (STATUS_RECEIVING, 0, written),
        Status::Pending { boots_left } => (STATUS_PENDING, boots_left, 0),
        Status::Confirmed => (STATUS_CONFIRMED, 0, 0),
    };
    out[0] = status;
    out[1] = boots_left;
    out[4..8].copy_from_slice(&s.pack.len.to_le_bytes());
    out[8..16].copy_from_slice(&s.pack.sequence.to_le_bytes());
    out[16..20].copy_from_slice(&written.to_le_bytes());
    out[20..52].copy_from_slice(&s.pack.sha256);
}

/// The record's sequence and state, or `None` when it is not a valid version-1 record (torn,
/// half-erased, bit-rotted, or never written).
pub fn decode(r: &[u8; RECORD_BYTES]) -> Option<(u32, State)> {
    if u32_at(r, 0) != RECORD_MAGIC || u32_at(r, CRC_AT) != crate::crc::crc32(&r[..CRC_AT]) {
        return None;
    }
    if r[17..20] != [0; 3] {
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
    let state = State {
        last_sequence: u64_at(r, 8),
        active,
        slots,
    };
    Some((u32_at(r, 4), state))
}

fn decode_slot(e: &[u8]) -> Option<SlotState> {
    if e[2..4] != [0; 2] {
        return None;
    }
    let written = u32_at(e, 16);
    let status = match (e[0], e[1], written) {
        (STATUS_EMPTY, 0, 0) => Status::Empty,
        (STATUS_RECEIVING, 0, w) => Status::Receiving { written: w },
        (STATUS_PENDING, b, 0) => Status::Pending { boots_left: b },
        (STATUS_CONFIRMED, 0, 0) => Status::Confirmed,
        _ => return None,
    };
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(&e[20..52]);
    Some(SlotState {
        status,
        pack: PackId {
            sequence: u64_at(e, 8),
            len: u32_at(e, 4),
            sha256,
        },
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            last_sequence: 0x0102_0304_0506_0708,
            active: Some(Slot::B),
            slots: [
                SlotState {
                    status: Status::Receiving { written: 4096 },
                    pack: PackId {
                        sequence: 9,
                        len: 70_000,
                        sha256: [0xAB; 32],
                    },
                },
                SlotState {
                    status: Status::Confirmed,
                    pack: PackId {
                        sequence: 8,
                        len: 900,
                        sha256: [0x5A; 32],
                    },
                },
            ],
        }
    }

    #[test]
    fn a_record_decodes_to_what_was_encoded() {
        let r = encode(77, &sample());
        assert_eq!(decode(&r), Some((77, sample())));
    }

    #[test]
    fn rejects_every_single_bit_flip() {
        let r = encode(3, &sample());
        for bit in 0..RECORD_BYTES * 8 {
            let mut bad = r;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&bad), None, "bit {bit}");
        }
    }

    #[test]
    fn rejects_a_blank_record() {
        assert_eq!(decode(&[0xFF; RECORD_BYTES]), None);
    }
}
