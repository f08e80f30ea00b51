//! Connection limits (issue #11 point 4): a socket that never speaks is closed after the header
//! timeout, and a connection beyond `--max-connections` is answered 503 while the server keeps
//! serving the ones it holds.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{ADMIN, TestServer, files_under};

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

/// An upload of model `m` whose body is still arriving: a connection being answered. Returns
/// once the server has started receiving it (its staged file exists).
async fn busy(server: &TestServer, dir: &std::path::Path, version: u8) -> TcpStream {
    let staged = files_under(&dir.join("tmp")).len();
    let mut c = TcpStream::connect(addr(server)).await.unwrap();
    c.write_all(
        format!(
            "POST /api/v1/models/m/versions/{version} HTTP/1.1\r\nhost: t\r\n\
             authorization: Bearer {ADMIN}\r\ncontent-length: 100000\r\n\r\nNPU1"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while files_under(&dir.join("tmp")).len() == staged {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upload never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c
}

#[tokio::test]
async fn rejects_connection_beyond_cap_with_503_when_every_one_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.max_connections = 2).await;
    server.create_model("m").await;
    // These two hold both places, each in the middle of an upload.
    let _one = busy(&server, dir.path(), 1).await;
    let _two = busy(&server, dir.path(), 2).await;
    let mut extra = TcpStream::connect(addr(&server)).await.unwrap();
    let said = String::from_utf8(read_to_close(&mut extra).await).unwrap();
    assert!(said.starts_with("HTTP/1.1 503"), "{said}");
    assert!(said.contains("\"error\":\"unavailable\""), "{said}");
    server.stop().await;
}

#[tokio::test]
async fn survives_a_connection_beyond_cap_by_closing_the_one_idle_longest() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.max_connections = 2).await;
    server.create_model("m").await;
    let mut idle = TcpStream::connect(addr(&server)).await.unwrap();
    let _busy = busy(&server, dir.path(), 1).await;
    // The third is served: the idle connection makes room, not the busy one.
    let mut third = TcpStream::connect(addr(&server)).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let said = String::from_utf8(read_to_close(&mut third).await).unwrap();
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    assert!(
        read_to_close(&mut idle).await.is_empty(),
        "closed without a word"
    );
    server.stop().await;
}
