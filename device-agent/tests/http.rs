//! The device's HTTP client (`http_io`, as the simulator runs it over a `TcpStream`) against a
//! minimal device-API server on loopback: manifest poll with the sequence, Range downloads, status
//! reports, bearer token on every request; a redirected download followed, without the token (chains: `redirects.rs`).
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::*;
use device_agent::http_io::std_link::{StdClock, TcpLink};
use device_agent::http_io::{Config, HttpIo};
use device_agent::{Poll, RecordingNpu, Transport};

const TOKEN: &str = "device-token-1";

/// The simulator's transport for `base`, asking for `window` bytes per range request.
fn client(base: &str, token: &str, window: u32) -> HttpIo<'static, TcpLink, StdClock> {
    let (base, token) = (base.to_owned().leak(), token.to_owned().leak());
    let config = Config::new(base, token).unwrap().with_window_bytes(window);
    HttpIo::new(TcpLink::new(), StdClock::default(), config)
}

/// Serves the device API for one pack until the listener is dropped with the test; records every
/// request line and status body.
fn serve(pack: Vec<u8>, manifest: Vec<u8>, seen: Arc<Mutex<Vec<String>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let sha: String = sha256(&pack).iter().map(|b| format!("{b:02x}")).collect();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let (mut range, mut len, mut auth) = (None, 0usize, String::new());
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.strip_prefix("range: bytes=") {
                        let (a, b) = v.split_once('-').unwrap();
                        range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
                    }
                    if let Some(v) = h.strip_prefix("content-length: ") {
                        len = v.parse().unwrap();
                    }
                    if let Some(v) = h.strip_prefix("authorization: ") {
                        auth = v.to_owned();
                    }
                }
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                seen.lock()
                    .unwrap()
                    .push(format!("{path} {}", String::from_utf8_lossy(&body)));
                let (status, payload): (&str, Vec<u8>) = if auth != format!("bearer {TOKEN}") {
                    ("401 Unauthorized", vec![])
                } else if path == "/api/v1/device/manifest?seq=0" {
                    ("200 OK", manifest.clone())
                } else if path.starts_with("/api/v1/device/manifest") {
                    ("204 No Content", vec![])
                } else if path == format!("/api/v1/device/packs/{sha}") {
                    let (a, b) = range.unwrap();
                    if a >= pack.len() {
                        ("416 Range Not Satisfiable", vec![])
                    } else {
                        (
                            "206 Partial Content",
                            pack[a..=b.min(pack.len() - 1)].to_vec(),
                        )
                    }
                } else if path == "/api/v1/device/status" {
                    ("204 No Content", vec![])
                } else {
                    ("404 Not Found", vec![])
                };
                let range = match (status, range) {
                    ("206 Partial Content", Some((a, _))) => format!(
                        "content-range: bytes {a}-{}/{}\r\n",
                        a + payload.len() - 1,
                        pack.len()
                    ),
                    _ => String::new(),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\n{range}content-length: {}\r\n\r\n",
                    payload.len()
                );
                if stream
                    .write_all(head.as_bytes())
                    .and_then(|()| stream.write_all(&payload))
                    .is_err()
                {
                    break;
                }
            }
        }
    });
    base
}

#[test]
fn installs_over_http_with_range_requests_and_reports() {
    let c = small();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = serve(c.pack.clone(), manifest(&c.pack, 1).to_vec(), seen.clone());
    // One range request per piece the agent asks for, as the simulator's former client made them.
    let mut http = client(&base, TOKEN, device_agent::CHUNK_BYTES as u32);
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut npu = RecordingNpu::default();
    let mut mem = ArenaMem::new();
    let polled = agent
        .poll(&mut http, &mut npu, &mut mem.arena(), None)
        .unwrap();
    assert!(matches!(polled, Poll::Installed(_)));
    assert_eq!(
        agent
            .poll(&mut http, &mut npu, &mut mem.arena(), None)
            .unwrap(),
        Poll::UpToDate
    );

    let seen = seen.lock().unwrap();
    let packs = seen
        .iter()
        .filter(|l| l.starts_with("/api/v1/device/packs/"))
        .count();
    assert_eq!(
        packs,
        c.pack.len().div_ceil(device_agent::CHUNK_BYTES),
        "one Range request per chunk"
    );
    let installed = seen
        .iter()
        .find(|l| l.contains(r#""state":"installed""#))
        .unwrap();
    assert!(installed.contains(r#""sequence":1"#), "{installed}");
    assert!(
        seen.last()
            .unwrap()
            .starts_with("/api/v1/device/manifest?seq=1")
    );
}

#[test]
fn a_wrong_token_is_an_http_error_not_a_pack() {
    let c = small();
    let base = serve(
        c.pack.clone(),
        manifest(&c.pack, 1).to_vec(),
        Arc::default(),
    );
    let mut http = client(&base, "stolen", 0);
    let mut buf = [0u8; 512];
    assert_eq!(
        http.fetch_manifest(0, &mut buf),
        Err(device_agent::TransportError::Status(401))
    );
}

/// A one-connection-per-request HTTP server answering every request with `answer(request head)`;
/// returns its base URL. Stops with the test.
fn answering(answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let _ = stream.write_all(&answer(&head));
        }
    });
    base
}

#[test]
fn follows_a_pack_redirect_once_with_the_range_and_without_the_token() {
    let pack: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (p, h) = (pack.clone(), Arc::clone(&heads));
    let bucket = answering(move |head| {
        h.lock().unwrap().push(head.to_ascii_lowercase());
        let body = &p[100..200];
        let mut out = format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100-199/1000\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        out
    });
    let server = answering(move |_| {
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {bucket}/packs/x?X-Amz-Signature=ab\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes()
    });
    let mut t = client(&server, TOKEN, 100);
    let mut buf = vec![0u8; 100];
    assert_eq!(t.fetch_pack(&[7; 32], 100, &mut buf), Ok(100));
    assert_eq!(buf, pack[100..200]);
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with("get /packs/x?x-amz-signature=ab "),
        "{heads:?}"
    );
    assert!(heads[0].contains("range: bytes=100-199"), "{heads:?}");
    assert!(
        !heads[0].contains("authorization"),
        "the token stayed home: {heads:?}"
    );
}

#[test]
fn rejects_a_pack_redirect_without_a_location_or_to_another_scheme() {
    for (location, says) in [
        ("", "redirect without a usable Location"),
        (
            "Location: ftp://bucket.example/pack\r\n",
            "redirect to a scheme other than HTTP or HTTPS",
        ),
        (
            "Location: https://bucket.example/pack\r\n",
            "https:// needs a link with TLS and a CA (--ca)",
        ),
    ] {
        let server = answering(move |_| {
            format!(
                "HTTP/1.1 307 Temporary Redirect\r\n{location}Content-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            )
            .into_bytes()
        });
        let mut t = client(&server, TOKEN, 0);
        let mut buf = vec![0u8; 100];
        assert_eq!(
            t.fetch_pack(&[7; 32], 0, &mut buf),
            Err(device_agent::TransportError::Protocol(says))
        );
    }
}
