//! Release signatures on the host agent (issue 34): a server that holds the online signing key
//! (and its own root) cannot get a device with release keys to install anything nobody released.
//!
//! The server here is this file's own, over real HTTP on 127.0.0.1:0, and plays the compromised
//! server: it signs manifests with the online key the device trusts, serves any pack, any bundle
//! of release signatures and any keyring record it likes. The test holds every key (the online
//! key, the server's root, the release keys, the release root), so each attack is built exactly.
//! The agent is the real one, through the firmware's `http_io` over a `TcpStream`. Each attack is
//! refused before a pack byte is fetched, with the npub-core `ReleaseError` that names the failed
//! check, and the `failed` report the server receives says it. The last test runs against the real
//! npub server, which serves no release bundle for a pack it deployed.
mod net;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use device_agent::http_io::std_link::{StdClock, TcpLink};
use device_agent::http_io::{Config, HttpIo};
use device_agent::{Agent, Arena, Device, Error, Poll, RecordingNpu, Trust};
use net::{LiveServer, RamNor};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{KeyId, ManifestFields, PackFacts, ROTATION_BYTES, sign_manifest};
use npub_core::release::{
    ModelId, ReleaseChange, ReleaseFields, ReleasePolicy, TrustChange, TrustUpdate, encode_bundle,
    sign_release, sign_trust_update,
};
use npub_core::{Accel, KeyringError, ReleaseError, Role};

const SLOT_BYTES: u32 = 512 * 1024;
const XIP: u32 = 0x8000_0000;
const ARENA_BUS: u32 = 0x2200_0000;
const MODEL: &str = "person-detect";
const VERSION: &str = "1.0.0";

type Io<'a> = HttpIo<'a, TcpLink, StdClock>;

/// The keys of the story: the online signing key and the server's root (both the attacker's),
/// three release keys and the release root (offline, never the server's).
struct Keys {
    online: KeyPair,
    server_root: KeyPair,
    release: [KeyPair; 3],
    release_root: KeyPair,
}

fn keys() -> Keys {
    Keys {
        online: KeyPair::from_seed([0x10; 32]),
        server_root: KeyPair::from_seed([0x11; 32]),
        release: [0x21, 0x22, 0x23].map(|s| KeyPair::from_seed([s; 32])),
        release_root: KeyPair::from_seed([0x30; 32]),
    }
}

