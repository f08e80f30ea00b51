//! Semihosting, the firmware's only window on the host: its command line, the wall clock, and
//! files (the flash image and the trust files). Every call traps into QEMU and returns when the
//! host has done it, so a write that returned is in the host's file: killing QEMU after it loses
//! nothing, killing QEMU during it is a torn write.
use cortex_m_semihosting::{nr, syscall};

/// The longest path the firmware opens.
const PATH_MAX: usize = 256;

/// The command line QEMU was given (`-append`), into `buf`.
pub fn cmdline(buf: &'static mut [u8]) -> Option<&'static str> {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: GET_CMDLINE writes at most block[1] bytes into the buffer block[0] points at, and
    // the length it wrote into block[1].
    // (The block is passed as it is: `syscall!` would wrap it in a block of its own.)
    let r = unsafe { cortex_m_semihosting::syscall1(nr::GET_CMDLINE, block.as_mut_ptr() as usize) };
    if r != 0 {
        return None;
    }
    core::str::from_utf8(&buf[..block[1].min(buf.len())]).ok()
}

/// Seconds since 1970 on the host.
pub fn unix_time() -> u64 {
    // SAFETY: TIME takes no argument and returns the time.
    unsafe { syscall!(TIME) as u64 }
}

/// An open host file.
#[derive(Debug)]
pub struct File(usize);

/// How [`File::open`] opens.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// `rb`.
    Read,
    /// `r+b`: read and write an existing file.
    ReadWrite,
    /// `w+b`: create (or truncate), read and write.
    Create,
}

impl File {
    /// Opens `path` on the host.
    pub fn open(path: &str, mode: Mode) -> Option<File> {
        let mut z = [0u8; PATH_MAX + 1];
        let bytes = path.as_bytes();
        if bytes.len() > PATH_MAX || bytes.contains(&0) {
            return None;
        }
        z[..bytes.len()].copy_from_slice(bytes);
        let mode = match mode {
            Mode::Read => nr::open::R_BINARY,
            Mode::ReadWrite => nr::open::RW_BINARY,
            Mode::Create => nr::open::RW_TRUNC_BINARY,
        };
        // SAFETY: OPEN reads a NUL-terminated name of the given length.
        let fd = unsafe { syscall!(OPEN, z.as_ptr(), mode, bytes.len()) };
        (fd as isize >= 0).then_some(File(fd))
    }

    /// The file's length.
    pub fn len(&self) -> Option<usize> {
        // SAFETY: FLEN takes an open handle.
        let n = unsafe { syscall!(FLEN, self.0) };
        (n as isize >= 0).then_some(n)
    }

    /// Moves to byte `pos` from the start.
    pub fn seek(&self, pos: usize) -> bool {
        // SAFETY: SEEK takes an open handle and an offset.
        unsafe { syscall!(SEEK, self.0, pos) == 0 }
    }

    /// Reads into `buf`; returns the bytes read.
    pub fn read(&self, buf: &mut [u8]) -> usize {
        // SAFETY: READ writes at most buf.len() bytes into buf; it returns how many it did not.
        let left = unsafe { syscall!(READ, self.0, buf.as_mut_ptr(), buf.len()) };
        buf.len().saturating_sub(left)
    }

    /// Writes all of `buf` at `pos`.
    pub fn write_at(&self, pos: usize, buf: &[u8]) -> bool {
        // SAFETY: WRITE reads buf.len() bytes from buf; it returns how many it did not write.
        self.seek(pos) && unsafe { syscall!(WRITE, self.0, buf.as_ptr(), buf.len()) == 0 }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: CLOSE takes an open handle, closed once here.
        unsafe { syscall!(CLOSE, self.0) };
    }
}
