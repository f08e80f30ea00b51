//! End to end: the `device-agent` simulator binary against a real npub server on loopback. The
//! operator uploads two Vela fixtures, provisions a device and deploys version 2; the agent polls,
//! installs and reports. A rollback by version is a newer sequence that the agent installs; the
//! earlier manifest, replayed to the same agent core over its flash, is refused.
use std::path::{Path, PathBuf};
use std::process::Command;

use device_agent::http_io::std_link::StdClock;
use device_agent::http_io::std_tls::{TlsLink, trust_pem, trust_pem_as};
use device_agent::http_io::{Config as HttpConfig, HttpError, HttpIo, Retry, TlsFailure};
use device_agent::nor_emu::NorEmu;
use device_agent::{
    Agent, Arena, Device, Error, Layout, RecordingNpu, Report, Transport, TransportError, Trust,
};
use npub_core::Accel;
use npub_core::ManifestError;
use npub_server::{Config, Server};
use serde_json::{Value, json};

/// The server tests' S3 server on loopback (s3s-fs).
#[path = "../../server/tests/s3/bucket.rs"]
mod bucket;
/// The server tests' certificates (a CA, server certificates), made in the test.
#[path = "../../server/tests/tls/certs.rs"]
mod certs;

/// The bootstrap admin token of the test server.
const ADMIN: &str = "npub_op_e2e-admin-0123456789abcdef0123456789abcdef";
/// Slot size passed to the binary; the test reopens the flash file with the same layout.
const SLOT_KIB: u32 = 256;
/// The binary's flash: 16-byte program unit, 4 KiB sectors, journal at 0 (two 8 KiB banks),
/// then the two slots, mapped at the OSPI0 XIP window (mirrors `src/bin/device-agent.rs`).
type Flash = NorEmu<16, 4096>;
fn layout() -> Layout {
    Layout::contiguous(0, 8 * 1024, SLOT_KIB * 1024, 16 * 1024, 0x8000_0000)
}

fn fixture(name: &str) -> Vec<u8> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela/vela_out/u55_256/tflite"
    );
    std::fs::read(Path::new(dir).join(name)).unwrap()
}

/// A real npub server running on its own runtime, and a blocking client for the test thread.
struct LiveServer {
    /// The operator API: the plain listener (`--admin-listen` when the server speaks TLS).
    url: String,
    /// Where devices poll: `url`, or `https://127.0.0.1:PORT` when the server speaks TLS.
    device_url: String,
    http: reqwest::blocking::Client,
    rt: tokio::runtime::Runtime,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl LiveServer {
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, |_| {})
    }

    /// Starts the server after `tweak` has adjusted its configuration.
    fn start_with(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config = Config::new(dir, "127.0.0.1:0".parse().unwrap());
        config.admin_token = Some(ADMIN.into());
        tweak(&mut config);
        if config.tls_cert.is_some() {
            config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
        }
        let server = rt.block_on(Server::start(config)).expect("server starts");
        let device_url = format!("{}://{}", server.scheme(), server.local_addr());
        let url = match server.admin_addr() {
            Some(admin) => format!("http://{admin}"),
            None => device_url.clone(),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(server.run(async move {
            let _ = rx.await;
        }));
        Self {
            url,
            device_url,
            http: reqwest::blocking::Client::new(),
            rt,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// `method path` as `token`, with an optional JSON or raw body; returns status and body.
    fn call(&self, token: &str, method: &str, path: &str, body: Body) -> (u16, Vec<u8>) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token);
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&v).unwrap()),
            Body::Raw(b) => req.body(b),
        };
        let r = req.send().unwrap();
        let status = r.status().as_u16();
        (status, r.bytes().unwrap().to_vec())
    }

    /// As the admin; panics unless `want`; returns the body as JSON (`null` if empty).
    fn admin(&self, method: &str, path: &str, body: Body, want: u16) -> Value {
        let (status, bytes) = self.call(ADMIN, method, path, body);
        assert_eq!(
            status,
            want,
            "{method} {path}: {}",
            String::from_utf8_lossy(&bytes)
        );
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    }

    fn stop(mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        let task = self.task.take().unwrap();
        self.rt.block_on(task).unwrap().unwrap();
    }
}

enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

