//! A NOR flash emulation (feature `std`) that behaves like the OSPI part where it matters to the
//! agent, and can cut the power.
//!
//! | NOR behaviour                              | here                                                        |
//! |--------------------------------------------|-------------------------------------------------------------|
//! | erase sets whole sectors to `0xFF`          | `erase` needs `ERASE`-aligned bounds                        |
//! | programming only clears bits                | `write` ANDs, and needs `WRITE`-aligned offset and length   |
//! | a word is programmed once between erases    | `write` to a word that is not all `0xFF` is refused (`ProgramTwice`): the agent must never rely on re-programming |
//! | the power can fail at any instant           | [`Cut::BeforeOp`]: the Nth erase/program never starts; [`Cut::During`]: the Nth stops after N bytes (torn) |
//! | bits rot, reads glitch                      | [`NorEmu::flip_stored_bit`] (now) and [`NorEmu::flip_stored_bit_after_op`] change the stored bit; [`NorEmu::flip_on_read`] makes `read` return it flipped |
//!
//! After a cut every operation fails with [`NorEmuError::PowerCut`] until [`NorEmu::power_on`]
//! (the reboot). Operations are numbered from 0 in the order they are attempted and logged, so a
//! test can run an install once, count its operations, and then cut at each one.
//!
//! The memory-mapped view ([`Mapped`]) is the stored bytes, so what the agent verifies is what
//! the emulated NPU would read. With [`NorEmu::with_file`] every change is also written through
//! to a file, which is how the simulator binary keeps its flash across runs.
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

use crate::flash::Mapped;

/// Where the power fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Operation number `n` (0-based) never starts.
    BeforeOp(u64),
    /// Operation number `op` stops after its first `after_bytes` bytes (a torn program or erase).
    During {
        /// The operation's number.
        op: u64,
        /// Bytes it completes.
        after_bytes: usize,
    },
}

/// What kind of operation a log entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A sector erase.
    Erase,
    /// A program.
    Program,
}

/// One attempted erase or program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// Erase or program.
    pub kind: OpKind,
    /// Flash offset.
    pub offset: u32,
    /// Bytes it covers.
    pub len: usize,
}

/// Why an emulated operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NorEmuError {
    /// The power was cut (now or earlier, without [`NorEmu::power_on`] since).
    PowerCut,
    /// Offset or length not aligned to `WRITE`/`ERASE`.
    NotAligned,
    /// Past the end of the flash.
    OutOfBounds,
    /// A program of a word that was not erased.
    ProgramTwice,
    /// The backing file failed.
    Io,
}

impl NorFlashError for NorEmuError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            NorEmuError::NotAligned => NorFlashErrorKind::NotAligned,
            NorEmuError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
            NorEmuError::PowerCut | NorEmuError::ProgramTwice | NorEmuError::Io => {
                NorFlashErrorKind::Other
            }
        }
    }
}

/// An emulated NOR flash with `WRITE`-byte program units and `ERASE`-byte sectors.
#[derive(Debug, Clone)]
pub struct NorEmu<const WRITE: usize, const ERASE: usize> {
    data: Vec<u8>,
    log: Vec<Op>,
    cut: Option<Cut>,
    dead: bool,
    read_flips: Vec<(u32, u8)>,
    /// (operation number, offset, bit): bit rot that strikes right after that operation.
    rot_after: Option<(u64, u32, u8)>,
    file: Option<PathBuf>,
}

