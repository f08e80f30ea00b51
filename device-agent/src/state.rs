//! What the device remembers across power cuts, and the only transitions it may make.
//!
//! Each slot is in one of five states; `active` names the slot the device last confirmed:
//!
//! ```text
//!            begin_receiving            pending(&VerifiedSlot)        confirm(&BoundSlot)
//!   Empty ───────────────────► Receiving ─────────────────────► Pending ───────────────────► Confirmed
//!     ▲  ▲                      │  ▲ progress(written)            │  trial_boot: boots_left − 1      │
//!     │  │                      └──┘                              │                                  │
//!     │  └──────────── revert (tampered or malformed pack, trial boots used up) ◄────────────────────┘
//!     │                         │ ▲ retry (same pack, same sequence, while retries > 0)
//!     │                         ▼ │
//!     └──── retries used up ── Failed ◄── fail (a local fault: read-back mismatch, self-test)
//! ```
//!
//! - A slot is bootable only when `Pending` (with boots left) or `Confirmed`, and the transitions
//!   into those two states take a proof: a [`VerifiedSlot`], produced only by `verify.rs`'s pass
//!   over the slot as it sits in flash, for `Pending`; a [`BoundSlot`], produced only by binding
//!   one ([`crate::verify::pin`]: its program copied and proven), for `Confirmed`. There is no
//!   other way to make a slot bootable, and no way to build a [`State`] outside this crate: its
//!   fields are private and its transitions crate-internal.
//! - An install only ever targets the slot that is not `active`, and marks it `Receiving` (not
//!   bootable) in the journal *before* its first erase; so once a first pack is confirmed, the
//!   active slot is never written, and there is always a bootable slot.
//! - `last_sequence` is the highest manifest sequence whose install this device ever started; a
//!   manifest must be strictly newer (anti-replay), with one bounded exception: an install that
//!   failed for a *local* reason (the flash read back wrong, the self-test failed) leaves its slot
//!   `Failed`, and the very same pack at the very same sequence may be started again `retries`
//!   more times ([`MAX_LOCAL_RETRIES`] in all), so that one transient fault does not burn the
//!   deployment. It is raised before the first erase, so a replayed manifest cannot even wipe the
//!   inactive slot.
use crate::ids::{PackId, Slot};
use crate::verify::{BoundSlot, VerifiedSlot};

/// How many times a pending pack is tried at boot before it is reverted: a pack whose self-test
/// hangs or resets the device gets this many attempts, then the previous pack comes back.
pub const MAX_TRIAL_BOOTS: u8 = 3;

/// How many times an install that failed for a local reason may be started again with the same
/// manifest: enough to ride out a transient fault, few enough that a pack which fails every time
/// stops costing erase cycles.
pub const MAX_LOCAL_RETRIES: u8 = 2;

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
    /// Its install failed for a local reason; not bootable. The pack is remembered so that the
    /// same manifest may be tried again (see [`State::retries`]).
    Failed,
}

/// One slot's journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotState {
    status: Status,
    pack: PackId,
}

impl SlotState {
    /// An empty slot.
    pub const EMPTY: SlotState = SlotState {
        status: Status::Empty,
        pack: PackId::NONE,
    };

    pub(crate) const fn new(status: Status, pack: PackId) -> Self {
        Self { status, pack }
    }

    /// Where the slot is in its life cycle.
    pub const fn status(&self) -> Status {
        self.status
    }

    /// The pack it holds or receives ([`PackId::NONE`] when empty).
    pub const fn pack(&self) -> PackId {
        self.pack
    }
}

/// The whole remembered state: one journal record holds all of it. Only this crate makes one
/// (from the journal, through the transitions below):
///
/// ```compile_fail
/// let forged = device_agent::State { last_sequence: 0, retries: 0, active: None,
///     slots: [device_agent::SlotState::EMPTY; 2] };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    last_sequence: u64,
    retries: u8,
    active: Option<Slot>,
    slots: [SlotState; 2],
}

