//! Idle connections cannot take the server off the air (issues #11 point 4, #31 point 1): with
//! the soft `RLIMIT_NOFILE` lowered below the number of idle sockets (systemd starts services at
//! 1024), the server raises it to the hard limit and keeps answering; with the hard limit itself
//! too low, it fits `--max-connections` under it and closes the connection idle the longest to
//! make room, instead of failing `accept` or refusing the newcomer.
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

/// Opens `n` connections that never send a byte from 127.0.0.`from`, each accepted before the
/// next is opened.
async fn idle_connections(addr: &str, n: usize, from: u8) -> Vec<TcpStream> {
    let to: std::net::SocketAddr = addr.parse().unwrap();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, from], 0).into()).unwrap();
        held.push(socket.connect(to).await.unwrap());
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
    // From ten addresses, each under its per-peer cap.
    let mut held = Vec::new();
    for from in 2..12 {
        held.extend(idle_connections(&addr, 60, from).await);
    }
    let said = healthz(&addr).await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    drop(held);
    server.stop().await;
}

#[tokio::test]
async fn survives_more_idle_connections_than_the_hard_fd_limit_by_closing_the_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn(
        dir.path(),
        &["--header-timeout", "3600", "--idle-timeout", "3600"],
        Some("ulimit -n 256"),
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    // 256 descriptors, 128 kept for the rest: 128 connections are held. 300 idle ones from five
    // addresses (each under its per-peer cap) are more than that: the oldest make room.
    let mut held = Vec::new();
    for from in 2..7 {
        held.extend(idle_connections(&addr, 60, from).await);
    }
    let said = healthz(&addr).await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    // The first ones were closed to make room; the process never ran out of descriptors.
    let mut first = held.remove(0);
    let mut b = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(30), first.read(&mut b))
        .await
        .expect("the oldest idle connection was closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    drop(held);
    server.stop().await;
}
