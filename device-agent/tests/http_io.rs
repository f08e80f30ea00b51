//! The no_std HTTP/1.1 transport (`http_io`) over a host `TcpStream`: against the real npub
//! server (a 1 MB-class pack in a handful of range requests on one kept connection, ETag,
//! `Npub-Poll-Interval`, reports the server accepts), and against a hostile server of this file
//! that lies in every way the transport must notice. Each lie abandons the attempt with its own
//! [`HttpError`], leaves nothing in flash but erased bytes and bytes of the real pack, and the
//! next poll against an honest server resumes at the journal's durable offset and finishes.
mod net;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use device_agent::http_io::std_link::{StdClock, TcpLink};
use device_agent::http_io::{Clock, Config, HttpError, HttpIo, Timeouts};
use device_agent::{
    Agent, Arena, Device, Error, EventError, Mapped, Poll, Progress, RecordingNpu, Slot, Transport,
    TransportError, Trust,
};
use net::{LiveServer, RamNor};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{ManifestFields, PackFacts, sign_manifest};
use npub_core::{Accel, Role};

const SLOT_BYTES: u32 = 1280 * 1024;
const XIP: u32 = 0x8000_0000;
const ARENA_BUS: u32 = 0x2200_0000;

type Io<'a> = HttpIo<'a, TcpLink, StdClock>;

fn transport<'a>(url: &'a str, token: &'a str) -> Io<'a> {
    // Short enough that the stall tests end soon; nothing honest comes near them on loopback.
    let config = Config::new(url, token).unwrap().with_timeouts(Timeouts {
        connect_ms: 2_000,
        read_ms: 500,
        request_ms: 10_000,
        download_ms: 60_000,
    });
    HttpIo::new(TcpLink::new(), StdClock::default(), config)
}

/// An agent over `flash` whose factory keyring trusts `key`.
fn open(flash: RamNor, key: [u8; 32]) -> Agent<RamNor> {
    let layout = net::layout(SLOT_BYTES, XIP);
    let device = Device {
        trust: Trust::new(&[key], &[]).unwrap(),
        ..net::device()
    };
    Agent::open(flash, layout, device).unwrap()
}

fn blank_agent(key: [u8; 32]) -> Agent<RamNor> {
    let layout = net::layout(SLOT_BYTES, XIP);
    open(RamNor::blank(layout.end() as usize), key)
}

/// One poll with the NPU and arena a test needs.
fn poll<T: Transport>(agent: &mut Agent<RamNor>, t: &mut T) -> Result<Poll, Error> {
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };
    agent.poll(t, &mut npu, &mut arena, None)
}

fn slot_bytes(agent: &Agent<RamNor>, slot: Slot, len: usize) -> &[u8] {
    let start = agent.layout().slot(slot) as usize;
    &agent.flash().mapped()[start..start + len]
}

#[test]
fn installs_a_1mb_pack_from_the_real_server_in_a_range_request_per_64_kib_on_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let pack = fleet.upload("vision", "1.0.0", net::big_pack(1 << 20));
    let token = fleet.provision("dev-1", "lab");
    let seq = fleet.deploy("vision", "1.0.0", "lab");
    let mut agent = blank_agent(fleet.public_key());
    let mut t = transport(&fleet.url, &token);
    let installed = match poll(&mut agent, &mut t) {
        Ok(Poll::Installed(v)) => v,
        other => panic!("{other:?}: {:?}", t.last_error()),
    };
    assert_eq!(installed.pack().sequence, seq);
    assert!(slot_bytes(&agent, installed.slot(), pack.len()) == pack.as_slice());
    let stats = t.stats();
    let windows = pack.len().div_ceil(64 * 1024) as u32;
    println!(
        "pack {} bytes: {} HTTP requests ({} manifest, {} range, {} reports), {} connection(s)",
        pack.len(),
        stats.requests,
        stats.manifest_requests,
        stats.pack_requests,
        stats.report_requests,
        stats.connects
    );
    assert_eq!(
        stats.pack_requests, windows,
        "one range request per 64 KiB window"
    );
    assert!(stats.pack_requests <= pack.len().div_ceil(32 * 1024) as u32);
    assert_eq!(stats.pack_bytes, pack.len() as u64, "no byte fetched twice");
    assert_eq!(
        stats.connects, 1,
        "one kept-alive connection for everything"
    );
    assert_eq!(t.last_report_error(), None, "the server took every report");
    assert_eq!(t.poll_interval_s(), Some(net::POLL_INTERVAL_S));

    // The server took the progress fractions and the final state.
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], seq, "{dev}");
    assert_eq!(dev["last_state"], "installed", "{dev}");

    // ETag: asked again for the same manifest, the server answers 304 and the transport hands
    // out the manifest it kept, byte for byte.
    let (mut first, mut again) = ([0u8; 280], [0u8; 280]);
    assert_eq!(t.fetch_manifest(seq - 1, &mut first), Ok(Some(280)));
    let before = t.stats();
    assert_eq!(t.fetch_manifest(seq - 1, &mut again), Ok(Some(280)));
    assert_eq!(t.stats().not_modified, before.not_modified + 1, "a 304");
    assert_eq!(first, again);
    // Up to date: nothing newer.
    assert_eq!(t.fetch_manifest(seq, &mut again), Ok(None));
    assert_eq!(t.stats().connects, 1);
}

