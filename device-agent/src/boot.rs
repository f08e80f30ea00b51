//! Boot: choose the slot from the journal, re-validate it in flash, bind it.
//!
//! | journal says                        | boot does                                                                 |
//! |-------------------------------------|---------------------------------------------------------------------------|
//! | nothing at all (blank or lost)      | reads the slot descriptors: each slot whose descriptor is not revoked and whose bytes verify against it comes back, confirmed if its descriptor says so, else pending; then as below |
//! | a slot pending, trial boots left    | records one trial used, *then* verifies, binds (its program pinned in the arena: [`Agent::bind`]) and self-tests it: pass → confirmed and active; fail → failed (retry allowed) and unbound; if the trial cannot be recorded it is not run |
//! | a slot pending, no trial boots left | reverts it: its self-test never got to confirm it (hangs, resets)        |
//! | confirmed slots                     | the active one first, else the other: the first that verifies in flash is bound (and made active) |
//! | nothing bootable                    | unbinds the NPU; [`Error::NoBootableSlot`]                                |
//!
//! "Verifies" is the pack against the journal's SHA-256 (NPU1, command stream, binding); with
//! [`crate::Layout::boot_check`], the slot's stored manifest verified again against the keyring
//! and the pack against it (boot_check.rs). A confirmed slot that does not verify is skipped and
//! [`Booted::skipped`] says why.
//!
//! The trial is journalled before it runs, so a pack whose self-test resets the device is tried
//! at most [`crate::state::MAX_TRIAL_BOOTS`] times. Boot never erases or programs a slot, and a
//! confirmed slot that fails re-validation is read again (after [`Mapped::invalidate`]) and then
//! skipped, not wiped: a misread must not cost the device its pack. Only a trial needs the
//! journal to be writable: a confirmed pack that verifies is bound even when every commit fails.
use embedded_storage::nor_flash::NorFlash;

use crate::agent::{Agent, Device};
use crate::counter::MonotonicCounter;
use crate::descriptor;
use crate::error::{Error, EventError};
use crate::flash::Mapped;
use crate::ids::{PackId, Slot};
use crate::layout::Layout;
use crate::npu::{Arena, Npu, SelfTestResult};
use crate::state::{MAX_TRIAL_BOOTS, SlotState, State, Status};
use crate::verify::{self, BoundSlot, VerifiedSlot};

/// An agent right after power-on: it can only boot.
///
/// ```no_run
/// # use device_agent::{Agent, Arena, Device, Layout, NorCounter, RecordingNpu, Transport};
/// # use device_agent::nor_emu::NorEmu;
/// # fn run(flash: NorEmu<16, 4096>, counter: NorEmu<16, 4096>, layout: Layout, device: Device,
/// #        server: &mut impl Transport, arena: &mut Arena<'_>) {
/// let mut npu = RecordingNpu::default();
/// let unbooted = Agent::power_on(flash, NorCounter::new(counter, 0), layout, device).unwrap();
/// let (mut agent, _booted) = unbooted.boot(&mut npu, arena);
/// let _ = agent.poll(server, &mut npu, arena, None);
/// # }
/// ```
///
/// Polling before boot does not compile:
///
/// ```compile_fail
/// # use device_agent::{Agent, Arena, Device, Layout, NorCounter, RecordingNpu, Transport};
/// # use device_agent::nor_emu::NorEmu;
/// # fn run(flash: NorEmu<16, 4096>, counter: NorEmu<16, 4096>, layout: Layout, device: Device,
/// #        server: &mut impl Transport, arena: &mut Arena<'_>) {
/// let mut npu = RecordingNpu::default();
/// let mut unbooted = Agent::power_on(flash, NorCounter::new(counter, 0), layout, device).unwrap();
/// let _ = unbooted.poll(server, &mut npu, arena, None);
/// # }
/// ```
#[derive(Debug)]
pub struct Unbooted<F, C>(Agent<F, C>);

/// A pending pack that boot gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reverted {
    /// Its slot.
    pub slot: Slot,
    /// Its manifest sequence.
    pub sequence: u64,
    /// Why it was given up.
    pub reason: Error,
}

