//! Install: from a signed manifest to a confirmed pack, resumable and power-cut safe.
//!
//! | step | what                                                                                         | journal after it |
//! |------|----------------------------------------------------------------------------------------------|------------------|
//! | 1    | ([`Agent::poll`]) fetch the manifest newer than the last sequence; npub-core verifies it (keyring, sequence, hardware, NPU, slot size, expiry); [`Agent::install`] takes it from here | — |
//! | 1¼   | only while the release trust is active: fetch the pack's release bundle and npub-core's `release::check` it against the policy for the manifest's model (pack SHA-256, model name, version, accelerator, IO digest; nothing required while the trust is inactive). A refusal is reported `failed` with the check that failed, and nothing is erased or fetched | — |
//! | 1½   | the active slot already holds the pack (same length and SHA-256) and verifies in flash against this manifest: the sequence is consumed and the install is done, nothing erased or fetched (a rollback to the running pack, a byte-identical version) | sequence consumed, the active slot journalled under it |
//! | 2    | the inactive slot becomes the target, the sequence is consumed (at most [`MAX_SEQUENCE_STEP`] above the floor), then the monotonic counter is raised to it and the target's descriptor erased | target *receiving*, `written` 0 |
//! | 3    | fetch pack pieces (never past the manifest's length); npub-core's `StreamValidator` checks each piece before it is programmed (header and region table, checks 1–8: a bad one is abandoned at once) and the header checksum is cross-checked against the manifest; erase each sector as it is entered, program | every `progress_bytes`: `written` |
//! | 4    | invalidate the XIP cache; one pass over the slot as mapped: SHA-256 = manifest, NPU1 + FNV-1a, command stream, binding (verify.rs); a failure is read again once after another invalidate | — |
//! | 5    | the slot's signed manifest (on sectors of 1 KiB or more, for the boot check), then its descriptor record, each programmed and read back; the slot goes on trial | target *pending* |
//! | 6    | pin the program (copy the COP1 payload / command stream into the arena, its SHA-256 = the pass's, its stream checked again; once more after an invalidate) and program the NPU (a copy that never reads as verified fails the slot: local), report `verified`, run the self-test | — |
//! | 7    | pass: the slot becomes the active pack (then its descriptor is marked confirmed); fail: the NPU is unbound, the slot *failed* (its descriptor marked revoked) and the previous pack rebound | *confirmed* + active, or *failed* |
//!
//! | failure (what the device reports)                         | the slot becomes | the same manifest again |
//! |-----------------------------------------------------------|------------------|-------------------------|
//! | dropped connection, power cut, flash or journal error (`downloading`, with the reason) | stays *receiving* | resumes at `written`   |
//! | bytes from the server that are not a pack (step 3)         | *empty*          | refused (replayed)      |
//! | the slot does not read back as signed (step 4: a download corrupted on the way, a flash fault), descriptor read-back, self-test (step 6) — a *local* fault (`downloading` with the reason and `attempts` while attempts are left, then `failed`; the self-test `rolled_back`) | *failed* | downloaded again from byte 0 (the caller's poll loop backs off first), up to [`crate::state::MAX_LOCAL_RETRIES`] times |
//! | the bytes are as signed but refused (command stream, binding) | *empty*      | refused (replayed)      |
//!
//! A power cut anywhere leaves the previous pack bootable: the target is never the active slot,
//! and it is bootable only from step 5, after verification. An interrupted download (power cut,
//! dropped connection) resumes at the last journalled `written` when the server offers the same
//! manifest again: the bytes before it are not fetched again (they are re-read from flash in step
//! 4 like all the others), and the sector at `written` is erased again before it is programmed,
//! since the cut may have left it half-written.
//!
//! Each pack byte is hashed once, in step 4, from flash: hashing it while it streams in as well
//! would double the cost and prove less (the bytes that matter are the ones in flash), so the
//! download's validator is `StreamValidator::structure_only`, and step 4 hands its FNV-1a to
//! `Blob::parse_prehashed`. A resumed download first passes the bytes already in flash through a
//! new validator (no network, no hashing).
use embedded_storage::nor_flash::NorFlash;
use npub_core::ManifestError;
use npub_core::ReleaseError;
use npub_core::StreamValidator;
use npub_core::manifest::{
    self, MANIFEST_BYTES, MANIFEST_MAX_BYTES, MANIFEST_V2_BYTES, ManifestView, Policy,
    ROTATION_BYTES, VerifiedManifest,
};
use npub_core::release::{self, ReleaseFacts};

use crate::agent::Agent;
use crate::counter::{MAX_SEQUENCE_STEP, MonotonicCounter};
use crate::descriptor::{self, SelfTestRef};
use crate::error::{Error, TransportError};
use crate::events::failure_line;
use crate::flash::Mapped;
use crate::ids::{PackId, Slot};
use crate::npu::{Arena, Npu, SelfTestResult};
use crate::transport::{Report, ReportState, Transport};
use crate::verify::{self, BoundSlot, VerifiedSlot};

/// The largest piece fetched and programmed at once: a stack buffer, since the agent never
/// allocates. 512 bytes is two OSPI pages and keeps the agent's stack within budget.
pub const CHUNK_BYTES: usize = 512;

/// Keyring updates fetched per request while catching up: the buffer lives on the stack.
pub const KEYRING_FETCH_RECORDS: usize = 4;

/// What one poll did.
// No allocator to box the bound slot into; the value is returned once per poll.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// The server had nothing newer.
    UpToDate,
    /// A new pack was installed, confirmed and bound.
    Installed(BoundSlot),
}

