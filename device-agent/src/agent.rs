//! The agent: one flash, its layout, the device's identity, the monotonic counter and the mounted
//! journal.
//!
//! Power-on is a typestate, in boot.rs: [`Agent::power_on`] gives an [`crate::Unbooted`] agent,
//! whose only move is to boot. [`Agent::open`] is the older entry point, without a counter: its
//! agent may poll at once, and then the first poll or install runs the boot first.
//!
//! Everything that changes the device goes through boot (boot.rs) and poll (install.rs), each an
//! `impl Agent` of its own; this file holds the agent's parts, mounts them and commits states, and
//! names nothing of those two files (they build on it, not the other way round).
use embedded_storage::nor_flash::NorFlash;
use npub_core::Accel;
use npub_core::io_bindings::IoBindings;
use npub_core::release::{DeviceReleaseTrust, MAX_BUNDLE_BYTES};

use crate::counter::{JournalOnly, MAX_SEQUENCE_STEP, MonotonicCounter};
use crate::error::{CounterError, Error, EventError};
use crate::events::EventLog;
use crate::flash::Mapped;
use crate::ids::Slot;
use crate::journal::Journal;
use crate::keystore::{DeviceKeyring, KeyStore, Trust};
use crate::layout::Layout;
use crate::npu::{Arena, Npu};
use crate::state::State;

/// What a manifest must match to be installed on this device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    /// The board's hardware class id (see the manifest's `hw_class`).
    pub hw_class: u32,
    /// The NPU's configuration.
    pub accel: Accel,
    /// The IO bindings the application is built for (npub-core's canonical encoding): where it
    /// writes inputs and reads outputs. When set, a pack is installed only if its manifest's
    /// `io_digest` is their digest, and every bind resolves them to bus addresses. `None`: the
    /// application takes any IO (the manifest's digest is not checked).
    pub io_bindings: Option<&'static [u8]>,
    /// The keys built into the firmware: the factory signing keys (the keyring until the first
    /// keyring update is stored in flash), the root keys that sign keyring updates, and the
    /// factory release keys and release roots ([`Trust::with_release`]).
    pub trust: Trust,
}

/// The OTA agent over a flash of type `F`, with the replay floor also kept in `C`, after boot.
#[derive(Debug)]
pub struct Agent<F, C = JournalOnly> {
    pub(crate) flash: F,
    pub(crate) counter: C,
    pub(crate) layout: Layout,
    pub(crate) device: Device,
    pub(crate) journal: Journal,
    /// Where the keyring lives in flash.
    pub(crate) keystore: KeyStore,
    /// The signing keys manifests are verified with: from flash, or the factory keyring.
    pub(crate) keyring: DeviceKeyring,
    /// The release keys and policies packs are checked against (inactive: none required), kept
    /// and committed with the keyring.
    pub(crate) release: DeviceReleaseTrust,
    /// Where a pack's release bundle is received: here rather than on the poll's stack, whose
    /// deepest path (keyring updates, then a signature check) it would otherwise deepen.
    pub(crate) bundle: [u8; MAX_BUNDLE_BYTES],
    /// Whether boot ran in this power cycle (an agent from [`Agent::open`] boots lazily).
    pub(crate) booted: bool,
    /// The confirmed slot the last boot did not bind because it did not verify: its slot, the
    /// sequence the journal says it holds, and why (boot.rs reads it out).
    pub(crate) skipped: Option<(Slot, u64, Error)>,
    /// The last events of this power cycle, sent with a failure report.
    pub(crate) events: EventLog,
}

impl<F: NorFlash + Mapped> Agent<F, JournalOnly> {
    /// Opens the agent on `flash` without a monotonic counter (the replay floor lives in the
    /// journal only): checks the layout against it (a misfit is a firmware bug and panics) and
    /// mounts the journal. The agent may poll at once; the first poll or install boots first.
    /// Prefer [`Agent::power_on`].
    pub fn open(flash: F, layout: Layout, device: Device) -> Result<Self, Error> {
        Agent::mount(flash, JournalOnly, layout, device)
    }
}