/// A small_net pack; `salt` changes its weights, so two salts are two packs.
fn pack(salt: u8) -> Vec<u8> {
    let case = net::vela_dir().join("cases/small_net_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let mut weights = std::fs::read(case.join("weights.bin")).unwrap();
    weights.push(salt);
    build_pack(
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
    .unwrap()
}

/// The manifest the server signs with the online key: `pack` as `model` `version`.
fn manifest(keys: &Keys, pack: &[u8], sequence: u64, model: &str, version: &str) -> Vec<u8> {
    let facts = PackFacts::of(pack).unwrap();
    sign_manifest(
        &ManifestFields {
            sequence,
            model_name: model,
            model_version: version,
            accel: Accel::EthosU55_256,
            hw_class: net::HW_CLASS,
            pack_len: facts.len,
            pack_checksum: facts.checksum,
            pack_sha256: facts.sha256,
            io_digest: [0; 32],
            issued_at: 1_700_000_000,
            expires_at: 0,
        },
        &keys.online,
    )
    .unwrap()
    .to_vec()
}

/// One release signature by `key` over `pack` as `model` `version`.
fn release(key: &KeyPair, pack: &[u8], model: &str, version: &str) -> [u8; 288] {
    let facts = PackFacts::of(pack).unwrap();
    sign_release(
        &ReleaseFields {
            pack_sha256: facts.sha256,
            model_name: model,
            model_version: version,
            accel: Accel::EthosU55_256,
            io_digest: [0; 32],
            selftest_digest: [0; 32],
            signed_at: 1_700_000_100,
        },
        key,
    )
    .unwrap()
}

fn bundle(signatures: &[[u8; 288]]) -> Vec<u8> {
    encode_bundle(signatures).unwrap()
}

/// A keyring record of a release action, signed by `root`.
fn record(root: &KeyPair, sequence: u64, change: ReleaseChange) -> [u8; ROTATION_BYTES] {
    let update = TrustUpdate {
        sequence,
        change: TrustChange::Release(change),
        issued_at: 1_700_000_000,
    };
    sign_trust_update(&update, root).unwrap()
}

/// What the fake server serves and what it saw.
#[derive(Default)]
struct Served {
    manifest: Vec<u8>,
    sequence: u64,
    pack: Vec<u8>,
    release: Option<Vec<u8>>,
    records: Vec<[u8; ROTATION_BYTES]>,
    /// Paths asked, in order.
    asked: Vec<String>,
    /// The `POST /api/v1/device/status` bodies.
    reports: Vec<String>,
}

/// The compromised server: the device API over real HTTP, serving whatever [`Served`] holds.
struct Fake {
    url: String,
    served: Arc<Mutex<Served>>,
}

impl Fake {
    fn start(served: Served) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = Arc::new(Mutex::new(served));
        let shared = Arc::clone(&served);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        Fake { url, served }
    }

    fn pack_requests(&self) -> usize {
        let s = self.served.lock().unwrap();
        s.asked
            .iter()
            .filter(|p| p.starts_with("/api/v1/device/packs/") && !p.ends_with("/release"))
            .count()
    }

    fn release_requests(&self) -> usize {
        let s = self.served.lock().unwrap();
        s.asked.iter().filter(|p| p.ends_with("/release")).count()
    }

    fn failed_reason(&self) -> String {
        let s = self.served.lock().unwrap();
        s.reports
            .iter()
            .rev()
            .find(|r| r.contains("\"failed\""))
            .cloned()
            .unwrap_or_else(|| panic!("no failed report among {:?}", s.reports))
    }
}

/// One request: its method and path, its `Range`, its body; `None` at EOF.
fn read_request(stream: &mut TcpStream) -> Option<(String, Option<(usize, usize)>, Vec<u8>)> {
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
    let mut len = 0usize;
    for h in req.headers.iter() {
        let v = std::str::from_utf8(h.value).unwrap();
        if h.name.eq_ignore_ascii_case("range") {
            let (a, b) = v.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
            range = Some((a.parse().unwrap(), b.parse().unwrap()));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            len = v.parse().unwrap();
        }
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some((path, range, body))
}

fn serve(mut stream: TcpStream, served: &Mutex<Served>) {
    while let Some((path, range, body)) = read_request(&mut stream) {
        let mut s = served.lock().unwrap();
        s.asked.push(path.clone());
        let newest = s
            .records
            .last()
            .map_or(0, |r| TrustUpdate::decode(r).map_or(0, |(_, u)| u.sequence));
        let reply = |status: &str, extra: &str, body: &[u8]| {
            [
                format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nNpub-Keyring-Sequence: \
                     {newest}\r\n{extra}\r\n",
                    body.len()
                )
                .as_bytes(),
                body,
            ]
            .concat()
        };
        let answer = if let Some(query) = path.strip_prefix("/api/v1/device/manifest?seq=") {
            let after: u64 = query.parse().unwrap();
            if s.sequence > after {
                reply("200 OK", "", &s.manifest)
            } else {
                reply("204 No Content", "", &[])
            }
        } else if let Some(query) = path.strip_prefix("/api/v1/device/keys?after=") {
            let after: u64 = query.parse().unwrap();
            let records: Vec<u8> = s
                .records
                .iter()
                .filter(|r| TrustUpdate::decode(&r[..]).is_ok_and(|(_, u)| u.sequence > after))
                .flatten()
                .copied()
                .collect();
            reply("200 OK", "", &records)
        } else if path.ends_with("/release") {
            match &s.release {
                Some(bundle) => reply("200 OK", "", bundle),
                None => reply("404 Not Found", "", b"no release signatures for this pack"),
            }
        } else if path.starts_with("/api/v1/device/packs/") {
            let (first, last) = range.expect("the transport asks for a range");
            let last = last.min(s.pack.len() - 1);
            let range = format!("Content-Range: bytes {first}-{last}/{}\r\n", s.pack.len());
            reply("206 Partial Content", &range, &s.pack[first..=last])
        } else if path.starts_with("/api/v1/device/status") {
            s.reports.push(String::from_utf8(body).unwrap());
            reply("204 No Content", "", &[])
        } else {
            reply("404 Not Found", "", &[])
        };
        drop(s);
        if stream.write_all(&answer).is_err() {
            return;
        }
    }
}

/// A device: factory keyring {online}, root {server root}, factory release keys `release`,
/// release root {release root}.
fn device(keys: &Keys, release: &[&KeyPair]) -> Device {
    let release: Vec<[u8; 32]> = release.iter().map(|k| k.public_key()).collect();
    Device {
        trust: Trust::new(
            &[keys.online.public_key()],
            &[keys.server_root.public_key()],
        )
        .unwrap()
        .with_release(&release, &[keys.release_root.public_key()])
        .unwrap(),
        ..net::device()
    }
}

fn blank_agent(device: Device) -> Agent<RamNor> {
    let layout = net::layout(SLOT_BYTES, XIP);
    Agent::open(RamNor::blank(layout.end() as usize), layout, device).unwrap()
}

fn poll(agent: &mut Agent<RamNor>, url: &str) -> Result<Poll, Error> {
    let config = Config::new(url, "npub_dev_test").unwrap();
    let mut io: Io<'_> = HttpIo::new(TcpLink::new(), StdClock::default(), config);
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };
    agent.poll(&mut io, &mut npu, &mut arena, None)
}

