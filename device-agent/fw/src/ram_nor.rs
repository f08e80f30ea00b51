//! The OSPI NOR, emulated in SRAM: what `nor_emu.rs` is on the host, minus the fault injection
//! (the power-cut tests run on the host; this proves the same core runs on the Cortex-M).
//! Erase sets whole 4 KiB sectors to 0xFF; programming needs 16-byte alignment, only clears bits,
//! and is refused on a word that was not erased.
use device_agent::Mapped;
use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

/// Program unit: the coarsest the agent supports, so alignment bugs would show.
pub const WRITE: usize = 16;
/// Sector: the usual OSPI NOR erase unit.
pub const ERASE: usize = 4096;

/// Why an emulated operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamNorError {
    NotAligned,
    OutOfBounds,
    NotErased,
}

impl NorFlashError for RamNorError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            RamNorError::NotAligned => NorFlashErrorKind::NotAligned,
            RamNorError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
            RamNorError::NotErased => NorFlashErrorKind::Other,
        }
    }
}

pub struct RamNor {
    mem: &'static mut [u8],
}

impl RamNor {
    /// A blank flash over `mem`.
    pub fn new(mem: &'static mut [u8]) -> Self {
        mem.fill(0xFF);
        Self { mem }
    }

    /// The same memory, as it is (a reboot: nothing is erased).
    pub fn reopen(mem: &'static mut [u8]) -> Self {
        Self { mem }
    }

    pub fn into_inner(self) -> &'static mut [u8] {
        self.mem
    }

    fn range(
        &self,
        offset: u32,
        len: usize,
        align: usize,
    ) -> Result<core::ops::Range<usize>, RamNorError> {
        let start = offset as usize;
        if start % align != 0 || len % align != 0 {
            return Err(RamNorError::NotAligned);
        }
        let end = start.checked_add(len).ok_or(RamNorError::OutOfBounds)?;
        if end > self.mem.len() {
            return Err(RamNorError::OutOfBounds);
        }
        Ok(start..end)
    }
}

impl ErrorType for RamNor {
    type Error = RamNorError;
}

impl ReadNorFlash for RamNor {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), RamNorError> {
        let r = self.range(offset, bytes.len(), 1)?;
        bytes.copy_from_slice(&self.mem[r]);
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.mem.len()
    }
}

impl NorFlash for RamNor {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), RamNorError> {
        let len = to.checked_sub(from).ok_or(RamNorError::OutOfBounds)? as usize;
        let r = self.range(from, len, ERASE)?;
        self.mem[r].fill(0xFF);
        Ok(())
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), RamNorError> {
        let r = self.range(offset, bytes.len(), WRITE)?;
        let cells = &mut self.mem[r];
        if cells.iter().any(|&c| c != 0xFF) {
            return Err(RamNorError::NotErased);
        }
        for (c, &b) in cells.iter_mut().zip(bytes) {
            *c &= b;
        }
        Ok(())
    }
}

impl Mapped for RamNor {
    fn mapped(&self) -> &[u8] {
        self.mem
    }
}