impl<const WRITE: usize, const ERASE: usize> NorEmu<WRITE, ERASE> {
    /// A blank (all `0xFF`) flash of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self::from_image(vec![0xFF; capacity])
    }

    /// A flash holding `image` (say, a snapshot taken with [`NorEmu::image`]).
    pub fn from_image(image: Vec<u8>) -> Self {
        const {
            assert!(
                WRITE > 0 && ERASE % WRITE == 0,
                "ERASE must be a multiple of WRITE"
            );
        }
        assert!(image.len() % ERASE == 0, "capacity must be whole sectors");
        Self {
            data: image,
            log: Vec::new(),
            cut: None,
            dead: false,
            read_flips: Vec::new(),
            rot_after: None,
            file: None,
        }
    }

    /// A flash backed by the file at `path`: loaded if it exists (it must be `capacity` bytes),
    /// created blank otherwise; every erase and program is written through.
    pub fn with_file(path: &Path, capacity: usize) -> std::io::Result<Self> {
        let mut image = vec![0xFF; capacity];
        match File::open(path) {
            Ok(mut f) => {
                let len = f.metadata()?.len();
                if len != capacity as u64 {
                    return Err(std::io::Error::other(format!(
                        "flash file {} is {len} bytes, expected {capacity}",
                        path.display()
                    )));
                }
                f.read_exact(&mut image)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::write(path, &image)?;
            }
            Err(e) => return Err(e),
        }
        let mut emu = Self::from_image(image);
        emu.file = Some(path.to_path_buf());
        Ok(emu)
    }

    /// The stored bytes.
    pub fn image(&self) -> &[u8] {
        &self.data
    }

    /// Arms a power cut (replacing any armed one).
    pub fn cut(&mut self, cut: Cut) {
        self.cut = Some(cut);
    }

    /// Restores the power: operations work again and no cut is armed. The log is kept.
    pub fn power_on(&mut self) {
        self.dead = false;
        self.cut = None;
    }

    /// Whether an armed cut has happened.
    pub fn power_was_cut(&self) -> bool {
        self.dead
    }

    /// Every erase and program attempted so far, in order.
    pub fn log(&self) -> &[Op] {
        &self.log
    }

    /// Number of erases and programs attempted so far.
    pub fn ops(&self) -> u64 {
        self.log.len() as u64
    }

    /// Bit rot: flips bit `bit` of the stored byte at `offset`.
    pub fn flip_stored_bit(&mut self, offset: u32, bit: u8) {
        self.data[offset as usize] ^= 1 << bit;
    }

    /// Bit rot at a chosen moment: flips bit `bit` of the stored byte at `offset` as soon as
    /// operation number `op` has completed (say, between programming a pack and reading it back).
    pub fn flip_stored_bit_after_op(&mut self, op: u64, offset: u32, bit: u8) {
        self.rot_after = Some((op, offset, bit));
    }

    /// A read glitch: every later `read` covering `offset` returns bit `bit` flipped (the stored
    /// byte is unchanged).
    pub fn flip_on_read(&mut self, offset: u32, bit: u8) {
        self.read_flips.push((offset, 1 << bit));
    }

    /// Starts operation `kind` on `len` bytes at `offset`: logs it and applies an armed cut.
    /// Returns how many bytes to perform and whether the power fails after them.
    fn begin(
        &mut self,
        kind: OpKind,
        offset: u32,
        len: usize,
    ) -> Result<(usize, bool), NorEmuError> {
        if self.dead {
            return Err(NorEmuError::PowerCut);
        }
        let n = self.ops();
        self.log.push(Op { kind, offset, len });
        match self.cut {
            Some(Cut::BeforeOp(at)) if at == n => {
                self.dead = true;
                Err(NorEmuError::PowerCut)
            }
            Some(Cut::During { op, after_bytes }) if op == n => Ok((after_bytes.min(len), true)),
            _ => Ok((len, false)),
        }
    }

    fn check_range(&self, offset: u32, len: usize, align: usize) -> Result<(), NorEmuError> {
        if offset as usize % align != 0 || len % align != 0 {
            return Err(NorEmuError::NotAligned);
        }
        if offset as usize + len > self.data.len() {
            return Err(NorEmuError::OutOfBounds);
        }
        Ok(())
    }

    fn write_through(&self, offset: u32, len: usize) -> Result<(), NorEmuError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let bytes = &self.data[offset as usize..offset as usize + len];
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(u64::from(offset)))?;
                f.write_all(bytes)?;
                f.sync_data()
            })
            .map_err(|_| NorEmuError::Io)
    }

    fn end(&mut self, torn: bool) -> Result<(), NorEmuError> {
        if let Some((op, offset, bit)) = self.rot_after {
            if op + 1 == self.ops() && !torn {
                self.flip_stored_bit(offset, bit);
                self.rot_after = None;
            }
        }
        if torn {
            self.dead = true;
            return Err(NorEmuError::PowerCut);
        }
        Ok(())
    }
}

impl<const WRITE: usize, const ERASE: usize> ErrorType for NorEmu<WRITE, ERASE> {
    type Error = NorEmuError;
}

impl<const WRITE: usize, const ERASE: usize> ReadNorFlash for NorEmu<WRITE, ERASE> {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), NorEmuError> {
        if self.dead {
            return Err(NorEmuError::PowerCut);
        }
        self.check_range(offset, bytes.len(), 1)?;
        let start = offset as usize;
        bytes.copy_from_slice(&self.data[start..start + bytes.len()]);
        for &(at, mask) in &self.read_flips {
            if let Some(b) = (at as usize)
                .checked_sub(start)
                .and_then(|i| bytes.get_mut(i))
            {
                *b ^= mask;
            }
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.data.len()
    }
}

