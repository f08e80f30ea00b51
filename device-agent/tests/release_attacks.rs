//! Release signatures on the host agent (issue 34): a server that holds the online signing key
//! (and its own root) cannot get a device with release keys to install anything nobody released.
//!
//! The server here is the tests' own (`fake_server/`), over real HTTP on 127.0.0.1:0, and plays the compromised
//! server: it signs manifests with the online key the device trusts, serves any pack, any bundle
//! of release signatures and any keyring record it likes. The test holds every key (the online
//! key, the server's root, the release keys, the release root), so each attack is built exactly.
//! The agent is the real one, through the firmware's `http_io` over a `TcpStream`. Each attack is
//! refused before a pack byte is fetched, with the npub-core `ReleaseError` that names the failed
//! check, and the `failed` report the server receives says it. The last test runs against the real
//! npub server, which serves no release bundle for a pack it deployed.
mod fake_server;
mod net;

use device_agent::http_io::std_link::{StdClock, TcpLink};
use device_agent::http_io::{Config, HttpIo};
use device_agent::{Agent, Arena, Device, Error, Poll, RecordingNpu, Trust};
use fake_server::{
    Fake, Keys, MODEL, Served, VERSION, bundle, keys, manifest, pack, record, release,
};
use net::{LiveServer, RamNor};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{KeyId, ROTATION_BYTES};
use npub_core::release::{ModelId, ReleaseChange, ReleasePolicy};
use npub_core::{KeyringError, ReleaseError};

const SLOT_BYTES: u32 = 512 * 1024;
const XIP: u32 = 0x8000_0000;
const ARENA_BUS: u32 = 0x2200_0000;

type Io<'a> = HttpIo<'a, TcpLink, StdClock>;

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
fn rejects_a_bundle_longer_than_the_largest_and_one_that_is_garbage() {
    let keys = keys();
    let pack = pack(1);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(vec![0x4E; 2000]), vec![]);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let e = release_error(poll(&mut agent, &fake.url));
    assert_eq!(e, ReleaseError::BundleTooLong { len: 2000 });
    assert_refused(&agent, &fake, "above the limit");

    fake.served.lock().unwrap().release = Some(b"not a bundle, but short".to_vec());
    let e = release_error(poll(&mut agent, &fake.url));
    assert!(matches!(e, ReleaseError::BundleBadMagic { .. }), "{e:?}");
    assert_refused(&agent, &fake, "magic");
}

#[test]
fn a_server_error_for_the_release_is_no_refusal_and_downloads_nothing() {
    let keys = keys();
    let pack = pack(1);
    let signed = bundle(&[release(&keys.release[0], &pack, MODEL, VERSION)]);
    let fake = deploy(&keys, &pack, MODEL, VERSION, Some(signed), vec![]);
    fake.served.lock().unwrap().release_status = Some(403);
    let mut agent = blank_agent(device(&keys, &[&keys.release[0]]));
    let polled = poll(&mut agent, &fake.url);
    assert!(matches!(polled, Err(Error::Transport(_))), "{polled:?}");
    assert_eq!(fake.pack_requests(), 0);
    assert!(
        !fake
            .served
            .lock()
            .unwrap()
            .reports
            .iter()
            .any(|r| r.contains("\"failed\"")),
        "a transport failure is not reported as a refusal"
    );
    // The server answers again: the same deployment installs.
    fake.served.lock().unwrap().release_status = None;
    assert!(matches!(
        poll(&mut agent, &fake.url),
        Ok(Poll::Installed(_))
    ));
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

/// The simulator binary with `--release-trust` and `--release-root`, once, against `url`.
fn simulator(url: &str, dir: &std::path::Path, keys: &Keys) -> (bool, String) {
    let trust = fake_server::key_file(dir, "online", &keys.online);
    let alice = fake_server::key_file(dir, "alice", &keys.release[0]);
    let root = fake_server::key_file(dir, "release-root", &keys.release_root);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args(["--server", url, "--token", "npub_dev_test", "--once"])
        .args(["--accel", "ethos-u55-256", "--slot-kib", "512"])
        .arg("--flash")
        .arg(dir.join("dev-1.nor"))
        .arg("--trust")
        .arg(trust)
        .arg("--release-trust")
        .arg(alice)
        .arg("--release-root")
        .arg(root)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn rejects_an_unreleased_pack_in_the_simulator_and_installs_it_once_released() {
    let keys = keys();
    let dir = tempfile::tempdir().unwrap();
    let pack = pack(1);
    let fake = deploy(&keys, &pack, MODEL, VERSION, None, vec![]);
    let (ok, out) = simulator(&fake.url, dir.path(), &keys);
    assert!(!ok, "{out}");
    assert!(
        out.contains("this model needs 1 release signature(s) and the deployment carries none"),
        "{out}"
    );
    assert_eq!(fake.pack_requests(), 0, "{out}");
    assert!(fake.failed_reason().contains("carries none"));

    fake.served.lock().unwrap().release =
        Some(bundle(&[release(&keys.release[0], &pack, MODEL, VERSION)]));
    let (ok, out) = simulator(&fake.url, dir.path(), &keys);
    assert!(ok, "{out}");
    assert!(fake.pack_requests() > 0, "{out}");
}