/// A version-2 manifest's self-test record (a real Vela model's, as the server computes it at
/// upload, longer than the agent's 512-byte piece) comes after the pack over the same kept
/// connection: one range request for the rest of the record, read on piece by piece as a pack's
/// window, not one request (and, over TLS, one handshake) per piece. The golden input runs.
#[test]
fn fetches_the_self_test_record_in_one_request_on_the_kept_connection() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let pack = fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite"));
    let token = fleet.provision("dev-1", "lab");
    let seq = fleet.deploy("kws", "1.0.0", "lab");
    let sha = npub_core::manifest::sha256(&pack);
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    let (status, record) = fleet.call(
        &token,
        "GET",
        &format!("/api/v1/device/packs/{hex}/selftest"),
        net::Body::None,
    );
    assert_eq!(status, 200);
    assert!(
        record.len() > device_agent::CHUNK_BYTES,
        "a record of {} bytes would fit one piece",
        record.len()
    );
    let mut agent = blank_agent(fleet.public_key());
    let mut t = transport(&fleet.url, &token);
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };
    let installed = match agent.poll(&mut t, &mut npu, &mut arena, None) {
        Ok(Poll::Installed(v)) => v,
        other => panic!("{other:?}: {:?}", t.last_error()),
    };
    assert_eq!(installed.pack().sequence, seq);
    assert!(slot_bytes(&agent, installed.slot(), pack.len()) == pack.as_slice());
    assert_eq!(
        npu.last_golden,
        Some(record.len() - npub_core::release::SELFTEST_HEADER_BYTES),
        "the golden input ran"
    );
    let stats = t.stats();
    assert_eq!(
        stats.selftest_requests, 1,
        "one request for the whole record"
    );
    assert_eq!(stats.connects, 1, "on the kept connection");
}

/// An install that fails (its self-test) against the real server: the `rolled_back` report
/// carries the device's event log, the agent's lines and the firmware's own in order, escaped
/// on the wire and kept word for word, and the fleet's device view shows them with the report.
/// A line the server would refuse is refused on the device, and never sent.
#[test]
fn a_failed_install_shows_the_devices_event_log_in_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    fleet.upload("vision", "1.0.0", net::big_pack(64 * 1024));
    let token = fleet.provision("dev-1", "lab");
    let seq = fleet.deploy("vision", "1.0.0", "lab");
    let mut agent = blank_agent(fleet.public_key());
    let mut t = transport(&fleet.url, &token);
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };

    let app = r#"app: camera "cam0" up \ 41 ms"#;
    agent.record_event(app).unwrap();
    let long = "x".repeat(device_agent::MAX_EVENT_CHARS + 1);
    assert_eq!(
        agent.record_event(&long),
        Err(EventError::TooLong { len: 65, max: 64 })
    );
    assert_eq!(
        agent.record_event("two\nlines"),
        Err(EventError::NotPrintable { at: 3 })
    );
    assert_eq!(
        agent.record_event("caf\u{e9}"),
        Err(EventError::NotPrintable { at: 3 })
    );

    let manifest = agent
        .fetch_update(&mut t, None)
        .unwrap()
        .expect("a manifest");
    let mut job = agent
        .begin_install(&manifest, &mut t, &mut npu, &mut arena)
        .unwrap();
    while !matches!(
        agent
            .continue_install(&mut job, &mut t, &mut npu, &mut arena, u32::MAX)
            .unwrap(),
        Progress::Pending(_)
    ) {}
    let failed = agent.finish_install(job, Err(7), &mut t, &mut npu, &mut arena);
    assert!(
        matches!(failed, Err(Error::SelfTestFailed { code: 7 })),
        "{failed:?}"
    );
    assert_eq!(t.last_report_error(), None, "the server took every report");

    // (`Agent::open` boots lazily: at the install's beginning, after the firmware's line.)
    let want = [
        app.to_string(),
        "boot: nothing bootable".to_string(),
        format!("download started seq {seq}"),
        format!("install pending seq {seq}"),
        format!("self-test failed, reverted seq {seq}"),
    ];
    let sent: Vec<&str> = agent.events().lines().collect();
    assert_eq!(sent, want);
    let dev = fleet.device("dev-1");
    assert_eq!(dev["last_state"], "rolled_back", "{dev}");
    let history = dev["history"]["events"].as_array().unwrap();
    let with_log: Vec<&serde_json::Value> =
        history.iter().filter(|e| !e["events"].is_null()).collect();
    assert_eq!(
        with_log.len(),
        1,
        "only the failure report carries the log: {history:#?}"
    );
    assert_eq!(with_log[0]["state"], "rolled_back");
    assert_eq!(with_log[0]["sequence"], seq);
    assert_eq!(with_log[0]["events"], serde_json::json!(want), "{dev}");
}

