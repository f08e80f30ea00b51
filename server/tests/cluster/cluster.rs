//! The cluster of `deploy/local-cluster.sh` (PostgreSQL in a temp dir, s3s-fs, two replicas),
//! driven through the script itself, and a client for its replicas.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// PostgreSQL's binaries, as the script looks for them.
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A running cluster; `down` when dropped.
pub struct Cluster {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    /// Replica A's base URL.
    pub a: String,
    /// Replica B's base URL.
    pub b: String,
    /// The admin token both replicas accept.
    pub token: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/local-cluster.sh")
}

/// Whether the cluster can run here; outside CI a missing PostgreSQL or s3s-fs skips the test
/// with a message, in CI (`CI=true`) it fails it.
fn available() -> bool {
    let pg = Path::new(PG_BIN).join("initdb").is_file();
    let s3 = crate::bucket::binary().is_some();
    if !pg {
        let hint = format!("{PG_BIN}/initdb is missing (apt-get install postgresql-15)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{hint}");
        eprintln!("SKIPPED: {hint}");
    }
    pg && s3
}

impl Cluster {
    /// `local-cluster.sh up`, both replicas with `replica_args` as well; `None` when it cannot
    /// run here (see [`available`]).
    pub fn up(replica_args: &str) -> Option<Self> {
        if !available() {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        // PostgreSQL runs as `nobody` when the tests run as root: it must reach its directory.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let dir = tmp.path().join("cluster");
        let out = run(&dir, replica_args, &["up"]);
        let field = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .unwrap_or_else(|| panic!("local-cluster.sh up printed no {name}=: {out}"))
                .to_owned()
        };
        Some(Self {
            a: field("REPLICA_A"),
            b: field("REPLICA_B"),
            token: field("ADMIN_TOKEN"),
            dir,
            _tmp: tmp,
        })
    }

    /// Runs `local-cluster.sh ARGS` on this cluster; panics unless it succeeds.
    pub fn script(&self, args: &[&str]) -> String {
        run(&self.dir, "", args)
    }

    /// A client of replica A.
    pub fn api_a(&self) -> Api {
        Api::new(&self.a, &self.token)
    }

    /// A client of replica B.
    pub fn api_b(&self) -> Api {
        Api::new(&self.b, &self.token)
    }

    /// A replica's log so far (for assertion messages).
    pub fn log(&self, replica: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("replica-{replica}.log"))).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("down")
            .env("NPUB_CLUSTER_DIR", &self.dir)
            .status();
    }
}

fn run(dir: &Path, replica_args: &str, args: &[&str]) -> String {
    let mut cmd = Command::new("bash");
    cmd.arg(script())
        .args(args)
        .env("NPUB_CLUSTER_DIR", dir)
        .env("NPUB_SERVER_BIN", env!("CARGO_BIN_EXE_npub-server"))
        .env("NPUB_REPLICA_ARGS", replica_args);
    if let Some(s3s) = crate::bucket::binary() {
        cmd.env("NPUB_S3S_FS", s3s);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "local-cluster.sh {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A replica's API as one token.
#[derive(Clone)]
pub struct Api {
    pub url: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(url: &str, token: &str) -> Self {
        Self {
            url: url.to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::builder()
                // A request that hangs is a failure of its own: bound every one.
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
        }
    }

    /// The same replica as another token.
    pub fn as_token(&self, token: &str) -> Self {
        Self {
            token: token.to_owned(),
            ..self.clone()
        }
    }

    pub fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
    }

    /// `method path` with an optional JSON body; panics unless `want`; the body as JSON.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>, want: u16) -> Value {
        let mut req = self.req(method.clone(), path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status.as_u16(), want, "{method} {}{path}: {text}", self.url);
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Uploads `body` as `model`/`version`; panics unless 201.
    pub async fn upload(&self, model: &str, version: &str, body: Vec<u8>) {
        let r = self
            .req(
                Method::POST,
                &format!("/api/v1/models/{model}/versions/{version}"),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert_eq!(status, StatusCode::CREATED, "{}", r.text().await.unwrap());
    }

    /// Every audit entry with `action`, oldest first.
    pub async fn audit(&self, action: &str) -> Vec<Value> {
        let all = self
            .call(Method::GET, "/api/v1/audit?limit=1000", None, 200)
            .await;
        let mut out: Vec<Value> = all["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == action)
            .cloned()
            .collect();
        out.reverse();
        out
    }
}
