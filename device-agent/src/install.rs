//! Install: from a signed manifest to a confirmed pack, resumable and power-cut safe.
//!
//! | step | what                                                                                         | journal after it |
//! |------|----------------------------------------------------------------------------------------------|------------------|
//! | 1    | ([`Agent::poll`]) fetch the manifest newer than the last sequence; npub-core verifies it (keyring, sequence, hardware, NPU, slot size, expiry); [`Agent::install`] takes it from here | — |
//! | 2    | the inactive slot becomes the target, the sequence is consumed                              | target *receiving*, `written` 0 |
//! | 3    | fetch pack pieces (never past the manifest's length); npub-core's `StreamValidator` checks each piece before it is programmed (header and region table, checks 1–8: a bad one is abandoned at once) and the header checksum is cross-checked against the manifest; erase each sector as it is entered, program | every `progress_bytes`: `written` |
//! | 4    | one pass over the slot as mapped: SHA-256 = manifest, NPU1 + FNV-1a, command stream, binding (verify.rs) | — |
//! | 5    | the slot goes on trial                                                                       | target *pending* |
//! | 6    | program the NPU, run the self-test                                                           | — |
//! | 7    | pass: the slot becomes the active pack; fail: it is reverted and the previous pack rebound   | *confirmed* + active, or *empty* |
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
use npub_core::StreamValidator;
use npub_core::manifest::{self, Keyring, MANIFEST_BYTES, ManifestView, Policy, VerifiedManifest};

use crate::agent::Agent;
use crate::error::Error;
use crate::flash::Mapped;
use crate::layout::Slot;
use crate::npu::{Arena, Npu};
use crate::state::PackId;
use crate::transport::{Report, ReportState, Transport};
use crate::verify::{self, VerifiedSlot};

/// The largest piece fetched and programmed at once: a stack buffer, since the agent never
/// allocates. 512 bytes is two OSPI pages and keeps the agent's stack within budget.
pub const CHUNK_BYTES: usize = 512;

/// What one poll did.
// No allocator to box the verified slot into; the value is returned once per poll.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// The server had nothing newer.
    UpToDate,
    /// A new pack was installed, confirmed and bound.
    Installed(VerifiedSlot),
}

impl<F: NorFlash + Mapped> Agent<F> {
    /// Asks the server for a newer manifest and, if there is one, verifies it for this device
    /// and installs its pack ([`Agent::install`]). Reports progress and the outcome through
    /// `transport` (best effort: a failed report does not fail the install). On `Err` the
    /// previous pack is still the active one, and bound again.
    pub fn poll<T: Transport, N: Npu, const K: usize>(
        &mut self,
        transport: &mut T,
        keyring: &Keyring<K>,
        npu: &mut N,
        arena: &mut Arena<'_>,
        now: Option<u64>,
    ) -> Result<Poll, Error> {
        let mut bytes = [0u8; MANIFEST_BYTES];
        let state = *self.state();
        // While a download is interrupted, ask again for its own manifest.
        let after = match state.receiving() {
            Some((_, pack, _)) => pack.sequence.saturating_sub(1),
            None => state.last_sequence,
        };
        let Some(len) = transport.fetch_manifest(after, &mut bytes)? else {
            return Ok(Poll::UpToDate);
        };
        let policy = Policy {
            hw_class: self.device.hw_class,
            accel: self.device.accel,
            slot_bytes: self.layout.slot_bytes,
            last_sequence: after,
            now,
        };
        let verified = if len == MANIFEST_BYTES {
            manifest::verify(&bytes, keyring, &policy)
        } else {
            Err(npub_core::Error::ManifestWrongLength { len: len as u64 })
        };
        match verified {
            Ok(m) => self.install(&m, transport, npu, arena).map(Poll::Installed),
            Err(e) => {
                let claimed = ManifestView::new(&bytes).map_or(0, |v| v.sequence());
                report(
                    transport,
                    claimed,
                    ReportState::Failed,
                    None,
                    Some(Error::Rejected(e)),
                );
                Err(Error::Rejected(e))
            }
        }
    }