impl State {
    /// A device fresh from the factory: no pack, no sequence.
    pub const FACTORY: State = State {
        last_sequence: 0,
        retries: 0,
        active: None,
        slots: [SlotState::EMPTY; 2],
    };

    pub(crate) const fn from_parts(
        last_sequence: u64,
        retries: u8,
        active: Option<Slot>,
        slots: [SlotState; 2],
    ) -> Self {
        Self {
            last_sequence,
            retries,
            active,
            slots,
        }
    }

    /// Highest manifest sequence whose install was started (anti-replay).
    pub const fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// How many more times the install of `last_sequence` may be started again after a local
    /// failure (see the module's notes).
    pub const fn retries(&self) -> u8 {
        self.retries
    }

    /// The last confirmed slot, booted in preference to any other confirmed slot.
    pub const fn active(&self) -> Option<Slot> {
        self.active
    }

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
            Status::Empty | Status::Receiving { .. } | Status::Failed => false,
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
    #[inline(never)]
    pub fn receiving(&self) -> Option<(Slot, PackId, u32)> {
        Slot::ALL
            .into_iter()
            .find_map(|s| match self.slot(s).status {
                Status::Receiving { written } => Some((s, self.slot(s).pack, written)),
                _ => None,
            })
    }

    /// Which attempt at the install of `last_sequence` this is (1 for the first download, up to
    /// `MAX_LOCAL_RETRIES + 1`): the attempts a report carries. After the last attempt failed
    /// (the slot given up) it reads `MAX_LOCAL_RETRIES + 1`.
    pub const fn attempt(&self) -> u8 {
        MAX_LOCAL_RETRIES + 1 - self.retries
    }

    /// The failed install that may be started again, if any: its slot and pack.
    pub fn retryable(&self) -> Option<(Slot, PackId)> {
        if self.retries == 0 {
            return None;
        }
        Slot::ALL.into_iter().find_map(|s| {
            let e = self.slot(s);
            (e.status == Status::Failed && e.pack.sequence == self.last_sequence)
                .then_some((s, e.pack))
        })
    }

    /// Whether the state is one this crate could have written for a slot of `pack_capacity`
    /// bytes: a record that decodes but breaks this is corruption (or a firmware whose layout
    /// changed without a new magic), never something to act on.
    pub(crate) fn is_consistent(&self, pack_capacity: u32) -> bool {
        let slots_ok = self.slots.iter().all(|e| match e.status {
            Status::Empty => e.pack == PackId::NONE,
            Status::Receiving { written } => {
                e.pack.len <= pack_capacity
                    && written <= e.pack.len
                    && e.pack.sequence <= self.last_sequence
            }
            Status::Pending { boots_left } => {
                boots_left <= MAX_TRIAL_BOOTS && self.holds_pack(e, pack_capacity)
            }
            Status::Confirmed | Status::Failed => self.holds_pack(e, pack_capacity),
        });
        let active_ok = self
            .active
            .is_none_or(|a| self.slot(a).status == Status::Confirmed);
        let one_install = self
            .slots
            .iter()
            .filter(|e| matches!(e.status, Status::Receiving { .. } | Status::Pending { .. }))
            .count()
            <= 1;
        slots_ok && active_ok && one_install && self.retries <= MAX_LOCAL_RETRIES
    }

    fn holds_pack(&self, e: &SlotState, pack_capacity: u32) -> bool {
        let min = npub_core::format::HEADER_BYTES;
        (min..=pack_capacity).contains(&e.pack.len) && e.pack.sequence <= self.last_sequence
    }

    /// The replay floor is at least `floor` (from the monotonic counter): a journal that was lost
    /// or lags behind never lowers it.
    #[inline(never)]
    pub(crate) fn with_floor(self, floor: u64) -> State {
        let mut next = self;
        if floor > next.last_sequence {
            next.last_sequence = floor;
            next.retries = 0;
        }
        next
    }

