//! Connection limits (issue #11 point 4): a socket that never speaks is closed after the header
//! timeout, and a connection beyond `--max-connections` is answered 503 while the server keeps
//! serving the ones it holds.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::TestServer;

/// Reads until the server closes. The outer bound only turns "held forever" into a failure
/// instead of a hung suite; the server's own timeout is far shorter.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out))
        .await
        .expect("the server closed the connection")
        .ok();
    out
}

fn addr(server: &TestServer) -> String {
    server.url.trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn rejects_silent_connection_after_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.header_timeout = 1).await;
    let mut silent = TcpStream::connect(addr(&server)).await.unwrap();
    let said = read_to_close(&mut silent).await;
    assert!(
        said.is_empty() || said.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&said)
    );
    server.stop().await;
}

#[tokio::test]
async fn rejects_connection_beyond_cap_with_503() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.max_connections = 2).await;
    // Accepted in order: these two hold both permits before the third is accepted.
    let mut held = TcpStream::connect(addr(&server)).await.unwrap();
    let _idle = TcpStream::connect(addr(&server)).await.unwrap();
    let mut extra = TcpStream::connect(addr(&server)).await.unwrap();
    let said = String::from_utf8(read_to_close(&mut extra).await).unwrap();
    assert!(said.starts_with("HTTP/1.1 503"), "{said}");
    assert!(said.contains("\"error\":\"unavailable\""), "{said}");
    // The server still answers on a connection it holds.
    held.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let said = String::from_utf8(read_to_close(&mut held).await).unwrap();
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    server.stop().await;
}