/// An install under way, between [`Agent::begin_install`] and [`Agent::finish_install`]: the
/// manifest, the target slot, the bytes durable in it and the download's structure check.
///
/// It borrows nothing, so a firmware that cannot block for a whole download keeps it beside the
/// agent and calls [`Agent::continue_install`] once per turn of its main loop. Dropping it
/// abandons nothing: the journal holds the download, and the next poll of the same manifest
/// resumes it.
#[derive(Debug, Clone)]
pub struct Installing {
    manifest: VerifiedManifest,
    target: Slot,
    written: u32,
    structure: StreamValidator,
    /// Set once the slot verified, went pending and was bound.
    pending: Option<BoundSlot>,
    /// The active slot already holds the pack: nothing was fetched or programmed, the sequence
    /// was consumed in [`Agent::begin_install`] and `pending` is the active slot.
    held: bool,
    /// Which attempt at this install the download is ([`crate::State::attempt`]): carried by
    /// the report that ends it.
    attempt: u8,
    /// The self-test record stored after the pack and checked in flash against the manifest's
    /// `selftest_digest` (version 2), once it is.
    selftest: Option<SelfTestRef>,
    /// Step 3½ is over: the record is stored (or the manifest names none).
    selftest_fetched: bool,
}

impl Installing {
    /// The manifest being installed.
    pub fn manifest(&self) -> &VerifiedManifest {
        &self.manifest
    }

    /// The slot it goes into.
    pub fn target(&self) -> Slot {
        self.target
    }

    /// Pack bytes in flash so far.
    pub fn written(&self) -> u32 {
        self.written
    }

    /// Whether the active slot already held this pack, so that nothing is downloaded: the
    /// install is done as soon as it begins (a rollback to the pack a device runs, or a
    /// deployment of a byte-identical version).
    pub fn already_held(&self) -> bool {
        self.held
    }

    /// Which attempt at this install this is: 1 for the first download, one more for each
    /// fresh download after a failed one (at most [`crate::state::MAX_LOCAL_RETRIES`] + 1).
    pub fn attempt(&self) -> u8 {
        self.attempt
    }
}

/// Whether the active slot already holds a manifest's pack ([`Agent::try_hold`]).
// Returned once per install, in place.
#[allow(clippy::large_enum_variant)]
enum Hold {
    /// It does, verified and bound again: the install is done as it begins.
    Held(Installing),
    /// It does not (another pack, a sequence step 2 must judge, a slot that no longer verifies):
    /// the pack is downloaded into the other slot.
    Download,
    /// It verified, but its program could not be pinned, so the NPU is unbound: it is bound
    /// again to what still binds, and the pack downloaded into the other slot.
    Unbound,
}

/// What one [`Agent::continue_install`] did.
// As `Poll`: no allocator, returned once per step.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Pack bytes were fetched and programmed: `written` of `len` are in flash.
    Downloading {
        /// Bytes in flash.
        written: u32,
        /// The manifest's length.
        len: u32,
    },
    /// The slot verified in flash, went pending and is programmed into the NPU: run the
    /// self-test on it and hand the outcome to [`Agent::finish_install`].
    Pending(BoundSlot),
}

impl<F: NorFlash + Mapped, C: MonotonicCounter> Agent<F, C> {
    /// Asks the server for a newer manifest and, if there is one, verifies it for this device
    /// and installs its pack ([`Agent::install`]). Reports progress and the outcome through
    /// `transport` (best effort: a failed report does not fail the install). On `Err` the
    /// previous pack is still the active one, and bound again.
    pub fn poll<T: Transport, N: Npu>(
        &mut self,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
        now: Option<u64>,
    ) -> Result<Poll, Error> {
        self.boot_if_needed(npu, arena);
        match self.fetch_update(transport, now)? {
            None => Ok(Poll::UpToDate),
            Some(m) => self.install(&m, transport, npu, arena).map(Poll::Installed),
        }
    }

    /// Step 1 alone: the manifest newer than the last sequence (or the one of an interrupted or
    /// retryable install), verified for this device with its own keyring; `None` when the server
    /// has nothing newer. When the answer announces keyring updates the keyring has not applied,
    /// they are fetched, applied in order and stored in flash first ([`Agent::update_keyring`]).
    /// A refused manifest is reported `failed`.
    #[inline(never)]
    pub fn fetch_update<T: Transport>(
        &mut self,
        transport: &mut T,
        now: Option<u64>,
    ) -> Result<Option<VerifiedManifest>, Error> {
        let mut bytes = [0u8; MANIFEST_MAX_BYTES];
        let state = *self.state();
        // While a download is interrupted, or a failed one may be retried, ask again for its own
        // manifest.
        let again = state
            .receiving()
            .map(|(_, pack, _)| pack)
            .or(state.retryable().map(|(_, pack)| pack));
        let after = match again {
            Some(pack) => pack.sequence.saturating_sub(1),
            None => state.last_sequence(),
        };
        let fetched = transport.fetch_manifest(after, &mut bytes)?;
        if let Some(announced) = transport.keyring_sequence()
            && let Err(e) = self.update_keyring(transport, announced)
        {
            if fetched.is_some() {
                let claimed = claimed_sequence(&bytes, fetched);
                self.refuse(transport, claimed, e);
            }
            return Err(e);
        }
        let Some(len) = fetched else {
            return Ok(None);
        };
        let policy = Policy {
            hw_class: self.device.hw_class,
            accel: self.device.accel,
            slot_bytes: self.layout.pack_capacity::<F>(),
            last_sequence: after,
            now,
        };
        let verified = if len == MANIFEST_BYTES || len == MANIFEST_V2_BYTES {
            manifest::verify(&bytes[..len], &self.keyring, &policy)
        } else {
            Err(npub_core::Error::Manifest(ManifestError::WrongLength {
                len: len as u64,
            }))
        };
        let verified = verified.map_err(|e| {
            let claimed = claimed_sequence(&bytes, Some(len));
            self.refuse(transport, claimed, Error::Rejected(e));
            Error::Rejected(e)
        })?;
        if self.release.is_active() {
            self.check_release(transport, &verified)?;
        }
        Ok(Some(verified))
    }

