//! The device-agent on a Cortex-M55 under QEMU (`mps3-an547`), as a device runs it: it reads its
//! configuration from the semihosting command line, opens the OSPI NOR kept in a host file,
//! boots (re-validates and binds whatever the flash holds), brings the LAN9118 up with DHCP, and
//! polls a real npub server over TCP (smoltcp) with the no_std HTTP transport: download in range
//! windows into flash, verify in place, bind, report. `run-qemu.sh` builds and starts it.
//!
//! Every step is a line on the console (see `tests/qemu.rs` for the ones the tests read). With
//! `--once` it exits 0 after the first poll that succeeds, 1 if a manifest or pack was refused or
//! the network stayed away; a poll that failed for the network or the flash is retried with
//! backoff and jitter, and resumes the download from the journal.
#![no_std]
#![no_main]

mod args;
mod board_npu;
mod clock;
mod file_nor;
mod lan9118;
mod logged;
mod net;
mod semi;
mod stack;
mod tls;
mod watchdog;

use core::ptr::addr_of_mut;

use cortex_m_rt::{ExceptionFrame, entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use device_agent::http_io::{Backoff, Clock, Config, HttpIo};
use device_agent::{
    Agent, Arena, Booted, Device, DeviceKey, Error, JournalOnly, Layout, Poll, Report, ReportState,
    Transport, Trust,
};
use npub_core::Accel;
use smoltcp::iface::SocketStorage;

use args::Args;
use clock::SysClock;
use file_nor::{FileNor, Opened};
use lan9118::Lan9118;
use logged::Logged;
use net::Net;
use tls::TlsNet;

/// Journal banks of one sector (32 records each); progress journalled every 16 KiB.
const BANK_BYTES: u32 = file_nor::ERASE as u32;
const PROGRESS_BYTES: u32 = 16 * 1024;
/// The XIP window reserved for the flash: slots of up to 4 MiB each.
const XIP_BYTES: usize = (8 << 20) + 4 * BANK_BYTES as usize;
/// The NPU arena: a pack's scratch regions plus alignment slack.
const ARENA_BYTES: usize = 256 * 1024;
/// How long DHCP may take at boot.
const DHCP_MS: u64 = 10_000;

#[unsafe(link_section = ".xip_window")]
static mut XIP: [u8; XIP_BYTES] = [0; XIP_BYTES];

#[repr(C, align(16))]
struct ArenaMem([u8; ARENA_BYTES]);
#[unsafe(link_section = ".npu_arena")]
static mut ARENA: ArenaMem = ArenaMem([0; ARENA_BYTES]);

static mut CMDLINE: [u8; 1024] = [0; 1024];
static mut SOCKETS: [SocketStorage<'static>; 2] = [SocketStorage::EMPTY; 2];
static mut TCP_RX: [u8; net::TCP_RX_BYTES] = [0; net::TCP_RX_BYTES];
static mut TCP_TX: [u8; net::TCP_TX_BYTES] = [0; net::TCP_TX_BYTES];
/// The network stack, kept in place for the whole run (the link refers to it).
static mut NET: Option<Net<'static>> = None;
static mut TLS_READ: [u8; tls::READ_RECORD_BYTES] = [0; tls::READ_RECORD_BYTES];
static mut TLS_WRITE: [u8; tls::WRITE_RECORD_BYTES] = [0; tls::WRITE_RECORD_BYTES];
/// The `--ca` file's DER (a certificate or a key).
static mut CA_DER: [u8; CA_DER_BYTES] = [0; CA_DER_BYTES];
const CA_DER_BYTES: usize = 2048;

type Flash = FileNor;

/// **The QEMU demo's device key: public, the same in every image, NOT A SECRET.** It shows the
/// records' MAC path (`--demo-device-key`) and protects nothing. An RA8P1 derives its key from
/// the hardware unique key at start-up (`device-agent/README.md`, "The trust state's key").
const DEMO_DEVICE_KEY: [u8; 32] = *b"npub QEMU demo key: NOT A SECRET";

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().expect("the core peripherals, once");
    clock::start(cp.SYST);
    stack::paint();
    let code = match run() {
        Ok(()) => debug::EXIT_SUCCESS,
        Err(what) => {
            hprintln!("FAIL: {}", what);
            debug::EXIT_FAILURE
        }
    };
    hprintln!("stack: {} bytes at the deepest", stack::deepest_overall());
    debug::exit(code);
    halt()
}

/// Why the firmware stopped without success.
enum Fail {
    Args(&'static str),
    /// The flag, the file, what is wrong.
    Trust(&'static str, &'static str, &'static str),
    Flash(file_nor::FileNorError),
    Agent(Error),
    Nic(lan9118::Error),
    NoDhcp,
    Url(device_agent::http_io::HttpError),
    Refused(Error),
    GaveUp(u32),
}

impl core::fmt::Display for Fail {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Fail::Args(what) => write!(f, "command line: {what}"),
            Fail::Trust(flag, path, what) => write!(f, "{flag} {path}: {what}"),
            Fail::Flash(e) => write!(f, "flash file: {e:?}"),
            Fail::Agent(e) => write!(f, "agent: {e}"),
            Fail::Nic(e) => write!(f, "LAN9118: {e:?}"),
            Fail::NoDhcp => write!(f, "no DHCP answer within {DHCP_MS} ms"),
            Fail::Url(e) => write!(f, "{e}"),
            Fail::Refused(e) => write!(f, "refused: {e}"),
            Fail::GaveUp(n) => write!(f, "gave up after {n} failed polls"),
        }
    }
}

fn run() -> Result<(), Fail> {
    // SAFETY: `run` is called once, from `main`: these are the only references ever made to the
    // statics, and no interrupt handler touches them.
    let (cmdline, xip, arena_mem, sockets, tcp_rx, tcp_tx) = unsafe {
        (
            &mut *addr_of_mut!(CMDLINE),
            &mut *addr_of_mut!(XIP),
            &mut (*addr_of_mut!(ARENA)).0,
            &mut *addr_of_mut!(SOCKETS),
            &mut *addr_of_mut!(TCP_RX),
            &mut *addr_of_mut!(TCP_TX),
        )
    };
    // SAFETY: as above.
    let (tls_read, tls_write, ca_der) = unsafe {
        (
            &mut *addr_of_mut!(TLS_READ),
            &mut *addr_of_mut!(TLS_WRITE),
            &mut *addr_of_mut!(CA_DER),
        )
    };
    let line = semi::cmdline(cmdline).ok_or(Fail::Args("semihosting gave no command line"))?;
    let args = args::parse(line).map_err(Fail::Args)?;
    let trust = trust(&args)?;
    let trust = if args.demo_device_key {
        hprintln!("trust: records sealed under the QEMU demo device key (public, not a secret)");
        trust.with_device_key(DeviceKey::new(DEMO_DEVICE_KEY))
    } else {
        trust
    };
    // The record buffer is free until the link takes it: the PEM is read into it.
    let tls_trust = tls_trust(&args, ca_der, &mut tls_read[..])?;

    let slot_bytes = args.slot_kib.saturating_mul(1024);
    if slot_bytes == 0 || slot_bytes as usize > (XIP_BYTES - 4 * BANK_BYTES as usize) / 2 {
        return Err(Fail::Args("--slot-kib: 4 to 4096"));
    }
    let layout = Layout::contiguous(
        0,
        BANK_BYTES,
        slot_bytes,
        PROGRESS_BYTES,
        xip.as_ptr() as u32,
    )
    .with_boot_check(args.boot_check);
    let (flash, opened) =
        FileNor::open(args.flash, &mut xip[..layout.end() as usize]).map_err(Fail::Flash)?;
    match opened {
        Opened::Created => hprintln!(
            "flash: {} created blank ({} bytes)",
            args.flash,
            layout.end()
        ),
        Opened::Reopened => hprintln!("flash: {} reopened", args.flash),
        Opened::Extended { from } => {
            hprintln!("flash: {} extended from {} bytes", args.flash, from)
        }
    }
    let device = Device {
        hw_class: args.hw_class,
        accel: Accel::EthosU55_256,
        io_bindings: None,
        trust,
    };
    // The replay floor is the journal's: the board has no OTP counter to spare.
    let unbooted = Agent::power_on(flash, JournalOnly, layout, device).map_err(Fail::Agent)?;
    let mut npu = board_npu::BoardNpu::default();
    let mut arena = Arena {
        bus_address: arena_mem.as_ptr() as u32,
        bytes: &mut arena_mem[..],
    };
    let started = clock::now_ms();
    let (mut agent, booted) = unbooted.boot(&mut npu, &mut arena);
    // Under `-icount shift=0` a virtual ms is a million instructions (docs/performance.md).
    hprintln!(
        "boot: {} ms (boot check {})",
        clock::now_ms() - started,
        if args.boot_check { "on" } else { "off" }
    );
    if let (Err(_), Some(r)) = (&booted, agent.boot_skipped()) {
        hprintln!(
            "boot: skipped sequence {} in slot {}: {}",
            r.sequence,
            r.slot.name(),
            r.reason
        );
    }
    let booted = boot(booted);

    let nic = Lan9118::start().map_err(Fail::Nic)?;
    let mac = nic.mac();
    let seed = u64::from_le_bytes([mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], 0, 0])
        ^ semi::unix_time();
    let mut net = Net::new(nic, sockets, tcp_rx, tcp_tx, seed);
    let (addr, router) = net.up(DHCP_MS).ok_or(Fail::NoDhcp)?;
    // SAFETY: `run` is called once; this is the only reference ever made to `NET`.
    let net = unsafe { (*addr_of_mut!(NET)).insert(net) };
    let net = TlsNet::new(net, tls_trust, tls_read, tls_write);
    let m = mac;
    hprintln!(
        "net: {} via {} (LAN9118 {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x})",
        addr,
        router.map_or(core::net::Ipv4Addr::UNSPECIFIED, |r| r),
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5]
    );
    let config = Config::new(args.server, args.token)
        .map_err(Fail::Url)?
        .with_window_bytes(args.window_kib.saturating_mul(1024));
    let mut transport = Logged::new(HttpIo::new(net, SysClock, config));
    transport.starve_once = args.starve_once;
    if args.watchdog_ms > 0 {
        watchdog::arm(args.watchdog_ms);
        hprintln!("watchdog: armed at {} ms", args.watchdog_ms);
    }
    let link = core::mem::size_of::<TlsNet>();
    hprintln!(
        "ram: transport {} B, link {} B (smoltcp interface, LAN9118 frames {} B), TLS state {} B, \
         TLS records {} B, TCP buffers {} B, socket storage {} B",
        core::mem::size_of::<HttpIo<'_, TlsNet, SysClock>>() - link,
        core::mem::size_of::<Net<'static>>(),
        core::mem::size_of::<Lan9118>(),
        link,
        tls::READ_RECORD_BYTES + tls::WRITE_RECORD_BYTES,
        net::TCP_RX_BYTES + net::TCP_TX_BYTES,
        core::mem::size_of::<[SocketStorage<'static>; 2]>()
    );
    if let Some((sequence, state)) = booted {
        // A rollback is a failure report: with the event log that says how the trial went.
        let events = (state == ReportState::RolledBack).then_some(agent.events());
        report(&mut transport, sequence, state, events);
    }
    poll_loop(&args, &mut agent, &mut transport, &mut npu, &mut arena)
}

