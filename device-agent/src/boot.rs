//! Boot: choose the slot from the journal, re-validate it in flash, bind it.
//!
//! | journal says                        | boot does                                                                 |
//! |-------------------------------------|---------------------------------------------------------------------------|
//! | a slot pending, trial boots left    | records one trial used, *then* verifies, binds and self-tests it: pass → confirmed and active; fail → reverted |
//! | a slot pending, no trial boots left | reverts it: its self-test never got to confirm it (hangs, resets)        |
//! | confirmed slots                     | the active one first, else the other: the first that verifies in flash is bound (and made active) |
//! | nothing bootable                    | [`Error::NoBootableSlot`]                                                 |
//!
//! The trial is journalled before it runs, so a pack whose self-test resets the device is tried
//! at most [`crate::state::MAX_TRIAL_BOOTS`] times. Boot never erases or programs a slot, and a
//! confirmed slot that fails re-validation is skipped, not wiped: a transient read fault must not
//! cost the device its pack.
use embedded_storage::nor_flash::NorFlash;

use crate::agent::Agent;
use crate::error::Error;
use crate::flash::Mapped;
use crate::layout::Slot;
use crate::npu::{Arena, Npu};
use crate::state::PackId;
use crate::verify::{self, VerifiedSlot};

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

/// What boot bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Booted {
    /// The slot, its pack and its NPU registers (already programmed into the NPU).
    pub verified: VerifiedSlot,
    /// A pending pack that was reverted on the way, to report.
    pub reverted: Option<Reverted>,
}

impl<F: NorFlash + Mapped> Agent<F> {
    /// Boots: see the module's table. On `Ok` the NPU has been programmed with the bound pack.
    pub fn boot<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) -> Result<Booted, Error> {
        let mut reverted = None;
        if let Some((slot, boots_left)) = self.state().on_trial() {
            let pack = self.state().slot(slot).pack;
            let outcome = if boots_left == 0 {
                Err(Error::TrialBootsExhausted {
                    boots: crate::state::MAX_TRIAL_BOOTS,
                })
            } else {
                self.commit(self.state().trial_boot(slot))?;
                self.trial(slot, &pack, npu, arena)
            };
            match outcome {
                Ok(verified) => {
                    self.commit(self.state().confirm(&verified))?;
                    return Ok(Booted {
                        verified,
                        reverted: None,
                    });
                }
                Err(reason) => {
                    self.commit(self.state().revert(slot))?;
                    reverted = Some(Reverted {
                        slot,
                        sequence: pack.sequence,
                        reason,
                    });
                }
            }
        }
        let state = *self.state();
        for slot in state.confirmed() {
            let pack = state.slot(slot).pack;
            let Ok(verified) = verify::for_boot(
                &self.flash,
                &self.layout,
                slot,
                &pack,
                self.device.io_bindings,
                arena,
            ) else {
                continue;
            };
            // A fallback becomes the active pack, so the next install overwrites the slot that
            // no longer verifies rather than this one.
            self.commit(self.state().confirm(&verified))?;
            npu.program(verified.registers());
            return Ok(Booted { verified, reverted });
        }
        Err(Error::NoBootableSlot)
    }

    /// One trial of a pending pack: verify in flash, program the NPU, run the self-test.
    pub(crate) fn trial<N: Npu>(
        &self,
        slot: Slot,
        pack: &PackId,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let verified = verify::for_boot(
            &self.flash,
            &self.layout,
            slot,
            pack,
            self.device.io_bindings,
            arena,
        )?;
        npu.program(verified.registers());
        npu.self_test(verified.registers())
            .map_err(|code| Error::SelfTestFailed { code })?;
        Ok(verified)
    }
}
