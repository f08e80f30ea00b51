//! The agent core alone, to measure what it costs in flash (`device-agent/README.md`, "Figures"):
//! power-on, boot, poll (manifest verification with ed25519, download, journal, the verification
//! pass, the command-stream check, bind), keyring updates kept in flash and the monotonic counter, over a NOR in RAM and a
//! transport that hands over whatever the memory below holds. Every input is read volatile, so
//! the linker keeps every path a real device could take; nothing here formats text or talks to a
//! network, so the image is the agent, npub-core and the crypto, with cortex-m-rt's start-up.
//!
//! Not meant to run (it would find no manifest and poll for ever); `llvm-size -A` on it is the
//! figure.
#![no_std]
#![no_main]

use core::ptr::{addr_of, addr_of_mut, read_volatile};

use cortex_m_rt::entry;
use device_agent::{
    Agent, Arena, Device, DeviceKey, Layout, NorCounter, RecordingNpu, Report, Transport,
    TransportError, Trust,
};
use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};
use npub_core::Accel;

const WRITE: usize = 16;
const ERASE: usize = 4096;
/// Journal banks, two slots, keyring banks.
const FLASH_BYTES: usize = 2 * ERASE + 2 * 64 * 1024 + 2 * ERASE;

static mut FLASH: [u8; FLASH_BYTES] = [0xFF; FLASH_BYTES];
static mut COUNTER: [u8; 2 * ERASE] = [0xFF; 2 * ERASE];
/// What the "server" answers: set by a debugger, or by nothing. Read volatile.
static mut WIRE: [u8; 1024] = [0; 1024];
static mut KEY: [u8; 32] = [0; 32];
static mut ROOT: [u8; 32] = [0; 32];
#[repr(C, align(16))]
struct ArenaMem([u8; 32 * 1024]);
static mut ARENA: ArenaMem = ArenaMem([0; 32 * 1024]);

#[derive(Debug)]
struct Failed;

impl NorFlashError for Failed {
    fn kind(&self) -> NorFlashErrorKind {
        NorFlashErrorKind::Other
    }
}

/// A NOR in RAM (`embedded-storage` traits, XIP = the array).
struct RamNor(&'static mut [u8]);

impl ErrorType for RamNor {
    type Error = Failed;
}

impl ReadNorFlash for RamNor {
    const READ_SIZE: usize = 1;
    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Failed> {
        let at = offset as usize;
        let src = self.0.get(at..at + bytes.len()).ok_or(Failed)?;
        bytes.copy_from_slice(src);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

impl NorFlash for RamNor {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;
    fn erase(&mut self, from: u32, to: u32) -> Result<(), Failed> {
        self.0
            .get_mut(from as usize..to as usize)
            .ok_or(Failed)?
            .fill(0xFF);
        Ok(())
    }
    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Failed> {
        let at = offset as usize;
        let dst = self.0.get_mut(at..at + bytes.len()).ok_or(Failed)?;
        for (d, s) in dst.iter_mut().zip(bytes) {
            *d &= *s;
        }
        Ok(())
    }
}

impl device_agent::Mapped for RamNor {
    fn mapped(&self) -> &[u8] {
        self.0
    }
}

/// Answers from `WIRE`, read volatile.
struct Wire;

fn wire(at: usize) -> u8 {
    // SAFETY: a plain read of a static nothing else writes in this program.
    unsafe { read_volatile(addr_of!(WIRE).cast::<u8>().add(at % 1024)) }
}

impl Transport for Wire {
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        if wire(0) == 0 || u64::from(wire(1)) <= after {
            return Ok(None);
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = wire(i + 2);
        }
        Ok(Some(buf.len()))
    }

    fn fetch_pack(
        &mut self,
        _sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = wire(offset as usize + i);
        }
        Ok(buf.len())
    }

    fn fetch_release(
        &mut self,
        _sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        if wire(5) == 0 {
            return Ok(None);
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = wire(i + 6);
        }
        Ok(Some(usize::from(wire(5)) * 16))
    }

    fn keyring_sequence(&self) -> Option<u64> {
        Some(u64::from(wire(4)))
    }

    fn fetch_selftest(
        &mut self,
        _sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        if wire(7) == 0 {
            return Ok(None);
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = wire(offset as usize + i + 8);
        }
        Ok(Some(buf.len().min(usize::from(wire(7)) * 16)))
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = wire(after as usize + i);
        }
        Ok(buf.len() / 144 * 144)
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        // Keep the report's fields alive without formatting them.
        if report.sequence == u64::from(wire(3)) {
            return Err(TransportError::Unreachable);
        }
        Ok(())
    }
}

#[entry]
fn main() -> ! {
    // SAFETY: `main` runs once; these statics are used nowhere else.
    let (flash, counter, arena, key, root) = unsafe {
        (
            &mut *addr_of_mut!(FLASH),
            &mut *addr_of_mut!(COUNTER),
            &mut (*addr_of_mut!(ARENA)).0,
            read_volatile(addr_of!(KEY)),
            read_volatile(addr_of!(ROOT)),
        )
    };
    // With a release key and root: the release check and the release record are linked in;
    // with a device key, the records' MAC (issue 35).
    let Ok(trust) = Trust::new(&[key], &[root])
        .and_then(|t| t.with_release(&[key], &[root]))
        .map(|t| t.with_device_key(DeviceKey::new(root)))
    else {
        loop {
            cortex_m::asm::wfi();
        }
    };
    let layout = Layout::contiguous(0, ERASE as u32, 64 * 1024, 16 * 1024, 0x8000_0000);
    let device = Device {
        hw_class: 1,
        accel: Accel::EthosU55_256,
        io_bindings: None,
        trust,
    };
    let mut arena = Arena {
        bytes: arena,
        bus_address: 0x2200_0000,
    };
    let mut npu = RecordingNpu::default();
    let Ok(unbooted) = Agent::power_on(
        RamNor(flash),
        NorCounter::new(RamNor(counter), 0),
        layout,
        device,
    ) else {
        loop {
            cortex_m::asm::wfi();
        }
    };
    let (mut agent, _) = unbooted.boot(&mut npu, &mut arena);
    loop {
        let _ = agent.poll(&mut Wire, &mut npu, &mut arena, None);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}
