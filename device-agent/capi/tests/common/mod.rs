//! What the C tests share: a real npub server in-process on 127.0.0.1:0 with two versions of a
//! model deployed one after the other, what it serves a device, and the generated `data.c`.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use npub_server::{Config, Server};
use serde_json::{Value, json};

const ADMIN: &str = "npub_op_capi-admin-0123456789abcdef0123456789abcdef";

/// A real npub server on its own runtime.
pub struct LiveServer {
    /// The operator API (plain: the admin listener when the server speaks TLS).
    pub url: String,
    /// The device API (`https://` when the server speaks TLS).
    pub device_url: String,
    /// Where s3s-fs keeps the objects of the server's `s3://` store (its root directory), when
    /// the server presigns downloads: a pack request answers 307 to the bucket (over TLS, which
    /// this client does not speak), and the test reads the object the URL names from there.
    pub bucket_root: Option<PathBuf>,
    http: reqwest::blocking::Client,
    rt: tokio::runtime::Runtime,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// What the server served a device, for the C program's in-memory transport.
pub struct Served {
    pub token: String,
    pub key: [u8; 32],
    pub root: [u8; 32],
    pub hw_class: u32,
    pub versions: Vec<Version>,
    pub rotation: Rotation,
}

/// One version as served: its sequence, manifest, pack and self-test record (empty: none).
pub type Version = (u64, Vec<u8>, Vec<u8>, Vec<u8>);

/// After the two versions: the signing key rotated with revoke_previous, 2.0.0 deployed again.
pub struct Rotation {
    /// The manifest answer's `Npub-Keyring-Sequence`.
    pub keyring_sequence: u64,
    /// `GET /api/v1/device/keys?after=0`: the root-signed records.
    pub records: Vec<u8>,
    /// The deployment's sequence and manifest (signed by key 2).
    pub sequence: u64,
    pub manifest: Vec<u8>,
}

impl LiveServer {
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, |_| {})
    }

    /// A server whose device API speaks TLS with the certificate chain and key at `cert`, `key`
    /// (PEM); the operator API on a plain admin listener on loopback.
    pub fn start_tls(dir: &Path, cert: &Path, key: &Path) -> Self {
        Self::start_with(dir, |c| {
            c.tls_cert = Some(cert.to_owned());
            c.tls_key = Some(key.to_owned());
            c.admin_listen = Some("127.0.0.1:0".parse().unwrap());
        })
    }

    /// A server with `tweak` applied to its config.
    pub fn start_with(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config = Config::new(dir, "127.0.0.1:0".parse().unwrap());
        config.admin_token = Some(ADMIN.into());
        tweak(&mut config);
        let server = rt.block_on(Server::start(config)).expect("server starts");
        let device_url = format!("{}://{}", server.scheme(), server.local_addr());
        let url = format!(
            "http://{}",
            server.admin_addr().unwrap_or(server.local_addr())
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(server.run(async move {
            let _ = rx.await;
        }));
        Self {
            url,
            device_url,
            bucket_root: None,
            // Redirects are the device's to follow (a presigned one is read from the bucket's
            // directory, see `pack`).
            http: reqwest::blocking::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            rt,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        json: bool,
    ) -> (u16, Vec<u8>) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token);
        if json {
            req = req.header("content-type", "application/json");
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let r = req.send().unwrap();
        (r.status().as_u16(), r.bytes().unwrap().to_vec())
    }

    fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        raw: Option<Vec<u8>>,
        want: u16,
    ) -> Value {
        let json = body.is_some();
        let bytes = body.map(|v| serde_json::to_vec(&v).unwrap()).or(raw);
        let (status, out) = self.call(ADMIN, method, path, bytes, json);
        assert_eq!(
            status,
            want,
            "{method} {path}: {}",
            String::from_utf8_lossy(&out)
        );
        serde_json::from_slice(&out).unwrap_or(Value::Null)
    }

    /// Model "kws" 1.0.0 (conv1) and 2.0.0 (small_net) from the Vela fixtures, one device in
    /// group "lab"; 1.0.0 deployed, then 2.0.0. Returns what a device is served at each step.
    pub fn deploy_two_versions(&self) -> Served {
        self.admin(
            "POST",
            "/api/v1/models",
            Some(json!({"name": "kws"})),
            None,
            201,
        );
        for (v, file) in [
            ("1.0.0", "conv1_vela.tflite"),
            ("2.0.0", "small_net_vela.tflite"),
        ] {
            let path = fixtures().join(file);
            let bytes = std::fs::read(&path).unwrap();
            self.admin(
                "POST",
                &format!("/api/v1/models/kws/versions/{v}"),
                None,
                Some(bytes),
                201,
            );
        }
        let devices = self.admin(
            "POST",
            "/api/v1/devices",
            Some(
                json!({"devices": [{"id": "c-1", "accelerator": "ethos-u55-256", "group": "lab"}]}),
            ),
            None,
            201,
        );
        let token = devices[0]["token"].as_str().unwrap().to_owned();
        let keys = self.admin("GET", "/api/v1/keys", None, None, 200);
        let key = hex_key(keys["active"]["public_key"].as_str().unwrap());
        let root = hex_key(keys["root"]["public_key"].as_str().unwrap());
        let me = self.call(&token, "GET", "/api/v1/device", None, false);
        let me: Value = serde_json::from_slice(&me.1).unwrap();
        let hw_class = me["hw_class"].as_u64().unwrap_or(1) as u32;
        let mut versions = Vec::new();
        for v in ["1.0.0", "2.0.0"] {
            let d = self.admin(
                "POST",
                "/api/v1/deployments",
                Some(json!({"model": "kws", "version": v, "group": "lab"})),
                None,
                201,
            );
            let seq = d["sequence"].as_u64().unwrap();
            let (status, manifest) =
                self.call(&token, "GET", "/api/v1/device/manifest?seq=0", None, false);
            assert_eq!(status, 200);
            // The manifest's pack digest: bytes 48..80 of the 280-byte manifest (docs/manifest.md).
            let view = npub_core::manifest::ManifestView::new(&manifest).unwrap();
            assert_eq!(view.sequence(), seq);
            let sha: String = view
                .pack_sha256()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let pack = self.pack(&token, &sha);
            let (status, record) = self.call(
                &token,
                "GET",
                &format!("/api/v1/device/packs/{sha}/selftest"),
                None,
                false,
            );
            let record = if status == 200 { record } else { Vec::new() };
            versions.push((seq, manifest, pack, record));
        }
        // Rotate, revoking key 1 in the same record; deploy 2.0.0 again (signed by key 2).
        self.admin(
            "POST",
            "/api/v1/keys/rotate",
            Some(json!({"revoke_previous": true})),
            None,
            201,
        );
        let d = self.admin(
            "POST",
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
            None,
            201,
        );
        let sequence = d["sequence"].as_u64().unwrap();
        let r = self
            .http
            .get(format!("{}/api/v1/device/manifest?seq=0", self.url))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let keyring_sequence: u64 = r
            .headers()
            .get("npub-keyring-sequence")
            .expect("the manifest answer announces the keyring")
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let manifest = r.bytes().unwrap().to_vec();
        let (status, records) =
            self.call(&token, "GET", "/api/v1/device/keys?after=0", None, false);
        assert_eq!(status, 200);
        assert_eq!(records.len(), 144 * keyring_sequence as usize);
        let rotation = Rotation {
            keyring_sequence,
            records,
            sequence,
            manifest,
        };
        Served {
            token,
            key,
            root,
            rotation,
            hw_class,
            versions,
        }
    }

    /// The pack `sha` as the server serves it to the device `token`: its answer, or with
    /// presigned downloads the object its 307 names, read from the bucket's directory.
    fn pack(&self, token: &str, sha: &str) -> Vec<u8> {
        let r = self
            .http
            .get(format!("{}/api/v1/device/packs/{sha}", self.url))
            .bearer_auth(token)
            .send()
            .unwrap();
        let Some(root) = &self.bucket_root else {
            assert_eq!(r.status().as_u16(), 200);
            return r.bytes().unwrap().to_vec();
        };
        assert_eq!(r.status().as_u16(), 307, "a presigned download");
        let to = r.headers()["location"].to_str().unwrap().to_owned();
        // https://HOST/BUCKET/KEY?X-Amz-…: s3s-fs keeps the object at ROOT/BUCKET/KEY.
        let path = to
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(_, path)| path.split('?').next().unwrap())
            .unwrap_or_else(|| panic!("a presigned URL: {to}"));
        let file = root.join(path);
        std::fs::read(&file).unwrap_or_else(|e| panic!("{} ({to}): {e}", file.display()))
    }

    pub fn stop(mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        let task = self.task.take().unwrap();
        self.rt.block_on(task).unwrap().unwrap();
    }
}