/// Runs the simulator binary once (boot, one poll, report); asserts it succeeded.
fn run_agent(url: &str, token: &str, flash: &Path, trust: &Path) -> String {
    run_agent_rooted(url, token, flash, trust, None)
}

/// [`run_agent`], with the server's root key file as `--root` when given.
fn run_agent_rooted(
    url: &str,
    token: &str,
    flash: &Path,
    trust: &Path,
    root: Option<&Path>,
) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_device-agent"));
    cmd.args(["--server", url, "--token", token, "--once", "--slot-kib"])
        .arg(SLOT_KIB.to_string())
        .arg("--flash")
        .arg(flash)
        .arg("--trust")
        .arg(trust);
    if let Some(root) = root {
        cmd.arg("--root").arg(root);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "device-agent failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The agent core over the binary's flash file, with the device the binary simulates trusting
/// `trust` (its keyring comes from the flash file once a keyring update was stored there).
fn open_agent_with(flash: &Path, trust: Trust) -> Agent<Flash> {
    let layout = layout();
    let flash = Flash::with_file(flash, layout.end() as usize).unwrap();
    let device = Device {
        hw_class: 1,
        accel: Accel::EthosU55_256,
        io_bindings: None,
        trust,
    };
    Agent::open(flash, layout, device).unwrap()
}

/// [`open_agent_with`] trusting nothing: enough to read the flash.
fn open_agent(flash: &Path) -> Agent<Flash> {
    open_agent_with(flash, Trust::NONE)
}

/// The active slot's first `len` bytes, as they sit in the flash file.
fn active_slot_bytes(flash: &Path, len: usize) -> (u64, Vec<u8>) {
    let agent = open_agent(flash);
    let state = *agent.state();
    let slot = state.active().expect("a slot is active");
    let start = agent.layout().slot(slot) as usize;
    let image = std::fs::read(flash).unwrap();
    (state.last_sequence(), image[start..start + len].to_vec())
}

/// Hands the agent one fixed manifest, whatever sequence it asks after.
struct Replay(Vec<u8>);

impl Transport for Replay {
    fn fetch_selftest(
        &mut self,
        _sha256: &[u8; 32],
        _offset: u32,
        _buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        panic!("a replayed manifest must be refused before its self-test is asked for")
    }

    fn fetch_manifest(
        &mut self,
        _after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let n = self.0.len().min(buf.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        Ok(Some(self.0.len()))
    }

    fn fetch_pack(
        &mut self,
        _sha256: &[u8; 32],
        _offset: u32,
        _buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        panic!("a replayed manifest must be refused before any download");
    }

    fn fetch_release(
        &mut self,
        _: &[u8; 32],
        _: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        panic!("a replayed manifest must be refused before its release is asked for");
    }

    fn report(&mut self, _report: &Report) -> Result<(), TransportError> {
        Ok(())
    }

    /// The replay announces no keyring updates: the device's stored keyring is what refuses it.
    fn keyring_sequence(&self) -> Option<u64> {
        None
    }

    fn fetch_keyring_updates(&mut self, _: u64, _: &mut [u8]) -> Result<usize, TransportError> {
        panic!("no keyring update was announced, so none may be fetched");
    }
}

fn hex_key(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn deploy_install_rollback_by_version_and_replay_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));

    // Operator: model, two versions from the Vela fixtures, one device in group "lab".
    fleet.admin(
        "POST",
        "/api/v1/models",
        Body::Json(json!({"name": "kws"})),
        201,
    );
    for (version, file) in [
        ("1.0.0", "conv1_vela.tflite"),
        ("2.0.0", "small_net_vela.tflite"),
    ] {
        fleet.admin(
            "POST",
            &format!("/api/v1/models/kws/versions/{version}"),
            Body::Raw(fixture(file)),
            201,
        );
    }
    let packs: Vec<Vec<u8>> = ["1.0.0", "2.0.0"]
        .iter()
        .map(|v| {
            let (status, bytes) = fleet.call(
                ADMIN,
                "GET",
                &format!("/api/v1/models/kws/versions/{v}/npub"),
                Body::None,
            );
            assert_eq!(status, 200);
            bytes
        })
        .collect();
    let devices = fleet.admin(
        "POST",
        "/api/v1/devices",
        Body::Json(json!({"devices": [
            {"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}
        ]})),
        201,
    );
    let token = devices[0]["token"].as_str().unwrap().to_owned();

    // The device trusts the server's signing key: the trust file as the server serves it.
    let keys = fleet.admin("GET", "/api/v1/keys", Body::None, 200);
    let public = hex_key(keys["active"]["public_key"].as_str().unwrap());
    let trust = trust_file(
        &fleet,
        dir.path(),
        keys["active"]["key_id"].as_str().unwrap(),
    );
    let flash = dir.path().join("flash.bin");

    // Deploy 2.0.0: the agent installs it into flash and the server sees it bound.
    let d2 = fleet.admin(
        "POST",
        "/api/v1/deployments",
        Body::Json(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
        201,
    );
    let seq2 = d2["sequence"].as_u64().unwrap();
    let (status, manifest2) =
        fleet.call(&token, "GET", "/api/v1/device/manifest?seq=0", Body::None);
    assert_eq!(status, 200);
    let out = run_agent(&fleet.url, &token, &flash, &trust);
    assert!(
        out.contains(&format!("installed kws 2.0.0 (sequence {seq2}) in slot")),
        "{out}"
    );
    let (last, in_flash) = active_slot_bytes(&flash, packs[1].len());
    assert_eq!(last, seq2);
    assert!(in_flash == packs[1], "the active slot holds the 2.0.0 pack");
    let dev = fleet.admin("GET", "/api/v1/devices/dev-1", Body::None, 200);
    assert_eq!(dev["current_version"], "2.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], seq2, "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");

    // Polling again: nothing newer, the same slot stays active.
    let out = run_agent(&fleet.url, &token, &flash, &trust);
    assert!(
        out.contains(&format!("up to date (sequence {seq2})")),
        "{out}"
    );

    // Roll back by version: a newer sequence for the older pack, installed like any update.
    let rb = fleet.admin(
        "POST",
        "/api/v1/groups/lab/rollback",
        Body::Json(json!({"model": "kws", "version": "1.0.0"})),
        201,
    );
    let seq3 = rb["sequence"].as_u64().unwrap();
    assert!(seq3 > seq2, "rollback sequence {seq3} after {seq2}");
    let out = run_agent(&fleet.url, &token, &flash, &trust);
    assert!(
        out.contains(&format!("installed kws 1.0.0 (sequence {seq3}) in slot")),
        "{out}"
    );
    let (last, in_flash) = active_slot_bytes(&flash, packs[0].len());
    assert_eq!(last, seq3);
    assert!(in_flash == packs[0], "the active slot holds the 1.0.0 pack");
    let dev = fleet.admin("GET", "/api/v1/devices/dev-1", Body::None, 200);
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], seq3, "{dev}");

    // The 2.0.0 manifest, replayed to the agent core over the same flash, is refused before
    // anything is fetched or written; the rollback stays active.
    let mut agent = open_agent_with(&flash, Trust::new(&[public], &[]).unwrap());
    let mut npu = RecordingNpu::default();
    let mut arena_mem = vec![0u8; 1 << 20];
    let mut arena = Arena {
        bytes: &mut arena_mem,
        bus_address: 0x2200_0000,
    };
    let before = *agent.state();
    let result = agent.poll(&mut Replay(manifest2), &mut npu, &mut arena, None);
    assert!(
        matches!(
            result,
            Err(Error::Rejected(npub_core::Error::Manifest(ManifestError::Replayed { sequence, last })))
                if sequence == seq2 && last == seq3
        ),
        "{result:?}"
    );
    assert_eq!(*agent.state(), before);
    drop(agent);
    let (_, in_flash) = active_slot_bytes(&flash, packs[0].len());
    assert!(in_flash == packs[0], "the active slot still holds 1.0.0");

    // Deploying the version the device already runs: the sequence is taken, not one pack byte
    // is fetched, and the server sees the device on that deployment.
    let served = bytes_served(&fleet);
    let d4 = fleet.admin(
        "POST",
        "/api/v1/deployments",
        Body::Json(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
        201,
    );
    let seq4 = d4["sequence"].as_u64().unwrap();
    let out = run_agent(&fleet.url, &token, &flash, &trust);
    assert!(
        out.contains(&format!("installed kws 1.0.0 (sequence {seq4}) in slot"))
            && out.contains("already in flash: nothing downloaded"),
        "{out}"
    );
    assert_eq!(bytes_served(&fleet), served, "no pack byte was served");
    let (last, in_flash) = active_slot_bytes(&flash, packs[0].len());
    assert_eq!(last, seq4);
    assert!(in_flash == packs[0], "the active slot still holds 1.0.0");
    let dev = fleet.admin("GET", "/api/v1/devices/dev-1", Body::None, 200);
    assert_eq!(dev["current_sequence"], seq4, "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");

    fleet.stop();
}

/// Downloads the server's trust file for `key_id` into `dir`, as an operator would.
fn trust_file(fleet: &LiveServer, dir: &Path, key_id: &str) -> PathBuf {
    let (status, bytes) = fleet.call(
        ADMIN,
        "GET",
        &format!("/api/v1/keys/{key_id}/trust"),
        Body::None,
    );
    assert_eq!(status, 200);
    let path = dir.join(format!("{key_id}.key.pub"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The server's root key file, as `GET /api/v1/keys/root/trust` serves it.
fn root_file(fleet: &LiveServer, dir: &Path) -> PathBuf {
    let (status, bytes) = fleet.call(ADMIN, "GET", "/api/v1/keys/root/trust", Body::None);
    assert_eq!(status, 200);
    let path = dir.join("root.key.pub");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn rejects_a_revoked_keys_manifest_after_rotation_revocation_and_a_reboot() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    fleet.admin(
        "POST",
        "/api/v1/models",
        Body::Json(json!({"name": "kws"})),
        201,
    );
    for (version, file) in [
        ("1.0.0", "conv1_vela.tflite"),
        ("2.0.0", "small_net_vela.tflite"),
    ] {
        fleet.admin(
            "POST",
            &format!("/api/v1/models/kws/versions/{version}"),
            Body::Raw(fixture(file)),
            201,
        );
    }
    let devices = fleet.admin(
        "POST",
        "/api/v1/devices",
        Body::Json(json!({"devices": [
            {"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}
        ]})),
        201,
    );
    let token = devices[0]["token"].as_str().unwrap().to_owned();
    let keys = fleet.admin("GET", "/api/v1/keys", Body::None, 200);
    let key1_id = keys["active"]["key_id"].as_str().unwrap().to_owned();
    let key1 = hex_key(keys["active"]["public_key"].as_str().unwrap());
    let root = hex_key(keys["root"]["public_key"].as_str().unwrap());
    let trust = trust_file(&fleet, dir.path(), &key1_id);
    let root_path = root_file(&fleet, dir.path());
    let flash = dir.path().join("flash.bin");
    let deploy = |version: &str| {
        fleet.admin(
            "POST",
            "/api/v1/deployments",
            Body::Json(json!({"model": "kws", "version": version, "group": "lab"})),
            201,
        )["sequence"]
            .as_u64()
            .unwrap()
    };
    let run = || run_agent_rooted(&fleet.url, &token, &flash, &trust, Some(&root_path));

    // Deploy with key 1.
    let seq1 = deploy("1.0.0");
    let (status, manifest1) =
        fleet.call(&token, "GET", "/api/v1/device/manifest?seq=0", Body::None);
    assert_eq!(status, 200);
    let out = run();
    assert!(
        out.contains(&format!("installed kws 1.0.0 (sequence {seq1})")),
        "{out}"
    );

    // Rotate; deploy with key 2: the device learns key 2 from the poll and installs.
    let rotated = fleet.admin("POST", "/api/v1/keys/rotate", Body::Json(json!({})), 201);
    assert_ne!(rotated["key"]["key_id"], key1_id.as_str());
    let seq2 = deploy("2.0.0");
    let out = run();
    assert!(out.contains("keyring: applied updates 1..=1"), "{out}");
    assert!(
        out.contains(&format!("installed kws 2.0.0 (sequence {seq2})")),
        "{out}"
    );

    // Revoke key 1; the device applies it at its next poll.
    fleet.admin(
        "POST",
        &format!("/api/v1/keys/{key1_id}/revoke"),
        Body::None,
        201,
    );
    let out = run();
    assert!(out.contains("keyring: applied updates 2..=2"), "{out}");
    assert!(
        out.contains(&format!("up to date (sequence {seq2})")),
        "{out}"
    );

    // Reboot: the agent core over the same flash, with the factory trust the binary had (key 1
    // and the root). The keyring comes from flash: key 1's old manifest, replayed by a server
    // that announces no keyring updates, is refused for its key.
    let mut agent = open_agent_with(&flash, Trust::new(&[key1], &[root]).unwrap());
    assert_eq!(agent.keyring().update_sequence(), 2);
    let key1_entry = agent
        .keyring()
        .get(npub_core::manifest::KeyId::of(&key1))
        .unwrap();
    assert!(key1_entry.is_revoked());
    let mut npu = RecordingNpu::default();
    let mut arena_mem = vec![0u8; 1 << 20];
    let mut arena = Arena {
        bytes: &mut arena_mem,
        bus_address: 0x2200_0000,
    };
    let before = *agent.state();
    let result = agent.poll(&mut Replay(manifest1), &mut npu, &mut arena, None);
    assert_eq!(
        result,
        Err(Error::Rejected(npub_core::Error::Manifest(
            ManifestError::KeyRevoked {
                key_id: npub_core::manifest::KeyId::of(&key1)
            }
        ))),
    );
    assert_eq!(*agent.state(), before);
    drop(agent);

    // And the device still installs key-2 deployments.
    let seq3 = deploy("1.0.0");
    let out = run();
    assert!(
        out.contains(&format!("installed kws 1.0.0 (sequence {seq3})")),
        "{out}"
    );
    fleet.stop();
}

#[test]
fn rejects_an_accel_flag_that_disagrees_with_the_servers_registration_and_defaults_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let devices = fleet.admin(
        "POST",
        "/api/v1/devices",
        Body::Json(json!({"devices": [
            {"id": "small-1", "accelerator": "ethos-u55-128", "group": "lab"}
        ]})),
        201,
    );
    let token = devices[0]["token"].as_str().unwrap().to_owned();
    let keys = fleet.admin("GET", "/api/v1/keys", Body::None, 200);
    let trust = trust_file(
        &fleet,
        dir.path(),
        keys["active"]["key_id"].as_str().unwrap(),
    );
    let flash = dir.path().join("flash.bin");
    let url = fleet.url.clone();
    let agent = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_device-agent"))
            .args(["--server", &url, "--token", &token, "--once"])
            .args(["--slot-kib", &SLOT_KIB.to_string()])
            .arg("--flash")
            .arg(&flash)
            .arg("--trust")
            .arg(&trust)
            .args(extra)
            .output()
            .unwrap()
    };

    // The device API says what the server registered.
    let (status, me) = fleet.call(&token, "GET", "/api/v1/device", Body::None);
    assert_eq!(status, 200);
    let me: Value = serde_json::from_slice(&me).unwrap();
    assert_eq!(me["accelerator"], "ethos-u55-128", "{me}");
    assert_eq!(me["id"], "small-1", "{me}");

    // A disagreeing --accel is refused before anything is polled or written.
    let out = agent(&["--accel", "ethos-u55-256"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--accel ethos-u55-256 disagrees with the server")
            && err.contains("registered this device as ethos-u55-128"),
        "{err}"
    );
    assert!(!flash.exists(), "nothing was written");

    // Without --accel the server's registration is used; an agreeing one is accepted.
    for extra in [&[][..], &["--accel", "ethos-u55-128"][..]] {
        let out = agent(extra);
        assert!(
            out.status.success(),
            "{extra:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A server that can't be reached: without --accel the agent says what to pass.
    fleet.stop();
    let out = agent(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pass --accel"), "{err}");
}

/// `npub_pack_bytes_served_total` from the server's metrics.
fn bytes_served(fleet: &LiveServer) -> u64 {
    let (status, body) = fleet.call(ADMIN, "GET", "/metrics", Body::None);
    assert_eq!(status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("npub_pack_bytes_served_total "))
        .expect("the counter is exported")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn follows_a_presigned_redirect_to_the_bucket_and_still_verifies_what_it_gets() {
    let dir = tempfile::tempdir().unwrap();
    let Some(s3) = bucket::S3Server::start(&dir.path().join("s3")) else {
        return;
    };
    let settings = s3.settings();
    let fleet = LiveServer::start_with(&dir.path().join("server"), |c| {
        c.pack_store = Some(format!("s3://{}/packs", bucket::BUCKET));
        c.presign_downloads = true;
        c.aws_overrides = settings;
    });
    fleet.admin(
        "POST",
        "/api/v1/models",
        Body::Json(json!({"name": "kws"})),
        201,
    );
    for (version, file) in [
        ("1.0.0", "small_net_vela.tflite"),
        ("2.0.0", "conv1_vela.tflite"),
    ] {
        fleet.admin(
            "POST",
            &format!("/api/v1/models/kws/versions/{version}"),
            Body::Raw(fixture(file)),
            201,
        );
    }
    let packs: Vec<Vec<u8>> = ["1.0.0", "2.0.0"]
        .iter()
        .map(|v| {
            let path = format!("/api/v1/models/kws/versions/{v}/npub");
            let (status, bytes) = fleet.call(ADMIN, "GET", &path, Body::None);
            assert_eq!(status, 200);
            bytes
        })
        .collect();
    let devices = fleet.admin(
        "POST",
        "/api/v1/devices",
        Body::Json(json!({"devices": [
            {"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}
        ]})),
        201,
    );
    let token = devices[0]["token"].as_str().unwrap().to_owned();
    let keys = fleet.admin("GET", "/api/v1/keys", Body::None, 200);
    let trust = trust_file(
        &fleet,
        dir.path(),
        keys["active"]["key_id"].as_str().unwrap(),
    );
    let flash = dir.path().join("flash.bin");
    let served = bytes_served(&fleet);

    // 1.0.0 comes from the bucket: the server only answers 307s, and sends no pack byte.
    let d1 = fleet.admin(
        "POST",
        "/api/v1/deployments",
        Body::Json(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
        201,
    );
    let out = run_agent(&fleet.url, &token, &flash, &trust);
    assert!(
        out.contains(&format!(
            "installed kws 1.0.0 (sequence {}) in slot",
            d1["sequence"]
        )),
        "{out}"
    );
    let (_, in_flash) = active_slot_bytes(&flash, packs[0].len());
    assert!(in_flash == packs[0], "the active slot holds the 1.0.0 pack");
    assert_eq!(
        bytes_served(&fleet),
        served,
        "no pack byte went through the server"
    );

    // 2.0.0's object is altered in the bucket after the server checked it: same length, one
    // byte flipped. The agent fetches it through the redirect, refuses it, keeps 1.0.0.
    fleet.admin(
        "POST",
        "/api/v1/deployments",
        Body::Json(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
        201,
    );
    let sha: String = npub_core::manifest::sha256(&packs[1])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let object = s3.object_file(&format!("packs/{sha}"));
    let mut altered = std::fs::read(&object).unwrap();
    let mid = altered.len() / 2;
    altered[mid] ^= 0x01;
    std::fs::write(&object, &altered).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args([
            "--server",
            &fleet.url,
            "--token",
            &token,
            "--once",
            "--slot-kib",
        ])
        .arg(SLOT_KIB.to_string())
        .arg("--flash")
        .arg(&flash)
        .arg("--trust")
        .arg(&trust)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("install of kws 2.0.0 (sequence ")
            && stdout.contains("failed: pack: SHA-256 is")
            && stdout.contains("not the pack this manifest was signed for"),
        "{stdout}"
    );
    let (_, in_flash) = active_slot_bytes(&flash, packs[0].len());
    assert!(in_flash == packs[0], "the active slot still holds 1.0.0");
    let dev = fleet.admin("GET", "/api/v1/devices/dev-1", Body::None, 200);
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["last_state"], "failed", "{dev}");
    fleet.stop();
}

/// A server speaking TLS with `cert` (its files in `dir`).
fn start_tls(dir: &Path, cert: &certs::Leaf) -> LiveServer {
    let (cert_path, key_path) = cert.write(dir, "server");
    LiveServer::start_with(&dir.join("server"), |c| {
        c.tls_cert = Some(cert_path);
        c.tls_key = Some(key_path);
    })
}

/// Provisions `dev-1` (ethos-u55-256, group `lab`); its token.
fn provision(fleet: &LiveServer) -> String {
    let devices = fleet.admin(
        "POST",
        "/api/v1/devices",
        Body::Json(json!({"devices": [
            {"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}
        ]})),
        201,
    );
    devices[0]["token"].as_str().unwrap().to_owned()
}

#[test]
fn installs_over_tls_with_the_servers_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let ca_file = ca.write(dir.path(), "ca");
    let fleet = start_tls(
        dir.path(),
        &ca.server(&["localhost", "127.0.0.1"], certs::Validity::Now),
    );
    assert!(
        fleet.device_url.starts_with("https://"),
        "{}",
        fleet.device_url
    );
    fleet.admin(
        "POST",
        "/api/v1/models",
        Body::Json(json!({"name": "kws"})),
        201,
    );
    fleet.admin(
        "POST",
        "/api/v1/models/kws/versions/2.0.0",
        Body::Raw(fixture("small_net_vela.tflite")),
        201,
    );
    let token = provision(&fleet);
    let keys = fleet.admin("GET", "/api/v1/keys", Body::None, 200);
    let trust = trust_file(
        &fleet,
        dir.path(),
        keys["active"]["key_id"].as_str().unwrap(),
    );
    let d = fleet.admin(
        "POST",
        "/api/v1/deployments",
        Body::Json(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
        201,
    );
    let seq = d["sequence"].as_u64().unwrap();
    let flash = dir.path().join("flash.bin");
    let out = Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args(["--server", &fleet.device_url, "--token", &token, "--once"])
        .args(["--slot-kib", &SLOT_KIB.to_string()])
        .arg("--flash")
        .arg(&flash)
        .arg("--trust")
        .arg(&trust)
        .arg("--ca")
        .arg(&ca_file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("installed kws 2.0.0 (sequence {seq}) in slot")),
        "{stdout}"
    );
    let dev = fleet.admin("GET", "/api/v1/devices/dev-1", Body::None, 200);
    assert_eq!(dev["last_state"], "bound", "{dev}");
    let metrics = String::from_utf8(fleet.call(ADMIN, "GET", "/metrics", Body::None).1).unwrap();
    assert!(
        !metrics.contains("npub_tls_handshakes_total{outcome=\"full\"} 0"),
        "{metrics}"
    );
    fleet.stop();
}

/// Polls `fleet` once through the host's TLS link trusting `ca_pem`: the transport's error.
fn poll_error(fleet: &LiveServer, ca_pem: &str, token: &str) -> Option<HttpError> {
    let trust = trust_pem(ca_pem.as_bytes()).unwrap();
    let config = HttpConfig::new(&fleet.device_url, token)
        .unwrap()
        .with_retry(Retry {
            attempts: 1,
            base_ms: 1,
            cap_ms: 1,
        });
    let mut io = HttpIo::new(TlsLink::new(Some(trust)), StdClock::default(), config);
    let mut buf = [0u8; 512];
    match io.fetch_manifest(0, &mut buf) {
        Ok(_) => None,
        Err(_) => io.last_error(),
    }
}

#[test]
fn accepts_a_pinned_self_signed_server_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pinned = certs::self_signed_server(&["localhost", "127.0.0.1"]);
    let fleet = start_tls(dir.path(), &pinned);
    let token = provision(&fleet);
    assert_eq!(poll_error(&fleet, &pinned.cert_pem, &token), None);
    fleet.stop();
}

#[test]
fn rejects_a_server_certificate_from_an_unknown_ca() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = certs::Ca::new("npub test CA");
    let fleet = start_tls(
        dir.path(),
        &theirs.server(&["localhost", "127.0.0.1"], certs::Validity::Now),
    );
    let token = provision(&fleet);
    let ours = certs::Ca::new("another CA");
    assert_eq!(
        poll_error(&fleet, &ours.pem, &token),
        Some(HttpError::Tls(TlsFailure::UnknownCa))
    );
    // The simulator says so, in words, and sends nothing.
    let ca_file = ours.write(dir.path(), "ours");
    let out = Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args(["--server", &fleet.device_url, "--token", &token, "--once"])
        .args(["--accel", "ethos-u55-256", "--trust", "/dev/null"])
        .arg("--flash")
        .arg(dir.path().join("flash.bin"))
        .arg("--ca")
        .arg(&ca_file)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("not issued by the CA given"), "{said}");
    fleet.stop();
}

#[test]
fn rejects_a_server_certificate_for_another_host_name() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let fleet = start_tls(
        dir.path(),
        &ca.server(&["npub.example"], certs::Validity::Now),
    );
    let token = provision(&fleet);
    assert_eq!(
        poll_error(&fleet, &ca.pem, &token),
        Some(HttpError::Tls(TlsFailure::WrongHostName))
    );
    fleet.stop();
}

#[test]
fn rejects_an_expired_server_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let fleet = start_tls(
        dir.path(),
        &ca.server(&["localhost", "127.0.0.1"], certs::Validity::Expired),
    );
    let token = provision(&fleet);
    assert_eq!(
        poll_error(&fleet, &ca.pem, &token),
        Some(HttpError::Tls(TlsFailure::Expired))
    );
    fleet.stop();
}

#[test]
fn rejects_https_without_a_ca_before_anything_is_sent() {
    let out = Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args([
            "--server",
            "https://127.0.0.1:1",
            "--token",
            "npub_dev_x",
            "--once",
        ])
        .args(["--trust", "/dev/null", "--flash", "/nonexistent/flash.bin"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("https:// needs --ca"), "{said}");
}

#[test]
fn resumes_its_tls_session_on_the_next_connection() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let fleet = start_tls(
        dir.path(),
        &ca.server(&["localhost", "127.0.0.1"], certs::Validity::Now),
    );
    let token = provision(&fleet);
    // One trust (and so one session cache) for two transports: two connections, as a device
    // polling again after its connection closed.
    let trust = trust_pem(ca.pem.as_bytes()).unwrap();
    for _ in 0..2 {
        let config = HttpConfig::new(&fleet.device_url, &token).unwrap();
        let link = TlsLink::new(Some(std::sync::Arc::clone(&trust)));
        let mut io = HttpIo::new(link, StdClock::default(), config);
        let mut buf = [0u8; 512];
        assert_eq!(io.fetch_manifest(0, &mut buf).ok(), Some(None), "204");
    }
    let metrics = String::from_utf8(fleet.call(ADMIN, "GET", "/metrics", Body::None).1).unwrap();
    assert!(
        metrics.contains("npub_tls_handshakes_total{outcome=\"full\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("npub_tls_handshakes_total{outcome=\"resumed\"} 1"),
        "{metrics}"
    );
    fleet.stop();
}

#[test]
fn presents_a_device_certificate_and_is_refused_under_another_devices_token() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let devices = certs::Ca::new("npub devices");
    let device_ca = devices.write(dir.path(), "devices");
    let (cert_path, key_path) = ca
        .server(&["localhost", "127.0.0.1"], certs::Validity::Now)
        .write(dir.path(), "server");
    let fleet = LiveServer::start_with(&dir.path().join("server"), |c| {
        c.tls_cert = Some(cert_path);
        c.tls_key = Some(key_path);
        c.client_ca = Some(device_ca);
    });
    let token = provision(&fleet);
    let poll_as = |cert: &certs::Leaf| {
        let identity = (cert.cert_pem.as_bytes(), cert.key_pem.as_bytes());
        let trust = trust_pem_as(ca.pem.as_bytes(), Some(identity)).unwrap();
        let config = HttpConfig::new(&fleet.device_url, &token)
            .unwrap()
            .with_retry(Retry {
                attempts: 1,
                base_ms: 1,
                cap_ms: 1,
            });
        let mut io = HttpIo::new(TlsLink::new(Some(trust)), StdClock::default(), config);
        let mut buf = [0u8; 512];
        io.fetch_manifest(0, &mut buf).err().and(io.last_error())
    };
    assert_eq!(
        poll_as(&devices.device("dev-1", certs::Validity::Now)),
        None
    );
    let refused = poll_as(&devices.device("dev-2", certs::Validity::Now));
    assert!(
        matches!(refused, Some(HttpError::Status { status: 401, .. })),
        "{refused:?}"
    );
    fleet.stop();
}