/// A confirmed slot that boot did not bind because it did not verify (read twice): the other
/// one was tried instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Its slot.
    pub slot: Slot,
    /// The sequence the journal says it holds.
    pub sequence: u64,
    /// Why it did not verify (with the boot check: its stored manifest, or the pack against it).
    pub reason: Error,
}

/// What boot bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Booted {
    /// The slot, its pack and its NPU registers (already programmed into the NPU).
    pub bound: BoundSlot,
    /// A pending pack that was reverted on the way, to report.
    pub reverted: Option<Reverted>,
    /// The confirmed slot skipped on the way (the active one, when the other is bound), to
    /// report.
    pub skipped: Option<Skipped>,
}

/// Where [`Agent::boot_start`] stopped.
// No allocator to box the bound slot into; the value is returned once per boot.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootStart {
    /// A pending pack verified and is programmed into the NPU on trial (the trial is journalled):
    /// run the application's self-test on it and hand the outcome to [`Agent::settle_trial`].
    /// Until then the pack is not confirmed; a reset before that costs one of its trial boots.
    Trial(BoundSlot),
    /// Boot is over: what it bound, or why nothing is bound.
    Done(Result<Booted, Error>),
}

impl<F: NorFlash + Mapped, C: MonotonicCounter> Agent<F, C> {
    /// Powers the agent on: checks the layout against `flash` (a misfit is a firmware bug and
    /// panics), mounts the journal, reads the replay floor from `counter` and the keyring from
    /// its area (the factory keyring of `device.trust` while the area holds none). A counter that
    /// reads more than [`crate::MAX_SEQUENCE_STEP`] above the journal's floor is refused
    /// ([`crate::CounterError::AheadOfJournal`]) before anything is written. It writes only
    /// to heal: the newest journal or keyring record is committed again if it was found in one
    /// copy only (or, when a journal record was a session's first, its bank is erased and the
    /// previous state stands), and the counter is raised if it lags the journal (a raise that a
    /// power cut stopped).
    pub fn power_on(
        flash: F,
        counter: C,
        layout: Layout,
        device: Device,
    ) -> Result<Unbooted<F, C>, Error> {
        Agent::mount(flash, counter, layout, device).map(Unbooted)
    }

