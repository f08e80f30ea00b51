//! Uploads in flight are bounded (issue #11 point 5): with `--max-uploads` taken, one more upload
//! is answered 503 with `Retry-After` before its body is read, and is accepted once a slot is
//! free again.
use reqwest::Method;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::{ADMIN, TestServer, conv1_npub, files_under};

#[tokio::test]
async fn rejects_an_upload_beyond_max_uploads_with_503_and_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.max_uploads = 1).await;
    s.create_model("m").await;
    // An upload that holds the only slot: its body is still coming.
    let mut holder = TcpStream::connect(s.url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /api/v1/models/m/versions/held HTTP/1.1\r\nhost: t\r\n\
         authorization: Bearer {ADMIN}\r\ncontent-length: 100000\r\n\r\nNPU1"
    );
    holder.write_all(head.as_bytes()).await.unwrap();
    // Its staged file exists once it holds the slot.
    let tmp = dir.path().join("tmp");
    while files_under(&tmp).is_empty() {
        tokio::task::yield_now().await;
    }
    let r = s.upload("m", "1", conv1_npub()).await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "unavailable");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("1 uploads are in progress"),
        "{body}"
    );
    // The holder goes away: its slot comes back (once the server has seen the socket close).
    drop(holder);
    let mut status = 0;
    for _ in 0..1000 {
        status = s.upload("m", "1", conv1_npub()).await.status().as_u16();
        if status != 503 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(status, 201);
    let listed: Vec<Value> = s
        .req(Method::GET, "/api/v1/models/m/versions")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 1);
    s.stop().await;
}
