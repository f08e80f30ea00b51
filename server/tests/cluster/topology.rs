//! The deployment path across the topology, with the device-agent simulator as the device:
//! upload through A, deploy through B, the device (behind the load balancer, which prefers A)
//! polls A and starts downloading from A; A is killed with SIGKILL mid-download; the device's
//! next attempt reaches B through the balancer and resumes where its flash journal says it
//! stopped, then installs, verifies and reports, and B sees it bound.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::cluster::Cluster;
use crate::lb::Lb;
use crate::{PATIENCE, models, provision};

/// Download pace through the balancer: the 134 KB pack takes about three seconds, time enough
/// to kill A in the middle.
const PACE: u64 = 48 * 1024;
/// What the simulator's flash holds per slot (its `--slot-kib`).
const SLOT_KIB: &str = "256";

/// The simulator, built beside the server by `cargo test --workspace`; `None` (skipped with a
/// message outside CI) when it was not built.
fn agent_binary() -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_BIN_EXE_npub-server")).with_file_name("device-agent");
    if bin.is_file() {
        return Some(bin);
    }
    let hint = format!(
        "{} is not built: cargo build -p device-agent",
        bin.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{hint}");
    eprintln!("SKIPPED: {hint}");
    None
}

fn addr(url: &str) -> SocketAddr {
    url.strip_prefix("http://").unwrap().parse().unwrap()
}

fn agent(bin: &Path, url: &str, token: &str, flash: &Path, trust: &Path) -> std::process::Child {
    Command::new(bin)
        .args([
            "--server",
            url,
            "--token",
            token,
            "--once",
            "--slot-kib",
            SLOT_KIB,
        ])
        .arg("--flash")
        .arg(flash)
        .arg("--trust")
        .arg(trust)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the replica at `url` answers the device's poll with a manifest.
async fn offered_by(url: &str, token: &str) {
    let client = reqwest::Client::new();
    let start = Instant::now();
    loop {
        let status = client
            .get(format!("{url}/api/v1/device/manifest"))
            .bearer_auth(token)
            .send()
            .await
            .map(|r| r.status().as_u16());
        if let Ok(200) = status {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{url} never offered the deployment: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_replica_a_killed_mid_download_and_the_device_resumes_from_b() {
    let Some(bin) = agent_binary() else {
        return;
    };
    let Some(cluster) = Cluster::up("--last-seen-flush 1") else {
        return;
    };
    let (a, b) = (cluster.api_a(), cluster.api_b());
    models(&a).await;
    let token = provision(&a, "lab", &["dev-1".to_owned()]).await.remove(0);
    let keys = b.call(Method::GET, "/api/v1/keys", None, 200).await;
    let key_id = keys["active"]["key_id"].as_str().unwrap();
    let trust_bytes = b
        .req(Method::GET, &format!("/api/v1/keys/{key_id}/trust"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let trust = work.path().join("signing.key.pub");
    std::fs::write(&trust, &trust_bytes).unwrap();
    let flash = work.path().join("dev-1.nor");

    let d = b
        .call(
            Method::POST,
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
            201,
        )
        .await;
    let seq = d["sequence"].as_u64().unwrap();
    // B deployed; A learns of it by NOTIFY, a few milliseconds later. Until A offers it, the
    // device's poll through A is answered "nothing newer" and `--once` exits up to date.
    offered_by(&cluster.a, &token).await;
    let lb = Lb::start([addr(&cluster.a), addr(&cluster.b)], PACE).await;

    // The device polls A (the balancer's first choice) and starts downloading from it.
    let mut first = agent(&bin, &lb.url, &token, &flash, &trust);
    let start = Instant::now();
    while lb.pack_ranges(0).is_empty() || lb.seen.bytes_from[0].load(Ordering::Relaxed) < 48 * 1024
    {
        if first.try_wait().unwrap().is_some() {
            let out = first.wait_with_output().unwrap();
            panic!(
                "the agent finished before A was killed ({} bytes from A): {}",
                lb.seen.bytes_from[0].load(Ordering::Relaxed),
                text(&out)
            );
        }
        assert!(start.elapsed() < PATIENCE, "no download from A");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.script(&["kill", "a"]);
    let killed_at = lb.seen.bytes_from[0].load(Ordering::Relaxed);
    let out = tokio::task::spawn_blocking(move || first.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let mut log = text(&out);

    // The device tries again (its next poll; a real one waits its interval), through the same
    // balancer, which now finds only B.
    let mut installed = out.status.success();
    for _ in 0..3 {
        if installed {
            break;
        }
        let next = agent(&bin, &lb.url, &token, &flash, &trust);
        let out = tokio::task::spawn_blocking(move || next.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        log.push_str(&text(&out));
        installed = out.status.success();
    }
    assert!(installed, "the device never installed: {log}");
    assert!(
        log.contains(&format!("installed kws 2.0.0 (sequence {seq})")),
        "{log}"
    );
    assert!(
        lb.seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|(i, line, _)| *i == 0 && line.contains("/api/v1/device/manifest")),
        "the device never polled A"
    );
    // Resumed, not restarted: B never served the pack from its first byte.
    let from_b = lb.pack_ranges(1);
    assert!(!from_b.is_empty(), "B served no pack range: {log}");
    assert!(
        from_b[0] > 0,
        "B's first range starts at 0 ({killed_at} bytes came from A): {from_b:?}"
    );
    let dev = b
        .call(Method::GET, "/api/v1/devices/dev-1", None, 200)
        .await;
    assert_eq!(dev["current_version"], "2.0.0", "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");
}
