//! Pack downloads the server redirects more than once (issue 35, point 4): the device's HTTP
//! client (`http_io`, the transport of the simulator and of the firmware alike) follows up to
//! `MAX_REDIRECTS` hops, absolute or relative to the hop that redirected, to `http://` and
//! `https://` only, never with the device token, and over TLS without the device's client
//! certificate. Real servers on 127.0.0.1:0, one thread each; TLS through rustls with test
//! certificates made here.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use device_agent::Transport;
use device_agent::http_io::std_link::{StdClock, TcpLink};
use device_agent::http_io::std_tls::{TlsLink, trust_pem_as};
use device_agent::http_io::{Config, HttpError, HttpIo, Link, MAX_REDIRECTS, Retry};

/// The server tests' certificates (a CA, server certificates), made in the test.
#[path = "../../server/tests/tls/certs.rs"]
mod certs;

const TOKEN: &str = "device-token-redirects";

/// What one listener saw: each request's head, lower-cased.
type Heads = Arc<Mutex<Vec<String>>>;

/// Reads one request head from `r`.
fn read_head(r: &mut impl BufRead) -> String {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    head.to_ascii_lowercase()
}

/// A one-request-per-connection HTTP server on 127.0.0.1:0 answering every request with
/// `answer(head)`; returns its `http://127.0.0.1:PORT` and the heads it saw.
fn serve(answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> (String, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let heads = Heads::default();
    let seen = Arc::clone(&heads);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let head = read_head(&mut BufReader::new(stream.try_clone().unwrap()));
            seen.lock().unwrap().push(head.clone());
            let _ = stream.write_all(&answer(&head));
        }
    });
    (base, heads)
}

fn redirect(status: &str, location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nLocation: {location}\r\nContent-Length: 5\r\n\
         Connection: close\r\n\r\nmoved"
    )
    .into_bytes()
}

/// The 206 for `range: bytes=A-B` of `pack`.
fn partial(pack: &[u8], head: &str) -> Vec<u8> {
    let range = head
        .lines()
        .find_map(|l| l.strip_prefix("range: bytes="))
        .expect("a range request");
    let (a, b) = range.split_once('-').unwrap();
    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
    let b = b.min(pack.len() - 1);
    let mut out = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        pack.len(),
        b - a + 1
    )
    .into_bytes();
    out.extend_from_slice(&pack[a..=b]);
    out
}

fn client<L: Link>(base: &str, link: L) -> HttpIo<'static, L, StdClock> {
    let base = base.to_owned().leak();
    let config = Config::new(base, TOKEN)
        .unwrap()
        .with_window_bytes(100)
        .with_retry(Retry {
            attempts: 1,
            base_ms: 1,
            cap_ms: 1,
        });
    HttpIo::new(link, StdClock::default(), config)
}

fn pack() -> Vec<u8> {
    (0..=255u8).cycle().take(1000).collect()
}

#[test]
fn follows_a_chain_of_three_redirects_with_the_range_and_without_the_token() {
    let pack = pack();
    let p = pack.clone();
    let (last, last_heads) = serve(move |head| partial(&p, head));
    let last_host = last.strip_prefix("http://").unwrap().to_owned();
    // The first bucket sends its own redirect on, once to a path of its own, then elsewhere.
    let (bucket, bucket_heads) = serve(move |head| {
        if head.starts_with("get /a?") {
            redirect("308 Permanent Redirect", "/b?sig=2")
        } else {
            redirect("302 Found", &format!("{last}/c?X-Amz-Signature=3"))
        }
    });
    let bucket_host = bucket.strip_prefix("http://").unwrap().to_owned();
    let (server, server_heads) =
        serve(move |_| redirect("307 Temporary Redirect", &format!("{bucket}/a?sig=1")));
    let mut t = client(&server, TcpLink::new());
    let mut buf = vec![0u8; 100];
    assert_eq!(t.fetch_pack(&[7; 32], 300, &mut buf), Ok(100));
    assert_eq!(buf, pack[300..400]);
    assert_eq!(t.stats().redirects, 3);

    let server_heads = server_heads.lock().unwrap();
    assert!(
        server_heads[0].contains("authorization: bearer"),
        "{server_heads:?}"
    );
    let bucket_heads = bucket_heads.lock().unwrap();
    let last_heads = last_heads.lock().unwrap();
    assert_eq!(bucket_heads.len(), 2, "{bucket_heads:?}");
    assert!(
        bucket_heads[0].starts_with("get /a?sig=1 "),
        "{bucket_heads:?}"
    );
    assert!(
        bucket_heads[1].starts_with("get /b?sig=2 "),
        "a path stays on the hop that redirected: {bucket_heads:?}"
    );
    assert_eq!(last_heads.len(), 1, "{last_heads:?}");
    assert!(
        last_heads[0].starts_with("get /c?x-amz-signature=3 "),
        "{last_heads:?}"
    );
    for (head, host) in bucket_heads
        .iter()
        .map(|h| (h, &bucket_host))
        .chain(last_heads.iter().map(|h| (h, &last_host)))
    {
        assert!(head.contains(&format!("host: {host}\r\n")), "{head}");
        assert!(head.contains("range: bytes=300-399\r\n"), "{head}");
        assert!(
            !head.contains("authorization"),
            "the token stayed home: {head}"
        );
    }
}

