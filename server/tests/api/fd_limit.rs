//! Idle connections cannot take the server off the air (issue #11 point 4): with the soft
//! `RLIMIT_NOFILE` lowered below the number of idle sockets (systemd starts services at 1024),
//! the server raises it to the hard limit and keeps answering; with the hard limit itself too
//! low, it fits `--max-connections` under it and answers 503 instead of failing `accept`.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::binary::spawn;

async fn healthz(addr: &str) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    // The bound turns "never accepted" into a failure instead of a hung suite.
    tokio::time::timeout(Duration::from_secs(30), conn.read_to_end(&mut out))
        .await
        .expect("the server answered")
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// Opens `n` connections that never send a byte, each accepted before the next is opened.
async fn idle_connections(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    held
}

fn hard_limit() -> u64 {
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

#[tokio::test]
async fn survives_more_idle_connections_than_the_soft_fd_limit() {
    assert!(
        hard_limit() >= 2048,
        "the hard limit is too low for this test"
    );
    let dir = tempfile::tempdir().unwrap();
    // The idle sockets are never timed out here: only the raised limit can make room.
    let server = spawn(
        dir.path(),
        &["--header-timeout", "3600", "--idle-timeout", "3600"],
        Some("ulimit -Sn 256"),
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    let held = idle_connections(&addr, 600).await;
    let said = healthz(&addr).await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    drop(held);
    server.stop().await;
}

#[tokio::test]
async fn survives_more_idle_connections_than_the_hard_fd_limit_with_503() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn(
        dir.path(),
        &["--header-timeout", "3600", "--idle-timeout", "3600"],
        Some("ulimit -n 256"),
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    // 256 descriptors, 128 kept for the rest: 128 connections are served, the next gets 503.
    let held = idle_connections(&addr, 128).await;
    let said = healthz(&addr).await;
    assert!(said.starts_with("HTTP/1.1 503"), "{said}");
    drop(held);
    // Once the idle sockets are gone the server serves again; the loop bounds how long the
    // server takes to notice the closed sockets.
    let mut said = String::new();
    for _ in 0..200 {
        said = healthz(&addr).await;
        if said.starts_with("HTTP/1.1 200") {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    server.stop().await;
}
