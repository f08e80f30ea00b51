//! The OSPI NOR, kept in a host file through semihosting, so that it outlives QEMU: killing the
//! emulator is a power cut, starting it again on the same file is a reboot.
//!
//! The file is the flash image, byte for byte (offset 0 = flash offset 0). The CPU (and the NPU)
//! read the flash through its XIP window, which here is a RAM mirror of the file loaded at boot;
//! every erase and program updates the mirror and is written through to the file before it
//! returns. The semantics are the host emulation's (`nor_emu.rs`): erase sets whole 4 KiB sectors
//! to 0xFF, a program needs 16-byte alignment, only clears bits and is refused on a word that was
//! not erased. A kill between two operations leaves the file as the flash was; a kill inside a
//! write leaves a prefix of it (a torn program or erase), which is what the journal is built for.
use device_agent::Mapped;
use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

use crate::semi::{File, Mode};

/// Program unit: the coarsest the agent supports, so alignment bugs would show.
pub const WRITE: usize = 16;
/// Sector: the usual OSPI NOR erase unit.
pub const ERASE: usize = 4096;

/// Why a flash operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileNorError {
    NotAligned,
    OutOfBounds,
    NotErased,
    /// The host refused the write (disk full, file gone).
    Host,
}

impl NorFlashError for FileNorError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            FileNorError::NotAligned => NorFlashErrorKind::NotAligned,
            FileNorError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
            FileNorError::NotErased | FileNorError::Host => NorFlashErrorKind::Other,
        }
    }
}

/// What [`FileNor::open`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// No file: a blank (erased) flash was created.
    Created,
    /// The file held the whole flash.
    Reopened,
    /// The file was shorter (a kill while it was being created): the rest is erased flash.
    Extended {
        /// The file's length before.
        from: usize,
    },
}

pub struct FileNor {
    file: File,
    mem: &'static mut [u8],
}

impl FileNor {
    /// The flash kept in `path`, mirrored into `mem` (its whole size).
    pub fn open(path: &str, mem: &'static mut [u8]) -> Result<(Self, Opened), FileNorError> {
        if let Some(file) = File::open(path, Mode::ReadWrite) {
            let len = file.len().ok_or(FileNorError::Host)?.min(mem.len());
            if !file.seek(0) || file.read(&mut mem[..len]) != len {
                return Err(FileNorError::Host);
            }
            if len == mem.len() {
                return Ok((Self { file, mem }, Opened::Reopened));
            }
            mem[len..].fill(0xFF);
            if !file.write_at(len, &mem[len..]) {
                return Err(FileNorError::Host);
            }
            return Ok((Self { file, mem }, Opened::Extended { from: len }));
        }
        let file = File::open(path, Mode::Create).ok_or(FileNorError::Host)?;
        mem.fill(0xFF);
        if !file.write_at(0, mem) {
            return Err(FileNorError::Host);
        }
        Ok((Self { file, mem }, Opened::Created))
    }

    fn range(
        &self,
        offset: u32,
        len: usize,
        align: usize,
    ) -> Result<core::ops::Range<usize>, FileNorError> {
        let start = offset as usize;
        if start % align != 0 || len % align != 0 {
            return Err(FileNorError::NotAligned);
        }
        let end = start.checked_add(len).ok_or(FileNorError::OutOfBounds)?;
        if end > self.mem.len() {
            return Err(FileNorError::OutOfBounds);
        }
        Ok(start..end)
    }

    fn write_through(&self, r: core::ops::Range<usize>) -> Result<(), FileNorError> {
        if self.file.write_at(r.start, &self.mem[r]) {
            Ok(())
        } else {
            Err(FileNorError::Host)
        }
    }
}

impl ErrorType for FileNor {
    type Error = FileNorError;
}

impl ReadNorFlash for FileNor {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), FileNorError> {
        let r = self.range(offset, bytes.len(), 1)?;
        bytes.copy_from_slice(&self.mem[r]);
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.mem.len()
    }
}

impl NorFlash for FileNor {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), FileNorError> {
        let len = to.checked_sub(from).ok_or(FileNorError::OutOfBounds)? as usize;
        let r = self.range(from, len, ERASE)?;
        self.mem[r.clone()].fill(0xFF);
        self.write_through(r)
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), FileNorError> {
        let r = self.range(offset, bytes.len(), WRITE)?;
        let cells = &mut self.mem[r.clone()];
        if cells.iter().any(|&c| c != 0xFF) {
            return Err(FileNorError::NotErased);
        }
        for (c, &b) in cells.iter_mut().zip(bytes) {
            *c &= b;
        }
        self.write_through(r)
    }
}

impl Mapped for FileNor {
    fn mapped(&self) -> &[u8] {
        self.mem
    }
}