/// The server deploys `pack` as `model` `version` (sequence 1) beside `release` and `records`.
fn deploy(
    keys: &Keys,
    pack: &[u8],
    model: &str,
    version: &str,
    release: Option<Vec<u8>>,
    records: Vec<[u8; ROTATION_BYTES]>,
) -> Fake {
    Fake::start(Served {
        manifest: manifest(keys, pack, 1, model, version),
        sequence: 1,
        pack: pack.to_vec(),
        release,
        records,
        ..Served::default()
    })
}

fn release_error(result: Result<Poll, Error>) -> ReleaseError {
    match result {
        Err(Error::Rejected(npub_core::Error::Release(e))) => e,
        other => panic!("expected a release refusal, got {other:?}"),
    }
}

/// The refusal left nothing installed and fetched no pack byte, and the server was told why.
fn assert_refused(agent: &Agent<RamNor>, fake: &Fake, reason: &str) {
    assert_eq!(fake.pack_requests(), 0, "no pack byte may be fetched");
    assert_eq!(agent.state().active(), None, "nothing is installed");
    assert_eq!(
        agent.state().last_sequence(),
        0,
        "the sequence is not consumed"
    );
    let report = fake.failed_reason();
    assert!(
        report.contains(reason),
        "the failed report must name the check ({reason:?}): {report}"
    );
}

