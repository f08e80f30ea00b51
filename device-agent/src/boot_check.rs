//! The boot check ([`crate::Layout::boot_check`]): a slot is verified again from its signed
//! manifest, kept beside it (descriptor.rs), before the NPU is bound to it.
//!
//! | step | check                                                                          | a failure                               |
//! |------|--------------------------------------------------------------------------------|-----------------------------------------|
//! | 1    | the slot's stored manifest reads back whole (its check word: CRC, or the device key's MAC) | [`Error::StoredManifestMissing`] |
//! | 2    | npub-core's `manifest::verify` against the keyring *as it stands* (its signing key known and not revoked, the ed25519 signature, every field, the device's hardware class, NPU and slot size); expiry is not checked | [`Error::StoredManifestRefused`] |
//! | 3    | it names the pack the journal (or the descriptor) says the slot holds: length, sequence, SHA-256 | [`Error::StoredManifestMismatch`] |
//! | 4    | the slot against that manifest (`verify::for_install`): the IO digest, SHA-256, NPU1 structure and FNV-1a, the header checksum, the command stream, the binding | that check's error (a SHA-256 mismatch is [`Error::DigestMismatch`], as without the check) |
//!
//! A failure is what a torn or rotted slot is to boot: the slot is read again after an XIP
//! invalidate, then skipped (the other confirmed slot is bound, or nothing), never erased; a
//! pending pack that fails is given up as one that does not verify.
//!
//! | since the install, the signing key was…                    | the slot at boot                |
//! |------------------------------------------------------------|---------------------------------|
//! | rotated (a new key added, the old one still in the keyring) | boots: the old key still verifies |
//! | revoked (a keyring update from a root)                      | refused ([`Error::StoredManifestRefused`], `KeyRevoked`): a revocation says the key may be in someone else's hands, and a pack it signed may be theirs. Deploy a pack signed with another key before revoking one whose packs devices run: a manifest for the very pack a device runs is a *held* install, which keeps the stored manifest it has (the part is programmed once per erase), so re-signing the same bytes does not help |
//! | expired (its `expires_at` passed)                           | boots: expiry stops freezing a device on an old deployment at install time, not a pack that runs |
//!
//! The release trust (release signatures, docs/release.md) is not checked again: the bundle is
//! not kept in flash, and the install checked it before a byte was fetched.
//!
//! Without the boot check, boot verifies the slot against the journal's SHA-256 only
//! (`verify::for_boot`): a flipped byte in the pack is still caught, a rewritten journal or
//! descriptor with a matching SHA-256 is not (with a device key, not without its MAC either).
use embedded_storage::nor_flash::NorFlash;
use npub_core::ManifestError;
use npub_core::manifest::{self, Policy, VerifiedManifest};

use crate::agent::Agent;
use crate::counter::MonotonicCounter;
use crate::descriptor;
use crate::error::Error;
use crate::flash::Mapped;
use crate::ids::{PackId, Slot};
use crate::npu::Arena;
use crate::verify::{self, VerifiedSlot};

impl<F: NorFlash + Mapped, C: MonotonicCounter> Agent<F, C> {
    /// Verifies `slot`, which the journal (or its descriptor) says holds `pack`, for boot: with
    /// the boot check, from its stored manifest (the module's table); without it, against
    /// `pack`'s SHA-256 (`verify::for_boot`). Once: the caller reads again after an invalidate.
    #[inline(never)]
    pub(crate) fn verify_slot(
        &mut self,
        slot: Slot,
        pack: &PackId,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let io = self.device.io_bindings;
        if !self.layout.boot_check {
            return verify::for_boot(&self.flash, &self.layout, slot, pack, io, arena);
        }
        self.verify_signed(slot, pack, arena)
    }

    /// Steps 1–4 (the module's table). Out of line: the manifest it holds is on no stack
    /// without the boot check, nor under a caller's frame.
    #[inline(never)]
    fn verify_signed(
        &mut self,
        slot: Slot,
        pack: &PackId,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let manifest = self.stored_manifest(slot, pack)?;
        let io = self.device.io_bindings;
        let verified = verify::for_install(&self.flash, &self.layout, slot, &manifest, io, arena);
        // The same fault as without the check: the slot does not hold what was signed. (Tested
        // in place: the verified slot is not moved through a match.)
        if let Err(Error::Rejected(npub_core::Error::Manifest(ManifestError::PackHashMismatch {
            ..
        }))) = verified
        {
            return Err(Error::DigestMismatch { slot });
        }
        verified
    }

    /// Steps 1–3: `slot`'s stored manifest, verified against the keyring as it stands and
    /// naming `pack`. (Out of line: the ed25519 check's stack is not under the pass's.)
    #[inline(never)]
    fn stored_manifest(&mut self, slot: Slot, pack: &PackId) -> Result<VerifiedManifest, Error> {
        let key = self.device.trust.device_key();
        // The release bundle's buffer is free at boot: the part is read there, not on the stack.
        let Some(range) =
            descriptor::read_manifest(&mut self.flash, &self.layout, slot, key, &mut self.bundle)?
        else {
            return Err(Error::StoredManifestMissing { slot });
        };
        let policy = Policy {
            hw_class: self.device.hw_class,
            accel: self.device.accel,
            slot_bytes: self.layout.pack_capacity::<F>(),
            // Not a replay check: step 3 demands exactly the journal's sequence.
            last_sequence: 0,
            now: None,
        };
        let manifest = manifest::verify(&self.bundle[range], &self.keyring, &policy)
            .map_err(|error| Error::StoredManifestRefused { slot, error })?;
        if PackId::of(&manifest) != *pack {
            return Err(Error::StoredManifestMismatch { slot });
        }
        Ok(manifest)
    }
}
