//! The device-agent core on a Cortex-M55 under QEMU (`mps3-an547`): installs a real pack (the
//! `small_net` Vela fixture, signed at build time) from an in-memory server into an emulated OSPI
//! NOR, re-validates it in flash, binds it, "reboots", boots it again, and exits 0 only if every
//! step succeeded and the NPU registers point where they must. It prints the peak stack of the
//! install and of the boot (painted stack).
#![no_std]
#![no_main]

mod ram_nor;
mod server;
mod stack;

use core::ptr::addr_of_mut;

use cortex_m_rt::{ExceptionFrame, entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use device_agent::{Agent, Arena, Device, Error, Layout, Poll, RecordingNpu, Slot};
use npub_core::Accel;
use npub_core::manifest::Keyring;

use ram_nor::RamNor;
use server::Server;

/// Must match build.rs.
const HW_CLASS: u32 = 0x8A81;
/// Journal banks of one sector (32 records each), slots of 256 KiB, progress every 16 KiB.
const BANK_BYTES: u32 = ram_nor::ERASE as u32;
const SLOT_BYTES: u32 = 256 * 1024;
const PROGRESS_BYTES: u32 = 16 * 1024;
const NOR_BYTES: usize = 2 * BANK_BYTES as usize + 2 * SLOT_BYTES as usize;
/// The NPU arena: the pack's scratch region (19,424 bytes) plus alignment slack.
const ARENA_BYTES: usize = 32 * 1024;

const PACK_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/pack.npub")).len();
const MANIFEST_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/manifest.bin")).len();
const TRUSTED_KEY: &[u8; 32] = include_bytes!(concat!(env!("OUT_DIR"), "/trust.pub.bin"));

#[unsafe(link_section = ".server")]
static PACK: [u8; PACK_LEN] = *include_bytes!(concat!(env!("OUT_DIR"), "/pack.npub"));
#[unsafe(link_section = ".server")]
static MANIFEST: [u8; MANIFEST_LEN] = *include_bytes!(concat!(env!("OUT_DIR"), "/manifest.bin"));

#[unsafe(link_section = ".emulated_nor")]
static mut NOR: [u8; NOR_BYTES] = [0; NOR_BYTES];

#[repr(C, align(16))]
struct ArenaMem([u8; ARENA_BYTES]);
#[unsafe(link_section = ".npu_arena")]
static mut ARENA: ArenaMem = ArenaMem([0; ARENA_BYTES]);

/// Why the run failed.
enum Failure {
    Agent(Error),
    Check(&'static str),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Agent(e)
    }
}

#[entry]
fn main() -> ! {
    match run() {
        Ok(()) => {
            hprintln!("PASS");
            debug::exit(debug::EXIT_SUCCESS);
        }
        Err(Failure::Agent(_e)) => {
            #[cfg(feature = "verbose")]
            hprintln!("FAIL: {}", _e);
            #[cfg(not(feature = "verbose"))]
            hprintln!(
                "FAIL: the agent returned an error (build with --features verbose to see it)"
            );
            debug::exit(debug::EXIT_FAILURE);
        }
        Err(Failure::Check(what)) => {
            hprintln!("FAIL: {}", what);
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    halt()
}

#[inline(never)]
fn run() -> Result<(), Failure> {
    // SAFETY: `run` is called once, from `main`, with interrupts disabled: these are the only
    // references ever made to the two statics.
    let (nor, arena_mem) = unsafe { (&mut *addr_of_mut!(NOR), &mut (*addr_of_mut!(ARENA)).0) };
    let layout = Layout::contiguous(
        0,
        BANK_BYTES,
        SLOT_BYTES,
        PROGRESS_BYTES,
        nor.as_ptr() as u32,
    );
    let device = Device {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        io_bindings: None,
    };
    let mut keyring = Keyring::<2>::new();
    keyring
        .add(TRUSTED_KEY)
        .map_err(|_| Failure::Check("keyring"))?;
    let arena_bus = arena_mem.as_ptr() as u32;

    let mut agent = Agent::open(RamNor::new(nor), layout, device)?;
    let mut server = Server {
        manifest: &MANIFEST,
        pack: &PACK,
        sequence: 1,
        served: 0,
    };
    let mut npu = RecordingNpu::default();
    let mut arena = Arena {
        bytes: &mut arena_mem[..],
        bus_address: arena_bus,
    };
    stack::paint();
    let sp = stack::sp();
    let polled = agent.poll(&mut server, &keyring, &mut npu, &mut arena, None);
    let install_stack = stack::peak(sp);
    let installed = match polled? {
        Poll::Installed(v) => v,
        Poll::UpToDate => return Err(Failure::Check("the server's manifest was not taken")),
    };
    check(&installed, &layout, agent.flash(), &npu)?;
    hprintln!(
        "installed {} bytes into slot {}: QBASE {:#010x} QSIZE {} BASEP0 {:#010x} BASEP1 {:#010x}",
        server.served,
        installed.slot().name(),
        installed.registers().qbase,
        installed.registers().qsize,
        installed.registers().basep[0],
        installed.registers().basep[1]
    );

    // Power off and on: the journal is mounted afresh and the slot re-validated before binding.
    let nor = agent.into_flash().into_inner();
    let mut agent = Agent::open(RamNor::reopen(nor), layout, device)?;
    let mut npu = RecordingNpu::default();
    stack::paint();
    let sp = stack::sp();
    let booted = agent.boot(&mut npu, &mut arena);
    let boot_stack = stack::peak(sp);
    let booted = booted?;
    if booted.verified != installed || npu.programmed.as_ref() != Some(installed.registers()) {
        return Err(Failure::Check("the reboot bound something else"));
    }
    hprintln!(
        "rebooted: slot {} re-validated and bound",
        booted.verified.slot().name()
    );
    hprintln!(
        "stack peak (whole program / the agent call alone): install {} / {} bytes, boot {} / {} bytes",
        install_stack.0,
        install_stack.1,
        boot_stack.0,
        boot_stack.1
    );
    Ok(())
}

/// The registers point into the slot as it sits in flash: QBASE at the command stream, BASEP0 at
/// the weights (zero copy), BASEP1 into the arena.
fn check(
    v: &device_agent::VerifiedSlot,
    layout: &Layout,
    flash: &RamNor,
    npu: &RecordingNpu,
) -> Result<(), Failure> {
    use device_agent::Mapped;
    let blob = npub_core::Blob::parse(&PACK).map_err(|_| Failure::Check("pack"))?;
    let regs = v.registers();
    let xip = layout.slot_xip(Slot::A);
    let mapped = flash.mapped();
    let at = |bus: u32, len: usize| {
        let off = (bus - layout.xip_base) as usize;
        &mapped[off..off + len]
    };
    let weights = blob.baked_bytes(0).ok_or(Failure::Check("region 0"))?;
    let ok = v.slot() == Slot::A
        && npu.programmed.as_ref() == Some(regs)
        && regs.qbase == xip + blob.header().cmd_offset
        && at(regs.qbase, regs.qsize as usize) == blob.command_stream()
        && regs.basep[0] == xip + blob.region(0).map_or(0, |r| r.data_offset)
        && at(regs.basep[0], weights.len()) == weights
        && regs.basep[1] % 16 == 0
        && regs.region_bytes[1] == 19_424;
    if !ok {
        return Err(Failure::Check(
            "NPU registers do not point at the pack in flash",
        ));
    }
    Ok(())
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    hprintln!("FAIL: hard fault");
    debug::exit(debug::EXIT_FAILURE);
    halt()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("FAIL: panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    halt()
}

/// Where execution ends if the semihosting exit does not stop QEMU.
fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}
