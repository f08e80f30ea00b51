//! What the device remembers across power cuts, and the only transitions it may make.
//!
//! Each slot is in one of four states; `active` names the slot the device last confirmed:
//!
//! ```text
//!            begin_receiving            pending(&VerifiedSlot)        confirm(&VerifiedSlot)
//!   Empty ───────────────────► Receiving ─────────────────────► Pending ───────────────────► Confirmed
//!     ▲                         │  ▲ progress(written)            │  trial_boot: boots_left − 1      │
//!     │                         └──┘                              │                                  │
//!     └───────────── revert (self-test failed, trial boots used up, or failed re-validation) ◄──────┘
//! ```
//!
//! - A slot is bootable only when `Pending` (with boots left) or `Confirmed`, and the transitions
//!   into those two states take a [`VerifiedSlot`]: the proof, produced only by
//!   [`crate::verify::verify_in_flash`], that the bytes in that slot were checked as they sit in
//!   flash. There is no other way to make a slot bootable.
//! - An install only ever targets the slot that is not `active`, and marks it `Receiving` (not
//!   bootable) in the journal *before* its first erase; so once a first pack is confirmed, the
//!   active slot is never written, and there is always a bootable slot.
//! - `last_sequence` is the highest manifest sequence whose install this device ever started; a
//!   manifest must be strictly newer (anti-replay). It is raised before the first erase, so a
//!   replayed manifest cannot even wipe the inactive slot.
use crate::layout::Slot;
use crate::verify::VerifiedSlot;

/// How many times a pending pack is tried at boot before it is reverted: a pack whose self-test
/// hangs or resets the device gets this many attempts, then the previous pack comes back.
pub const MAX_TRIAL_BOOTS: u8 = 3;

/// Which pack a slot holds (or is receiving): what the signed manifest said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackId {
    /// The manifest's deployment sequence.
    pub sequence: u64,
    /// The pack's length in bytes.
    pub len: u32,
    /// SHA-256 of the pack's bytes.
    pub sha256: [u8; 32],
}

impl PackId {
    /// The identity of "no pack" (all zero), stored for empty slots.
    pub const NONE: PackId = PackId {
        sequence: 0,
        len: 0,
        sha256: [0; 32],
    };
}

/// A slot's state (see the module's diagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Nothing the device may use.
    Empty,
    /// An install is writing this slot; `written` bytes from its start are durable.
    Receiving {
        /// Bytes of the pack programmed and journalled; a multiple of the layout's
        /// `progress_bytes`, or the pack's length.
        written: u32,
    },
    /// Verified in flash, on trial: tried at boot while `boots_left > 0`.
    Pending {
        /// Trial boots remaining.
        boots_left: u8,
    },
    /// Verified in flash and passed its self-test.
    Confirmed,
}

/// One slot's journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotState {
    /// Where the slot is in its life cycle.
    pub status: Status,
    /// The pack it holds or receives ([`PackId::NONE`] when empty).
    pub pack: PackId,
}

impl SlotState {
    /// An empty slot.
    pub const EMPTY: SlotState = SlotState {
        status: Status::Empty,
        pack: PackId::NONE,
    };
}

/// The whole remembered state: one journal record holds all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Highest manifest sequence whose install was started (anti-replay).
    pub last_sequence: u64,
    /// The last confirmed slot, booted in preference to any other confirmed slot.
    pub active: Option<Slot>,
    /// Slot A and slot B.
    pub slots: [SlotState; 2],
}

impl State {
    /// A device fresh from the factory: no pack, no sequence.
    pub const FACTORY: State = State {
        last_sequence: 0,
        active: None,
        slots: [SlotState::EMPTY; 2],
    };

    /// `slot`'s entry.
    pub const fn slot(&self, slot: Slot) -> SlotState {
        self.slots[slot.index()]
    }