fn hex_key(hex: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/vela/vela_out/u55_256/tflite"
    ))
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `data.c`: the key, both manifests and packs, as C arrays.
pub fn write_data_c(served: &Served, path: &Path) {
    fn array(out: &mut String, name: &str, bytes: &[u8]) {
        writeln!(
            out,
            "const uint8_t {name}[] __attribute__((aligned(16))) = {{"
        )
        .unwrap();
        for line in bytes.chunks(24) {
            for b in line {
                write!(out, "{b},").unwrap();
            }
            out.push('\n');
        }
        writeln!(out, "}};\nconst size_t {name}_len = {};", bytes.len()).unwrap();
    }
    let mut out = String::from(
        "/* Generated by tests/common/mod.rs: what a real npub server served. */\n#include \"agent_test.h\"\n",
    );
    write!(out, "const uint8_t npub_test_key[32] = {{").unwrap();
    for b in served.key {
        write!(out, "{b},").unwrap();
    }
    out.push_str("};\nconst uint8_t npub_test_root[32] = {");
    for b in served.root {
        write!(out, "{b},").unwrap();
    }
    out.push_str("};\n");
    for (i, (seq, manifest, pack, record)) in served.versions.iter().enumerate() {
        let n = i + 1;
        array(&mut out, &format!("npub_test_manifest{n}"), manifest);
        array(&mut out, &format!("npub_test_pack{n}"), pack);
        array(&mut out, &format!("npub_test_selftest{n}"), record);
        writeln!(out, "const uint64_t npub_test_seq{n} = {seq};").unwrap();
    }
    let r = &served.rotation;
    array(&mut out, "npub_test_manifest3", &r.manifest);
    writeln!(out, "const uint64_t npub_test_seq3 = {};", r.sequence).unwrap();
    array(&mut out, "npub_test_keyring_records", &r.records);
    writeln!(
        out,
        "const uint64_t npub_test_keyring_sequence = {};",
        r.keyring_sequence
    )
    .unwrap();
    writeln!(
        out,
        "const uint32_t npub_test_hw_class = {};",
        served.hw_class
    )
    .unwrap();
    std::fs::write(path, out).unwrap();
}

/// Runs `cmd`; panics with its output unless it succeeds.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}
