//! A TCP proxy between the firmware and the real server: it forwards bytes as they are, records
//! each request (the route and the first byte of its `Range`), and on request breaks the answer
//! the way a network does: a reset or a FIN after so many more bytes, a slow link, a stale
//! manifest handed back in place of the server's.
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How an armed cut ends the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// RST to the firmware.
    Reset,
    /// FIN to the firmware (the answer is truncated).
    Fin,
}

/// One request the firmware sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// The first byte of its `Range`, if any.
    pub range_from: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    upstream: Option<SocketAddr>,
    seen: Vec<Seen>,
    /// Bytes forwarded to the firmware.
    down_bytes: u64,
    /// Cut the connection carrying the byte at this count.
    cut: Option<(u64, Cut)>,
    /// Bytes per second towards the firmware (0: as fast as it goes).
    rate: u64,
    /// Answer manifest polls with this (200, the bytes) instead of asking the server.
    replay: Option<Vec<u8>>,
}

/// The proxy.
pub struct Proxy {
    pub addr: SocketAddr,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Proxy {
    /// Listens on 127.0.0.1 and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new((
            Mutex::new(State {
                upstream: Some(upstream),
                ..State::default()
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let state = Arc::clone(&shared);
                std::thread::spawn(move || connection(client, state));
            }
        });
        Self { addr, state }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.state.0.lock().unwrap());
        self.state.1.notify_all();
        r
    }

    /// Everything the firmware asked since the last call, and forgets it.
    pub fn take_seen(&self) -> Vec<Seen> {
        self.with(|s| std::mem::take(&mut s.seen))
    }

    /// The pack's range requests' first bytes among `seen` (not the self-test record's, which
    /// is fetched with a range too).
    pub fn range_starts(seen: &[Seen]) -> Vec<u64> {
        seen.iter()
            .filter(|s| !s.path.ends_with("/selftest"))
            .filter_map(|s| s.range_from)
            .collect()
    }

    /// Bytes forwarded to the firmware so far.
    pub fn down_bytes(&self) -> u64 {
        self.with(|s| s.down_bytes)
    }

    /// Breaks the connection that carries the `n`-th byte from now towards the firmware.
    pub fn cut_after(&self, n: u64, how: Cut) {
        self.with(|s| s.cut = Some((s.down_bytes + n, how)));
    }

    /// Limits the rate towards the firmware.
    pub fn set_rate(&self, bytes_per_s: u64) {
        self.with(|s| s.rate = bytes_per_s);
    }

    /// Answers manifest polls with `manifest` (or, with `None`, forwards them again).
    pub fn replay(&self, manifest: Option<Vec<u8>>) {
        self.with(|s| s.replay = manifest);
    }

    /// Blocks until `n` bytes in all went to the firmware, or `timeout` passes; whether they did.
    pub fn wait_down_bytes(&self, n: u64, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut s = self.state.0.lock().unwrap();
        while s.down_bytes < n {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self.state.1.wait_timeout(s, left).unwrap().0;
        }
        true
    }
}

fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn connection(client: TcpStream, state: Arc<(Mutex<State>, Condvar)>) {
    let upstream = state.0.lock().unwrap().upstream;
    let Some(server) = upstream.and_then(|a| TcpStream::connect(a).ok()) else {
        // The server is down: the firmware sees its connection refused (reset).
        reset(&client);
        return;
    };
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let st = Arc::clone(&state);
    std::thread::spawn(move || downstream(s2, c2, st));
    upstream_pump(client, server, state);
}

/// Firmware → server: parse each request head, record it, forward it (or answer it).
fn upstream_pump(
    mut client: TcpStream,
    mut server: TcpStream,
    state: Arc<(Mutex<State>, Condvar)>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        // Whole requests only: heads, then their bodies.
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            let Ok(httparse::Status::Complete(head)) = req.parse(&buf) else {
                break;
            };
            let mut body = 0usize;
            let mut range_from = None;
            for h in req.headers.iter() {
                let v = String::from_utf8_lossy(h.value);
                if h.name.eq_ignore_ascii_case("content-length") {
                    body = v.trim().parse().unwrap_or(0);
                }
                if h.name.eq_ignore_ascii_case("range") {
                    range_from = v
                        .trim()
                        .strip_prefix("bytes=")
                        .and_then(|r| r.split('-').next())
                        .and_then(|a| a.parse().ok());
                }
            }
            if buf.len() < head + body {
                break;
            }
            let seen = Seen {
                method: req.method.unwrap_or("").to_owned(),
                path: req.path.unwrap_or("").to_owned(),
                range_from,
            };
            let request: Vec<u8> = buf.drain(..head + body).collect();
            let replay = {
                let mut s = state.0.lock().unwrap();
                s.seen.push(seen.clone());
                state.1.notify_all();
                s.replay.clone()
            };
            match replay {
                Some(m) if seen.path.starts_with("/api/v1/device/manifest") => {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
                        m.len()
                    );
                    if client.write_all(&[head.as_bytes(), &m].concat()).is_err() {
                        return;
                    }
                }
                _ => {
                    if server.write_all(&request).is_err() {
                        reset(&client);
                        return;
                    }
                }
            }
        }
    }
    let _ = server.shutdown(Shutdown::Both);
}

/// Server → firmware: forward, throttled and cut as configured.
fn downstream(mut server: TcpStream, mut client: TcpStream, state: Arc<(Mutex<State>, Condvar)>) {
    let mut chunk = [0u8; 2048];
    loop {
        let n = match server.read(&mut chunk) {
            Ok(0) | Err(_) => {
                let _ = client.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        let (send, cut, rate) = {
            let mut s = state.0.lock().unwrap();
            let (send, cut) = match s.cut {
                Some((at, how)) if s.down_bytes + n as u64 >= at => {
                    s.cut = None;
                    ((at - s.down_bytes.min(at)) as usize, Some(how))
                }
                _ => (n, None),
            };
            s.down_bytes += send as u64;
            state.1.notify_all();
            (send, cut, s.rate)
        };
        if client.write_all(&chunk[..send]).is_err() {
            let _ = server.shutdown(Shutdown::Both);
            return;
        }
        match cut {
            Some(Cut::Reset) => {
                reset(&client);
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
            Some(Cut::Fin) => {
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
            None => {}
        }
        if let Some(us) = (send as u64 * 1_000_000).checked_div(rate) {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}