impl<const WRITE: usize, const ERASE: usize> NorFlash for NorEmu<WRITE, ERASE> {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), NorEmuError> {
        let len = to.checked_sub(from).ok_or(NorEmuError::OutOfBounds)? as usize;
        self.check_range(from, len, ERASE)?;
        let (done, torn) = self.begin(OpKind::Erase, from, len)?;
        self.data[from as usize..from as usize + done].fill(0xFF);
        self.write_through(from, done)?;
        self.end(torn)
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), NorEmuError> {
        self.check_range(offset, bytes.len(), WRITE)?;
        let start = offset as usize;
        let target = &self.data[start..start + bytes.len()];
        if target.iter().any(|&b| b != 0xFF) {
            return Err(NorEmuError::ProgramTwice);
        }
        let (done, torn) = self.begin(OpKind::Program, offset, bytes.len())?;
        for (cell, &b) in self.data[start..start + done].iter_mut().zip(bytes) {
            *cell &= b;
        }
        self.write_through(offset, done)?;
        self.end(torn)
    }
}

impl<const WRITE: usize, const ERASE: usize> Mapped for NorEmu<WRITE, ERASE> {
    fn mapped(&self) -> &[u8] {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Emu = NorEmu<4, 64>;

    #[test]
    fn programming_only_clears_bits_and_erase_restores_ff() {
        let mut f = Emu::new(128);
        f.write(0, &[0x0F, 0xF0, 0x00, 0xFF]).unwrap();
        assert_eq!(&f.image()[..4], &[0x0F, 0xF0, 0x00, 0xFF]);
        f.erase(0, 64).unwrap();
        assert!(f.image()[..64].iter().all(|&b| b == 0xFF));
    }

    #[test]
    fn rejects_a_second_program_without_erase() {
        let mut f = Emu::new(128);
        f.write(0, &[0; 4]).unwrap();
        assert_eq!(f.write(0, &[0; 4]), Err(NorEmuError::ProgramTwice));
    }

    #[test]
    fn rejects_misaligned_operations() {
        let mut f = Emu::new(128);
        assert_eq!(f.write(2, &[0; 4]), Err(NorEmuError::NotAligned));
        assert_eq!(f.write(0, &[0; 3]), Err(NorEmuError::NotAligned));
        assert_eq!(f.erase(0, 32), Err(NorEmuError::NotAligned));
        assert_eq!(f.erase(64, 192), Err(NorEmuError::OutOfBounds));
    }

    #[test]
    fn a_cut_before_an_operation_stops_it_and_everything_after() {
        let mut f = Emu::new(128);
        f.cut(Cut::BeforeOp(1));
        f.write(0, &[0; 4]).unwrap();
        assert_eq!(f.write(4, &[0; 4]), Err(NorEmuError::PowerCut));
        assert_eq!(f.read(0, &mut [0; 4]), Err(NorEmuError::PowerCut));
        assert_eq!(&f.image()[4..8], &[0xFF; 4]);
        f.power_on();
        f.write(4, &[0; 4]).unwrap();
        assert_eq!(f.ops(), 3);
    }

    #[test]
    fn a_torn_program_and_a_torn_erase_stop_mid_way() {
        let mut f = Emu::new(128);
        f.cut(Cut::During {
            op: 0,
            after_bytes: 5,
        });
        assert_eq!(f.write(0, &[0; 8]), Err(NorEmuError::PowerCut));
        assert_eq!(&f.image()[..8], &[0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF]);
        f.power_on();
        f.cut(Cut::During {
            op: 1,
            after_bytes: 2,
        });
        assert_eq!(f.erase(0, 64), Err(NorEmuError::PowerCut));
        assert_eq!(&f.image()[..4], &[0xFF, 0xFF, 0, 0]);
    }

    #[test]
    fn read_glitches_leave_the_stored_byte_alone() {
        let mut f = Emu::new(128);
        f.flip_on_read(3, 0);
        let mut buf = [0u8; 4];
        f.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0xFF, 0xFF, 0xFF, 0xFE]);
        assert_eq!(f.image()[3], 0xFF);
        f.flip_stored_bit(3, 7);
        assert_eq!(f.mapped()[3], 0x7F);
    }
}