/// The pack and manifest the hostile server serves: small_net with 300 KiB of weights (five
/// windows), signed by a test key.
struct Signed {
    pack: Vec<u8>,
    manifest: Vec<u8>,
    key: [u8; 32],
    /// The self-test record a version-2 manifest names (`None`: a version-1 manifest).
    record: Option<Vec<u8>>,
}

fn signed() -> Signed {
    let case = net::vela_dir().join("cases/small_net_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let mut weights = std::fs::read(case.join("weights.bin")).unwrap();
    weights.resize(300 * 1024, 0x5A);
    let pack = build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 19_424,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    let facts = PackFacts::of(&pack).unwrap();
    let key = KeyPair::from_seed([0x42; 32]);
    let manifest = sign_manifest(&fields(&facts), &key).unwrap().to_vec();
    Signed {
        pack,
        manifest,
        key: key.public_key(),
        record: None,
    }
}

/// What both manifests of `small_net` sign (version 1 and version 2).
fn fields(facts: &PackFacts) -> ManifestFields<'static> {
    ManifestFields {
        sequence: 1,
        model_name: "small_net",
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        hw_class: net::HW_CLASS,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest: [0; 32],
        issued_at: 1_700_000_000,
        expires_at: 0,
    }
}

/// [`signed`] with a version-2 manifest naming a self-test record of 1,500 bytes (three of the
/// agent's pieces), which the hostile server serves at `…/selftest`.
fn signed_v2() -> Signed {
    let s = signed();
    let input: Vec<u8> = (0..1452u32).map(|i| (i * 5 + 1) as u8).collect();
    let record = npub_core::release::encode_selftest(&input, &[0x77; 32]).unwrap();
    let facts = PackFacts::of(&s.pack).unwrap();
    let manifest = npub_core::manifest::sign_manifest_v2(
        &fields(&facts),
        &npub_core::manifest::sha256(&record),
        &KeyPair::from_seed([0x42; 32]),
    )
    .unwrap()
    .to_vec();
    Signed {
        manifest,
        record: Some(record),
        ..s
    }
}

/// How the hostile server answers the self-test record's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordLie {
    /// Honest: 206 with the rest of the record from the offset asked.
    None,
    /// `Content-Range` one byte past the offset asked (and the body from there).
    WrongRange,
    /// A record cut 7 bytes before the length its header states, served as if whole (a
    /// consistent `Content-Range` and `Content-Length`).
    Short,
}

/// How the hostile server answers the first range request at or past `Hostile::from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lie {
    /// Honest.
    None,
    /// The head is right; half the body, then FIN.
    Truncate,
    /// The head is right; some body, then RST.
    Reset,
    /// `Content-Range` names the asked length but from offset 0, and sends those bytes.
    WrongRange,
    /// 200 with the whole pack.
    Whole,
    /// `Content-Range` says the pack is 4 KiB longer than the manifest.
    Longer,
    /// `Content-Length` 100 more than the range.
    LengthMismatch,
    /// A header line without a colon.
    GarbageHead,
    /// Not HTTP at all.
    NotHttp,
    /// Reads the request, answers nothing.
    StallHead,
    /// The head and 100 body bytes, then nothing.
    StallBody,
    /// The body one byte every 10 ms.
    Drip,
    /// 416 for an offset inside the pack.
    Unsatisfiable,
    /// 16 bytes of garbage after the body, in the same write.
    Trailing,
    /// 503, once.
    Busy,
    /// Honest, but every connection is closed after one answer (without saying so).
    CloseEach,
    /// Honest head, one byte of the body's weights flipped, once.
    Corrupt,
    /// As `Corrupt`, on every window at or past `from`.
    CorruptAlways,
}

#[derive(Debug)]
struct HostileState {
    lie: Lie,
    record_lie: RecordLie,
    /// Offsets of the range requests, in order.
    ranges: Vec<u32>,
    /// The bodies of the status reports, in order.
    reports: Vec<String>,
}

struct Hostile {
    url: String,
    state: Arc<Mutex<HostileState>>,
}

