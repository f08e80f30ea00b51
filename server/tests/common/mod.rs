//! Shared by the test binaries: a server on 127.0.0.1:0 over a temp data dir, fixtures, and
//! counting what is stored.
#![allow(dead_code)]

pub mod postgres;

use std::path::{Path, PathBuf};

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Role};
use npub_server::{AppState, Config, Server};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The bootstrap admin token every test server starts with.
pub const ADMIN: &str = "npub_op_test-admin-0123456789abcdef0123456789abcdef";

/// `shared/fixtures/vela`.
pub fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela"
    ))
}

/// Every Vela output fixture: `vela_out/*/{tflite/*.tflite, raw/*.npz}`, sorted.
pub fn vela_outputs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for accel in std::fs::read_dir(fixtures().join("vela_out")).unwrap() {
        let accel = accel.unwrap().path();
        for (sub, ext) in [("tflite", "tflite"), ("raw", "npz")] {
            for f in std::fs::read_dir(accel.join(sub)).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == ext) {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    assert!(out.len() >= 8, "fixtures missing: {out:?}");
    out
}

/// A valid `.npub` built from the `conv1_u55_256` case (command stream + baked weights + the
/// two scratch regions of `meta.json`), as `npub pack` would build it.
pub fn conv1_npub() -> Vec<u8> {
    let case = fixtures().join("cases/conv1_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let weights = std::fs::read(case.join("weights.bin")).unwrap();
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 704,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

/// A server running in this process.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// `http://ADDR` of `--admin-listen`, when the configuration asked for one.
    pub admin_url: Option<String>,
    /// Its state (database pool, store), for looking behind the API.
    pub state: AppState,
    /// What it printed at start.
    pub banner: String,
    /// A client.
    pub http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Starts a server over `dir` with the [`ADMIN`] bootstrap token.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, |_| {}).await
    }

    /// Starts a server over `dir` after `tweak` has adjusted the configuration.
    pub async fn start_with(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Self {
        // `NPUB_TEST_LOG=warn` (a `--log` filter): the servers' logs on stderr, for a failing test.
        if let Ok(filter) = std::env::var("NPUB_TEST_LOG") {
            let _ = npub_server::ops::logging::init(&filter);
        }
        let mut config = Config::new(dir, "127.0.0.1:0".parse().unwrap());
        config.admin_token = Some(ADMIN.into());
        // The tests' webhook receivers listen on 127.0.0.1 (`webhook_receiver.rs`), a range
        // deliveries are refused by default; a test of that refusal clears it.
        config.webhook_allow_addresses = vec!["127.0.0.1".into()];
        tweak(&mut config);
        if postgres::backend() == postgres::Backend::Postgres && config.database_url.is_none() {
            config.database_url = Some(postgres::database_for(dir).await);
            config
                .key_encryption_key
                .get_or_insert_with(|| postgres::TEST_KEK.into());
        }
        let server = Server::start(config).await.expect("server starts");
        let url = format!("http://{}", server.local_addr());
        let admin_url = server.admin_addr().map(|a| format!("http://{a}"));
        let state = server.state().clone();
        let banner = server.banner();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        Self {
            url,
            admin_url,
            state,
            banner,
            http: reqwest::Client::new(),
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Shuts down gracefully and waits until the data dir is released.
    pub async fn stop(mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }

    /// A request to `path` with `token`.
    pub fn req_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token)
    }

    /// A request to `path` as the bootstrap admin.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.req_as(ADMIN, method, path)
    }

    /// `GET path` as the bootstrap admin: its JSON body; panics (naming the path) unless 200.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let r = self.req(reqwest::Method::GET, path).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        r.json().await.unwrap()
    }

    /// Creates model `name` (any accelerator); panics unless 201.
    pub async fn create_model(&self, name: &str) {
        let r = self
            .req(reqwest::Method::POST, "/api/v1/models")
            .json(&serde_json::json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }

    /// Uploads `body` raw as `model`/`version`.
    pub async fn upload(&self, model: &str, version: &str, body: Vec<u8>) -> reqwest::Response {
        self.req(
            reqwest::Method::POST,
            &format!("/api/v1/models/{model}/versions/{version}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
    }

    /// Downloads a version's pack; panics unless 200.
    pub async fn download(&self, model: &str, version: &str) -> Vec<u8> {
        let r = self
            .req(
                reqwest::Method::GET,
                &format!("/api/v1/models/{model}/versions/{version}/npub"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap().to_vec()
    }

    /// Rows in `table` (a fixed table name from the test).
    pub async fn rows(&self, table: &'static str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_one(&self.state.db)
            .await
            .unwrap();
        n
    }
}

/// Regular files under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// SHA-256 hex of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A size-limited filesystem (tmpfs) mounted on a temporary directory for the life of the
/// value, so that a test can fill a disk. `None` when this process may not mount (not root, or
/// no `CAP_SYS_ADMIN` in a container): the test is skipped with a message on stderr, unless
/// `NPUB_REQUIRE_MOUNT=1` (set by `.ci/run`, which runs as root) makes that a failure.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` bytes.
    pub fn mount(bytes: u64) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes},mode=0700"))
            .arg("npub-test")
            .arg(dir.path())
            .output();
        let refused = match out {
            Ok(o) if o.status.success() => return Some(Self { dir }),
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        };
        assert!(
            std::env::var_os("NPUB_REQUIRE_MOUNT").is_none(),
            "cannot mount a tmpfs ({refused}) and NPUB_REQUIRE_MOUNT is set"
        );
        eprintln!(
            "SKIPPED: this test needs a size-limited filesystem and cannot mount a tmpfs \
             ({refused}); run it as root (as .ci/run does)"
        );
        None
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: a server task that still holds a file there must not keep the mount.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
