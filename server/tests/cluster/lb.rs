//! The load balancer in front of the replicas, as a fleet has one: a TCP proxy on 127.0.0.1:0
//! that sends each new connection to the first backend that accepts it (A while A is up, then
//! B), paces what backends send to at most `bytes_per_sec` (so that a test can act while a
//! download is under way), and logs each request line and `Range` header it forwards.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// Bytes moved per pacing step.
const STEP: usize = 2048;

/// What went through the balancer.
#[derive(Default)]
pub struct Seen {
    /// Per backend (by index): bytes it sent to clients.
    pub bytes_from: [AtomicU64; 2],
    /// (backend index, request line, `Range` header value or "") per request.
    pub requests: Mutex<Vec<(usize, String, String)>>,
}

/// A running balancer; stops with the test's runtime.
pub struct Lb {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub seen: Arc<Seen>,
}

impl Lb {
    pub async fn start(backends: [SocketAddr; 2], bytes_per_sec: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Seen::default());
        let pause = Duration::from_secs_f64(STEP as f64 / bytes_per_sec as f64);
        let shared = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let seen = Arc::clone(&shared);
                tokio::spawn(async move {
                    for (index, addr) in backends.iter().enumerate() {
                        if let Ok(server) = TcpStream::connect(addr).await {
                            relay(client, server, index, seen, pause).await;
                            return;
                        }
                    }
                    // No backend: the client sees its connection closed.
                });
            }
        });
        Self { url, seen }
    }

    /// The `Range` starts of pack downloads backend `index` was asked for, in order.
    pub fn pack_ranges(&self, index: usize) -> Vec<u64> {
        self.seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, line, _)| *b == index && line.contains("/api/v1/device/packs/"))
            .filter_map(|(_, _, range)| {
                range
                    .strip_prefix("bytes=")?
                    .split('-')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    index: usize,
    seen: Arc<Seen>,
    pause: Duration,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up_seen = Arc::clone(&seen);
    let up = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            log_heads(&buf[..n], index, &up_seen);
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; STEP];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
            seen.bytes_from[index].fetch_add(n as u64, Ordering::Relaxed);
            tokio::time::sleep(pause).await;
        }
        // A backend that died (or closed): the client's connection goes with it.
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Records the request line and `Range` of every request head in `bytes` (device requests are
/// small: a head arrives in one read).
fn log_heads(bytes: &[u8], index: usize, seen: &Seen) {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split("\r\n");
    while let Some(line) = lines.next() {
        if !(line.starts_with("GET ") || line.starts_with("POST ")) {
            continue;
        }
        let mut range = String::new();
        for header in lines.by_ref() {
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("range")
            {
                range = value.trim().to_owned();
            }
        }
        seen.requests
            .lock()
            .unwrap()
            .push((index, line.to_owned(), range));
    }
}
