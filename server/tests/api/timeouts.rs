//! Connections and bodies that stall are let go (issue #11 point 4): a keep-alive connection idle
//! past `--idle-timeout` is closed even when the header timeout is long, and a request body
//! trickled in below `--body-min-rate` is answered 408 with nothing left staged.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{ADMIN, TestServer, files_under};

/// Reads until the server closes. The outer bound only turns "held forever" into a failure
/// instead of a hung suite; the server's own limits are far shorter.
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
async fn rejects_an_idle_keep_alive_connection_after_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.header_timeout = 3600;
        c.idle_timeout = 1;
    })
    .await;
    let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await
        .unwrap();
    // The answer, then silence: the connection stays open for a next request until it idles out.
    let said = String::from_utf8(read_to_close(&mut conn).await).unwrap();
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    assert_eq!(said.matches("HTTP/1.1").count(), 1, "{said}");
    server.stop().await;
}

#[tokio::test]
async fn rejects_a_trickled_upload_body_with_408_and_stages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.body_min_rate = 1000;
        c.body_grace = 1;
    })
    .await;
    server.create_model("m").await;
    for (path, content_type) in [
        ("/api/v1/models/m/versions/1", "application/octet-stream"),
        ("/api/v1/models", "application/json"),
    ] {
        let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {ADMIN}\r\n\
             content-type: {content_type}\r\ncontent-length: 100000\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(b"{\"name\": ").await.unwrap();
        // Nothing more: far below 1000 bytes/s once the second of grace is over.
        let said = String::from_utf8(read_to_close(&mut conn).await).unwrap();
        assert!(said.starts_with("HTTP/1.1 408"), "{path}: {said}");
        assert!(
            said.contains("\"error\":\"request_timeout\""),
            "{path}: {said}"
        );
    }
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    // A body at full speed is unaffected.
    assert_eq!(
        server
            .upload("m", "2", crate::common::conv1_npub())
            .await
            .status(),
        201
    );
    server.stop().await;
}

/// A writer waits for its turn in this process at most `--database-lock-timeout`: with the turn
/// held (as by a writer the database holds), a change is answered 503 saying the database did not
/// answer in time, within the bound and with nothing written; once the turn is free, it goes
/// through.
#[tokio::test]
async fn rejects_a_write_waiting_for_its_turn_past_the_lock_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.database_lock_timeout = 1).await;
    let create = || {
        server
            .req(reqwest::Method::POST, "/api/v1/devices")
            .json(
                &serde_json::json!({"devices": [{"id": "cam-1", "accelerator": "ethos-u55-256"}]}),
            )
            .send()
    };
    let turn = server.state.write_lock.lock().await;
    let asked = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(30), create())
        .await
        .expect("answered while the turn is held")
        .unwrap();
    let waited = asked.elapsed();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("did not answer in time"),
        "{body}"
    );
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    let listed = server.get_json("/api/v1/devices").await;
    assert_eq!(listed["items"], serde_json::json!([]), "nothing written");
    drop(turn);
    assert_eq!(create().await.unwrap().status(), 201);
    server.stop().await;
}