/// The factory keyring from the `--trust` files and the roots from the `--root` files.
fn trust(args: &Args) -> Result<Trust, Fail> {
    let mut keys = [[0u8; 32]; args::MAX_TRUST];
    let count = read_keys("--trust", &args.trust, &mut keys)?;
    let mut roots = [[0u8; 32]; args::MAX_ROOT];
    let root_count = read_keys("--root", &args.root, &mut roots)?;
    let mut release = [[0u8; 32]; args::MAX_RELEASE];
    let release_count = read_keys("--release-trust", &args.release_trust, &mut release)?;
    let mut release_roots = [[0u8; 32]; args::MAX_ROOT];
    let release_root_count = read_keys("--release-root", &args.release_root, &mut release_roots)?;
    Trust::new(&keys[..count], &roots[..root_count])
        .map_err(|_| Fail::Args("--trust/--root: unusable keys"))?
        .with_release(
            &release[..release_count],
            &release_roots[..release_root_count],
        )
        .map_err(|_| Fail::Args("--release-trust/--release-root: unusable keys"))
}

/// The `--ca` anchor and the handshake's generator, seeded by the TRNG stand-in; the PEM is read
/// into `scratch` (not a buffer of its own on the stack: its frame would lie below every poll's).
fn tls_trust(
    args: &Args,
    der: &'static mut [u8],
    scratch: &mut [u8],
) -> Result<Option<tls::Trust>, Fail> {
    let (Some(path), Some(seed)) = (args.ca, args.tls_seed) else {
        return Ok(None);
    };
    let file =
        semi::File::open(path, semi::Mode::Read).ok_or(Fail::Trust("--ca", path, "cannot open"))?;
    let pem = &mut scratch[..2 * CA_DER_BYTES];
    let n = file.read(pem);
    let anchor = npub_tls::Anchor::from_pem(&pem[..n], der)
        .map_err(|e| Fail::Trust("--ca", path, e.what()))?;
    let what = match anchor {
        npub_tls::Anchor::Ca { .. } => {
            "a P-256 certificate, the server's issuer or the server pinned"
        }
        npub_tls::Anchor::Key(_) => "the server's P-256 key, pinned",
    };
    hprintln!("tls: --ca {}: {}", path, what);
    hprintln!(
        "tls: DEMO seed from the host (--tls-seed): QEMU's board has no TRNG; a device seeds from its own"
    );
    Ok(Some(tls::Trust::new(anchor, &mut tls::HostSeed(seed))))
}