    /// Step 1¼: the release signatures served beside `manifest`'s pack meet the release policy
    /// for its model (npub-core's `release::check`), or the install is refused and reported
    /// `failed` with the check that failed. A transport failure is returned as it is (the next
    /// poll asks again). Out of line, and the bundle is received into the agent's own buffer:
    /// neither is on the stack while the manifest's signature is checked.
    #[inline(never)]
    fn check_release<T: Transport>(
        &mut self,
        transport: &mut T,
        manifest: &VerifiedManifest,
    ) -> Result<(), Error> {
        let bundle = &mut self.bundle;
        let sha256 = manifest.pack_sha256();
        let checked = match transport.fetch_release(&sha256, bundle)? {
            None => release::check(&self.release, &[], &facts(manifest)),
            Some(n) if n > bundle.len() => {
                Err(npub_core::Error::Release(ReleaseError::BundleTooLong {
                    len: n as u64,
                }))
            }
            Some(n) => release::check(&self.release, &bundle[..n], &facts(manifest)),
        };
        checked.map(|_| ()).map_err(|e| {
            let e = Error::Rejected(e);
            self.refuse(transport, manifest.sequence(), e);
            e
        })
    }

    /// Brings the keyring up to `announced` (the server's `Npub-Keyring-Sequence`): fetches the
    /// updates after its own sequence, applies them in order (each checked by npub-core against
    /// the firmware's root keys) and stores the result in flash before it is used; asks again
    /// until it reaches `announced`, so a device that missed several updates catches up in one
    /// poll. A refused update stops it: the ones before it are kept, and the error says which.
    #[inline(never)]
    pub fn update_keyring<T: Transport>(
        &mut self,
        transport: &mut T,
        announced: u64,
    ) -> Result<(), Error> {
        let mut buf = [0u8; KEYRING_FETCH_RECORDS * ROTATION_BYTES];
        while self.keyring.update_sequence() < announced {
            let have = self.keyring.update_sequence();
            let n = transport.fetch_keyring_updates(have, &mut buf)?;
            if n > buf.len() || n % ROTATION_BYTES != 0 {
                return Err(Error::Transport(TransportError::Protocol(
                    "keyring updates are not whole 144-byte records",
                )));
            }
            if n == 0 {
                return Err(Error::KeyringUpdatesMissing { announced, have });
            }
            let mut next = self.keyring.clone();
            let mut refused = None;
            for record in buf[..n].chunks_exact(ROTATION_BYTES) {
                // Actions 4 to 8 (release keys and policies) only from a release root; 1 to 3
                // from a root, as before. The release trust changes in place, not in a copy (680
                // bytes more on the poll's deepest stack path): if the commit below fails, it is
                // ahead of the flash only by changes that a root signed, and the next poll
                // fetches the same records again, whose release changes then apply as no-ops.
                if let Err(error) = release::apply_update(
                    &mut next,
                    &mut self.release,
                    record,
                    self.device.trust.roots(),
                    self.device.trust.release_roots(),
                ) {
                    let sequence = record_sequence(record);
                    refused = Some(Error::KeyringUpdate { sequence, error });
                    break;
                }
            }
            if next.update_sequence() > have {
                self.commit_keyring(next)?;
            }
            if let Some(e) = refused {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Installs the pack `manifest` describes (steps 2–7 of the module's table), or resumes its
    /// interrupted download, or retries it after a local failure. The manifest must be newer than
    /// every sequence this device started — by at most [`MAX_SEQUENCE_STEP`] — unless it is the
    /// very one whose download was interrupted or which failed locally with retries left.
    /// Reports progress and outcome through `transport`; on `Err` the previous pack is still the
    /// active one, and bound again.
    ///
    /// It is [`Agent::begin_install`] and [`Agent::run_install`].
    // Not inlined into `poll`: the install's locals (the job, the verified slot) would otherwise
    // sit in poll's frame below the keyring update and ed25519 check, the deepest stack path.
    #[inline(never)]
    pub fn install<T: Transport, N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        // The job stays where begin_install wrote it, inside the Result: moving it out (672 B
        // on thumbv8m) would put a second copy in this frame, on the deepest stack path of a
        // poll.
        let mut begun = self.begin_install(manifest, transport, npu, arena);
        match &mut begun {
            Ok(job) => self.run(job, transport, npu, arena),
            Err(e) => Err(*e),
        }
    }

    /// Runs an install that [`Agent::begin_install`] began to its end: [`Agent::continue_install`]
    /// until the pack is pending, `npu`'s [`Npu::self_test`] (not for a pack the active slot
    /// already held: it passed its self-test when it was installed) and
    /// [`Agent::finish_install`]. A caller that wants to know whether anything is downloaded asks
    /// the job ([`Installing::already_held`]) before it hands it over.
    pub fn run_install<T: Transport, N: Npu>(
        &mut self,
        mut job: Installing,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        self.run(&mut job, transport, npu, arena)
    }

    /// [`Agent::run_install`] on a job the caller keeps in place.
    fn run<T: Transport, N: Npu>(
        &mut self,
        job: &mut Installing,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        loop {
            if let Progress::Pending(bound) =
                self.continue_install(job, transport, npu, arena, u32::MAX)?
            {
                let outcome = if job.held {
                    Ok(None)
                } else {
                    let golden = self.golden_input(bound.slot(), job.selftest.as_ref());
                    npu.self_test(bound.registers(), golden)
                };
                return self.finish(job, outcome, transport, npu, arena);
            }
        }
    }

    /// Step 2, and the checks before it: the target slot is chosen and journalled *receiving*
    /// (or the interrupted download of the same pack found again), the counter raised and the
    /// target's descriptor erased. Nothing is fetched yet. On `Err` the failure is reported.
    #[inline(never)]
    pub fn begin_install<T: Transport, N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<Installing, Error> {
        self.boot_if_needed(npu, arena);
        self.begin_booted(manifest, transport, npu, arena)
    }

    /// [`Agent::begin_install`] once booted. (Its own frame, which holds the job: a lazy boot
    /// must not run below it.)
    #[inline(never)]
    fn begin_booted<T: Transport, N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<Installing, Error> {
        let begun = match self.try_hold(manifest, npu, arena) {
            Ok(Hold::Held(job)) => Ok(job),
            Ok(Hold::Download) => self.try_begin(manifest),
            Ok(Hold::Unbound) => {
                // Here, not below try_hold: the rebind's stack is not added to its frame.
                self.rebind(npu, arena);
                self.try_begin(manifest)
            }
            Err(e) => Err(e),
        };
        begun.map_err(|e| self.conclude_failed(transport, manifest, None, e))
    }

    /// One step of steps 3–6: while bytes are missing, fetches and programs up to `budget` more
    /// (at least one piece of [`CHUNK_BYTES`]) and returns [`Progress::Downloading`]; once the
    /// pack is whole, verifies the slot in flash, makes it pending, programs the NPU with it and
    /// returns [`Progress::Pending`] (again on every later call). Each call is bounded: by
    /// `budget` and the transport's timeouts, or by one pass over the slot. On `Err` the install
    /// is over (reported as the module's table says; an interrupted download resumes at the
    /// next poll of its manifest) and the previous pack is still the active one.
    #[inline(never)]
    pub fn continue_install<T: Transport, N: Npu>(
        &mut self,
        job: &mut Installing,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
        budget: u32,
    ) -> Result<Progress, Error> {
        if let Some(bound) = job.pending {
            return Ok(Progress::Pending(bound));
        }
        let len = job.manifest.pack_len();
        let step = if job.written < len {
            self.receive(transport, job, budget)
                .map(|()| Progress::Downloading {
                    written: job.written,
                    len,
                })
        } else if !job.selftest_fetched && job.manifest.selftest_digest().is_some() {
            self.receive_selftest(transport, job)
                .map(|()| Progress::Downloading { written: len, len })
        } else {
            self.make_pending(job, npu, arena).map(|bound| {
                let sequence = job.manifest.sequence();
                self.events.note("install pending", sequence);
                report(transport, sequence, ReportState::Verified, None, None);
                Progress::Pending(bound)
            })
        };
        step.map_err(|e| self.conclude_failed(transport, &job.manifest, Some(job.attempt), e))
    }

    /// Step 7: the self-test's `outcome` on the pending pack of `job`. A pass makes it the
    /// active, confirmed pack (reported `installed`); a failure unbinds it, marks the slot
    /// failed and binds the previous pack again (reported `rolled_back`, and
    /// [`Error::SelfTestFailed`]).
    #[inline(never)]
    pub fn finish_install<T: Transport, N: Npu>(
        &mut self,
        job: Installing,
        outcome: SelfTestResult,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        self.finish(&job, outcome, transport, npu, arena)
    }

    /// The golden input of `job`'s pending pack, for a firmware that runs its self-test itself
    /// between [`Progress::Pending`] and [`Agent::finish_install`]: `Ok(None)` when the pack has
    /// no self-test record (a version-1 manifest), [`Error::SelfTestMissing`] when its record
    /// no longer hashes to the signed digest as flash holds it now (the pack then fails
    /// whatever its self-test answers).
    pub fn install_golden_input(&self, job: &Installing) -> Result<Option<&[u8]>, Error> {
        self.golden(job.target, job.selftest.as_ref())
    }

    /// The self-test record `selftest` of the pack in `slot`, as flash holds it now, only if it
    /// still hashes to the digest it was installed under: a record read back at self-test time
    /// (a trial boot after a reset included) is flash read again, and must not be believed on
    /// the strength of an earlier read.
    fn stored_selftest(&self, slot: Slot, t: &SelfTestRef) -> Option<release::SelfTest<'_>> {
        let pack = self.state().slot(slot).pack();
        let start = u64::from(self.layout.slot(slot)) + descriptor::selftest_offset::<F>(pack.len);
        let start = usize::try_from(start).ok()?;
        let record = self
            .flash
            .mapped()
            .get(start..start.checked_add(t.len as usize)?)?;
        if manifest::sha256(record) != t.digest {
            return None;
        }
        release::SelfTest::parse(record).ok()
    }

    /// The golden input a pending pack's self-test runs: the input of the record in `slot`
    /// (after the pack), as flash holds it; `None` when the pack has no self-test or its record
    /// no longer verifies (then [`Self::digest_failure`] fails the pack).
    pub(crate) fn golden_input(&self, slot: Slot, selftest: Option<&SelfTestRef>) -> Option<&[u8]> {
        self.golden(slot, selftest).ok().flatten()
    }

    /// [`Self::golden_input`], telling a pack without a record (`Ok(None)`) from a record that
    /// no longer verifies ([`Error::SelfTestMissing`]).
    pub(crate) fn golden(
        &self,
        slot: Slot,
        selftest: Option<&SelfTestRef>,
    ) -> Result<Option<&[u8]>, Error> {
        let Some(t) = selftest else {
            return Ok(None);
        };
        match self.stored_selftest(slot, t) {
            Some(r) => Ok(Some(r.input())),
            None => Err(Error::SelfTestMissing),
        }
    }

    /// Whether a self-test's answer `got` (the outputs' SHA-256; `None`: no golden inference
    /// ran) fails the record `selftest` of the pack in `slot`: `Some(SelfTestDigest)` when the
    /// digests differ, `Some(SelfTestMissing)` when the record no longer verifies in flash
    /// (whatever the answer: a skipped run on such a record confirms nothing). A skipped run
    /// (no NPU on the board) with a whole record fails nothing: the firmware says so.
    pub(crate) fn digest_failure(
        &self,
        slot: Slot,
        selftest: Option<&SelfTestRef>,
        got: Option<[u8; 32]>,
    ) -> Option<Error> {
        let t = selftest?;
        let Some(expected) = self.stored_selftest(slot, t).map(|r| r.output_sha256()) else {
            return Some(Error::SelfTestMissing);
        };
        let got = got?;
        (expected != got).then(|| Error::SelfTestDigest {
            expected: manifest::Sha256Prefix::of(&expected),
            got: manifest::Sha256Prefix::of(&got),
        })
    }

    /// Step 3½ (a version-2 manifest): fetch the self-test record into the slot's pack area
    /// from the first erase sector after the pack (so a fetch again never erases pack bytes),
    /// each sector erased as it is entered, then check it as flash holds it: its SHA-256 is the
    /// manifest's `selftest_digest` and it parses as a record. Not journalled: until the
    /// descriptor names it the slot is not bootable, and a resume fetches it again.
    #[inline(never)]
    fn receive_selftest<T: Transport>(
        &mut self,
        transport: &mut T,
        job: &mut Installing,
    ) -> Result<(), Error> {
        let Some(digest) = job.manifest.selftest_digest() else {
            return Ok(());
        };
        let sha256 = job.manifest.pack_sha256();
        let at = descriptor::selftest_offset::<F>(job.manifest.pack_len());
        let capacity = u64::from(self.layout.pack_capacity::<F>());
        let room = capacity.saturating_sub(at) as u32;
        let base = self.layout.slot(job.target) + at.min(capacity) as u32;
        let mut buf = [0u8; CHUNK_BYTES];
        let mut total: Option<u64> = None;
        let mut offset = 0u32;
        loop {
            let want = total.map_or(CHUNK_BYTES as u64, |t| {
                (t - u64::from(offset)).min(CHUNK_BYTES as u64)
            }) as usize;
            if want == 0 {
                break;
            }
            let mut have = 0;
            while have < want {
                let Some(got) = transport.fetch_selftest(
                    &sha256,
                    offset + have as u32,
                    &mut buf[have..want],
                )?
                else {
                    // No record to be had (a server that has none, or C request callbacks
                    // without `fetch_selftest`). The manifest signs that one exists: the pack
                    // is not installed without its golden run (fail closed; only a version-1
                    // manifest, which names none, is confirmed on the firmware's own
                    // self-test). Not a local fault a fresh download would mend: given up,
                    // reported `failed`, until a manifest names a record the server has.
                    let _ = self.commit(self.state().revert(job.target));
                    return Err(Error::SelfTestRecordMissing {
                        manifest: manifest::Sha256Prefix::of(&digest),
                    });
                };
                if got == 0 {
                    break;
                }
                have += got.min(want - have);
            }
            if total.is_none() {
                // The header states the length: 48 bytes and the input.
                if have < npub_core::release::SELFTEST_HEADER_BYTES {
                    return Err(Error::SelfTestMissing);
                }
                let n = u32::from_le_bytes([buf[40], buf[41], buf[42], buf[43]]);
                let len = npub_core::release::SELFTEST_HEADER_BYTES as u64 + u64::from(n);
                if len > u64::from(room) {
                    return Err(Error::SelfTestTooLarge { len, room });
                }
                total = Some(len);
            }
            let have = have.min(total.map_or(have, |t| (t - u64::from(offset)) as usize));
            if have == 0 {
                break;
            }
            self.program(base + offset, &mut buf, have)?;
            offset += have as u32;
        }
        let len = total.unwrap_or(0);
        if u64::from(offset) < len {
            // The answer ended before the length the record's own header states: a cut record,
            // not one whose bytes differ (hashing the erased rest would say "mismatch"). A local
            // fault like a mismatch: the next poll fetches it afresh.
            let _ = self.commit(self.state().fail(job.target));
            return Err(Error::SelfTestRecordShort {
                got: offset,
                stated: len,
            });
        }
        // `len` ≤ `room`, a u32 (checked when the header was read).
        let len = len as u32;
        self.flash.invalidate();
        let start = base as usize;
        let stored = &self.flash.mapped()[start..start + len as usize];
        let computed = manifest::sha256(stored);
        if computed != digest {
            let _ = self.commit(self.state().fail(job.target));
            return Err(Error::SelfTestRecordMismatch {
                manifest: manifest::Sha256Prefix::of(&digest),
                computed: manifest::Sha256Prefix::of(&computed),
            });
        }
        release::SelfTest::parse(stored).map_err(Error::Rejected)?;
        job.selftest = Some(SelfTestRef { digest, len });
        job.selftest_fetched = true;
        Ok(())
    }

    /// [`Agent::finish_install`] on a job the caller keeps in place.
    #[inline(never)]
    fn finish<T: Transport, N: Npu>(
        &mut self,
        job: &Installing,
        outcome: SelfTestResult,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        let Some(bound) = job.pending else {
            // Not pending yet: nothing was programmed, there is nothing to confirm.
            return Err(self.conclude_failed(
                transport,
                &job.manifest,
                Some(job.attempt),
                Error::NotPending,
            ));
        };
        let target = job.target;
        if job.held {
            // The active pack, confirmed long ago: its slot is never failed over a self-test
            // the application re-ran (the sequence was consumed when the install began).
            report(
                transport,
                job.manifest.sequence(),
                ReportState::Installed,
                None,
                None,
            );
            return Ok(bound);
        }
        let failed = match outcome {
            Err(code) => Some(Error::SelfTestFailed { code }),
            Ok(got) => self.digest_failure(target, job.selftest.as_ref(), got),
        };
        // A record whose golden input did not run (no digest came back): confirmed on the
        // firmware's own checks, and said so in the report, never as a pass.
        let skipped = failed.is_none() && job.selftest.is_some() && matches!(outcome, Ok(None));
        if let Some(e) = failed {
            npu.unbind();
            if self.commit(self.state().fail(target)).is_ok() {
                let _ = descriptor::mark_revoked(&mut self.flash, &self.layout, target);
            }
            // Give the NPU back the pack that is still active (if any).
            self.rebind(npu, arena);
            return Err(self.conclude_failed(transport, &job.manifest, Some(job.attempt), e));
        }
        if let Err(e) = self.commit(self.state().confirm(&bound)) {
            // Still pending: the next boot tries it. Until then the active pack runs.
            self.rebind(npu, arena);
            return Err(self.conclude_failed(transport, &job.manifest, Some(job.attempt), e));
        }
        let _ = descriptor::mark_confirmed(&mut self.flash, &self.layout, target);
        let line = if skipped {
            "installed, self-test skipped"
        } else {
            "install confirmed"
        };
        self.events.note(line, job.manifest.sequence());
        let _ = transport.report(&Report {
            sequence: job.manifest.sequence(),
            state: ReportState::Installed,
            progress: None,
            reason: None,
            attempts: None,
            events: None,
            selftest_skipped: skipped,
        });
        Ok(bound)
    }

    /// Reports an install that ended with `reason` (in its download attempt `attempt`, if it
    /// got that far), and hands `reason` back.
    #[inline(never)]
    fn conclude_failed<T: Transport>(
        &mut self,
        transport: &mut T,
        manifest: &VerifiedManifest,
        attempt: Option<u8>,
        reason: Error,
    ) -> Error {
        let pack = PackId::of(manifest);
        let mut attempts = attempt;
        let state = match reason {
            Error::SelfTestFailed { .. } | Error::SelfTestDigest { .. } => ReportState::RolledBack,
            // A local fault (the slot does not read back as signed: a corrupted download) with
            // attempts left: the next poll downloads the pack afresh. To the rollout the device
            // is still downloading; only the last attempt's failure counts towards the
            // auto-abort.
            _ if self.state().retryable().is_some_and(|(_, p)| p == pack) => {
                ReportState::Downloading
            }
            // A download kept for its resume (a dropped connection, a power cut, a flash or
            // journal error) has not failed: saying `failed` would count towards the
            // deployment's auto-abort, and abort a one-device group over a network blip.
            _ if self.state().receiving().is_some_and(|(_, p, _)| p == pack) => {
                // The same attempt goes on at the resume.
                attempts = None;
                ReportState::Downloading
            }
            _ => ReportState::Failed,
        };
        self.events.note(failure_line(&reason), manifest.sequence());
        let failed = matches!(state, ReportState::Failed | ReportState::RolledBack);
        let _ = transport.report(&Report {
            sequence: manifest.sequence(),
            state,
            progress: None,
            reason: Some(reason),
            attempts,
            events: failed.then_some(&self.events),
            selftest_skipped: false,
        });
        reason
    }

    /// Reports a manifest refused for `e` (itself, the keyring update it announced, or its
    /// release signatures) `failed`, with the event log.
    #[inline(never)]
    fn refuse<T: Transport>(&mut self, transport: &mut T, sequence: u64, e: Error) {
        self.events.note(failure_line(&e), sequence);
        let _ = transport.report(&Report {
            sequence,
            state: ReportState::Failed,
            progress: None,
            reason: Some(e),
            attempts: None,
            events: Some(&self.events),
            selftest_skipped: false,
        });
    }

    /// Step 2: the slot and the durable bytes the install of `pack` starts from, journalled.
    #[inline(never)]
    fn begin(&mut self, pack: PackId) -> Result<(Slot, u32), Error> {
        let state = *self.state();
        if let Some((slot, p, written)) = state.receiving() {
            if p == pack {
                return Ok((slot, written));
            }
        }
        if let Some((slot, p)) = state.retryable() {
            if p == pack {
                self.commit(state.retry(slot))?;
                return Ok((slot, 0));
            }
        }
        self.check_sequence(pack)?;
        let target = state.install_target();
        self.commit(state.begin_receiving(target, pack))?;
        Ok((target, 0))
    }

    /// The replay checks of step 2 for `pack` (a new sequence, not too far above the floor).
    fn check_sequence(&self, pack: PackId) -> Result<(), Error> {
        let floor = self.state().last_sequence();
        if pack.sequence <= floor {
            return Err(Error::Rejected(npub_core::Error::Manifest(
                ManifestError::Replayed {
                    sequence: pack.sequence,
                    last: floor,
                },
            )));
        }
        if pack.sequence - floor > MAX_SEQUENCE_STEP {
            return Err(Error::SequenceTooFar {
                sequence: pack.sequence,
                floor,
                max_step: MAX_SEQUENCE_STEP,
            });
        }
        Ok(())
    }

    /// A manifest for the very pack the active slot holds (same length and SHA-256), which still
    /// verifies in flash against this manifest: it is bound again from that verification, the
    /// sequence is consumed (journal, then counter) and nothing is erased, fetched or programmed.
    /// Otherwise the pack is downloaded into the other slot as usual ([`Hold`] says why).
    #[inline(never)]
    fn try_hold<N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<Hold, Error> {
        let pack = PackId::of(manifest);
        let state = *self.state();
        let Some(active) = state.active() else {
            return Ok(Hold::Download);
        };
        let held = state.slot(active).pack();
        if (held.len, held.sha256) != (pack.len, pack.sha256) {
            return Ok(Hold::Download);
        }
        if self.check_sequence(pack).is_err() {
            // Refused, or the retry of an install that fell back to a download: step 2 decides.
            return Ok(Hold::Download);
        }
        let bound = match self.bind_held(active, manifest, npu, arena) {
            Some(Ok(bound)) => bound,
            None => return Ok(Hold::Download),
            Some(Err(_)) => return Ok(Hold::Unbound),
        };
        self.commit(state.hold(pack))?;
        self.counter.raise(pack.sequence)?;
        Ok(Hold::Held(Installing {
            manifest: manifest.clone(),
            target: active,
            written: pack.len,
            structure: StreamValidator::structure_only(pack.len),
            pending: Some(bound),
            held: true,
            attempt: 1,
            selftest: None,
            selftest_fetched: true,
        }))
    }

    /// The active slot verified against `manifest` and bound again from that verification (one
    /// verification binds once: the job's slot is the one it bound); `None` when it does not
    /// verify (the NPU untouched). (Out of line: the verified slot is in no caller's frame.)
    #[inline(never)]
    fn bind_held<N: Npu>(
        &mut self,
        active: Slot,
        manifest: &VerifiedManifest,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Option<Result<BoundSlot, Error>> {
        let io = self.device.io_bindings;
        // What the slot holds now, not what the XIP cache kept from an earlier read.
        self.flash.invalidate();
        let verified = verify::for_install(&self.flash, &self.layout, active, manifest, io, arena);
        if verified.is_err() {
            return None;
        }
        Some(self.bind(npu, verified, arena))
    }

    #[inline(never)]
    fn try_begin(&mut self, manifest: &VerifiedManifest) -> Result<Installing, Error> {
        // Refused before anything is journalled or erased: the application could not use it.
        verify::check_io_digest(manifest, self.device.io_bindings)?;
        let pack = PackId::of(manifest);
        let capacity = self.layout.pack_capacity::<F>();
        if pack.len > capacity {
            return Err(Error::Rejected(npub_core::Error::Manifest(
                ManifestError::PackTooLarge {
                    len: pack.len,
                    slot: capacity,
                },
            )));
        }
        let (target, written) = self.begin(pack)?;
        // The journal holds the sequence; the counter must too before anything is erased, so
        // that losing the journal cannot reopen it.
        self.counter.raise(pack.sequence)?;
        // A resumed download changed nothing in the journal yet: seal it first, so that a record
        // the last power cycle tore cannot come back after this erase.
        self.journal.seal(&mut self.flash, &self.layout)?;
        // The slot stops describing its old pack before any of it is erased.
        descriptor::erase(&mut self.flash, &self.layout, target)?;
        let (structure, written) = match self.resume_validator(target, manifest, written) {
            Ok(v) => (v, written),
            // The durable bytes no longer read as a pack's beginning (rot, a misread): start
            // over rather than give the deployment up; each sector is erased again as it is
            // entered.
            Err(_) => (StreamValidator::structure_only(manifest.pack_len()), 0),
        };
        let attempt = self.state().attempt();
        let line = match (written, attempt) {
            (1.., _) => "download resumed",
            (0, 2..) => "download retried",
            _ => "download started",
        };
        self.events.note(line, pack.sequence);
        Ok(Installing {
            manifest: manifest.clone(),
            target,
            written,
            structure,
            pending: None,
            held: false,
            attempt,
            selftest: None,
            selftest_fetched: false,
        })
    }

    /// Steps 4–6: verify the whole slot, write its descriptor, make it pending, bind it (its
    /// program pinned in the arena, then the NPU programmed). Reports nothing: the caller does,
    /// from a frame that holds neither the verified nor the bound slot (a report is the network's
    /// deep stack).
    #[inline(never)]
    fn make_pending<N: Npu>(
        &mut self,
        job: &mut Installing,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<BoundSlot, Error> {
        let target = job.target;
        let verified = self.verify_pending(target, &job.manifest, job.selftest.as_ref(), arena);
        if let Err(e) = verified {
            return Err(e);
        }
        let bound = self.bind(npu, verified, arena);
        match &bound {
            Ok(b) => job.pending = Some(*b),
            Err(e) => return Err(self.unbindable(target, *e, npu, arena)),
        }
        bound
    }

    /// Steps 4–5: verify the whole slot, write its descriptor, make it pending. A slot that does
    /// not verify is given up as the module's table says.
    #[inline(never)]
    fn verify_pending(
        &mut self,
        target: Slot,
        manifest: &VerifiedManifest,
        selftest: Option<&SelfTestRef>,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let pack = PackId::of(manifest);
        let verified = match self.verify_install(target, manifest, arena) {
            Ok(v) => v,
            Err(e) => {
                // The bytes as signed but refused (command stream, binding): the pack itself is
                // bad. Otherwise the flash does not hold what was signed: a local fault.
                let next = if verify::digest_matches(&self.flash, &self.layout, target, &pack) {
                    self.state().revert(target)
                } else {
                    self.state().fail(target)
                };
                let _ = self.commit(next);
                return Err(e);
            }
        };
        match self.describe(target, manifest, selftest) {
            Ok(()) => {}
            Err(e @ Error::DescriptorReadBack { .. }) => {
                let _ = self.commit(self.state().fail(target));
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        self.commit(self.state().pending(&verified))?;
        Ok(verified)
    }

    /// Step 5's writes: the slot's signed manifest (on sectors of 1 KiB or more, for the boot
    /// check), then the record that makes the sector a descriptor (descriptor.rs's order). The
    /// release bundle's buffer is free once the release check is over. (Out of line: nothing of
    /// it is in `verify_pending`'s frame, which is on the install's deepest path.)
    #[inline(never)]
    fn describe(
        &mut self,
        target: Slot,
        manifest: &VerifiedManifest,
        selftest: Option<&SelfTestRef>,
    ) -> Result<(), Error> {
        let key = self.device.trust.device_key();
        let bytes = manifest.as_bytes();
        descriptor::write_manifest(
            &mut self.flash,
            &self.layout,
            target,
            bytes,
            key,
            &mut self.bundle,
        )?;
        descriptor::write(
            &mut self.flash,
            &self.layout,
            target,
            &PackId::of(manifest),
            selftest,
            key,
        )
    }

    /// A pending pack whose program could not be pinned (its copy never read as verified): a
    /// local fault, so the slot is failed (a later poll may retry) and the active pack bound
    /// again. Returns `e`. (Out of line: `make_pending`'s frame is on the install's deepest path.)
    #[inline(never)]
    fn unbindable<N: Npu>(
        &mut self,
        target: Slot,
        e: Error,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Error {
        if self.commit(self.state().fail(target)).is_ok() {
            let _ = descriptor::mark_revoked(&mut self.flash, &self.layout, target);
        }
        self.rebind(npu, arena);
        e
    }

    /// Steps 4: the one pass over the slot, read again after invalidating the XIP cache when it
    /// fails (the slot was just programmed, and one misread must not cost the install).
    fn verify_install(
        &mut self,
        target: Slot,
        manifest: &VerifiedManifest,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let io = self.device.io_bindings;
        // The slot was just programmed: the XIP cache may hold its old lines.
        self.flash.invalidate();
        verify::for_install(&self.flash, &self.layout, target, manifest, io, arena).or_else(|_| {
            self.flash.invalidate();
            verify::for_install(&self.flash, &self.layout, target, manifest, io, arena)
        })
    }

    /// Binds the active pack again, or unbinds the NPU when none verifies.
    fn rebind<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) {
        let state = *self.state();
        for slot in state.confirmed() {
            let pack = state.slot(slot).pack();
            if self.bind_slot(npu, slot, &pack, arena).is_ok() {
                return;
            }
        }
        npu.unbind();
    }

    /// Step 3: download up to `budget` more bytes of `[written, pack_len)` into the target (at
    /// least one piece), each piece checked by the structure validator before it is programmed.
    fn receive<T: Transport>(
        &mut self,
        transport: &mut T,
        job: &mut Installing,
        budget: u32,
    ) -> Result<(), Error> {
        let received = self.receive_some(transport, job, budget);
        if let Err(Error::Rejected(_) | Error::TransportOverrun { .. }) = received {
            // The server sent bytes that are not the pack: give the slot up.
            let _ = self.commit(self.state().revert(job.target));
        }
        // Otherwise (a dropped connection, a power cut, a journal that could not be written)
        // what is durable is kept for the resume.
        received
    }

    fn receive_some<T: Transport>(
        &mut self,
        transport: &mut T,
        job: &mut Installing,
        budget: u32,
    ) -> Result<(), Error> {
        const { assert!(CHUNK_BYTES % F::WRITE_SIZE == 0) };
        let Installing {
            manifest,
            target,
            written,
            structure,
            ..
        } = job;
        let len = manifest.pack_len();
        let sha256 = manifest.pack_sha256();
        let progress = self.layout.progress_bytes;
        let base = self.layout.slot(*target);
        let stop = written.saturating_add(budget.max(1)).min(len);
        let mut buf = [0u8; CHUNK_BYTES];
        while *written < stop {
            let mark = (*written / progress + 1).saturating_mul(progress).min(len);
            let want = (CHUNK_BYTES as u32).min(mark - *written) as usize;
            let mut have = 0;
            while have < want {
                let offset = *written + have as u32;
                let asked = want - have;
                let got = transport.fetch_pack(&sha256, offset, &mut buf[have..want])?;
                if got == 0 {
                    return Err(Error::PackTruncated {
                        received: offset,
                        expected: len,
                    });
                }
                if got > asked {
                    return Err(Error::TransportOverrun { offset, asked, got });
                }
                have += got;
            }
            structure.feed(&buf[..want]).map_err(Error::Rejected)?;
            cross_check_header(structure, manifest)?;
            self.program(base + *written, &mut buf, want)?;
            *written += want as u32;
            if *written == mark {
                self.commit(self.state().progress(*target, *written))?;
                report(
                    transport,
                    manifest.sequence(),
                    ReportState::Downloading,
                    Some(*written),
                    None,
                );
            }
        }
        Ok(())
    }

    /// Programs `buf[..len]` at flash offset `at`, padded with `0xFF` to the write size, erasing
    /// each sector whose first byte it reaches (a download is sequential from a sector start).
    #[inline(never)]
    fn program(&mut self, at: u32, buf: &mut [u8; CHUNK_BYTES], len: usize) -> Result<(), Error> {
        let padded = len.next_multiple_of(F::WRITE_SIZE);
        buf[len..padded].fill(0xFF);
        let end = at + padded as u32;
        let erase = F::ERASE_SIZE as u32;
        let mut sector = at.next_multiple_of(erase);
        while sector < end {
            self.flash.erase(sector, sector + erase)?;
            sector += erase;
        }
        self.flash.write(at, &buf[..padded])?;
        Ok(())
    }

    /// A structure-only validator that has seen the `written` bytes already in the target slot (a
    /// resumed download), or none.
    #[inline(never)]
    fn resume_validator(
        &mut self,
        target: Slot,
        manifest: &VerifiedManifest,
        written: u32,
    ) -> Result<StreamValidator, Error> {
        let mut v = StreamValidator::structure_only(manifest.pack_len());
        if written > 0 {
            // Programmed earlier in this power cycle, maybe: fetch it as it is now.
            self.flash.invalidate();
            let start = self.layout.slot(target) as usize;
            let done = &self.flash.mapped()[start..start + written as usize];
            v.feed(done).map_err(Error::Rejected)?;
            cross_check_header(&v, manifest)?;
        }
        Ok(v)
    }
}

/// Once the validator has the whole header: its checksum word must be the one the manifest signed.
fn cross_check_header(v: &StreamValidator, manifest: &VerifiedManifest) -> Result<(), Error> {
    match v.header() {
        Some(h) if h.checksum != manifest.pack_checksum() => Err(Error::Rejected(
            npub_core::Error::Manifest(ManifestError::PackChecksumMismatch {
                manifest: manifest.pack_checksum(),
                pack: h.checksum,
            }),
        )),
        _ => Ok(()),
    }
}

/// Sends a report; a failure to report changes nothing on the device (the server learns the
/// state from the next report or poll).
#[inline(never)]
fn report<T: Transport>(
    transport: &mut T,
    sequence: u64,
    state: ReportState,
    progress: Option<u32>,
    reason: Option<Error>,
) {
    let _ = transport.report(&Report {
        sequence,
        state,
        progress,
        reason,
        attempts: None,
        events: None,
        selftest_skipped: false,
    });
}

/// What the release signatures must name: the verified manifest's facts, its self-test
/// digest among them (version 2; all zeros for a version-1 manifest, whose pack has none:
/// what `npub release sign` signs without `--selftest`).
fn facts(manifest: &VerifiedManifest) -> ReleaseFacts<'_> {
    ReleaseFacts::of_signed_manifest(manifest)
}

/// The sequence a refused manifest claims, for its report (0 when it is no manifest at all).
fn claimed_sequence(bytes: &[u8; MANIFEST_MAX_BYTES], len: Option<usize>) -> u64 {
    let len = len.unwrap_or(0).min(MANIFEST_MAX_BYTES);
    ManifestView::new(&bytes[..len]).map_or(0, |v| v.sequence())
}

/// A keyring update's claimed sequence (bytes 16..24 of every action's layout), for the error
/// that names it; 0 when the record is too short. Read, not decoded: decoding every action
/// again would link a second decoder into the firmware for an error message.
fn record_sequence(record: &[u8]) -> u64 {
    record
        .get(16..24)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}