#[test]
fn installs_a_released_pack() {
    let keys = keys();
    let pack = pack(1);
    let signed = bundle(&[release(&keys.release[0], &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(signed), vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let polled = poll(&mut agent, &fake.url).unwrap();
    assert!(matches!(polled, Poll::Installed(_)), "{polled:?}");
    assert_eq!(fake.release_requests(), 1);
    assert!(fake.pack_requests() > 0);
    assert!(agent.state().active().is_some());
    assert_eq!(agent.state().last_sequence(), 1);
}

#[test]
fn without_release_keys_the_device_installs_as_before_and_asks_for_no_release() {
    let keys = keys();
    let pack = pack(1);
    let fake = deploy(&keys, &pack, MODEL, VERSION, None, vec![]);
    let mut agent = blank_agent(device(&keys, &[]));
    assert!(!agent.release_trust().is_active());
    assert!(matches!(
        poll(&mut agent, &fake.url),
        Ok(Poll::Installed(_))
    ));
    assert_eq!(
        fake.release_requests(),
        0,
        "no release request without keys"
    );
}

#[test]
fn rejects_an_unreleased_pack_deployed_with_the_online_key() {
    let keys = keys();
    let pack = pack(1);
    let fake = deploy(&keys, &pack, MODEL, VERSION, None, vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert_eq!(e, ReleaseError::Missing { needed: 1 });
    assert_refused(&agent, &fake, "the deployment carries none");
}

#[test]
fn rejects_a_release_of_model_a_deployed_as_model_b() {
    let keys = keys();
    let pack = pack(1);
    let signed = bundle(&[release(&keys.release[0], &pack, "model-a", VERSION)]);
    let fake = deploy(&keys, &pack, "model-b", VERSION, Some(signed), vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert!(
        matches!(e, ReleaseError::OtherModel { index: 0, .. }),
        "{e:?}"
    );
    assert_refused(&agent, &fake, "released another model");
}

#[test]
fn rejects_a_release_of_one_version_deployed_as_another() {
    let keys = keys();
    let pack = pack(1);
    let signed = bundle(&[release(&keys.release[0], &pack, MODEL, "1.0.0")]);
    let fake = deploy(&keys, &pack, MODEL, "2.0.0", Some(signed), vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert!(
        matches!(e, ReleaseError::OtherVersion { index: 0, .. }),
        "{e:?}"
    );
    assert_refused(&agent, &fake, "released another version");
}

#[test]
fn rejects_a_signature_over_another_packs_hash() {
    let keys = keys();
    let (deployed, released) = (pack(1), pack(2));
    let signed = bundle(&[release(&keys.release[0], &released, MODEL, VERSION)]);
    let fake = deploy(&keys, &deployed, MODEL, VERSION, Some(signed), vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert!(
        matches!(e, ReleaseError::OtherPack { index: 0, .. }),
        "{e:?}"
    );
    assert_refused(&agent, &fake, "signed over pack sha256");
}

#[test]
fn rejects_a_signature_by_a_revoked_release_key() {
    let keys = keys();
    let pack = pack(1);
    let [alice, bob, _] = &keys.release;
    // The release root revoked Alice (sequence 1); the server still serves her release.
    let revoke = record(
        &keys.release_root,
        1,
        ReleaseChange::RevokeKey {
            key_id: KeyId::of(&alice.public_key()),
        },
    );
    let signed = bundle(&[release(alice, &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(signed), vec![revoke]);
    let mut agent = blank_agent(device(&keys, &[alice, bob]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert!(
        matches!(e, ReleaseError::KeyRevoked { index: 0, key_id } if key_id == KeyId::of(&alice.public_key())),
        "{e:?}"
    );
    assert_refused(&agent, &fake, "was revoked");

    // The revocation is in flash: after a power cycle the factory keys do not bring Alice back.
    let layout = *agent.layout();
    let flash = agent.into_flash();
    let mut again = Agent::open(flash, layout, device(&keys, &[alice, bob])).unwrap();
    let entry = again
        .release_trust()
        .key(KeyId::of(&alice.public_key()))
        .expect("Alice's entry is kept");
    assert!(entry.is_revoked(), "the revocation survives the reboot");
    assert!(matches!(
        release_error(poll(&mut again, &fake.url)),
        ReleaseError::KeyRevoked { .. }
    ));
}

#[test]
fn rejects_fewer_than_k_signatures() {
    let keys = keys();
    let pack = pack(1);
    let [alice, bob, _] = &keys.release;
    let ids = [alice, bob].map(|k| KeyId::of(&k.public_key()));
    // The release root sets "two of {Alice, Bob}" for the model (sequence 1).
    let policy = record(
        &keys.release_root,
        1,
        ReleaseChange::SetPolicy(ReleasePolicy::new(ModelId::of(MODEL), 2, &ids).unwrap()),
    );
    let one = bundle(&[release(alice, &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(one), vec![policy]);
    let mut agent = blank_agent(device(&keys, &[alice, bob]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert_eq!(
        e,
        ReleaseError::TooFewSignatures {
            needed: 2,
            found: 1
        }
    );
    assert_refused(&agent, &fake, "too few valid release signatures");

    // Bob signs too: the same deployment now installs.
    let two = bundle(&[
        release(alice, &pack, MODEL, VERSION),
        release(bob, &pack, MODEL, VERSION),
    ]);
    fake.served.lock().unwrap().release = Some(two);
    assert!(matches!(
        poll(&mut agent, &fake.url),
        Ok(Poll::Installed(_))
    ));
}

#[test]
fn rejects_a_release_key_added_by_a_record_the_release_root_did_not_sign() {
    let keys = keys();
    let pack = pack(1);
    let mallory = KeyPair::from_seed([0x66; 32]);
    // The server's own root (which the attacker holds) adds Mallory as a release key, and
    // Mallory releases the pack.
    let add = record(
        &keys.server_root,
        1,
        ReleaseChange::AddKey {
            public_key: mallory.public_key(),
        },
    );
    let signed = bundle(&[release(&mallory, &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(signed), vec![add]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let polled = poll(&mut agent, &fake.url);
    assert!(
        matches!(
            polled,
            Err(Error::KeyringUpdate {
                sequence: 1,
                error: npub_core::Error::Release(ReleaseError::RootNotReleaseRoot { .. })
            })
        ),
        "{polled:?}"
    );
    assert!(
        agent
            .release_trust()
            .key(KeyId::of(&mallory.public_key()))
            .is_none()
    );
    assert_refused(&agent, &fake, "release");

    // Signed by a key that is no root at all: refused as well.
    let forged = record(
        &mallory,
        1,
        ReleaseChange::AddKey {
            public_key: mallory.public_key(),
        },
    );
    fake.served.lock().unwrap().records = vec![forged];
    let polled = poll(&mut agent, &fake.url);
    assert!(
        matches!(
            polled,
            Err(Error::KeyringUpdate {
                error: npub_core::Error::Keyring(KeyringError::UpdateUnknownRootKey { .. }),
                ..
            })
        ),
        "{polled:?}"
    );
    assert_eq!(fake.pack_requests(), 0);
}

#[test]
fn a_release_key_added_by_the_release_root_is_trusted_and_kept() {
    let keys = keys();
    let pack = pack(1);
    let carol = &keys.release[2];
    let add = record(
        &keys.release_root,
        1,
        ReleaseChange::AddKey {
            public_key: carol.public_key(),
        },
    );
    let signed = bundle(&[release(carol, &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(signed), vec![add]);
    // No factory release key: the record makes the trust active.
    let mut agent = blank_agent(device(&keys, &[]));
    assert!(matches!(
        poll(&mut agent, &fake.url),
        Ok(Poll::Installed(_))
    ));
    assert_eq!(agent.keyring().update_sequence(), 1);
    let layout = *agent.layout();
    let again = Agent::open(agent.into_flash(), layout, device(&keys, &[])).unwrap();
    assert!(again.release_trust().is_active(), "kept in flash");
    assert!(
        again
            .release_trust()
            .key(KeyId::of(&carol.public_key()))
            .is_some()
    );
}

#[test]
fn rejects_an_unreleased_pack_the_real_server_deploys() {
    let keys = keys();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    fleet.upload(MODEL, VERSION, pack(1));
    let token = fleet.provision("dev-1", "lab");
    fleet.deploy(MODEL, VERSION, "lab");
    let device = Device {
        trust: Trust::new(&[fleet.public_key()], &[])
            .unwrap()
            .with_release(&[keys.release[0].public_key()], &[])
            .unwrap(),
        ..net::device()
    };
    let mut agent = blank_agent(device);
    let config = Config::new(&fleet.url, &token).unwrap();
    let mut io: Io<'_> = HttpIo::new(TcpLink::new(), StdClock::default(), config);
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };
    let e = release_error(agent.poll(&mut io, &mut npu, &mut arena, None));
    assert_eq!(e, ReleaseError::Missing { needed: 1 });
    assert_eq!(io.stats().pack_requests, 0);
    assert_eq!(io.stats().release_requests, 1);
    assert_eq!(agent.state().active(), None);
}
