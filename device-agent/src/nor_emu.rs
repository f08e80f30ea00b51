//! A NOR flash emulation (feature `std`) that is as hostile as the OSPI part where it matters to
//! the agent, and can cut the power.
//!
//! | NOR behaviour                              | here                                                        |
//! |--------------------------------------------|-------------------------------------------------------------|
//! | erase sets whole sectors to `0xFF`          | `erase` needs `ERASE`-aligned bounds                        |
//! | programming only clears bits                | `write` ANDs, and needs `WRITE`-aligned offset and length   |
//! | a word is programmed once between erases    | judged by each word's *history*, not its content: a word programmed (even with `0xFF`), torn, or left undefined by a torn erase is refused (`ProgramTwice`) and counted in [`NorEmu::violations`] until it is erased again |
//! | the power can fail at any instant           | [`Cut::BeforeOp`]: the Nth erase/program never starts; [`Cut::During`]: the Nth stops inside (torn) |
//! | a torn program is not a prefix              | the words before the cut are programmed; the cut word is left in one of three states, chosen at random: untouched (*reads blank*), all but one or two bits programmed and those *weak*, or every bit it was to clear programmed, unprogrammed or weak at random |
//! | a torn erase leaves the sector undefined    | the sectors before the cut are erased; the cut sector reads erased (strongly, or with weak bits sprinkled in) or holds each former 0 bit as 1, 0 or weak at random; either way its words are *undefined* until erased again |
//! | weak bits                                   | read 0 or 1 at random on every read, in the XIP view on every refresh, so after every power-on too |
//! | the XIP window is cached (the RA8P1 caches OSPI reads) | [`Mapped::mapped`] is a snapshot taken at power-on and at [`Mapped::invalidate`]: what was programmed since is not seen until the agent invalidates |
//! | bits rot, reads glitch                      | [`NorEmu::flip_stored_bit`] (now) and [`NorEmu::flip_stored_bit_after_op`] change the stored bit; [`NorEmu::glitch_read`] makes the next `read` of a byte return a bit flipped, once; [`NorEmu::glitch_mapped`] spoils a byte of the XIP cache until the next refresh; [`NorEmu::flip_on_read`] flips it on every read (a stuck sense amplifier) |
//!
//! After a cut every operation fails with [`NorEmuError::PowerCut`] until [`NorEmu::power_on`]
//! (the reboot). Operations are numbered from 0 in the order they are attempted and logged, so a
//! test can run an install once, count its operations, and then cut at each one. The randomness
//! is a seeded generator ([`NorEmu::seed`]): a failing run replays exactly.
//!
//! With [`NorEmu::with_file`] every change is also written through to a file, which is how the
//! simulator binary keeps its flash across runs (weak bits and word histories are not kept: a
//! reloaded file holds strong bits, and every word that is not `0xFF` counts as programmed).
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
    /// Operation number `op` stops inside its byte `after_bytes` (a torn program or erase): the
    /// bytes before it are done, the word (program) or sector (erase) holding it is torn.
    During {
        /// The operation's number.
        op: u64,
        /// Bytes it completes before the torn word or sector.
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
    /// A program of a word that was not erased since it was last programmed, torn, or left
    /// undefined by a torn erase.
    ProgramTwice,
    /// The range is write-protected ([`NorEmu::protect`]): a part that refuses to program.
    Protected,
    /// The backing file failed.
    Io,
}

impl NorFlashError for NorEmuError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            NorEmuError::NotAligned => NorFlashErrorKind::NotAligned,
            NorEmuError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
            NorEmuError::PowerCut
            | NorEmuError::ProgramTwice
            | NorEmuError::Protected
            | NorEmuError::Io => NorFlashErrorKind::Other,
        }
    }
}

/// What happened to a program word since its last complete erase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum History {
    /// Erased, and not programmed since: the only state a program may start from.
    Erased,
    /// Programmed (whatever the content, even `0xFF`).
    Programmed,
    /// A torn program or a torn erase: neither programmed nor erased.
    Undefined,
}