    /// Boots: see the module's table. On `Ok` the NPU has been programmed with the bound pack; on
    /// `Err` it has been unbound. Also rebinds the active pack on an agent that is running.
    ///
    /// A pending pack's self-test is `npu`'s [`Npu::self_test`], run at once; a firmware whose
    /// self-test is not one call (the C ABI's) uses [`Agent::boot_start`] and
    /// [`Agent::settle_trial`], which this is made of.
    pub fn boot<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) -> Result<Booted, Error> {
        match self.boot_start(npu, arena) {
            BootStart::Trial(bound) => {
                let selftest = self.trial_selftest(bound.slot()).ok().flatten();
                let golden = self.golden_input(bound.slot(), selftest.as_ref());
                let outcome = npu.self_test(bound.registers(), golden);
                self.settle_trial(&bound, outcome, npu, arena)
            }
            BootStart::Done(booted) => booted,
        }
    }

    /// Boots up to a pending pack's self-test: resolves everything else in the module's table,
    /// and stops with [`BootStart::Trial`] when a pending pack is bound on trial.
    pub fn boot_start<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) -> BootStart {
        self.booted = true;
        if !self.journal.has_records() {
            if let Err(e) = self.rebuild_from_descriptors(arena) {
                return BootStart::Done(Err(e));
            }
        }
        let reverted = match self.state().on_trial() {
            None => None,
            Some((slot, 0)) => {
                let pack = self.state().slot(slot).pack();
                let reason = Error::TrialBootsExhausted {
                    boots: MAX_TRIAL_BOOTS,
                };
                Some(self.give_up(slot, &pack, reason, npu))
            }
            // Unrecorded, a trial whose self-test resets the device would run for ever: a trial
            // that cannot be journalled is not run, and the confirmed pack boots.
            Some((slot, _)) if self.commit(self.state().trial_boot(slot)).is_err() => None,
            Some((slot, _)) => {
                let pack = self.state().slot(slot).pack();
                match self.bind_slot(npu, slot, &pack, arena) {
                    Ok(bound) => return BootStart::Trial(bound),
                    Err(reason) => Some(self.give_up(slot, &pack, reason, npu)),
                }
            }
        };
        BootStart::Done(self.bind_confirmed(npu, arena, reverted))
    }

    /// The confirmed slot the last boot skipped because it did not verify, and why: what
    /// [`Booted::skipped`] says, and the reason behind an [`Error::NoBootableSlot`] when no slot
    /// verified (the active one's, when it was the one skipped first).
    pub fn boot_skipped(&self) -> Option<Skipped> {
        self.skipped.map(|(slot, sequence, reason)| Skipped {
            slot,
            sequence,
            reason,
        })
    }

    /// Ends a boot that stopped at [`BootStart::Trial`] with the self-test's `outcome` on
    /// `bound` (the pack it returned): a pass confirms the pack and it stays bound; a failure
    /// gives it up (failed, its descriptor revoked), unbinds it and boots the confirmed pack.
    ///
    /// `outcome` is [`Npu::self_test`]'s: with the outputs' SHA-256 of the golden input
    /// ([`Agent::trial_golden_input`]), a digest other than the record's is a failure
    /// ([`Error::SelfTestDigest`]); so is a slot descriptor that no longer reads back
    /// ([`Error::DescriptorReadBack`]: whether the pack has a record to judge it by is unknown).
    pub fn settle_trial<N: Npu>(
        &mut self,
        bound: &BoundSlot,
        outcome: SelfTestResult,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<Booted, Error> {
        let slot = bound.slot();
        let outcome = match outcome {
            Err(code) => Err(Error::SelfTestFailed { code }),
            Ok(got) => match self.trial_selftest(slot) {
                Err(e) => Err(e),
                Ok(selftest) => match self.digest_failure(slot, selftest.as_ref(), got) {
                    Some(e) => Err(e),
                    None => Ok(()),
                },
            },
        };
        match outcome {
            Ok(()) => {
                if self.commit(self.state().confirm(bound)).is_ok() {
                    let _ = descriptor::mark_confirmed(&mut self.flash, &self.layout, slot);
                }
                Ok(Booted {
                    bound: *bound,
                    reverted: None,
                    skipped: None,
                })
            }
            Err(reason) => {
                let reverted = self.give_up(slot, &bound.pack(), reason, npu);
                self.bind_confirmed(npu, arena, Some(reverted))
            }
        }
    }

    /// The self-test record the descriptor of `slot` names (its pack's, stored after it), if
    /// any. A descriptor that no longer reads back (a flash error, or torn or rewritten since
    /// the install wrote it: its frame or MAC fails) is an error, not "no record": otherwise a
    /// version-2 pack whose descriptor rotted would be confirmed without its signed self-test.
    fn trial_selftest(&mut self, slot: Slot) -> Result<Option<descriptor::SelfTestRef>, Error> {
        let key = self.device.trust.device_key();
        match descriptor::read(&mut self.flash, &self.layout, slot, key)? {
            Some(d) => Ok(d.selftest),
            None => Err(Error::DescriptorReadBack { slot }),
        }
    }

    /// The golden input of the pack on trial in `slot` (from [`BootStart::Trial`]): what a
    /// firmware whose self-test is not one call runs before [`Agent::settle_trial`]; `Ok(None)`
    /// when the pack has no self-test record, [`Error::SelfTestMissing`] when its record no
    /// longer hashes to the signed digest as flash holds it now, [`Error::DescriptorReadBack`]
    /// when the slot's descriptor (which names the record) no longer reads back.
    pub fn trial_golden_input(&mut self, slot: Slot) -> Result<Option<&[u8]>, Error> {
        let selftest = self.trial_selftest(slot)?;
        self.golden(slot, selftest.as_ref())
    }

    /// Gives the pending pack in `slot` up for `reason`: the NPU unbound, the slot failed (a
    /// local fault may be retried) or reverted (trials used up), its descriptor revoked.
    fn give_up<N: Npu>(
        &mut self,
        slot: Slot,
        pack: &PackId,
        reason: Error,
        npu: &mut N,
    ) -> Reverted {
        npu.unbind();
        let (next, line) = match reason {
            Error::TrialBootsExhausted { .. } => (
                self.state().revert(slot),
                "boot: trial boots used up, reverted",
            ),
            _ => (self.state().fail(slot), "boot: trial failed, reverted"),
        };
        self.events.note(line, pack.sequence);
        if self.commit(next).is_ok() {
            let _ = descriptor::mark_revoked(&mut self.flash, &self.layout, slot);
        }
        Reverted {
            slot,
            sequence: pack.sequence,
            reason,
        }
    }

    /// Binds the first confirmed slot that verifies (the active one first), or unbinds the NPU.
    fn bind_confirmed<N: Npu>(
        &mut self,
        npu: &mut N,
        arena: &mut Arena<'_>,
        reverted: Option<Reverted>,
    ) -> Result<Booted, Error> {
        let state = *self.state();
        self.skipped = None;
        for slot in state.confirmed() {
            let pack = state.slot(slot).pack();
            let bound = match self.bind_slot(npu, slot, &pack, arena) {
                Ok(bound) => bound,
                Err(reason) => {
                    self.events
                        .note("boot: slot does not verify", pack.sequence);
                    self.skipped = self.skipped.or(Some((slot, pack.sequence, reason)));
                    continue;
                }
            };
            // A fallback becomes the active pack, so the next install overwrites the slot that
            // no longer verifies rather than this one. Best effort: it is bound either way.
            let _ = self.commit(self.state().confirm(&bound));
            return Ok(Booted {
                bound,
                reverted,
                skipped: self.boot_skipped(),
            });
        }
        npu.unbind();
        self.events.note("boot: nothing bootable", 0);
        Err(Error::NoBootableSlot)
    }

    /// Binds the slot a verification returned: its program is copied into the arena and proven
    /// ([`verify::pin`]), then the NPU is programmed. On a failure to pin, the NPU is unbound:
    /// the copy may have overwritten the program of the pack it held. A verification's `Err` is
    /// handed back as it is, the NPU untouched. (The verification comes as the `Result` it was
    /// returned in and is read in place: taking the slot out of it would copy it on the stack.)
    pub(crate) fn bind<N: Npu>(
        &mut self,
        npu: &mut N,
        verified: Result<VerifiedSlot, Error>,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        let verified = match &verified {
            Ok(verified) => verified,
            Err(e) => return Err(*e),
        };
        // Matched by reference and returned as it is: one bound slot in this frame.
        let pinned = verify::pin_owned(&mut self.flash, &self.layout, verified, arena);
        match &pinned {
            Ok(bound) => npu.program(bound.registers()),
            Err(_) => npu.unbind(),
        }
        pinned
    }

    /// Verifies `slot` against `pack` ([`Agent::verify_for_boot`]) and binds it. Out of line,
    /// so that the verified slot, which binding consumes, is in no caller's frame.
    #[inline(never)]
    pub(crate) fn bind_slot<N: Npu>(
        &mut self,
        npu: &mut N,
        slot: Slot,
        pack: &PackId,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        // verify_for_boot's retry, written into the one `Result` that binding then reads: its
        // own frame would hold a second verification on this path.
        let mut verified = self.verify_slot(slot, pack, arena);
        if verified.is_err() {
            self.flash.invalidate();
            verified = self.verify_slot(slot, pack, arena);
        }
        self.bind(npu, verified, arena)
    }

    /// Verifies `slot` against `pack` (boot_check.rs); a failure is read again after invalidating the XIP cache
    /// before it is believed.
    pub(crate) fn verify_for_boot(
        &mut self,
        slot: Slot,
        pack: &PackId,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        self.verify_slot(slot, pack, arena).or_else(|_| {
            self.flash.invalidate();
            self.verify_slot(slot, pack, arena)
        })
    }

    /// The journal holds no record at all (blank, erased, or written by a firmware with another
    /// layout): find the packs again from the slot descriptors. On a blank device this finds
    /// nothing and changes nothing.
    fn rebuild_from_descriptors(&mut self, arena: &mut Arena<'_>) -> Result<(), Error> {
        let mut found: [Option<(PackId, bool)>; 2] = [None, None];
        for slot in Slot::ALL {
            let key = self.device.trust.device_key();
            let Some(d) = descriptor::read(&mut self.flash, &self.layout, slot, key)? else {
                continue;
            };
            if !d.revoked && self.verify_for_boot(slot, &d.pack, arena).is_ok() {
                found[slot.index()] = Some((d.pack, d.confirmed));
            }
        }
        if found == [None, None] {
            return Ok(());
        }
        let seq = |s: Slot| found[s.index()].map_or(0, |(p, _)| p.sequence);
        let confirmed = |s: Slot| found[s.index()].is_some_and(|(_, c)| c);
        let newest_first = if seq(Slot::B) > seq(Slot::A) {
            [Slot::B, Slot::A]
        } else {
            [Slot::A, Slot::B]
        };
        let active = newest_first.into_iter().find(|&s| confirmed(s));
        // At most one pack on trial: the newest unconfirmed one.
        let trial = newest_first
            .into_iter()
            .find(|&s| found[s.index()].is_some() && !confirmed(s));
        let mut slots = [SlotState::EMPTY; 2];
        for s in Slot::ALL {
            if let Some((pack, _)) = found[s.index()] {
                let status = if confirmed(s) {
                    Status::Confirmed
                } else if trial == Some(s) {
                    Status::Pending {
                        boots_left: MAX_TRIAL_BOOTS,
                    }
                } else {
                    continue;
                };
                slots[s.index()] = SlotState::new(status, pack);
            }
        }
        let floor = self
            .state()
            .last_sequence()
            .max(seq(Slot::A))
            .max(seq(Slot::B));
        let state = State::from_parts(floor, 0, active, slots);
        self.journal.assume(state);
        // Best effort: if the journal cannot be written, the next boot rebuilds again.
        let _ = self.journal.commit(&mut self.flash, &self.layout, state);
        Ok(())
    }
}

