//! A webhook receiver on 127.0.0.1:0 for the tests (plain TCP, answering as each test scripts),
//! and the Standard Webhooks signature checked the way a receiver checks it.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How a receiver answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// This status, with the two-byte body `no`.
    Status(u16),
    /// Nothing, ever: the connection stays open.
    Hang,
    /// 200 and a body that never ends, a kilobyte at a time.
    Endless,
}

/// One request a receiver got.
#[derive(Debug)]
pub struct Got {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Got {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A receiver on 127.0.0.1:0: its URL, and every request it gets (sent before it answers).
pub async fn receiver(script: fn(usize) -> Answer) -> (String, mpsc::UnboundedReceiver<Got>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            let (tx, count) = (tx.clone(), Arc::clone(&count));
            tokio::spawn(serve(conn, script, tx, count));
        }
    });
    (url, rx)
}

async fn serve(
    mut conn: TcpStream,
    script: fn(usize) -> Answer,
    tx: mpsc::UnboundedSender<Got>,
    count: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    loop {
        // The head.
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8(buf[..end].to_vec()).unwrap();
        let headers: Vec<(String, String)> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        while buf.len() < end + length {
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buf[end..end + length].to_vec();
        buf.drain(..end + length);
        let n = count.fetch_add(1, Ordering::SeqCst);
        let _ = tx.send(Got { headers, body });
        match script(n) {
            Answer::Status(code) => {
                let head = format!("HTTP/1.1 {code} X\r\ncontent-length: 2\r\n\r\nno");
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
            }
            Answer::Hang => std::future::pending::<()>().await,
            Answer::Endless => {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
                let kib = [b'x'; 1024];
                while conn.write_all(&kib).await.is_ok() {}
                return;
            }
        }
    }
}

/// Checks `got`'s signature as the Standard Webhooks specification tells a receiver to: the
/// secret's bytes, `id.timestamp.body`, HMAC-SHA256, one of the `v1,` entries, a timestamp
/// near the receiver's clock.
pub fn verify(secret: &str, got: &Got) {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .unwrap();
    let id = got.header("webhook-id");
    let timestamp = got.header("webhook-timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (timestamp.parse::<i64>().unwrap() - now).abs() < 300,
        "timestamp {timestamp}"
    );
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(&got.body);
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
        &signed,
    );
    let expected = STANDARD.encode(tag.as_ref());
    let header = got.header("webhook-signature");
    assert!(
        header
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1,"))
            .any(|s| s == expected),
        "signature {header:?} is not v1,{expected}"
    );
}