    /// The slot an install writes: never the active one.
    pub fn install_target(&self) -> Slot {
        match self.active {
            Some(a) => a.other(),
            // No pack confirmed yet: prefer a slot that holds nothing bootable.
            None => Slot::ALL
                .into_iter()
                .find(|&s| !self.is_bootable(s))
                .unwrap_or(Slot::A),
        }
    }

    /// Whether `slot` may be booted (it still has to pass re-validation in flash).
    pub fn is_bootable(&self, slot: Slot) -> bool {
        match self.slot(slot).status {
            Status::Confirmed => true,
            Status::Pending { boots_left } => boots_left > 0,
            Status::Empty | Status::Receiving { .. } => false,
        }
    }

    /// The pending slot on trial and its boots left, if any.
    pub fn on_trial(&self) -> Option<(Slot, u8)> {
        Slot::ALL
            .into_iter()
            .find_map(|s| match self.slot(s).status {
                Status::Pending { boots_left } => Some((s, boots_left)),
                _ => None,
            })
    }

    /// The confirmed slots, the active one first.
    pub fn confirmed(&self) -> impl Iterator<Item = Slot> + '_ {
        let first = self.active.unwrap_or(Slot::A);
        [first, first.other()]
            .into_iter()
            .filter(|&s| self.slot(s).status == Status::Confirmed)
    }

    /// The slot receiving `pack`, and how much of it is durable, if an install was interrupted.
    pub fn receiving(&self) -> Option<(Slot, PackId, u32)> {
        Slot::ALL
            .into_iter()
            .find_map(|s| match self.slot(s).status {
                Status::Receiving { written } => Some((s, self.slot(s).pack, written)),
                _ => None,
            })
    }

    /// An install of `pack` into `target` starts: the slot stops being bootable and the sequence
    /// is consumed, both before the first erase.
    pub fn begin_receiving(self, target: Slot, pack: PackId) -> State {
        assert!(
            self.active != Some(target),
            "an install must not target the active slot"
        );
        let mut next = self;
        next.last_sequence = next.last_sequence.max(pack.sequence);
        next.slots[target.index()] = SlotState {
            status: Status::Receiving { written: 0 },
            pack,
        };
        next
    }

    /// `written` bytes of the pack in `target` are programmed.
    pub fn progress(self, target: Slot, written: u32) -> State {
        let mut next = self;
        next.slots[target.index()].status = Status::Receiving { written };
        next
    }

    /// The slot was verified in flash: it goes on trial.
    pub fn pending(self, verified: &VerifiedSlot) -> State {
        let mut next = self;
        next.slots[verified.slot().index()] = SlotState {
            status: Status::Pending {
                boots_left: MAX_TRIAL_BOOTS,
            },
            pack: verified.pack(),
        };
        next
    }

    /// A boot is about to try the pending `slot`: one trial used.
    pub fn trial_boot(self, slot: Slot) -> State {
        let mut next = self;
        if let Status::Pending { boots_left } = next.slots[slot.index()].status {
            next.slots[slot.index()].status = Status::Pending {
                boots_left: boots_left.saturating_sub(1),
            };
        }
        next
    }

    /// The slot was verified in flash and passed its self-test: it becomes the active pack.
    pub fn confirm(self, verified: &VerifiedSlot) -> State {
        let mut next = self;
        next.slots[verified.slot().index()] = SlotState {
            status: Status::Confirmed,
            pack: verified.pack(),
        };
        next.active = Some(verified.slot());
        next
    }

    /// `slot` is given up (failed its self-test, used up its trials, or no longer verifies). The
    /// sequence stays consumed; the active pack, if any, stays active unless it was this one.
    pub fn revert(self, slot: Slot) -> State {
        let mut next = self;
        next.slots[slot.index()] = SlotState::EMPTY;
        if next.active == Some(slot) {
            next.active = Slot::ALL
                .into_iter()
                .find(|&s| next.slot(s).status == Status::Confirmed);
        }
        next
    }
}