impl<F: NorFlash + Mapped, C: MonotonicCounter> Agent<F, C> {
    pub(crate) fn mount(
        mut flash: F,
        mut counter: C,
        layout: Layout,
        device: Device,
    ) -> Result<Self, Error> {
        const {
            assert!(F::WRITE_SIZE > 0 && F::ERASE_SIZE % F::WRITE_SIZE == 0);
            assert!(F::ERASE_SIZE.is_power_of_two());
        }
        layout.check::<F>(flash.capacity());
        // (The parse error is not formatted: that would pull every error message into the
        // firmware image for a check that can only fail in development.)
        assert!(
            device
                .io_bindings
                .is_none_or(|io| IoBindings::parse(io).is_ok()),
            "Device::io_bindings are not a canonical IO-bindings encoding"
        );
        assert!(
            flash.mapped().len() >= flash.capacity(),
            "the XIP mapping must cover the whole flash"
        );
        // Everything is read before anything is written: a heal that a power cut stops must not
        // keep the rest from being read.
        let key = device.trust.device_key();
        let mut journal = Journal::mount(&mut flash, &layout, key)?;
        let (mut keystore, stored) = KeyStore::mount(&mut flash, &layout, key)?;
        let floor = counter.read()?;
        let recorded = journal.state().last_sequence();
        // Checked before anything is written: a heal would make the bogus floor the journal's.
        if floor > recorded.saturating_add(MAX_SEQUENCE_STEP) {
            return Err(Error::Counter(CounterError::AheadOfJournal {
                read: floor,
                journal: recorded,
                max_step: MAX_SEQUENCE_STEP,
            }));
        }
        let (keyring, release) = match stored {
            Some(stored) => (stored.keyring, stored.release),
            None => (device.trust.factory_keyring()?, None),
        };
        // A record written while the release trust was inactive holds none: the factory one.
        let release = match release {
            Some(release) => release,
            None => device.trust.factory_release()?,
        };
        // Best effort, and again before the first commit if it fails.
        let _ = journal.erase_discarded(&mut flash, &layout);
        if recorded > floor {
            // Best effort: the next install raises it again before it erases anything.
            let _ = counter.raise(recorded);
        }
        let state = journal.state().with_floor(floor);
        if journal.needs_refresh() {
            // Best effort: a boot must not fail because the journal cannot be written.
            let _ = journal.commit(&mut flash, &layout, state);
        }
        journal.assume(state);
        if keystore.needs_refresh() {
            // Best effort, as for the journal: the record is in one copy only.
            let _ = keystore.commit(&mut flash, &layout, &keyring, &release);
        }
        Ok(Self {
            flash,
            counter,
            layout,
            device,
            journal,
            keystore,
            keyring,
            release,
            bundle: [0; MAX_BUNDLE_BYTES],
            booted: false,
            skipped: None,
            events: EventLog::new(),
        })
    }

    /// The state the journal holds (with the replay floor from the counter).
    pub fn state(&self) -> &State {
        self.journal.state()
    }

    /// The keyring manifests are verified with now: the one stored in flash, or the factory
    /// keyring while none is; updated by [`Agent::poll`] and [`Agent::fetch_update`].
    pub fn keyring(&self) -> &DeviceKeyring {
        &self.keyring
    }

    /// The release trust packs are checked against: stored in flash with the keyring, or the
    /// factory release keys; inactive (nothing required) while it holds no key and no policy.
    pub fn release_trust(&self) -> &DeviceReleaseTrust {
        &self.release
    }

    /// Makes `next` and the release trust in use the durable keyring and release trust, then
    /// `next` the keyring in use.
    pub(crate) fn commit_keyring(&mut self, next: DeviceKeyring) -> Result<(), Error> {
        self.keystore
            .commit(&mut self.flash, &self.layout, &next, &self.release)?;
        self.keyring = next;
        Ok(())
    }

    /// The device's last events, oldest first: the agent's own and the firmware's, sent with
    /// the next failure report.
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// Adds the firmware's own `line` to the event log (see [`EventLog::record`]): at most
    /// [`crate::MAX_EVENT_CHARS`] characters of printable ASCII; the oldest lines make room.
    pub fn record_event(&mut self, line: impl AsRef<[u8]>) -> Result<(), EventError> {
        self.events.record(line)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The flash, to read.
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// The monotonic counter, to read.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// The flash, to reach the driver while the agent runs (fault injection, diagnostics). What
    /// is written through it bypasses every guarantee of this crate.
    pub fn flash_mut(&mut self) -> &mut F {
        &mut self.flash
    }

    /// The monotonic counter, to reach its driver while the agent runs (see
    /// [`Agent::flash_mut`]).
    pub fn counter_mut(&mut self) -> &mut C {
        &mut self.counter
    }

    /// Gives the flash back (a test "reboots" by opening a new agent on it).
    pub fn into_flash(self) -> F {
        self.flash
    }

    /// Gives the flash and the counter back.
    pub fn into_parts(self) -> (F, C) {
        (self.flash, self.counter)
    }

    /// Makes `next` the durable state.
    pub(crate) fn commit(&mut self, next: State) -> Result<(), Error> {
        if next == *self.journal.state() {
            return Ok(());
        }
        self.journal.commit(&mut self.flash, &self.layout, next)
    }

    /// An agent from [`Agent::open`] that has not booted yet boots now (its result is the boot's
    /// business: a blank device has nothing to bind). Out of line: the boot's result is in no
    /// frame of the poll that installs.
    #[inline(never)]
    pub(crate) fn boot_if_needed<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) {
        if !self.booted {
            let _ = self.boot(npu, arena);
        }
    }
}
