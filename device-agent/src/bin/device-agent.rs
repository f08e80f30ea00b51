//! `device-agent`: one simulated RA8P1 on the host. The same agent core as the firmware, over an
//! emulated OSPI NOR kept in a file, talking to an npub server's device API through the
//! firmware's own HTTP/1.1 client (`http_io`) over a `TcpStream`, or over TLS for an
//! `https://` server checked against `--ca`. The start-up question "which accelerator did the
//! server register?", a JSON API outside the device protocol, is one `GET` on the same link.
//!
//! It boots (re-validating and binding whatever the flash holds), then polls, installs, reports,
//! and repeats every `--interval` seconds (or once, with `--once`). The replay floor is also kept
//! in a monotonic counter: two sectors of a second emulated NOR, in the file `<flash>.counter`.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use device_agent::http_io::std_link::StdClock;
use device_agent::http_io::std_tls::{ClientConfig, TlsLink, trust_pem_as};
use device_agent::http_io::{Backoff, Config, HttpIo, Link, Server};
use device_agent::model_npu::ModelNpu;
use device_agent::nor_emu::NorEmu;
use device_agent::{
    Agent, Arena, Device, Error, Layout, NorCounter, Report, ReportState, Transport, Trust,
};
use npub_core::Accel;

/// The emulated part: 16-byte program unit (the coarsest OSPI/MRAM granularity the agent
/// supports), 4 KiB sectors.
type Flash = NorEmu<16, 4096>;
/// The counter's part: two 4 KiB sectors.
type CounterFlash = NorEmu<16, 4096>;
const COUNTER_BYTES: usize = 2 * 4096;
/// The simulated NPU's arena: enough for the fixtures' scratch regions.
const ARENA_BYTES: usize = 1 << 20;
/// Where the emulated flash and arena sit on the bus (the RA8P1's OSPI0 XIP window, SRAM).
const XIP_BASE: u32 = 0x8000_0000;
const ARENA_BUS: u32 = 0x2200_0000;
/// How long the start-up question to the server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The device API, as the firmware speaks it.
type Io<'a> = HttpIo<'a, TlsLink, StdClock>;