    /// Installs the pack `manifest` describes (steps 2–7 of the module's table), or resumes its
    /// interrupted download. The manifest must be newer than every sequence this device started,
    /// unless it is the very one whose download was interrupted. Reports progress and outcome
    /// through `transport`; on `Err` the previous pack is still the active one, and bound again.
    pub fn install<T: Transport, N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        let result = self.try_install(manifest, transport, npu, arena);
        match result {
            Err(reason @ Error::SelfTestFailed { .. }) => {
                report(
                    transport,
                    manifest.sequence(),
                    ReportState::RolledBack,
                    None,
                    Some(reason),
                );
            }
            Err(reason) => {
                report(
                    transport,
                    manifest.sequence(),
                    ReportState::Failed,
                    None,
                    Some(reason),
                );
            }
            Ok(_) => report(
                transport,
                manifest.sequence(),
                ReportState::Installed,
                None,
                None,
            ),
        }
        result
    }

    fn try_install<T: Transport, N: Npu>(
        &mut self,
        manifest: &VerifiedManifest,
        transport: &mut T,
        npu: &mut N,
        arena: &mut Arena<'_>,
    ) -> Result<VerifiedSlot, Error> {
        // Refused before anything is journalled or erased: the application could not use it.
        verify::check_io_digest(manifest, self.device.io_bindings)?;
        let pack = PackId::of(manifest);
        let state = *self.state();
        let (target, written) = match state.receiving() {
            Some((slot, p, written)) if p == pack => (slot, written),
            _ if pack.sequence <= state.last_sequence => {
                return Err(Error::Rejected(npub_core::Error::ManifestReplayed {
                    sequence: pack.sequence,
                    last: state.last_sequence,
                }));
            }
            _ => {
                let target = state.install_target();
                self.commit(state.begin_receiving(target, pack))?;
                (target, 0)
            }
        };
        let outcome = self
            .receive(transport, target, manifest, written)
            .and_then(|()| {
                verify::for_install(
                    &self.flash,
                    &self.layout,
                    target,
                    manifest,
                    self.device.io_bindings,
                    arena,
                )
            });
        let verified = match outcome {
            Ok(v) => v,
            // A dropped connection or a power cut: keep what is durable for the resume.
            Err(e @ (Error::Transport(_) | Error::Flash(_) | Error::PackTruncated { .. })) => {
                return Err(e);
            }
            Err(e) => {
                self.commit(self.state().revert(target))?;
                return Err(e);
            }
        };
        report(transport, pack.sequence, ReportState::Verified, None, None);
        self.commit(self.state().pending(&verified))?;
        npu.program(verified.registers());
        if let Err(code) = npu.self_test(verified.registers()) {
            self.commit(self.state().revert(target))?;
            // Give the NPU back the pack that is still active (if any).
            let _ = self.boot(npu, arena);
            return Err(Error::SelfTestFailed { code });
        }
        self.commit(self.state().confirm(&verified))?;
        Ok(verified)
    }

    /// Step 3: download `[written, pack_len)` into `target`.
    fn receive<T: Transport>(
        &mut self,
        transport: &mut T,
        target: Slot,
        manifest: &VerifiedManifest,
        mut written: u32,
    ) -> Result<(), Error> {
        const { assert!(CHUNK_BYTES % F::WRITE_SIZE == 0) };
        let len = manifest.pack_len();
        let sha256 = manifest.pack_sha256();
        let progress = self.layout.progress_bytes;
        let base = self.layout.slot(target);
        let mut structure = self.resume_validator(target, manifest, written)?;
        let mut buf = [0u8; CHUNK_BYTES];
        while written < len {
            let mark = (written / progress + 1).saturating_mul(progress).min(len);
            let want = (CHUNK_BYTES as u32).min(mark - written) as usize;
            let mut have = 0;
            while have < want {
                let offset = written + have as u32;
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
            cross_check_header(&structure, manifest)?;
            self.program(base + written, &mut buf, want)?;
            written += want as u32;
            if written == mark {
                self.commit(self.state().progress(target, written))?;
                report(
                    transport,
                    manifest.sequence(),
                    ReportState::Downloading,
                    Some(written),
                    None,
                );
            }
        }
        Ok(())
    }

    /// Programs `buf[..len]` at flash offset `at`, padded with `0xFF` to the write size, erasing
    /// each sector whose first byte it reaches (a download is sequential from a sector start).
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
    fn resume_validator(
        &self,
        target: Slot,
        manifest: &VerifiedManifest,
        written: u32,
    ) -> Result<StreamValidator, Error> {
        let mut v = StreamValidator::structure_only(manifest.pack_len());
        if written > 0 {
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
        Some(h) if h.checksum != manifest.pack_checksum() => {
            Err(Error::Rejected(npub_core::Error::PackChecksumMismatch {
                manifest: manifest.pack_checksum(),
                pack: h.checksum,
            }))
        }
        _ => Ok(()),
    }
}

/// Sends a report; a failure to report changes nothing on the device (the server learns the
/// state from the next report or poll).
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
    });
}
