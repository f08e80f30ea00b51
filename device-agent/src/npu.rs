//! Binding a verified pack to the Ethos-U55, at register level.
//!
//! The NPU is started with a command stream address and length and eight base-pointer registers;
//! every address in the command stream is an offset from one of the base pointers:
//!
//! | Register       | Value                                                                  |
//! |----------------|------------------------------------------------------------------------|
//! | `QBASE`        | bus address of the command stream's copy at the arena's end (16-byte aligned, the COP1 header just before it): the program is pinned in SRAM, proven equal to the bytes verified ([`crate::verify::pin`]) |
//! | `QSIZE`        | `cmd_bytes`                                                            |
//! | `BASEP0..7`    | region *n*: BAKED → the slot's XIP address + `data_offset` (zero copy, the weights stay in flash); RUNTIME → inside the caller's arena before the program's copy, 16-byte aligned; unused → 0 |
//!
//! Arena, low to high: the runtime regions (npub-core's carving), free bytes, then the program
//! (the COP1 driver payload, or the bare stream) ending within 16 bytes of the arena's end. An
//! arena that cannot hold both is [`Error::ArenaTooSmall`], before anything is bound.
//!
//! The Ethos-U55 needs QBASE and every BASEPn 16-byte aligned and has eight base pointers, so a
//! pack with more than eight regions cannot be bound. The application's IO bindings (where the
//! command stream expects each input and output: a region and an offset) resolve to bus addresses
//! inside the bound regions, checked against the regions' sizes. The arena carving itself is npub-core's
//! [`npub_core::bind`] (one authority on where runtime regions go); this module only turns its
//! pointers into bus addresses and checks what the hardware needs.
use npub_core::FormatError;
use npub_core::format::{ARENA_ALIGN, Header, MAX_BASE_POINTERS};
use npub_core::io_bindings::{IoBindings, IoKind};
use npub_core::{Blob, BoundRegion};

use crate::error::Error;
use crate::ids::Register;

/// Inputs and outputs an application binds at most: an Ethos-U55 model for a microcontroller has
/// a handful, and the bound set is carried by value.
pub const MAX_IO: usize = 8;

/// Where one model input or output lives once bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoAddress {
    /// Input or output.
    pub kind: IoKind,
    /// The model's input (or output) number.
    pub index: u32,
    /// Its bus address: BASEP*region* + offset.
    pub address: u32,
    /// Its size in bytes.
    pub bytes: u32,
}

/// Arm's driver payload: the COP1 header that `npub pack` puts right before the command stream,
/// and the stream (see `npub_core::format::cop1`), as copied into the arena. What
/// `ethosu_invoke_v3()` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverPayload {
    /// Bus address of its first byte (`"COP1"`), 4-byte aligned.
    pub address: u32,
    /// Its length: the header and the stream (`QBASE − address + QSIZE`).
    pub bytes: u32,
}

/// Where a pack's program lies in it: the COP1 driver payload (header and stream) when the pack
/// carries one, else the command stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramSpan {
    /// Pack offset of its first byte.
    pub offset: u32,
    /// Its length.
    pub bytes: u32,
    /// Bytes before the command stream (the COP1 header; 0 for a bare stream).
    pub header: u32,
}

impl ProgramSpan {
    /// The program's place as `pack` reads before the pass, whose header nothing has checked
    /// yet: `None` when its command-stream fields point outside `pack`. After the parse,
    /// [`ProgramSpan::of`] must find the same place, or the slot read differently from one read to the
    /// next.
    pub(crate) fn locate(pack: &[u8]) -> Option<ProgramSpan> {
        let header = Header::read(pack)?;
        let end = u64::from(header.cmd_offset) + u64::from(header.cmd_bytes);
        if end > pack.len() as u64 {
            return None;
        }
        Some(ProgramSpan::at(pack, &header))
    }

    /// The program's place in a parsed pack (its header checked: every offset in bounds).
    pub(crate) fn of(blob: &Blob<'_>) -> ProgramSpan {
        ProgramSpan::at(blob.as_bytes(), &blob.header())
    }

    fn at(pack: &[u8], header: &Header) -> ProgramSpan {
        match npub_core::format::cop1::driver_payload(pack, header) {
            Some((offset, bytes)) => ProgramSpan {
                offset,
                bytes,
                header: header.cmd_offset - offset,
            },
            None => ProgramSpan {
                offset: header.cmd_offset,
                bytes: header.cmd_bytes,
                header: 0,
            },
        }
    }

    pub(crate) const fn end(&self) -> u64 {
        self.offset as u64 + self.bytes as u64
    }
}