/// An emulated NOR flash with `WRITE`-byte program units and `ERASE`-byte sectors.
#[derive(Debug, Clone)]
pub struct NorEmu<const WRITE: usize, const ERASE: usize> {
    /// The stored value of every bit that is not weak.
    data: Vec<u8>,
    /// Bits that read 0 or 1 at random.
    weak: Vec<u8>,
    /// One entry per `WRITE` word.
    history: Vec<History>,
    /// The XIP window as the CPU last fetched it (see [`Mapped::invalidate`]).
    xip: Vec<u8>,
    log: Vec<Op>,
    cut: Option<Cut>,
    dead: bool,
    read_flips: Vec<(u32, u8)>,
    read_glitches: Vec<(u32, u8)>,
    /// (operation number, offset, bit): bit rot that strikes right after that operation.
    rot_after: Option<(u64, u32, u8)>,
    rng: u64,
    violations: u64,
    protected: Vec<(u32, u32)>,
    file: Option<PathBuf>,
}

impl<const WRITE: usize, const ERASE: usize> NorEmu<WRITE, ERASE> {
    /// A blank (all `0xFF`) flash of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self::from_image(vec![0xFF; capacity])
    }

    /// A flash holding `image` (say, a snapshot taken with [`NorEmu::image`]): strong bits, and
    /// every word that is not all `0xFF` counts as programmed.
    pub fn from_image(image: Vec<u8>) -> Self {
        const {
            assert!(
                WRITE > 0 && ERASE % WRITE == 0,
                "ERASE must be a multiple of WRITE"
            );
        }
        assert!(image.len() % ERASE == 0, "capacity must be whole sectors");
        let history = image
            .chunks(WRITE)
            .map(|w| {
                if w.iter().all(|&b| b == 0xFF) {
                    History::Erased
                } else {
                    History::Programmed
                }
            })
            .collect();
        let mut emu = Self {
            weak: vec![0; image.len()],
            xip: image.clone(),
            data: image,
            history,
            log: Vec::new(),
            cut: None,
            dead: false,
            read_flips: Vec::new(),
            read_glitches: Vec::new(),
            rot_after: None,
            rng: 0x9E37_79B9_7F4A_7C15,
            violations: 0,
            protected: Vec::new(),
            file: None,
        };
        emu.refresh_xip();
        emu
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

    /// Seeds the generator behind torn words, torn sectors and weak bits.
    pub fn seed(&mut self, seed: u64) {
        // xorshift must not start at 0.
        self.rng = seed ^ 0x9E37_79B9_7F4A_7C15;
        if self.rng == 0 {
            self.rng = 1;
        }
    }

    /// The stored bytes (a weak bit shows its last stored value, not a fresh read).
    pub fn image(&self) -> &[u8] {
        &self.data
    }

    /// Arms a power cut (replacing any armed one).
    pub fn cut(&mut self, cut: Cut) {
        self.cut = Some(cut);
    }

    /// Restores the power: operations work again, no cut is armed, and the XIP window starts
    /// cold (weak bits read afresh). The log is kept.
    pub fn power_on(&mut self) {
        self.dead = false;
        self.cut = None;
        self.refresh_xip();
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

    /// Programs refused because the word's history was not "erased": each one is a bug in the
    /// caller, which must never rely on programming a word twice.
    pub fn violations(&self) -> u64 {
        self.violations
    }

    /// Refuses every later erase and program that touches `[from, to)` with
    /// [`NorEmuError::Protected`] (not counted as an operation): a worn-out or write-protected
    /// area. Reads still work.
    pub fn protect(&mut self, from: u32, to: u32) {
        self.protected.push((from, to));
    }

    fn is_protected(&self, offset: u32, len: usize) -> bool {
        let end = offset as u64 + len as u64;
        self.protected
            .iter()
            .any(|&(from, to)| (offset as u64) < u64::from(to) && u64::from(from) < end)
    }

    /// Bits that are weak now.
    pub fn weak_bits(&self) -> u64 {
        self.weak.iter().map(|w| u64::from(w.count_ones())).sum()
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

    /// A stuck read: every later `read` and XIP refresh covering `offset` returns bit `bit`
    /// flipped (the stored byte is unchanged).
    pub fn flip_on_read(&mut self, offset: u32, bit: u8) {
        self.read_flips.push((offset, 1 << bit));
    }

    /// One read glitch: the next `read` covering `offset` returns bit `bit` flipped; the reads
    /// after it are right again.
    pub fn glitch_read(&mut self, offset: u32, bit: u8) {
        self.read_glitches.push((offset, 1 << bit));
    }

    /// One glitch in the XIP window: the cached byte at `offset` reads with bit `bit` flipped
    /// until the next refresh (power-on or [`Mapped::invalidate`]) fetches it again.
    pub fn glitch_mapped(&mut self, offset: u32, bit: u8) {
        self.xip[offset as usize] ^= 1 << bit;
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// A uniformly random number below `n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next_random() % n
    }

    /// The byte at `at` as one read senses it: weak bits at random.
    fn sense(&mut self, at: usize) -> u8 {
        let weak = self.weak[at];
        if weak == 0 {
            return self.data[at];
        }
        let noise = self.next_random() as u8;
        (self.data[at] & !weak) | (noise & weak)
    }

    fn refresh_xip(&mut self) {
        for at in 0..self.data.len() {
            self.xip[at] = self.sense(at);
        }
        for &(at, mask) in &self.read_flips {
            if let Some(b) = self.xip.get_mut(at as usize) {
                *b ^= mask;
            }
        }
    }

    /// Starts operation `kind` on `len` bytes at `offset`: logs it and applies an armed cut.
    /// Returns how many bytes complete and whether the power fails after them (torn).
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
            Some(Cut::During { op, after_bytes }) if op == n && after_bytes < len => {
                Ok((after_bytes, true))
            }
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

    fn write_through(&self, offset: usize, len: usize) -> Result<(), NorEmuError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let bytes = &self.data[offset..offset + len];
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset as u64))?;
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

    fn erase_sector(&mut self, start: usize) {
        self.data[start..start + ERASE].fill(0xFF);
        self.weak[start..start + ERASE].fill(0);
        self.history[start / WRITE..(start + ERASE) / WRITE].fill(History::Erased);
    }

    /// The sector at `start` after a cut inside its erase.
    fn tear_sector(&mut self, start: usize) {
        let mode = self.below(4);
        for at in start..start + ERASE {
            let was_zero = !self.data[at] & !self.weak[at];
            match mode {
                // Reads erased, and nothing shows that it is not.
                0 => {
                    self.data[at] = 0xFF;
                    self.weak[at] = 0;
                }
                // Reads erased, mostly: a few former 0 bits are weak.
                1 => {
                    self.data[at] = 0xFF;
                    let sprinkle = if self.below(16) == 0 { 0xFF } else { 0 };
                    self.weak[at] = was_zero & (self.next_random() as u8) & sprinkle;
                }
                // Every former 0 bit 1, 0 or weak.
                _ => {
                    let (a, b) = (self.next_random() as u8, self.next_random() as u8);
                    let to_one = was_zero & a & !b;
                    let to_weak = was_zero & !a & b;
                    self.data[at] |= to_one | to_weak;
                    self.weak[at] |= to_weak;
                }
            }
        }
        self.history[start / WRITE..(start + ERASE) / WRITE].fill(History::Undefined);
    }

    /// The word at `start` after a cut inside its program of `target`.
    fn tear_word(&mut self, start: usize, target: &[u8]) {
        let mode = self.below(4);
        let to_clear: Vec<u8> = (0..WRITE)
            .map(|i| self.data[start + i] & !target[i])
            .collect();
        match mode {
            // Reads blank: the cut came before any cell took charge.
            0 => {}
            // Nearly done: every bit programmed but one or two, which are weak.
            1 => {
                for (i, &t) in target.iter().enumerate() {
                    self.data[start + i] &= t;
                }
                let bits: Vec<(usize, u8)> = (0..WRITE)
                    .flat_map(|i| (0..8).map(move |b| (i, b)))
                    .filter(|&(i, b)| to_clear[i] & (1 << b) != 0)
                    .collect();
                if !bits.is_empty() {
                    for _ in 0..=self.below(2) {
                        let (i, b) = bits[self.below(bits.len() as u64) as usize];
                        self.weak[start + i] |= 1 << b;
                    }
                }
            }
            // Each bit to clear: programmed, left, or weak.
            _ => {
                for (i, &clear) in to_clear.iter().enumerate() {
                    let (a, b) = (self.next_random() as u8, self.next_random() as u8);
                    self.data[start + i] &= !(clear & a & !b);
                    self.weak[start + i] |= clear & !a & b;
                }
            }
        }
        self.history[start / WRITE] = History::Undefined;
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
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = self.sense(start + i);
        }
        let len = bytes.len();
        let covers = |at: u32| (at as usize).checked_sub(start).filter(|&i| i < len);
        for &(at, mask) in &self.read_flips {
            if let Some(i) = covers(at) {
                bytes[i] ^= mask;
            }
        }
        let mut i = 0;
        while i < self.read_glitches.len() {
            let (at, mask) = self.read_glitches[i];
            if let Some(j) = covers(at) {
                bytes[j] ^= mask;
                self.read_glitches.swap_remove(i);
            } else {
                i += 1;
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
        if self.is_protected(from, len) {
            return Err(NorEmuError::Protected);
        }
        let (done, torn) = self.begin(OpKind::Erase, from, len)?;
        let from = from as usize;
        let whole = done / ERASE * ERASE;
        for sector in (from..from + whole).step_by(ERASE) {
            self.erase_sector(sector);
        }
        let touched = if torn {
            self.tear_sector(from + whole);
            whole + ERASE
        } else {
            whole
        };
        self.write_through(from, touched)?;
        self.end(torn)
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), NorEmuError> {
        self.check_range(offset, bytes.len(), WRITE)?;
        if self.is_protected(offset, bytes.len()) {
            return Err(NorEmuError::Protected);
        }
        let start = offset as usize;
        let words = start / WRITE..(start + bytes.len()) / WRITE;
        if self.history[words.clone()]
            .iter()
            .any(|&h| h != History::Erased)
        {
            self.violations += 1;
            return Err(NorEmuError::ProgramTwice);
        }
        let (done, torn) = self.begin(OpKind::Program, offset, bytes.len())?;
        let whole = done / WRITE * WRITE;
        for (cell, &b) in self.data[start..start + whole].iter_mut().zip(bytes) {
            *cell &= b;
        }
        self.history[words.start..words.start + whole / WRITE].fill(History::Programmed);
        let touched = if torn {
            self.tear_word(start + whole, &bytes[whole..whole + WRITE]);
            whole + WRITE
        } else {
            whole
        };
        self.write_through(start, touched)?;
        self.end(torn)
    }
}

impl<const WRITE: usize, const ERASE: usize> Mapped for NorEmu<WRITE, ERASE> {
    fn mapped(&self) -> &[u8] {
        &self.xip
    }

    fn invalidate(&mut self) {
        self.refresh_xip();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Emu = NorEmu<4, 64>;

    /// Reads `len` bytes at `at` `n` times and returns the distinct results.
    fn reads(f: &mut Emu, at: u32, len: usize, n: usize) -> Vec<Vec<u8>> {
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for _ in 0..n {
            let mut buf = vec![0u8; len];
            f.read(at, &mut buf).unwrap();
            if !seen.contains(&buf) {
                seen.push(buf);
            }
        }
        seen
    }

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
        assert_eq!(f.violations(), 1);
    }

    #[test]
    fn rejects_a_second_program_of_a_word_that_still_reads_blank() {
        // By history, not by content: programming 0xFF is still a program.
        let mut f = Emu::new(128);
        f.write(0, &[0xFF; 4]).unwrap();
        assert_eq!(f.write(0, &[0; 4]), Err(NorEmuError::ProgramTwice));
        f.erase(0, 64).unwrap();
        f.write(0, &[0; 4]).unwrap();
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
    fn a_torn_program_leaves_the_cut_word_undefined_and_the_rest_untouched() {
        let mut blank_torn_words = 0;
        let mut weak_torn_words = 0;
        for seed in 0..64 {
            let mut f = Emu::new(128);
            f.seed(seed);
            f.cut(Cut::During {
                op: 0,
                after_bytes: 5,
            });
            assert_eq!(f.write(0, &[0; 12]), Err(NorEmuError::PowerCut));
            assert_eq!(&f.image()[..4], &[0; 4], "the word before the cut");
            assert_eq!(&f.image()[8..12], &[0xFF; 4], "the word after the cut");
            f.power_on();
            if f.image()[4..8] == [0xFF; 4] && f.weak_bits() == 0 {
                blank_torn_words += 1;
            }
            if f.weak_bits() > 0 {
                weak_torn_words += 1;
                assert!(reads(&mut f, 4, 4, 64).len() > 1, "weak bits vary");
            }
            // Whatever it reads, the torn word may not be programmed again, the next may.
            assert_eq!(f.write(4, &[0; 4]), Err(NorEmuError::ProgramTwice));
            f.write(8, &[0; 4]).unwrap();
        }
        assert!(blank_torn_words > 0 && weak_torn_words > 0);
    }

    #[test]
    fn a_torn_erase_leaves_the_sector_undefined_even_when_it_reads_erased() {
        let mut read_erased = 0;
        for seed in 0..64 {
            let mut f = Emu::new(192);
            f.seed(seed);
            f.write(0, &[0; 4]).unwrap();
            f.write(64, &[0; 4]).unwrap();
            f.write(128, &[0; 4]).unwrap();
            f.cut(Cut::During {
                op: 3,
                after_bytes: 70,
            });
            assert_eq!(f.erase(0, 192), Err(NorEmuError::PowerCut));
            f.power_on();
            assert_eq!(&f.image()[..4], &[0xFF; 4], "the sector before the cut");
            assert_eq!(&f.image()[128..132], &[0; 4], "the sector after the cut");
            if reads(&mut f, 64, 64, 8) == [vec![0xFF; 64]] {
                read_erased += 1;
            }
            assert_eq!(f.write(64, &[0; 4]), Err(NorEmuError::ProgramTwice));
            assert_eq!(f.write(100, &[0; 4]), Err(NorEmuError::ProgramTwice));
            f.write(0, &[0; 4]).unwrap();
            f.erase(64, 128).unwrap();
            f.write(64, &[0; 4]).unwrap();
        }
        assert!(read_erased > 0);
    }

    #[test]
    fn a_read_glitch_strikes_once_and_leaves_the_stored_byte_alone() {
        let mut f = Emu::new(128);
        f.glitch_read(3, 0);
        let mut buf = [0u8; 4];
        f.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0xFF, 0xFF, 0xFF, 0xFE]);
        f.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0xFF; 4]);
        assert_eq!(f.image()[3], 0xFF);
        f.flip_on_read(1, 1);
        for _ in 0..2 {
            f.read(0, &mut buf).unwrap();
            assert_eq!(buf, [0xFF, 0xFD, 0xFF, 0xFF]);
        }
    }

    #[test]
    fn the_xip_window_sees_programs_only_after_an_invalidate() {
        let mut f = Emu::new(128);
        f.write(0, &[0x12, 0x34, 0x56, 0x78]).unwrap();
        assert_eq!(&f.mapped()[..4], &[0xFF; 4], "a stale cache line");
        f.invalidate();
        assert_eq!(&f.mapped()[..4], &[0x12, 0x34, 0x56, 0x78]);
        f.glitch_mapped(2, 0);
        assert_eq!(&f.mapped()[..4], &[0x12, 0x34, 0x57, 0x78]);
        f.invalidate();
        assert_eq!(&f.mapped()[..4], &[0x12, 0x34, 0x56, 0x78]);
        f.flip_stored_bit(3, 7);
        f.power_on();
        assert_eq!(f.mapped()[3], 0xF8);
    }
}