/// Simulates one device: poll, install, report, repeat.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The npub server's base URL, e.g. http://127.0.0.1:8080 or https://npub.example:8443.
    #[arg(long, env = "NPUB_SERVER")]
    server: String,
    /// PEM file the `https://` server is checked against: the CA that issued its certificate,
    /// or its own self-signed certificate (pinned). A server whose certificate it does not
    /// vouch for, names another host or has expired is refused before the token is sent.
    #[arg(long, env = "NPUB_CA")]
    ca: Option<PathBuf>,
    /// PEM file: this device's client certificate (P-256, its id as the CN), presented when the
    /// server asks (`--client-ca` there); with `--client-key`.
    #[arg(long, requires_all = ["client_key", "ca"])]
    client_cert: Option<PathBuf>,
    /// PEM file: the private key of `--client-cert`.
    #[arg(long, requires = "client_cert")]
    client_key: Option<PathBuf>,
    /// This device's token: shown once in the `token` field of `POST /api/v1/devices` (the web
    /// UI's Fleet page, "Add devices"), or a new one from `POST /api/v1/devices/{id}/token`.
    #[arg(long, env = "NPUB_DEVICE_TOKEN")]
    token: String,
    /// The emulated flash, created blank if missing; it keeps the packs and journal across runs.
    /// The monotonic counter lives beside it, in `<flash>.counter`.
    #[arg(long)]
    flash: PathBuf,
    /// A trusted signing key's public key file (`npub-ed25519-public-v1 <hex>`): the server's
    /// `GET /api/v1/keys/{id}/trust` (the web UI's Tokens & keys, "Trust file"), or the
    /// `KEYFILE.pub` of `npub keygen`; repeat for several.
    /// These are the factory keyring: used until the first keyring update is stored in the
    /// flash file, ignored after that.
    #[arg(long = "trust", required = true)]
    trust: Vec<PathBuf>,
    /// The server's root public key file, which signs keyring updates (key rotations and
    /// revocations): `GET /api/v1/keys/root/trust` (the web UI's Tokens & keys, "Root trust
    /// file"); repeat for an offline root as well. Without it, every keyring update is refused.
    #[arg(long = "root")]
    root: Vec<PathBuf>,
    /// A release trust file: a release key's public key file (the `KEYFILE.pub` of `npub
    /// keygen`, `npub-ed25519-public-v1 <hex>`); repeat for several (up to 4). With one, every
    /// pack needs release signatures (`GET /api/v1/device/packs/{sha256}/release`) that meet the
    /// release policy for its model before it is downloaded (docs/release.md). Like `--trust`,
    /// the factory release keys: used until a keyring record stored in the flash file holds a
    /// release trust.
    #[arg(long = "release-trust")]
    release_trust: Vec<PathBuf>,
    /// The release root's public key file: the only key whose keyring updates may add, revoke
    /// or replace release keys and set policies (actions 4 to 8); repeat for a second (up to 2).
    /// Without it, every such update is refused.
    #[arg(long = "release-root")]
    release_root: Vec<PathBuf>,
    /// The board's hardware class id, as in the manifests.
    #[arg(long, env = "NPUB_HW_CLASS", default_value_t = 1)]
    hw_class: u32,
    /// The NPU configuration, by Vela's name. Default: what the server registered for this
    /// device (`GET /api/v1/device`); when given, it must agree with the server's.
    #[arg(long)]
    accel: Option<String>,
    /// The IO bindings the simulated application is built for (canonical binary form): packs
    /// whose manifest digests other bindings are refused.
    #[arg(long)]
    io_bindings: Option<PathBuf>,
    /// Size of each pack slot in KiB (the flash file is 2 slots + 16 KiB of journal).
    #[arg(long, default_value_t = 2048)]
    slot_kib: u32,
    /// Seconds between polls.
    #[arg(long, default_value_t = 30)]
    interval: u64,
    /// Poll once and exit: 0 if up to date or installed, 1 otherwise.
    #[arg(long)]
    once: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("device-agent: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<ExitCode, String> {
    let config = Config::new(&args.server, &args.token).map_err(|e| e.to_string())?;
    let trust = match &args.ca {
        Some(path) => Some(trust(path, args)?),
        None if config.server().is_tls() => {
            return Err(format!(
                "--server {}: https:// needs --ca (the CA of the server's certificate)",
                args.server
            ));
        }
        None => None,
    };
    let mut link = TlsLink::new(trust);
    let accel = accelerator(args, config.server(), &mut link)?;
    let mut transport = HttpIo::new(link, StdClock::default(), config);
    let read = |flag: &str, paths: &[PathBuf]| {
        paths
            .iter()
            .map(|path| {
                npub_core::keypair::read_public_key(path)
                    .map_err(|e| format!("{flag} {}: {e}", path.display()))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let trust = Trust::new(&read("--trust", &args.trust)?, &read("--root", &args.root)?)
        .map_err(|e| format!("--trust/--root: {e}"))?
        .with_release(
            &read("--release-trust", &args.release_trust)?,
            &read("--release-root", &args.release_root)?,
        )
        .map_err(|e| format!("--release-trust/--release-root: {e}"))?;
    let slot_bytes = args
        .slot_kib
        .checked_mul(1024)
        .ok_or("--slot-kib is too large")?;
    let layout = Layout::contiguous(0, 8 * 1024, slot_bytes, 16 * 1024, XIP_BASE);
    let flash = Flash::with_file(&args.flash, layout.end() as usize)
        .map_err(|e| format!("--flash {}: {e}", args.flash.display()))?;
    let io_bindings = match &args.io_bindings {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("--io-bindings {}: {e}", path.display()))?;
            npub_core::io_bindings::IoBindings::parse(&bytes)
                .map_err(|e| format!("--io-bindings {}: {e}", path.display()))?;
            // The device's bindings live as long as the process, like a firmware's.
            Some(&*Box::leak(bytes.into_boxed_slice()))
        }
        None => None,
    };
    let device = Device {
        hw_class: args.hw_class,
        accel,
        io_bindings,
        trust,
    };
    let counter_path = counter_path(&args.flash);
    let counter = CounterFlash::with_file(&counter_path, COUNTER_BYTES)
        .map_err(|e| format!("{}: {e}", counter_path.display()))?;
    let agent = Agent::power_on(flash, NorCounter::new(counter, 0), layout, device)
        .map_err(|e| e.to_string())?;
    // The functional model stands in for the Ethos-U55: it runs the golden input on the pack
    // as the flash file holds it.
    let mut npu = ModelNpu::with_canonical_io(args.flash.clone(), XIP_BASE, io_bindings);
    if io_bindings.is_none() {
        println!(
            "self-test: golden inputs are skipped without --io-bindings (they cannot be split per model input)"
        );
    }
    let mut arena_mem = vec![0u8; ARENA_BYTES + 16];
    // The arena must be 16-byte aligned in memory as on the bus.
    let skip = arena_mem.as_ptr().align_offset(16);
    let mut arena = Arena {
        bytes: &mut arena_mem[skip..skip + ARENA_BYTES],
        bus_address: ARENA_BUS,
    };

    let (mut agent, booted) = agent.boot(&mut npu, &mut arena);
    report_boot(booted, &mut transport, agent.events());
    let mut backoff = Backoff::new(500, 8_000, std::process::id());
    loop {
        let outcome = poll_once(&mut agent, &mut transport, &mut npu, &mut arena);
        if outcome.is_err()
            && let Some((_, pack)) = agent.state().retryable()
        {
            // The pack did not read back as signed (a download corrupted on the way): it is
            // fetched afresh, after a backoff, up to MAX_LOCAL_RETRIES more times (also with
            // --once).
            let delay = backoff.next_delay_ms();
            println!(
                "retry: attempt {} of sequence {} in {delay} ms",
                agent.state().attempt() + 1,
                pack.sequence
            );
            std::thread::sleep(Duration::from_millis(u64::from(delay)));
            continue;
        }
        backoff.reset();
        if args.once {
            return Ok(if outcome.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        std::thread::sleep(Duration::from_secs(args.interval));
    }
}

/// One poll, its log line and its `bound` report: what was installed is named by the signed
/// manifest's model and version as well as its sequence (an operator reads this log).
fn poll_once(
    agent: &mut Agent<Flash, NorCounter<CounterFlash>>,
    transport: &mut Io<'_>,
    npu: &mut ModelNpu,
    arena: &mut Arena<'_>,
) -> Result<(), Error> {
    let keyring_before = agent.keyring().update_sequence();
    let fetched = agent.fetch_update(transport, now());
    let keyring_after = agent.keyring().update_sequence();
    if keyring_after != keyring_before {
        let revoked = agent.keyring().entries().filter(|e| e.is_revoked()).count();
        println!(
            "keyring: applied updates {}..={keyring_after}, {} keys ({revoked} revoked), stored",
            keyring_before + 1,
            agent.keyring().entries().count()
        );
    }
    let manifest = match fetched {
        Ok(Some(m)) => m,
        Ok(None) => {
            println!("up to date (sequence {})", agent.state().last_sequence());
            return Ok(());
        }
        Err(e) => {
            println!("poll failed: {e}");
            return Err(e);
        }
    };
    let (model, version, sequence) = (
        manifest.model_name(),
        manifest.model_version(),
        manifest.sequence(),
    );
    let installed = agent
        .begin_install(&manifest, transport, npu, arena)
        .and_then(|job| {
            // The active slot already held this very pack: the install downloads nothing.
            let held = job.already_held();
            agent
                .run_install(job, transport, npu, arena)
                .map(|v| (v, held))
        });
    match installed {
        Ok((v, held)) => {
            let how = if held {
                ", already in flash: nothing downloaded"
            } else {
                ""
            };
            println!(
                "installed {model} {version} (sequence {sequence}) in slot {}{how}: QBASE {:#010x}, BASEP {:08x?}",
                v.slot().name(),
                v.registers().qbase,
                &v.registers().basep[..usize::from(v.registers().regions)]
            );
            report(transport, sequence, ReportState::Bound, None);
            Ok(())
        }
        Err(e) => {
            println!("install of {model} {version} (sequence {sequence}) failed: {e}");
            Err(e)
        }
    }
}

/// The simulated NPU: `--accel`, checked against the server's registration, or the server's.
///
/// A device that believes it is another NPU than the server does would be offered packs compiled
/// for the server's, refuse each one as "compiled for another accelerator" and fail the install,
/// and failures count towards the whole group deployment's auto-abort: so the disagreement is
/// refused here, before any poll.
/// The `--ca` trust, with the `--client-cert` identity when given.
fn trust(ca: &std::path::Path, args: &Args) -> Result<std::sync::Arc<ClientConfig>, String> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
    };
    let pem = read("--ca", ca)?;
    let identity = match (&args.client_cert, &args.client_key) {
        (Some(cert), Some(key)) => Some((read("--client-cert", cert)?, read("--client-key", key)?)),
        _ => None,
    };
    let identity = identity.as_ref().map(|(c, k)| (&c[..], &k[..]));
    trust_pem_as(&pem, identity).map_err(|e| format!("--ca {}: {e}", ca.display()))
}

fn accelerator(args: &Args, server: &Server<'_>, link: &mut TlsLink) -> Result<Accel, String> {
    let parse = |name: &str, from: &str| {
        Accel::from_name(name).ok_or_else(|| format!("{from} {name}: not a Vela accelerator name"))
    };
    let given = args
        .accel
        .as_deref()
        .map(|n| parse(n, "--accel"))
        .transpose()?;
    match (given, registered_accelerator(server, &args.token, link)) {
        (Some(given), Ok(registered)) => {
            let registered_accel = parse(&registered, "the server's registration:")?;
            if registered_accel != given {
                return Err(format!(
                    "--accel {} disagrees with the server, which registered this device as \
                     {registered}: it would be offered packs compiled for {registered} and refuse \
                     them; drop --accel, or change the device's registration on the server",
                    given.name()
                ));
            }
            Ok(given)
        }
        (None, Ok(registered)) => parse(&registered, "the server's registration:"),
        (Some(given), Err(e)) => {
            println!(
                "could not check --accel against the server ({e}); going on with {}",
                given.name()
            );
            Ok(given)
        }
        (None, Err(e)) => Err(format!(
            "cannot learn this device's accelerator from the server (GET /api/v1/device: {e}); \
             pass --accel (e.g. ethos-u55-256) to run while the server is unreachable"
        )),
    }
}

/// The accelerator the server registered for this device: `GET /api/v1/device`, its
/// `accelerator` field.
fn registered_accelerator(
    server: &Server<'_>,
    token: &str,
    link: &mut TlsLink,
) -> Result<String, String> {
    let timeout = REQUEST_TIMEOUT.as_millis() as u32;
    if server.is_tls() {
        link.connect_tls(server.host(), server.port(), timeout)
            .map_err(|e| e.to_string())?;
    } else {
        link.connect(server.host(), server.port(), timeout)
            .map_err(|_| "server unreachable".to_owned())?;
    }
    let request = format!(
        "GET {}/api/v1/device HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json\r\nConnection: close\r\n\r\n",
        server.path(),
        server.host(),
        server.port()
    );
    let answer = exchange(link, request.as_bytes());
    link.close();
    let answer = answer.ok_or("server unreachable")?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut head = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(head_len)) = head.parse(&answer) else {
        return Err("the answer is not HTTP".to_owned());
    };
    if head.code != Some(200) {
        return Err(format!("server answered HTTP {}", head.code.unwrap_or(0)));
    }
    let v: serde_json::Value = serde_json::from_slice(&answer[head_len..])
        .map_err(|_| "the answer is not JSON".to_owned())?;
    v["accelerator"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "the answer has no `accelerator`".to_owned())
}