impl Hostile {
    fn start(s: &Signed, lie: Lie, from: u32) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(HostileState {
            lie,
            record_lie: RecordLie::None,
            ranges: Vec::new(),
            reports: Vec::new(),
        }));
        let (pack, manifest) = (Arc::new(s.pack.clone()), Arc::new(s.manifest.clone()));
        let record = Arc::new(s.record.clone());
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (pack, manifest, record, state) = (
                    Arc::clone(&pack),
                    Arc::clone(&manifest),
                    Arc::clone(&record),
                    Arc::clone(&shared),
                );
                std::thread::spawn(move || {
                    serve(stream, &pack, &manifest, record.as_deref(), &state, from)
                });
            }
        });
        Self { url, state }
    }

    fn honest(&self) {
        let mut state = self.state.lock().unwrap();
        state.lie = Lie::None;
        state.record_lie = RecordLie::None;
    }

    fn lie_about_the_record(&self, lie: RecordLie) {
        self.state.lock().unwrap().record_lie = lie;
    }

    fn ranges(&self) -> Vec<u32> {
        self.state.lock().unwrap().ranges.clone()
    }

    fn reports(&self) -> Vec<String> {
        self.state.lock().unwrap().reports.clone()
    }
}

/// A request's path, range and body.
type Request = (String, Option<(u32, u32)>, Vec<u8>);

/// One request, or `None` at EOF.
fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&buf).unwrap();
    let path = req.path.unwrap().to_owned();
    let mut range = None;
    let mut body = 0usize;
    for h in req.headers.iter() {
        let v = std::str::from_utf8(h.value).unwrap();
        if h.name.eq_ignore_ascii_case("range") {
            let (a, b) = v.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
            // `bytes=O-` (the self-test record's): to the end.
            range = Some((a.parse().unwrap(), b.parse().unwrap_or(u32::MAX)));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            body = v.parse().unwrap();
        }
    }
    let mut sink = vec![0u8; body];
    stream.read_exact(&mut sink).ok()?;
    Some((path, range, sink))
}

fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