impl<F: NorFlash + Mapped, C: MonotonicCounter> Unbooted<F, C> {
    /// Boots (see boot.rs): resolves a pending pack, re-validates and binds. Whatever the
    /// outcome, the agent that comes back may poll: a device with nothing bootable still installs
    /// its first pack.
    pub fn boot<N: Npu>(
        self,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> (Agent<F, C>, Result<Booted, Error>) {
        let mut agent = self.0;
        let booted = agent.boot(npu, arena);
        (agent, booted)
    }

    /// Boots up to a pending pack's self-test ([`Agent::boot_start`]): the agent, and either the
    /// end of the boot or the pack on trial, whose outcome goes to [`Agent::settle_trial`].
    pub fn boot_start<N: Npu>(
        self,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> (Agent<F, C>, BootStart) {
        let mut agent = self.0;
        let start = agent.boot_start(npu, arena);
        (agent, start)
    }

    /// The state the journal holds (with the replay floor from the counter).
    pub fn state(&self) -> &State {
        self.0.state()
    }

    /// The flash, to read.
    pub fn flash(&self) -> &F {
        &self.0.flash
    }

    /// The flash, to reach the driver (see [`Agent::flash_mut`]).
    pub fn flash_mut(&mut self) -> &mut F {
        &mut self.0.flash
    }

    /// Adds the firmware's own line to the event log before boot ([`Agent::record_event`]).
    pub fn record_event(&mut self, line: impl AsRef<[u8]>) -> Result<(), EventError> {
        self.0.record_event(line)
    }

    /// Gives the flash and the counter back (a power cut before boot).
    pub fn into_parts(self) -> (F, C) {
        self.0.into_parts()
    }
}