    /// An install of `pack` into `target` starts: the slot stops being bootable and the sequence
    /// is consumed, both before the first erase.
    #[inline(never)]
    pub(crate) fn begin_receiving(self, target: Slot, pack: PackId) -> State {
        assert!(
            self.active != Some(target),
            "an install must not target the active slot"
        );
        let mut next = self;
        if pack.sequence > next.last_sequence {
            next.last_sequence = pack.sequence;
            next.retries = MAX_LOCAL_RETRIES;
        }
        next.slots[target.index()] = SlotState {
            status: Status::Receiving { written: 0 },
            pack,
        };
        next
    }

    /// A manifest for `pack`, which the active slot already holds (verified in flash for it):
    /// its sequence is consumed and the active slot is journalled under it, so the device runs
    /// that deployment (and says so at every boot) with nothing downloaded. An interrupted
    /// download it supersedes is given up, and a failed install it supersedes is no longer
    /// retried: both were for an older sequence. (The slot's descriptor keeps the sequence it was
    /// installed at; descriptors name a pack by its length and SHA-256 when they are read.)
    #[inline(never)]
    pub(crate) fn hold(self, pack: PackId) -> State {
        let Some(active) = self.active else {
            return self;
        };
        let held = self.slot(active).pack;
        assert!(
            (held.len, held.sha256) == (pack.len, pack.sha256),
            "hold: the active slot holds another pack"
        );
        let mut next = self;
        if pack.sequence > next.last_sequence {
            next.last_sequence = pack.sequence;
            next.retries = 0;
        }
        for e in &mut next.slots {
            if matches!(e.status, Status::Receiving { .. }) && e.pack.sequence < pack.sequence {
                *e = SlotState::EMPTY;
            }
        }
        next.slots[active.index()].pack = pack;
        next
    }

    /// The failed install in `target` starts again: one retry used.
    pub(crate) fn retry(self, target: Slot) -> State {
        let mut next = self;
        next.retries = next.retries.saturating_sub(1);
        next.slots[target.index()].status = Status::Receiving { written: 0 };
        next
    }

    /// `written` bytes of the pack in `target` are programmed.
    pub(crate) fn progress(self, target: Slot, written: u32) -> State {
        let mut next = self;
        next.slots[target.index()].status = Status::Receiving { written };
        next
    }

    /// The slot was verified in flash: it goes on trial.
    pub(crate) fn pending(self, verified: &VerifiedSlot) -> State {
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
    pub(crate) fn trial_boot(self, slot: Slot) -> State {
        let mut next = self;
        if let Status::Pending { boots_left } = next.slots[slot.index()].status {
            next.slots[slot.index()].status = Status::Pending {
                boots_left: boots_left.saturating_sub(1),
            };
        }
        next
    }

    /// The slot was verified in flash and passed its self-test: it becomes the active pack.
    pub(crate) fn confirm(self, bound: &BoundSlot) -> State {
        let mut next = self;
        next.slots[bound.slot().index()] = SlotState {
            status: Status::Confirmed,
            pack: bound.pack(),
        };
        next.active = Some(bound.slot());
        next
    }

    /// `slot` is given up for good (a tampered or malformed pack, or trial boots used up). The
    /// sequence stays consumed; the active pack, if any, stays active unless it was this one.
    pub(crate) fn revert(self, slot: Slot) -> State {
        let mut next = self;
        next.slots[slot.index()] = SlotState::EMPTY;
        if next.active == Some(slot) {
            next.active = Slot::ALL
                .into_iter()
                .find(|&s| next.slot(s).status == Status::Confirmed);
        }
        if next.retryable().is_none() {
            next.retries = 0;
        }
        next
    }

    /// The install in `slot` failed for a local reason: it may be started again while retries
    /// are left, else it is given up like [`State::revert`].
    pub(crate) fn fail(self, slot: Slot) -> State {
        let e = self.slot(slot);
        if self.retries == 0 || e.pack.sequence != self.last_sequence || self.active == Some(slot) {
            return self.revert(slot);
        }
        let mut next = self;
        next.slots[slot.index()].status = Status::Failed;
        next
    }
}
