//! A real S3 server on loopback for the tests: `s3s-fs` (installed by `.ci/run`) serving a temp
//! directory, with access keys, on a port it picks itself. Shared with device-agent's tests.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The bucket every test uses.
pub const BUCKET: &str = "npub-packs";
const ACCESS_KEY: &str = "npub-test-access";
const SECRET_KEY: &str = "npub-test-secret-0123456789";

/// `s3s-fs`: `$NPUB_S3S_FS`, else on `PATH`, else cargo's bin directory. `None` when it is not
/// installed and this is not CI; in CI (`CI=true`) a missing server fails the test instead.
pub fn binary() -> Option<PathBuf> {
    let found = std::env::var_os("NPUB_S3S_FS")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("s3s-fs"))
                .find(|p| p.is_file())
        })
        .or_else(|| {
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
            Some(home.join("bin/s3s-fs")).filter(|p| p.is_file())
        });
    if found.is_none() {
        let hint = "s3s-fs is not installed: `cargo install --locked s3s-fs --version 0.14.1 \
                    --features binary` (.ci/run does)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{hint}; CI must run the S3 tests"
        );
        eprintln!("SKIPPED: {hint}");
    }
    found
}

/// A running `s3s-fs`.
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub port: u16,
    root: PathBuf,
}

impl S3Server {
    /// Serves `root` (created, with the bucket, if missing) on a port of its choosing; `None`
    /// when s3s-fs is not installed (see [`binary`]).
    pub fn start(root: &Path) -> Option<Self> {
        Some(Self::start_on(&binary()?, root, 0))
    }

    /// Serves `root` on `port` (0: any).
    pub fn start_on(binary: &Path, root: &Path, port: u16) -> Self {
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let mut child = Command::new(binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("s3s-fs starts");
        // It logs `server is running at http://ADDR` once it listens.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let endpoint = loop {
            let line = lines
                .next()
                .expect("s3s-fs said where it listens before exiting")
                .unwrap();
            if let Some((_, url)) = line.split_once("server is running at ") {
                break url.trim().to_owned();
            }
        };
        // Keep reading, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let port = endpoint.rsplit(':').next().unwrap().parse().unwrap();
        Self {
            child,
            endpoint,
            port,
            root: root.to_owned(),
        }
    }

    /// The settings a server needs to use this bucket (`Config::aws_overrides`), through
    /// `endpoint` (this server's, or a proxy's in front of it).
    pub fn settings_via(&self, endpoint: &str) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", endpoint),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// [`S3Server::settings_via`] this server's own endpoint.
    pub fn settings(&self) -> Vec<(String, String)> {
        self.settings_via(&self.endpoint)
    }

    /// The objects the bucket holds under `prefix`, by key, as files in s3s-fs's directory
    /// (a partial upload lives elsewhere until it is complete).
    pub fn objects(&self, prefix: &str) -> Vec<String> {
        let bucket = self.root.join(BUCKET);
        let mut out: Vec<String> = files_under(&bucket.join(prefix))
            .into_iter()
            .map(|p| {
                p.strip_prefix(&bucket)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        out.sort();
        out
    }

    /// The file holding object `key`.
    pub fn object_file(&self, key: &str) -> PathBuf {
        self.root.join(BUCKET).join(key)
    }

    /// SIGKILL, and wait for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
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
    out
}