fn serve(
    mut stream: TcpStream,
    pack: &[u8],
    manifest: &[u8],
    record: Option<&[u8]>,
    state: &Mutex<HostileState>,
    from: u32,
) {
    while let Some((path, range, body)) = read_request(&mut stream) {
        let lie = state.lock().unwrap().lie;
        let head = |status: &str, extra: &str, len: usize| {
            format!(
                "HTTP/1.1 {status}\r\nContent-Length: {len}\r\nNpub-Poll-Interval: 9\r\n{extra}\r\n"
            )
        };
        if path.starts_with("/api/v1/device/manifest") {
            let reply = if path.ends_with("seq=0") {
                [
                    head("200 OK", "ETag: \"m1\"\r\n", manifest.len()).as_bytes(),
                    manifest,
                ]
                .concat()
            } else {
                head("204 No Content", "", 0).into_bytes()
            };
            let _ = stream.write_all(&reply);
        } else if path.ends_with("/selftest") {
            let Some(record) = record else {
                let _ = stream.write_all(head("404 Not Found", "", 0).as_bytes());
                continue;
            };
            let first = range.expect("the record is asked for by range").0 as usize;
            let lie = state.lock().unwrap().record_lie;
            let whole = match lie {
                RecordLie::Short => &record[..record.len() - 7],
                _ => record,
            };
            let said = match lie {
                RecordLie::WrongRange => first + 1,
                _ => first,
            };
            if said >= whole.len() {
                // Past its end: what a server answers (the agent asks on after a short record).
                let h = head(
                    "416 Range Not Satisfiable",
                    &format!("Content-Range: bytes */{}\r\n", whole.len()),
                    0,
                );
                let _ = stream.write_all(h.as_bytes());
                continue;
            }
            let body = &whole[said..];
            let h = head(
                "206 Partial Content",
                &format!(
                    "Content-Range: bytes {said}-{}/{}\r\n",
                    said + body.len() - 1,
                    whole.len()
                ),
                body.len(),
            );
            let _ = stream.write_all(&[h.as_bytes(), body].concat());
        } else if path.starts_with("/api/v1/device/status") {
            let report = String::from_utf8(body).unwrap();
            state.lock().unwrap().reports.push(report);
            let _ = stream.write_all(head("204 No Content", "", 0).as_bytes());
        } else {
            let (first, last) = range.expect("the transport always asks for a range");
            state.lock().unwrap().ranges.push(first);
            let last = last.min(pack.len() as u32 - 1);
            let body = &pack[first as usize..=last as usize];
            let honest_head = head(
                "206 Partial Content",
                &format!("Content-Range: bytes {first}-{last}/{}\r\n", pack.len()),
                body.len(),
            );
            let lie = if first >= from { lie } else { Lie::None };
            if !matches!(lie, Lie::None | Lie::CloseEach | Lie::CorruptAlways) {
                state.lock().unwrap().lie = Lie::None;
            }
            match lie {
                Lie::None | Lie::CloseEach => {
                    let _ = stream.write_all(&[honest_head.as_bytes(), body].concat());
                }
                Lie::Truncate => {
                    let _ = stream
                        .write_all(&[honest_head.as_bytes(), &body[..body.len() / 2]].concat());
                    return;
                }
                Lie::Reset => {
                    let _ = stream
                        .write_all(&[honest_head.as_bytes(), &body[..body.len() / 3]].concat());
                    std::thread::sleep(Duration::from_millis(50));
                    return reset(stream);
                }
                Lie::WrongRange => {
                    let h = head(
                        "206 Partial Content",
                        &format!(
                            "Content-Range: bytes 0-{}/{}\r\n",
                            body.len() - 1,
                            pack.len()
                        ),
                        body.len(),
                    );
                    let _ = stream.write_all(&[h.as_bytes(), &pack[..body.len()]].concat());
                }
                Lie::Whole => {
                    let _ = stream
                        .write_all(&[head("200 OK", "", pack.len()).as_bytes(), pack].concat());
                }
                Lie::Longer => {
                    let h = head(
                        "206 Partial Content",
                        &format!(
                            "Content-Range: bytes {first}-{last}/{}\r\n",
                            pack.len() + 4096
                        ),
                        body.len(),
                    );
                    let _ = stream.write_all(&[h.as_bytes(), body].concat());
                }
                Lie::LengthMismatch => {
                    let h = head(
                        "206 Partial Content",
                        &format!("Content-Range: bytes {first}-{last}/{}\r\n", pack.len()),
                        body.len() + 100,
                    );
                    let _ = stream.write_all(&[h.as_bytes(), body, &[0u8; 100]].concat());
                }
                Lie::GarbageHead => {
                    let _ = stream
                        .write_all(b"HTTP/1.1 206 Partial Content\r\nContent-Range bytes\r\n\r\n");
                }
                Lie::NotHttp => {
                    let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
                }
                Lie::StallHead => {
                    std::thread::sleep(Duration::from_secs(3));
                    return;
                }
                Lie::StallBody => {
                    let _ = stream.write_all(&[honest_head.as_bytes(), &body[..100]].concat());
                    std::thread::sleep(Duration::from_secs(3));
                    return;
                }
                Lie::Drip => {
                    let _ = stream.write_all(honest_head.as_bytes());
                    for b in body.iter().take(400) {
                        if stream.write_all(&[*b]).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    return;
                }
                Lie::Unsatisfiable => {
                    let h = head(
                        "416 Range Not Satisfiable",
                        &format!("Content-Range: bytes */{}\r\n", pack.len()),
                        0,
                    );
                    let _ = stream.write_all(h.as_bytes());
                }
                Lie::Trailing => {
                    let _ = stream
                        .write_all(&[honest_head.as_bytes(), body, b"XXXXXXXXXXXXXXXX"].concat());
                }
                Lie::Corrupt | Lie::CorruptAlways => {
                    // Inside the weights: the structure check cannot see it, the SHA-256 of
                    // the slot in flash does.
                    let mut bad = body.to_vec();
                    bad[body.len() / 2] ^= 0x01;
                    let _ = stream.write_all(&[honest_head.as_bytes(), &bad].concat());
                }
                Lie::Busy => {
                    let _ = stream.write_all(head("503 Service Unavailable", "", 0).as_bytes());
                }
            }
        }
        if lie == Lie::CloseEach {
            return;
        }
    }
}

/// Every byte of the target slot is erased or the real pack's: nothing the validator did not
/// pass was programmed.
fn assert_only_pack_bytes(agent: &Agent<RamNor>, pack: &[u8]) -> u32 {
    let (slot, _, written) = agent
        .state()
        .receiving()
        .expect("an interrupted download stays journalled for the resume");
    let bytes = slot_bytes(agent, slot, pack.len());
    for (i, (&b, &p)) in bytes.iter().zip(pack).enumerate() {
        assert!(
            b == p || (b == 0xFF && i as u32 >= written),
            "slot {} byte {i}: {b:#04x}, the pack has {p:#04x} (durable up to {written})",
            slot.name()
        );
    }
    written
}

/// Runs one poll against the lie (on the window at 128 KiB), checks the error and the flash, then
/// resumes against the honest server and checks where it resumed.
fn abandoned_then_resumed(lie: Lie, window: u32, want: impl Fn(HttpError) -> bool) {
    let s = signed();
    let h = Hostile::start(&s, lie, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let token = "hostile-token";
    let mut t = transport(&h.url, token);
    t.set_window_bytes(window);
    let result = poll(&mut agent, &mut t);
    let err = t.last_error();
    assert!(
        matches!(result, Err(Error::Transport(_))),
        "{lie:?}: {result:?} ({err:?})"
    );
    let err = err.expect("the transport kept its error");
    assert!(want(err), "{lie:?}: {err:?}");
    println!("{lie:?}: {err}");
    let written = assert_only_pack_bytes(&agent, &s.pack);
    assert!(written >= 128 * 1024 || window < 128 * 1024, "{written}");

    h.honest();
    let asked_before = h.ranges().len();
    let mut t = transport(&h.url, token);
    t.set_window_bytes(window);
    match poll(&mut agent, &mut t) {
        Ok(Poll::Installed(v)) => {
            assert!(slot_bytes(&agent, v.slot(), s.pack.len()) == s.pack.as_slice());
        }
        other => panic!("{lie:?}: resume: {other:?} ({:?})", t.last_error()),
    }
    assert_eq!(
        h.ranges()[asked_before],
        written,
        "{lie:?}: the resume starts at the durable offset"
    );
}

const WINDOW: u32 = 64 * 1024;

/// The slot's SHA-256 in flash is not the manifest's.
fn is_hash_mismatch(r: &Result<Poll, Error>) -> bool {
    matches!(
        r,
        Err(Error::Rejected(npub_core::Error::Manifest(
            npub_core::ManifestError::PackHashMismatch { .. }
        )))
    )
}

/// The reports sent since the `n`-th.
fn reports_since(h: &Hostile, n: usize) -> Vec<String> {
    h.reports()[n..].to_vec()
}

/// One response corrupted in transit: the slot does not read back as signed, the agent reports
/// `downloading` with the reason and `"attempts":1` (not `failed`: that would count towards the
/// rollout's auto-abort), and the next poll downloads the pack afresh from byte 0 and installs it.
#[test]
fn retries_a_download_corrupted_once_afresh_and_reports_the_attempt() {
    let s = signed();
    let h = Hostile::start(&s, Lie::Corrupt, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let mut t = transport(&h.url, "corrupt-once");
    let first = poll(&mut agent, &mut t);
    assert!(is_hash_mismatch(&first), "{first:?}");
    assert_eq!(agent.state().retryable().map(|(_, p)| p.sequence), Some(1));
    let reports = h.reports();
    let last = reports.last().unwrap();
    assert!(
        last.starts_with(r#"{"sequence":1,"state":"downloading","reason":""#)
            && last.ends_with(r#","attempts":1}"#),
        "{last}"
    );
    assert!(reports.iter().all(|r| !r.contains("failed")), "{reports:?}");

    let (asked, reported) = (h.ranges().len(), h.reports().len());
    match poll(&mut agent, &mut t) {
        Ok(Poll::Installed(v)) => {
            assert!(slot_bytes(&agent, v.slot(), s.pack.len()) == s.pack.as_slice());
        }
        other => panic!("retry: {other:?} ({:?})", t.last_error()),
    }
    assert_eq!(h.ranges()[asked], 0, "the retry downloads afresh");
    let reports = reports_since(&h, reported);
    assert!(
        reports.iter().any(|r| r.contains(r#""state":"installed""#)),
        "{reports:?}"
    );
    assert!(reports.iter().all(|r| !r.contains("failed")), "{reports:?}");
}

/// Every attempt corrupted: after `MAX_LOCAL_RETRIES + 1` downloads the install is given up and
/// reported `failed` with the attempts, once; the manifest is not asked for again.
#[test]
fn rejects_a_pack_corrupted_on_every_attempt_after_the_last_one() {
    let s = signed();
    let h = Hostile::start(&s, Lie::CorruptAlways, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let mut t = transport(&h.url, "corrupt-always");
    let attempts = device_agent::MAX_LOCAL_RETRIES + 1;
    for attempt in 1..=attempts {
        let before = (h.ranges().len(), h.reports().len());
        let r = poll(&mut agent, &mut t);
        assert!(is_hash_mismatch(&r), "{r:?}");
        assert_eq!(h.ranges()[before.0], 0, "attempt {attempt} starts afresh");
        let reports = reports_since(&h, before.1);
        let last = reports.last().unwrap();
        let state = if attempt < attempts {
            "downloading"
        } else {
            "failed"
        };
        assert!(
            last.contains(&format!(r#""state":"{state}""#))
                && last.ends_with(&format!(r#","attempts":{attempt}}}"#)),
            "attempt {attempt}: {last}"
        );
        assert_eq!(
            reports.iter().filter(|r| r.contains("failed")).count(),
            usize::from(attempt == attempts),
            "{reports:?}"
        );
    }
    assert_eq!(agent.state().retryable(), None);
    let asked = h.ranges().len();
    assert!(matches!(poll(&mut agent, &mut t), Ok(Poll::UpToDate)));
    assert_eq!(h.ranges().len(), asked, "given up: nothing fetched");
}

#[test]
fn rejects_a_truncated_body() {
    abandoned_then_resumed(
        Lie::Truncate,
        WINDOW,
        |e| matches!(e, HttpError::BodyTruncated { expected, received, .. } if received == expected / 2),
    );
}

#[test]
fn rejects_a_connection_reset_mid_body() {
    abandoned_then_resumed(Lie::Reset, WINDOW, |e| {
        matches!(
            e,
            HttpError::Receive(embedded_io::ErrorKind::ConnectionReset)
        )
    });
}

#[test]
fn rejects_a_content_range_that_lies() {
    abandoned_then_resumed(
        Lie::WrongRange,
        WINDOW,
        |e| matches!(e, HttpError::WrongRange { asked_first, first: 0, .. } if asked_first == 128 * 1024),
    );
}

#[test]
fn rejects_200_to_a_range_request() {
    abandoned_then_resumed(Lie::Whole, WINDOW, |e| {
        e == HttpError::RangeIgnored { offset: 128 * 1024 }
    });
}

#[test]
fn rejects_a_pack_longer_than_the_manifests_length() {
    abandoned_then_resumed(
        Lie::Longer,
        WINDOW,
        |e| matches!(e, HttpError::PackLength { manifest, server } if server == u64::from(manifest) + 4096),
    );
}

#[test]
fn rejects_a_content_length_that_disagrees_with_the_range() {
    abandoned_then_resumed(
        Lie::LengthMismatch,
        WINDOW,
        |e| matches!(e, HttpError::BodyLength { content_length, range, .. } if content_length == range + 100),
    );
}

#[test]
fn rejects_garbage_headers() {
    abandoned_then_resumed(Lie::GarbageHead, WINDOW, |e| {
        matches!(e, HttpError::MalformedHead(_))
    });
}

#[test]
fn rejects_a_server_that_is_not_http() {
    abandoned_then_resumed(Lie::NotHttp, WINDOW, |e| {
        matches!(e, HttpError::MalformedHead(_))
    });
}

#[test]
fn rejects_a_server_that_stalls_before_the_head() {
    abandoned_then_resumed(
        Lie::StallHead,
        WINDOW,
        |e| matches!(e, HttpError::ReadTimeout { waited_ms, .. } if waited_ms >= 500),
    );
}

#[test]
fn rejects_a_server_that_stalls_mid_body() {
    abandoned_then_resumed(
        Lie::StallBody,
        WINDOW,
        |e| matches!(e, HttpError::ReadTimeout { waited_ms, .. } if waited_ms >= 500),
    );
}

/// The hostile server, the agent, its poll's result and the transport's own error.
type Lied = (
    Hostile,
    Agent<RamNor>,
    Result<Poll, Error>,
    Option<HttpError>,
);

/// One poll of [`signed_v2`]'s deployment from a hostile server whose record's answer lies as
/// `lie` (the pack honest): the agent, its result and the transport's own error.
fn record_lied(lie: RecordLie) -> Lied {
    let s = signed_v2();
    let h = Hostile::start(&s, Lie::None, u32::MAX);
    h.lie_about_the_record(lie);
    let mut agent = blank_agent(s.key);
    let mut t = transport(&h.url, "hostile-token");
    let result = poll(&mut agent, &mut t);
    let err = t.last_error();
    drop(t);
    (h, agent, result, err)
}

/// Then the honest server: the next poll installs the pack with its record.
fn installs_when_honest(h: &Hostile, agent: &mut Agent<RamNor>) {
    h.honest();
    let mut t = transport(&h.url, "hostile-token");
    match poll(agent, &mut t) {
        Ok(Poll::Installed(_)) => {}
        other => panic!("honest again: {other:?} ({:?})", t.last_error()),
    }
}

/// The record's request is answered with bytes other than asked for: refused in the record's
/// own words ("self-test record: …", not the pack's), both in the transport's error and in the
/// agent's reason; the pack's bytes stay, and the next poll fetches the record and installs.
#[test]
fn rejects_a_self_test_record_whose_content_range_lies() {
    let (h, mut agent, result, err) = record_lied(RecordLie::WrongRange);
    assert_eq!(
        result,
        Err(Error::Transport(TransportError::Protocol(
            "self-test record: Content-Range covers other bytes than asked"
        ))),
        "{err:?}"
    );
    let text = err.expect("the transport kept its error").to_string();
    assert!(
        text.starts_with("self-test record: Content-Range is bytes 1-")
            && text.ends_with("the request asked for 0-"),
        "{text}"
    );
    let report = h.reports().pop().unwrap();
    assert!(
        report.contains("\"reason\":\"transport: protocol: self-test record: Content-Range"),
        "{report}"
    );
    installs_when_honest(&h, &mut agent);
}

/// A record whose answer is consistent HTTP but ends 7 bytes before the length its own header
/// states: the agent's own error with both numbers, reported, not a hash mismatch; the next poll
/// against the honest server installs.
#[test]
fn rejects_a_self_test_record_shorter_than_its_header_states_over_http() {
    let (h, mut agent, result, _) = record_lied(RecordLie::Short);
    assert_eq!(
        result,
        Err(Error::SelfTestRecordShort {
            got: 1493,
            stated: 1500
        })
    );
    let report = h.reports().pop().unwrap();
    assert!(
        report.contains("self-test record shorter than stated: got 1493 of 1500 bytes"),
        "{report}"
    );
    installs_when_honest(&h, &mut agent);
}

#[test]
fn rejects_416_inside_the_pack() {
    abandoned_then_resumed(Lie::Unsatisfiable, WINDOW, |e| {
        e == HttpError::Unsatisfiable { offset: 128 * 1024 }
    });
}

#[test]
fn rejects_bytes_past_the_end_of_a_window() {
    // Small windows, so that the head, the whole body and what follows arrive in one read.
    abandoned_then_resumed(Lie::Trailing, 256, |e| {
        e == HttpError::TrailingBytes { extra: 16 }
    });
}

#[test]
fn rejects_a_download_that_drips_past_its_deadline() {
    let s = signed();
    let h = Hostile::start(&s, Lie::Drip, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let config = Config::new(&h.url, "t").unwrap();
    // Each byte comes in time; the attempt as a whole does not.
    let config = config.with_timeouts(Timeouts {
        read_ms: 500,
        download_ms: 1_500,
        ..config.timeouts()
    });
    let mut t = HttpIo::new(TcpLink::new(), StdClock::default(), config);
    let result = poll(&mut agent, &mut t);
    assert!(matches!(result, Err(Error::Transport(_))), "{result:?}");
    assert!(
        matches!(t.last_error(), Some(HttpError::DownloadTimeout { elapsed_ms }) if elapsed_ms >= 1_500),
        "{:?}",
        t.last_error()
    );
    assert_only_pack_bytes(&agent, &s.pack);
}

#[test]
fn survives_a_503_with_backoff() {
    let s = signed();
    let h = Hostile::start(&s, Lie::Busy, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let mut t = transport(&h.url, "t");
    let result = poll(&mut agent, &mut t);
    assert!(
        matches!(result, Ok(Poll::Installed(_))),
        "{result:?} {:?}",
        t.last_error()
    );
    let ranges = h.ranges();
    assert_eq!(
        ranges.iter().filter(|&&o| o == 128 * 1024).count(),
        2,
        "the 503 was retried: {ranges:?}"
    );
}

#[test]
fn survives_a_server_that_closes_every_kept_connection() {
    let s = signed();
    let h = Hostile::start(&s, Lie::CloseEach, 0);
    let mut agent = blank_agent(s.key);
    let mut t = transport(&h.url, "t");
    let result = poll(&mut agent, &mut t);
    assert!(
        matches!(result, Ok(Poll::Installed(_))),
        "{result:?} {:?}",
        t.last_error()
    );
    let stats = t.stats();
    assert!(stats.connects >= stats.pack_requests, "{stats:?}");
    assert_eq!(stats.pack_bytes, s.pack.len() as u64, "{stats:?}");
}

#[test]
fn rejects_a_304_that_was_not_asked_for() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let _ = s.write_all(b"HTTP/1.1 304 Not Modified\r\n\r\n");
        std::thread::sleep(Duration::from_millis(200));
    });
    let mut t = transport(&url, "t");
    let mut buf = [0u8; 280];
    assert!(t.fetch_manifest(0, &mut buf).is_err());
    assert_eq!(t.last_error(), Some(HttpError::UnaskedNotModified));
}

/// A clock in its own milliseconds: each reading advances it by 1, a sleep by its length. It
/// keeps the longest stretch between two feeds of the watchdog, and every sleep.
#[derive(Default)]
struct WatchdogClock {
    now: u64,
    last_feed: u64,
    longest: u64,
    feeds: u64,
    sleeps: Vec<u32>,
}

impl Clock for WatchdogClock {
    fn now_ms(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    fn sleep_ms(&mut self, ms: u32) {
        self.sleeps.push(ms);
        self.now += u64::from(ms);
    }

    fn feed(&mut self) {
        self.longest = self.longest.max(self.now - self.last_feed);
        self.last_feed = self.now;
        self.feeds += 1;
    }
}

/// The watchdog budget: a whole install through a 503 whose backoff (125 to 250 ms) is longer
/// than the 100 ms budget feeds the watchdog at least once per budget, the backoff slept in
/// pieces of at most the budget.
#[test]
fn feeds_the_watchdog_at_least_once_per_budget_through_a_backoff() {
    let s = signed();
    let h = Hostile::start(&s, Lie::Busy, 128 * 1024);
    let mut agent = blank_agent(s.key);
    let config = Config::new(&h.url, "watchdog").unwrap().with_budget_ms(100);
    let mut t = HttpIo::new(TcpLink::new(), WatchdogClock::default(), config);
    let result = poll(&mut agent, &mut t);
    assert!(matches!(result, Ok(Poll::Installed(_))), "{result:?}");
    let clock = t.clock();
    println!(
        "{} feeds, longest stretch {} ms, sleeps {:?}",
        clock.feeds, clock.longest, clock.sleeps
    );
    assert!(
        clock.sleeps.iter().sum::<u32>() >= 125,
        "{:?}",
        clock.sleeps
    );
    assert!(
        clock.sleeps.iter().all(|&ms| ms <= 100),
        "{:?}",
        clock.sleeps
    );
    assert!(clock.longest <= 100, "{} ms without a feed", clock.longest);
}
