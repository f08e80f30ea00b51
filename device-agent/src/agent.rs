//! The agent: one flash, its layout, the device's identity, the monotonic counter and the mounted
//! journal.
//!
//! Power-on is a typestate: [`Agent::power_on`] gives an [`Unbooted`] agent, whose only move is
//! [`Unbooted::boot`]; that resolves a pending pack (trial, confirm or revert) and binds, and only
//! then hands out the [`Agent`] that can [`Agent::poll`] and [`Agent::install`]. An install that
//! ran before boot resolved the pending pack could confirm a newer pack and leave the older one
//! pending, to be confirmed over it at the next boot.
//!
//! [`Agent::open`] is the older entry point, without a counter: its agent may poll at once, and
//! then the first poll or install runs the boot first.
//!
//! Everything that changes the device goes through boot (boot.rs) and poll (install.rs); this file
//! only opens the agent and commits states.
use embedded_storage::nor_flash::NorFlash;
use npub_core::Accel;
use npub_core::io_bindings::IoBindings;

use crate::counter::{JournalOnly, MonotonicCounter};
use crate::error::{CounterError, Error};
use crate::flash::Mapped;
use crate::install::MAX_SEQUENCE_STEP;
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
    /// keyring update is stored in flash) and the root keys that sign keyring updates.
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
    /// Whether boot ran in this power cycle (an agent from [`Agent::open`] boots lazily).
    pub(crate) booted: bool,
}

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
    /// Powers the agent on: checks the layout against `flash` (a misfit is a firmware bug and
    /// panics), mounts the journal, reads the replay floor from `counter` and the keyring from
    /// its area (the factory keyring of `device.trust` while the area holds none). A counter that
    /// reads more than [`MAX_SEQUENCE_STEP`] above the journal's floor is refused
    /// ([`CounterError::AheadOfJournal`]) before anything is written. It writes only
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

    fn mount(mut flash: F, mut counter: C, layout: Layout, device: Device) -> Result<Self, Error> {
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
        let mut journal = Journal::mount(&mut flash, &layout)?;
        let (mut keystore, stored) = KeyStore::mount(&mut flash, &layout)?;
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
        let keyring = match stored {
            Some(keyring) => keyring,
            None => device.trust.factory_keyring()?,
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
            let _ = keystore.commit(&mut flash, &layout, &keyring);
        }
        Ok(Self {
            flash,
            counter,
            layout,
            device,
            journal,
            keystore,
            keyring,
            booted: false,
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

    /// Makes `next` the durable keyring, then the one in use.
    pub(crate) fn commit_keyring(&mut self, next: DeviceKeyring) -> Result<(), Error> {
        self.keystore.commit(&mut self.flash, &self.layout, &next)?;
        self.keyring = next;
        Ok(())
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
    /// business: a blank device has nothing to bind).
    pub(crate) fn boot_if_needed<N: Npu>(&mut self, npu: &mut N, arena: &mut Arena<'_>) {
        if !self.booted {
            let _ = self.boot(npu, arena);
        }
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
    ) -> (Agent<F, C>, Result<crate::Booted, Error>) {
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
    ) -> (Agent<F, C>, crate::BootStart) {
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

    /// Gives the flash and the counter back (a power cut before boot).
    pub fn into_parts(self) -> (F, C) {
        self.0.into_parts()
    }
}