/// Sends `request` on the open link and reads the answer to the end of the connection (at most
/// 64 KiB, within [`REQUEST_TIMEOUT`]); `None` if the link fails.
fn exchange(link: &mut TlsLink, request: &[u8]) -> Option<Vec<u8>> {
    use embedded_io::{Read as _, Write as _};
    link.write_all(request).ok()?;
    link.flush().ok()?;
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < REQUEST_TIMEOUT && answer.len() < 64 * 1024 {
        match link.read(&mut buf) {
            Ok(0) => return Some(answer),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(embedded_io::ErrorKind::TimedOut) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Where the counter of the flash at `flash` is kept.
fn counter_path(flash: &std::path::Path) -> PathBuf {
    let mut name = flash.as_os_str().to_owned();
    name.push(".counter");
    PathBuf::from(name)
}

/// Tells the server what boot bound.
fn report_boot(
    booted: Result<device_agent::Booted, Error>,
    transport: &mut Io<'_>,
    events: &device_agent::EventLog,
) {
    match booted {
        Ok(booted) => {
            if let Some(r) = booted.reverted {
                println!(
                    "rolled back sequence {} from slot {}: {}",
                    r.sequence,
                    r.slot.name(),
                    r.reason
                );
                // A failure report: with the event log that says how the trial went.
                let _ = transport.report(&Report {
                    sequence: r.sequence,
                    state: ReportState::RolledBack,
                    progress: None,
                    reason: Some(r.reason),
                    attempts: None,
                    events: Some(events),
                    selftest_skipped: false,
                });
            }
            let v = booted.bound;
            println!(
                "booted sequence {} from slot {}",
                v.pack().sequence,
                v.slot().name()
            );
            report(transport, v.pack().sequence, ReportState::Bound, None);
        }
        Err(Error::NoBootableSlot) => println!("no pack installed yet"),
        Err(e) => println!("boot failed: {e}"),
    }
}

fn report(transport: &mut Io<'_>, sequence: u64, state: ReportState, reason: Option<Error>) {
    let _ = transport.report(&Report {
        sequence,
        state,
        progress: None,
        reason,
        attempts: None,
        events: None,
        selftest_skipped: false,
    });
}

/// The host knows the time; a device may not (then expiry is not checked).
fn now() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}
