//! The agent: one flash, its layout, the device's identity and the mounted journal.
//!
//! Everything that changes the device goes through [`Agent::boot`] (boot.rs) and
//! [`Agent::poll`] (install.rs); this file only opens the agent and commits states.
use embedded_storage::nor_flash::NorFlash;
use npub_core::Accel;
use npub_core::io_bindings::IoBindings;

use crate::error::Error;
use crate::flash::Mapped;
use crate::journal::Journal;
use crate::layout::Layout;
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
}

/// The OTA agent over a flash of type `F`.
#[derive(Debug)]
pub struct Agent<F> {
    pub(crate) flash: F,
    pub(crate) layout: Layout,
    pub(crate) device: Device,
    pub(crate) journal: Journal,
}

impl<F: NorFlash + Mapped> Agent<F> {
    /// Opens the agent on `flash`: checks the layout against it (a misfit is a firmware bug and
    /// panics) and mounts the journal. Changes nothing in flash.
    pub fn open(mut flash: F, layout: Layout, device: Device) -> Result<Self, Error> {
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
        let journal = Journal::mount(&mut flash, &layout)?;
        Ok(Self {
            flash,
            layout,
            device,
            journal,
        })
    }

    /// The state the journal holds.
    pub fn state(&self) -> &State {
        self.journal.state()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The flash, to read.
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// Gives the flash back (a test "reboots" by opening a new agent on it).
    pub fn into_flash(self) -> F {
        self.flash
    }

    /// Makes `next` the durable state.
    pub(crate) fn commit(&mut self, next: State) -> Result<(), Error> {
        if next == *self.journal.state() {
            return Ok(());
        }
        self.journal.commit(&mut self.flash, &self.layout, next)
    }
}