/// The keys in `paths`, into `keys`; how many.
fn read_keys(
    flag: &'static str,
    paths: &[Option<&'static str>],
    keys: &mut [[u8; 32]],
) -> Result<usize, Fail> {
    let mut count = 0;
    for path in paths.iter().flatten() {
        let file = semi::File::open(path, semi::Mode::Read).ok_or(Fail::Trust(
            flag,
            path,
            "cannot open",
        ))?;
        let mut text = [0u8; 256];
        let n = file.read(&mut text);
        let key = args::trust_key(&text[..n]).ok_or(Fail::Trust(
            flag,
            path,
            "not an `npub-ed25519-public-v1 <hex>` key file",
        ))?;
        if keys[..count].contains(&key) {
            return Err(Fail::Trust(flag, path, "the same key twice"));
        }
        keys[count] = key;
        count += 1;
        if flag == "--trust" {
            Trust::new(&keys[..count], &[]).map_err(|_| {
                Fail::Trust(
                    flag,
                    path,
                    "not a usable ed25519 public key, or a duplicate",
                )
            })?;
        }
    }
    Ok(count)
}

/// What the boot did; the report to send once the network is up.
fn boot(booted: Result<Booted, Error>) -> Option<(u64, ReportState)> {
    match booted {
        Ok(b) => {
            if let Some(r) = b.reverted {
                hprintln!(
                    "boot: rolled back sequence {} from slot {}: {}",
                    r.sequence,
                    r.slot.name(),
                    r.reason
                );
            }
            if let Some(r) = b.skipped {
                hprintln!(
                    "boot: skipped sequence {} in slot {}: {}",
                    r.sequence,
                    r.slot.name(),
                    r.reason
                );
            }
            let v = b.bound;
            hprintln!(
                "boot: sequence {} bound from slot {}",
                v.pack().sequence,
                v.slot().name()
            );
            Some((v.pack().sequence, ReportState::Bound))
        }
        Err(Error::NoBootableSlot) => {
            hprintln!("boot: no pack installed yet");
            None
        }
        Err(e) => {
            hprintln!("boot: failed: {}", e);
            None
        }
    }
}

fn report<T: Transport>(
    t: &mut T,
    sequence: u64,
    state: ReportState,
    events: Option<&device_agent::EventLog>,
) {
    let _ = t.report(&Report {
        sequence,
        state,
        progress: None,
        reason: None,
        attempts: None,
        events,
        selftest_skipped: false,
    });
}

/// The errors after which the download stays journalled and a later poll resumes it.
fn resumable(e: &Error) -> bool {
    matches!(
        e,
        Error::Transport(_) | Error::Flash(_) | Error::PackTruncated { .. }
    )
}

/// One `Agent::poll`, in a frame of its own: the stack figure measured around it is the poll's
/// whole depth, its own frame included (inlined into `poll_loop`, that frame sat above the
/// stack pointer the measurement starts from, and went uncounted).
#[inline(never)]
fn poll_once(
    agent: &mut Agent<Flash, JournalOnly>,
    t: &mut Logged<'_, TlsNet>,
    npu: &mut board_npu::BoardNpu,
    arena: &mut Arena<'_>,
) -> Result<Poll, Error> {
    agent.poll(t, npu, arena, Some(semi::unix_time()))
}

fn poll_loop(
    args: &Args,
    agent: &mut Agent<Flash, JournalOnly>,
    t: &mut Logged<'_, TlsNet>,
    npu: &mut board_npu::BoardNpu,
    arena: &mut Arena<'_>,
) -> Result<(), Fail> {
    let mut backoff = Backoff::new(500, 8_000, args.token.len() as u32 ^ clock::now_ms() as u32);
    let mut failed = 0u32;
    let mut succeeded = 0u32;
    loop {
        let state = *agent.state();
        if let Some((_, pack, written)) = state.receiving() {
            hprintln!(
                "resume: sequence {} at byte {} of {}",
                pack.sequence,
                written,
                pack.len
            );
        }
        hprintln!("poll: after sequence {}", state.last_sequence());
        let (t0, s0) = (clock::now_ms(), t.io.stats());
        // Painted afresh: the figure is this poll's alone, whatever ran deeper before it (the
        // whole run's deepest is kept by `stack::repaint`).
        stack::repaint();
        let sp = stack::sp();
        let outcome = poll_once(agent, t, npu, arena);
        let poll_stack = stack::peak(sp).1;
        let (ms, s) = (clock::now_ms() - t0, t.io.stats());
        let link = t.io.link();
        if link.handshakes > 0 {
            hprintln!(
                "tls: {} handshakes so far (TLS 1.3, {} resumed), the last {} in {} ms",
                link.handshakes,
                link.resumed,
                if link.last_resumed { "resumed" } else { "full" },
                link.last_handshake_ms
            );
        }
        match outcome {
            Ok(Poll::UpToDate) => {
                hprintln!("up to date: sequence {}", agent.state().last_sequence());
                failed = 0;
                backoff.reset();
                succeeded += 1;
                if args.once && succeeded >= args.polls {
                    t.io.finish();
                    return Ok(());
                }
            }
            Ok(Poll::Installed(v)) => {
                let r = v.registers();
                hprintln!(
                    "installed: sequence {} in slot {} (QBASE {:#010x} QSIZE {} BASEP0 {:#010x} BASEP1 {:#010x})",
                    v.pack().sequence,
                    v.slot().name(),
                    r.qbase,
                    r.qsize,
                    r.basep[0],
                    r.basep[1]
                );
                let bytes = s.pack_bytes - s0.pack_bytes;
                hprintln!(
                    "download: {} bytes in {} ms ({} KiB/s), {} range requests, {} requests, {} connections; stack {} B",
                    bytes,
                    ms,
                    bytes * 1000 / 1024 / ms.max(1),
                    s.pack_requests - s0.pack_requests,
                    s.requests - s0.requests,
                    s.connects - s0.connects,
                    poll_stack
                );
                report(t, v.pack().sequence, ReportState::Bound, None);
                failed = 0;
                backoff.reset();
                succeeded += 1;
                if args.once && succeeded >= args.polls {
                    t.io.finish();
                    return Ok(());
                }
            }
            // A dropped connection resumes; a pack that did not read back as signed (corrupted
            // on the way) is downloaded afresh while attempts are left: both after a backoff.
            Err(e) if resumable(&e) || agent.state().retryable().is_some() => {
                failed += 1;
                match t.io.last_error() {
                    Some(h) => hprintln!("failed: {} ({})", e, h),
                    None => hprintln!("failed: {}", e),
                }
                if args.once && failed >= args.attempts {
                    return Err(Fail::GaveUp(failed));
                }
                let delay = backoff.next_delay_ms();
                hprintln!("retry: in {} ms", delay);
                t.io.clock().sleep_ms(delay);
                continue;
            }
            Err(e) => {
                hprintln!("refused: {}", e);
                if args.once {
                    return Err(Fail::Refused(e));
                }
            }
        }
        let wait = t.io.poll_interval_s().unwrap_or(60).clamp(1, 3600);
        // Closed while the device sleeps: a poll interval outlasts a server's idle keep-alive,
        // and a server need hold no socket per sleeping device. The next poll resumes the TLS
        // session from the ticket kept in RAM (no certificate, about half the bytes).
        t.io.finish();
        hprintln!("sleep: {} s", wait);
        t.io.clock().sleep_ms(wait * 1000);
    }
}

#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    hprintln!("FAIL: hard fault at {:#010x}", frame.pc());
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
