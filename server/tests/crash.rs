//! The real binary: killed with SIGKILL in the middle of a large upload, it leaves no partial pack
//! and no row once restarted; SIGTERM stops it cleanly.
mod common;

use std::path::Path;
use std::process::Stdio;

use common::{ADMIN, conv1_npub, files_under};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// Bytes sent before the kill: large enough to be well inside the body, in several chunks.
const SENT_BEFORE_KILL: usize = 8 * 1024 * 1024;
const CHUNK: usize = 1024 * 1024;

struct Running {
    child: Child,
    url: String,
    /// The server's log lines, drained continuously so that it never blocks on a full pipe.
    log: mpsc::UnboundedReceiver<String>,
}

/// Starts the binary on `dir` and reads the bound address from its first stdout line.
async fn spawn(dir: &Path) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_npub-server"))
        .arg("--data-dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0", "--log", "info"])
        .env("NPUB_ADMIN_TOKEN", ADMIN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server binary starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = stdout.next_line().await.unwrap().expect("a banner");
    let url = first
        .strip_prefix("npub-server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    // Keep draining stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, log) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            let _ = tx.send(line);
        }
    });
    Running { child, url, log }
}

impl Running {
    /// Reads the server's log until a line contains `needle`.
    async fn wait_for_log(&mut self, needle: &str) {
        while let Some(line) = self.log.recv().await {
            if line.contains(needle) {
                return;
            }
        }
        panic!("the server exited before logging {needle:?}");
    }
}

#[tokio::test]
async fn sigkill_mid_upload_leaves_no_partial_pack_and_no_row_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let mut server = spawn(dir.path()).await;
    let r = http
        .post(format!("{}/api/v1/models", server.url))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"name": "big"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    // A streamed body fed by hand: the test decides when bytes go out, and never sends the end.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    let upload = tokio::spawn(
        http.post(format!("{}/api/v1/models/big/versions/1.0.0", server.url))
            .bearer_auth(ADMIN)
            .body(reqwest::Body::wrap_stream(body))
            .send(),
    );
    let mut head = conv1_npub();
    head.resize(CHUNK, 0xA5);
    tx.send(Ok(head)).await.unwrap();
    server.wait_for_log("receiving upload").await;
    for _ in 1..SENT_BEFORE_KILL / CHUNK {
        tx.send(Ok(vec![0x5A; CHUNK])).await.unwrap();
    }

    server.child.start_kill().unwrap(); // SIGKILL
    let status = server.child.wait().await.unwrap();
    assert!(!status.success());
    drop(tx);
    assert!(
        upload.await.unwrap().is_err(),
        "the upload cannot have completed"
    );
    assert_eq!(
        files_under(&dir.path().join("tmp")).len(),
        1,
        "the kill should have interrupted a staged upload"
    );
    assert!(files_under(&dir.path().join("packs")).is_empty());

    let mut server = spawn(dir.path()).await;
    assert!(
        files_under(&dir.path().join("tmp")).is_empty(),
        "swept at start"
    );
    assert!(
        files_under(&dir.path().join("packs")).is_empty(),
        "no partial pack"
    );
    let versions: Value = http
        .get(format!("{}/api/v1/models/big/versions", server.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["items"]
        .clone();
    assert_eq!(versions, serde_json::json!([]), "no row");
    let r = http
        .post(format!("{}/api/v1/models/big/versions/1.0.0", server.url))
        .bearer_auth(ADMIN)
        .body(conv1_npub())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "the version is free after the crash");

    // SIGTERM: a clean, successful exit.
    let pid = server.child.id().unwrap().to_string();
    let kill = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    let status = server.child.wait().await.unwrap();
    assert!(
        status.success(),
        "SIGTERM should stop the server cleanly: {status}"
    );
    server.wait_for_log("stopped").await;
}