/// The register values that start a job, plus each region's extent so that a caller (and a test)
/// can see what every base pointer covers, and the resolved IO bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpuRegisters {
    /// Bus address of the pack's first byte: its slot in the XIP window.
    pub pack: u32,
    /// Bus address of the command stream (its copy in the arena).
    pub qbase: u32,
    /// Command-stream length in bytes.
    pub qsize: u32,
    /// BASEP0..BASEP7; 0 for a slot the pack does not use.
    pub basep: [u32; MAX_BASE_POINTERS],
    /// Bytes each base pointer covers (the region's size).
    pub region_bytes: [u32; MAX_BASE_POINTERS],
    /// Which base pointers point into the slot (BAKED) rather than the arena.
    pub baked: [bool; MAX_BASE_POINTERS],
    /// How many base pointers the pack uses.
    pub regions: u8,
    /// The application's inputs and outputs, resolved (the first `io_count`).
    pub io: [Option<IoAddress>; MAX_IO],
    /// How many of `io` are set.
    pub io_count: u8,
    /// The driver payload's copy in the arena, when the pack carries its header (`None` for a
    /// pack from a producer that did not put it there).
    pub driver_payload: Option<DriverPayload>,
}

/// The caller's NPU-visible working memory for RUNTIME regions.
#[derive(Debug)]
pub struct Arena<'a> {
    /// The memory itself.
    pub bytes: &'a mut [u8],
    /// Its bus address as the NPU sees it (on the device: its address; the emulation may place
    /// it anywhere, 16-byte aligned).
    pub bus_address: u32,
}

/// What [`Npu::self_test`] answers: the outputs' SHA-256 when the golden input ran, `None` when
/// no golden inference ran, or the firmware's failure code.
pub type SelfTestResult = Result<Option<[u8; 32]>, u32>;

/// An NPU the agent can bind a pack to.
pub trait Npu {
    /// Writes QBASE, QSIZE and BASEP0..7.
    fn program(&mut self, regs: &NpuRegisters);

    /// Forgets the bound pack (QBASE, QSIZE and every BASEPn to 0): called when the pack last
    /// programmed was refused and nothing else could be bound, so that no job can start on it.
    fn unbind(&mut self);

    /// Runs the device's self-test on the bound pack. `golden` is the input of the pack's
    /// self-test record (every model input's bytes, in the model's input order, concatenated;
    /// `None` when the pack has none): run it and answer the SHA-256 of every output's bytes, in
    /// the model's output order, concatenated, which the agent compares with the record's.
    /// `Ok(None)`: no golden inference ran (no input, or no NPU on this board: the step is
    /// skipped, and says so); the firmware's own extra checks passed. `Err(code)` refuses the
    /// pack, and the install or the trial boot reverts it.
    fn self_test(&mut self, regs: &NpuRegisters, golden: Option<&[u8]>) -> SelfTestResult;
}

/// Computes the registers for `blob`, which lies in flash at bus address `slot_xip`, carving its
/// runtime regions out of `arena` below the place of its `program`'s copy (returned: its arena
/// offset), and resolves the application's `io` bindings in them. Nothing is written.
#[inline(never)]
pub fn registers(
    blob: &Blob<'_>,
    slot_xip: u32,
    arena: &mut Arena<'_>,
    io: Option<&[u8]>,
    program: &ProgramSpan,
) -> Result<(NpuRegisters, u32), Error> {
    let header = blob.header();
    let blob_start = blob.as_bytes().as_ptr() as usize;
    let arena_start = arena.bytes.as_ptr() as usize;
    let arena_bus = arena.bus_address;
    let arena_len = arena.bytes.len();
    let too_small = || Error::ArenaTooSmall {
        runtime: npub_core::arena_bytes_required(blob),
        program: program.bytes,
        arena: arena_len,
    };
    // The stream's copy as high as it goes with its address 16-byte aligned; its COP1 header
    // (a multiple of 4 bytes) right before it.
    let stream = arena_len
        .checked_sub(header.cmd_bytes as usize)
        .map(|room| (arena_start + room) & !(ARENA_ALIGN as usize - 1))
        .and_then(|end| end.checked_sub(arena_start))
        .ok_or_else(too_small)?;
    let at = stream
        .checked_sub(program.header as usize)
        .ok_or_else(too_small)?;
    let job = npub_core::bind(blob, &mut arena.bytes[..at]).map_err(|e| match e {
        npub_core::Error::Format(FormatError::ArenaTooSmall { .. }) => too_small(),
        e => Error::Rejected(e),
    })?;

    let qbase = bus(arena_bus, stream as u64, Register::Qbase)?;
    aligned(Register::Qbase, qbase)?;
    let mut regs = NpuRegisters {
        pack: slot_xip,
        qbase,
        qsize: header.cmd_bytes,
        basep: [0; MAX_BASE_POINTERS],
        region_bytes: [0; MAX_BASE_POINTERS],
        baked: [false; MAX_BASE_POINTERS],
        regions: job.region_count() as u8,
        io: [None; MAX_IO],
        io_count: 0,
        driver_payload: None,
    };
    if program.header > 0 {
        // Before QBASE, which is on the bus: cannot overflow.
        let address = bus(arena_bus, at as u64, Register::Qbase)?;
        regs.driver_payload = Some(DriverPayload {
            address,
            bytes: program.bytes,
        });
    }
    for n in 0..job.region_count() {
        let Some(region) = job.region(n) else {
            continue;
        };
        let register = Register::Basep(n as u8);
        let address = match region {
            // Both pointers come from slices of the blob / the arena, so the subtraction is the
            // offset inside them and cannot underflow.
            BoundRegion::Baked(b) => bus(
                slot_xip,
                (b.as_ptr() as usize - blob_start) as u64,
                register,
            )?,
            BoundRegion::Runtime(r) => bus(
                arena_bus,
                (r.as_ptr() as usize - arena_start) as u64,
                register,
            )?,
        };
        aligned(register, address)?;
        ends_on_bus(address, region.len() as u64, register)?;
        regs.basep[n] = address;
        regs.region_bytes[n] = region.len() as u32;
        regs.baked[n] = region.is_baked();
    }
    if let Some(io) = io {
        resolve_io(blob, io, &mut regs)?;
    }
    // `at` ≤ the arena's length, a `usize` slice length that the bus check above kept below 2³².
    Ok((regs, at as u32))
}