#[test]
fn rejects_a_redirect_chain_longer_than_the_limit() {
    let (bucket, bucket_heads) = serve(|_| redirect("307 Temporary Redirect", "/again"));
    let (server, _) = serve(move |_| redirect("307 Temporary Redirect", &format!("{bucket}/x")));
    let mut t = client(&server, TcpLink::new());
    let mut buf = vec![0u8; 100];
    assert_eq!(
        t.fetch_pack(&[7; 32], 0, &mut buf),
        Err(device_agent::TransportError::Protocol(
            "too many redirects in a row"
        ))
    );
    assert_eq!(
        t.last_error(),
        Some(HttpError::TooManyRedirects { status: 307 })
    );
    assert_eq!(bucket_heads.lock().unwrap().len(), MAX_REDIRECTS);
    assert_eq!(t.stats().redirects, MAX_REDIRECTS as u32);
    assert_eq!(t.stats().pack_bytes, 0);
}

#[test]
fn rejects_a_redirect_to_another_scheme_inside_a_chain() {
    for location in ["ftp://127.0.0.1/pack", "file:///etc/passwd", "gopher:x"] {
        let (bucket, _) = serve(move |_| redirect("307 Temporary Redirect", location));
        let (server, _) =
            serve(move |_| redirect("307 Temporary Redirect", &format!("{bucket}/x")));
        let mut t = client(&server, TcpLink::new());
        let mut buf = vec![0u8; 100];
        assert_eq!(
            t.fetch_pack(&[7; 32], 0, &mut buf),
            Err(device_agent::TransportError::Protocol(
                "redirect to a scheme other than HTTP or HTTPS"
            )),
            "{location}"
        );
        assert_eq!(t.last_error(), Some(HttpError::RedirectNotHttp));
    }
}

/// A TLS server on 127.0.0.1:0 (certificate `leaf`) that asks for a client certificate from
/// `client_ca` but takes a connection without one, and answers each request with
/// `answer(head)`; records, per connection, whether a client certificate came.
fn serve_tls(
    leaf: &certs::Leaf,
    client_ca: &certs::Ca,
    answer: impl Fn(&str) -> Vec<u8> + Send + 'static,
) -> (u16, Arc<Mutex<Vec<bool>>>) {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject as _;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = rustls::pki_types::CertificateDer::from_pem_slice(client_ca.pem.as_bytes());
    roots.add(ca_der.unwrap()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let identities = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&identities);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(tcp) = stream else { return };
            let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut reader = BufReader::new(TlsRead(&mut tls));
            let head = read_head(&mut reader);
            drop(reader);
            if head.is_empty() {
                continue;
            }
            seen.lock()
                .unwrap()
                .push(tls.conn.peer_certificates().is_some());
            let _ = tls.write_all(&answer(&head));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (port, identities)
}

/// `Read` over a borrowed TLS stream, for a `BufReader` that must not own it.
struct TlsRead<'a>(&'a mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>);

impl Read for TlsRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte at a time: nothing past the head may be buffered away from the stream.
        let n = buf.len().min(1);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn follows_an_https_redirect_without_the_device_certificate() {
    let ca = certs::Ca::new("npub test CA");
    let devices = certs::Ca::new("npub devices");
    let device = devices.device("dev-1", certs::Validity::Now);
    let bucket_leaf = ca.server(&["localhost", "127.0.0.1"], certs::Validity::Now);
    let pack = pack();
    let p = pack.clone();
    let (port, identities) = serve_tls(&bucket_leaf, &devices, move |head| partial(&p, head));
    let trust = trust_pem_as(
        ca.pem.as_bytes(),
        Some((device.cert_pem.as_bytes(), device.key_pem.as_bytes())),
    )
    .unwrap();

    // The link does present its certificate to the same listener when it is the server.
    let mut link = TlsLink::new(Some(Arc::clone(&trust)));
    link.connect_tls("localhost", port, 5_000).unwrap();
    embedded_io::Write::write_all(&mut link, b"GET / HTTP/1.1\r\nRange: bytes=0-0\r\n\r\n")
        .unwrap();
    let mut one = [0u8; 1];
    while embedded_io::Read::read(&mut link, &mut one).is_ok_and(|n| n > 0) {}
    link.close();
    assert_eq!(*identities.lock().unwrap(), [true]);

    // Redirected there from the npub server: the same link, no certificate and no token.
    let (server, _) = serve(move |_| {
        redirect(
            "307 Temporary Redirect",
            &format!("https://localhost:{port}/bucket/p?sig=1"),
        )
    });
    let mut t = client(&server, TlsLink::new(Some(trust)));
    let mut buf = vec![0u8; 100];
    assert_eq!(t.fetch_pack(&[7; 32], 500, &mut buf), Ok(100));
    assert_eq!(buf, pack[500..600]);
    assert_eq!(*identities.lock().unwrap(), [true, false]);
}

#[test]
fn rejects_an_https_redirect_on_a_link_without_tls() {
    let (server, _) = serve(|_| redirect("307 Temporary Redirect", "https://127.0.0.1:1/p"));
    let mut t = client(&server, TcpLink::new());
    let mut buf = vec![0u8; 100];
    assert!(t.fetch_pack(&[7; 32], 0, &mut buf).is_err());
    assert_eq!(
        t.last_error(),
        Some(HttpError::Tls(
            device_agent::http_io::TlsFailure::Unsupported
        ))
    );
}
