//! The real `npub-server` binary in a child process, for what only a process shows: its log, its
//! file-descriptor limit.
use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::common::ADMIN;

pub struct Running {
    pub child: Child,
    pub url: String,
    /// Every line the server printed on stdout (its banner), as they arrive.
    pub banner: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The server's log lines, drained continuously so that it never blocks on a full pipe.
    pub log: mpsc::UnboundedReceiver<String>,
}

/// Starts the binary on `dir` with `args` (after `--data-dir`, `--listen 127.0.0.1:0`), through
/// `sh -c "<shell>; exec …"` when `shell` is given (e.g. `ulimit -Sn 64`), and reads the bound
/// address from its first stdout line.
pub async fn spawn(dir: &Path, args: &[&str], shell: Option<&str>) -> Running {
    let binary = env!("CARGO_BIN_EXE_npub-server");
    let mut command = match shell {
        None => Command::new(binary),
        Some(prefix) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("{prefix} && exec \"$0\" \"$@\""))
                .arg(binary);
            c
        }
    };
    let mut child = command
        .arg("--data-dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("NPUB_ADMIN_TOKEN", ADMIN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server binary starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, log) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            let _ = tx.send(line);
        }
    });
    let Ok(Some(first)) = stdout.next_line().await else {
        let mut log = log;
        let mut lines = Vec::new();
        while let Some(l) = log.recv().await {
            lines.push(l);
        }
        panic!("no banner; the server said:\n{}", lines.join("\n"));
    };
    let url = first
        .strip_prefix("npub-server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let banner = std::sync::Arc::new(std::sync::Mutex::new(vec![first]));
    let lines = std::sync::Arc::clone(&banner);
    tokio::spawn(async move {
        while let Ok(Some(line)) = stdout.next_line().await {
            lines.lock().unwrap().push(line);
        }
    });
    Running {
        child,
        url,
        banner,
        log,
    }
}

impl Running {
    /// Reads the server's log until a line contains every one of `needles`; returns it.
    /// The outer bound only turns "never logged" into a failure instead of a hung suite.
    pub async fn wait_for_log(&mut self, needles: &[&str]) -> String {
        let wait = async {
            while let Some(line) = self.log.recv().await {
                if needles.iter().all(|n| line.contains(n)) {
                    return line;
                }
            }
            panic!("the server exited before logging {needles:?}");
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("the server never logged {needles:?}"))
    }

    /// SIGTERM, waits for a clean exit, and returns the log lines not read yet.
    pub async fn stop(mut self) -> Vec<String> {
        let pid = self.child.id().expect("running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().await.unwrap();
        assert!(status.success(), "{status}");
        let mut rest = Vec::new();
        while let Some(line) = self.log.recv().await {
            rest.push(line);
        }
        rest
    }
}