/// Each binding's address: its region's base pointer + its offset, after npub-core checked that
/// `[offset, offset + bytes)` lies inside that region.
fn resolve_io(blob: &Blob<'_>, io: &[u8], regs: &mut NpuRegisters) -> Result<(), Error> {
    let io = IoBindings::parse(io).map_err(Error::Rejected)?;
    io.check_against(blob).map_err(Error::Rejected)?;
    if io.len() > MAX_IO {
        return Err(Error::TooManyIoBindings {
            count: io.len(),
            max: MAX_IO,
        });
    }
    for (slot, b) in regs.io.iter_mut().zip(io.iter()) {
        let register = Register::Basep(b.region);
        // check_against proved the region exists and contains the tensor.
        let address = bus(
            regs.basep[usize::from(b.region)],
            u64::from(b.offset),
            register,
        )?;
        *slot = Some(IoAddress {
            kind: b.kind,
            index: b.index,
            address,
            bytes: b.bytes,
        });
    }
    regs.io_count = io.len() as u8;
    Ok(())
}

/// `base + offset` as a 32-bit bus address.
fn bus(base: u32, offset: u64, register: Register) -> Result<u32, Error> {
    u32::try_from(u64::from(base) + offset).map_err(|_| Error::AddressOverflow { register })
}

/// A region of `len` bytes at `address` must end on the bus (it may end exactly at 2³²).
fn ends_on_bus(address: u32, len: u64, register: Register) -> Result<(), Error> {
    if u64::from(address) + len > 1 << 32 {
        return Err(Error::AddressOverflow { register });
    }
    Ok(())
}

fn aligned(register: Register, address: u32) -> Result<(), Error> {
    if address % ARENA_ALIGN != 0 {
        return Err(Error::Misaligned {
            register,
            address: u64::from(address),
        });
    }
    Ok(())
}

/// An NPU that only remembers what it was given: the tests' and the QEMU firmware's (QEMU has no
/// Ethos-U55). Its self-test passes unless told to fail; given a golden input it answers
/// `outputs_sha256` (`None`: it ran nothing, as a board without an NPU).
#[derive(Debug, Clone, Default)]
pub struct RecordingNpu {
    /// The registers of the last `program`.
    pub programmed: Option<NpuRegisters>,
    /// How many times `program` was called.
    pub programs: u32,
    /// How many times `unbind` was called.
    pub unbinds: u32,
    /// `Some(code)`: every self-test fails with `code`.
    pub fail_self_test: Option<u32>,
    /// What a self-test with a golden input answers as its outputs' SHA-256.
    pub outputs_sha256: Option<[u8; 32]>,
    /// The golden input of the last self-test (its length), to check what the agent handed over.
    pub last_golden: Option<usize>,
}

impl Npu for RecordingNpu {
    fn program(&mut self, regs: &NpuRegisters) {
        self.programmed = Some(*regs);
        self.programs += 1;
    }

    fn unbind(&mut self) {
        self.programmed = None;
        self.unbinds += 1;
    }

    fn self_test(&mut self, regs: &NpuRegisters, golden: Option<&[u8]>) -> SelfTestResult {
        self.last_golden = golden.map(<[u8]>::len);
        match self.fail_self_test {
            Some(code) => Err(code),
            None if self.programmed.as_ref() == Some(regs) => Ok(golden.and(self.outputs_sha256)),
            // Testing a pack that is not the one programmed is a bug in the caller.
            None => Err(u32::MAX),
        }
    }
}
