//! Telling the firmware when the flash is busy: the running model and the update share one chip.
//!
//! On the RA8P1 the NPU reads the active slot's weights in place (XIP, OSPI memory-mapped mode)
//! while the agent erases and programs the inactive slot on the same OSPI NOR; a NOR chip cannot
//! be read while it erases or programs, so the firmware must keep inference (and any other XIP
//! read: code, constants) off the chip for exactly those windows. [`BusyFlash`] wraps the
//! firmware's driver and calls [`FlashBusy::begin`] before every erase and program and
//! [`FlashBusy::end`] after it, and splits every erase into single sectors
//! (`NorFlash::ERASE_SIZE`, the smallest unit the agent erases), so that each busy window is one
//! sector erase or one program of at most [`crate::CHUNK_BYTES`] and the firmware can run
//! inference windows between them.
//!
//! What `begin` does on an RA8P1 (FSP `r_ospi_b`): wait until the NPU job that reads the weights
//! is done (or hold the next one back), leave memory-mapped mode for the command mode that
//! erases and programs (the driver's write-enable and erase / program commands, polling the
//! status register's WIP bit), and make sure nothing else executes from or reads the OSPI window
//! (code that runs meanwhile must be in RAM, interrupts that touch XIP masked). `end` returns
//! when the chip is idle, re-enters memory-mapped mode (and invalidates the XIP cache for the
//! range the agent wrote: [`crate::Mapped::invalidate`] does it before every read-back) and lets
//! inference run again. A sector erase takes tens of milliseconds on typical OSPI NOR (up to a
//! few hundred); a 512-byte program about one millisecond.
use embedded_storage::nor_flash::{ErrorType, NorFlash, ReadNorFlash};

use crate::flash::Mapped;

/// What the flash is about to be busy with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOp {
    /// One sector erase.
    Erase,
    /// One program (page write).
    Program,
}

/// The firmware's side: called around every erase and program of [`BusyFlash`].
pub trait FlashBusy {
    /// The chip is about to be busy with `op` on `[offset, offset + len)`: stop reading it
    /// (inference, XIP) and return once nothing does.
    fn begin(&mut self, op: FlashOp, offset: u32, len: u32);
    /// The operation ended (done or failed): the chip may be read again.
    fn end(&mut self, op: FlashOp, offset: u32, len: u32);
}

/// The firmware's NOR driver `flash`, with `busy` told around every erase (one sector at a time)
/// and program. Everything else is `flash`'s.
#[derive(Debug)]
pub struct BusyFlash<F, B> {
    /// The driver.
    pub flash: F,
    /// The firmware's hooks.
    pub busy: B,
}

impl<F: ErrorType, B> ErrorType for BusyFlash<F, B> {
    type Error = F::Error;
}

impl<F: ReadNorFlash, B> ReadNorFlash for BusyFlash<F, B> {
    const READ_SIZE: usize = F::READ_SIZE;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        self.flash.read(offset, bytes)
    }

    fn capacity(&self) -> usize {
        self.flash.capacity()
    }
}

impl<F: NorFlash, B: FlashBusy> NorFlash for BusyFlash<F, B> {
    const WRITE_SIZE: usize = F::WRITE_SIZE;
    const ERASE_SIZE: usize = F::ERASE_SIZE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        if to <= from {
            // Nothing to erase (or a range the driver refuses as it would).
            return self.flash.erase(from, to);
        }
        let sector = F::ERASE_SIZE as u32;
        let mut at = from;
        while at < to {
            let end = at.saturating_add(sector).min(to);
            self.busy.begin(FlashOp::Erase, at, end - at);
            let done = self.flash.erase(at, end);
            self.busy.end(FlashOp::Erase, at, end - at);
            done?;
            at = end;
        }
        Ok(())
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        let len = bytes.len() as u32;
        self.busy.begin(FlashOp::Program, offset, len);
        let done = self.flash.write(offset, bytes);
        self.busy.end(FlashOp::Program, offset, len);
        done
    }
}

impl<F: Mapped, B> Mapped for BusyFlash<F, B> {
    fn mapped(&self) -> &[u8] {
        self.flash.mapped()
    }

    fn invalidate(&mut self) {
        self.flash.invalidate();
    }
}
