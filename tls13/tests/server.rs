//! npub-tls against the real npub-server speaking TLS (rustls, tickets on) on 127.0.0.1:0, with
//! certificates made in the test: a full handshake and a "nothing new" poll over x25519, resumed
//! ones (no certificate, no new ticket, fewer bytes), the refusals of a wrong CA, another host
//! name, an expired certificate and a tampered record, an unknown ticket falling back to a full
//! handshake, the server closing after the client's `close_notify`, and a rustls server that
//! insists on secp256r1 answered after its HelloRetryRequest.
#[path = "../../server/tests/tls/certs.rs"]
mod certs;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use certs::{Ca, Leaf, Validity};
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use npub_server::{Config as ServerConfig, Server};
use npub_tls::hello::{SECP256R1, X25519};
use npub_tls::{Anchor, CertError, Client, Config, Error, Handshake, Refusal, Ticket};
use rand_core::OsRng;
use serde_json::{Value, json};

const ADMIN: &str = "npub_op_tls13-admin-0123456789abcdef0123456789abcdef";
/// Issue 33's target for a resumed "nothing new" poll, both directions.
const RESUMED_POLL_BUDGET: u64 = 1500;

/// A real server with `leaf` on its TLS listener, the operator API on a plain one.
struct Fleet {
    addr: SocketAddr,
    admin_url: String,
    rt: tokio::runtime::Runtime,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Fleet {
    fn start(dir: &Path, leaf: &Leaf) -> Self {
        Self::start_with(dir, leaf, |_| {})
    }

    /// [`Self::start`], the configuration changed by `tweak`.
    fn start_with(dir: &Path, leaf: &Leaf, tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let (cert, key) = leaf.write(dir, "server");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config = ServerConfig::new(dir.join("data"), "127.0.0.1:0".parse().unwrap());
        config.admin_token = Some(ADMIN.into());
        config.log = "warn".into();
        config.tls_cert = Some(cert);
        config.tls_key = Some(key);
        config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
        tweak(&mut config);
        let server = rt.block_on(Server::start(config)).expect("server starts");
        let addr = server.local_addr();
        let admin_url = format!("http://{}", server.admin_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        rt.spawn(server.run(async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            admin_url,
            rt,
            _shutdown: tx,
        }
    }

    /// A device's token.
    fn device(&self) -> String {
        let body =
            json!({"devices": [{"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}]});
        let r = reqwest::blocking::Client::new()
            .post(format!("{}/api/v1/devices", self.admin_url))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        let v: Value = r.json().unwrap();
        v[0]["token"].as_str().unwrap().to_owned()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let rt = std::mem::replace(
            &mut self.rt,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        );
        rt.shutdown_timeout(Duration::from_secs(5));
    }
}

/// A TCP connection as embedded-io sees it, counting the bytes both ways, and able to flip
/// one bit of what it receives.
struct Tcp {
    stream: TcpStream,
    received: u64,
    sent: u64,
    /// Flip the low bit of the byte at this offset of the received stream.
    tamper_at: Option<u64>,
}

impl Tcp {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self {
            stream,
            received: 0,
            sent: 0,
            tamper_at: None,
        }
    }
}

impl ErrorType for Tcp {
    type Error = ErrorKind;
}

impl Read for Tcp {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let n = self.stream.read(buf).map_err(|_| ErrorKind::Other)?;
        if let Some(at) = self.tamper_at {
            if (self.received..self.received + n as u64).contains(&at) {
                buf[(at - self.received) as usize] ^= 1;
            }
        }
        self.received += n as u64;
        Ok(n)
    }
}

impl Write for Tcp {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        let n = self.stream.write(buf).map_err(|_| ErrorKind::Other)?;
        self.sent += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        self.stream.flush().map_err(|_| ErrorKind::Other)
    }
}

/// The client's two buffers, as the firmware sizes them.
struct Buffers {
    read: Vec<u8>,
    write: Vec<u8>,
}

impl Buffers {
    fn new() -> Self {
        Self {
            read: vec![0; npub_tls::READ_BUFFER_MIN],
            write: vec![0; 2048],
        }
    }

    fn client(&mut self) -> Client<'_> {
        Client::new(&mut self.read, &mut self.write).unwrap()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// One "nothing new" poll on an open connection: the status line's code. The server closes
/// after it (`Connection: close`), and the client reads to the end, taking tickets on the way.
fn poll(client: &mut Client<'_>, tcp: &mut Tcp, host: &str, token: &str) -> u16 {
    send_poll(client, tcp, host, token, "close");
    let answer = read_to_end(client, tcp);
    status(&answer)
}

/// Writes a poll's request with the `Connection` header given.
fn send_poll(client: &mut Client<'_>, tcp: &mut Tcp, host: &str, token: &str, connection: &str) {
    let request = format!(
        "GET /api/v1/device/manifest?seq=0 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: {connection}\r\n\r\n"
    );
    let mut sent = 0;
    while sent < request.len() {
        sent += client.write(tcp, &request.as_bytes()[sent..]).unwrap();
    }
}

/// What the server sends until it closes.
fn read_to_end(client: &mut Client<'_>, tcp: &mut Tcp) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match client.read(tcp, &mut buf) {
            Ok(0) | Err(Error::Closed) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    answer
}

/// An answer's status code.
fn status(answer: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(answer);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A server with a certificate of a fresh CA for localhost and 127.0.0.1; the CA.
fn fleet(dir: &Path) -> (Fleet, Ca) {
    let ca = Ca::new("npub-tls test CA");
    let leaf = ca.server(&["localhost", "127.0.0.1"], Validity::Now);
    (Fleet::start(dir, &leaf), ca)
}

/// The anchor of `ca_pem`, parsed into `der`.
fn anchor<'d>(ca_pem: &str, der: &'d mut [u8; 2048]) -> Anchor<'d> {
    Anchor::from_pem(ca_pem.as_bytes(), der).unwrap()
}

/// A device's configuration: `host`, checked against `anchor`, now, resuming.
fn config<'a>(host: &'a str, anchor: &'a Anchor<'a>) -> Config<'a> {
    Config {
        host,
        anchor,
        now: now(),
        resume: true,
    }
}

/// A connection to `addr` and its handshake, which must succeed.
fn connect(client: &mut Client<'_>, addr: SocketAddr, config: &Config<'_>) -> (Handshake, Tcp) {
    let mut tcp = Tcp::connect(addr);
    let done = client.handshake(&mut tcp, config, &mut OsRng).unwrap();
    (done, tcp)
}

/// One nothing-new poll on a connection of its own, as the firmware makes it: connect,
/// handshake, the poll (204), `close_notify`. How the handshake went and the bytes both ways.
fn poll_once(
    client: &mut Client<'_>,
    fleet: &Fleet,
    config: &Config<'_>,
    token: &str,
) -> (Handshake, u64) {
    let (done, mut tcp) = connect(client, fleet.addr, config);
    assert_eq!(poll(client, &mut tcp, config.host, token), 204);
    client.close(&mut tcp);
    (done, tcp.received + tcp.sent)
}

/// The handshake with `ca` as the anchor and `host` as the name; the error if refused.
fn handshake_with(fleet: &Fleet, ca_pem: &str, host: &str) -> Result<Handshake, Error> {
    let mut der = [0u8; 2048];
    let anchor = anchor(ca_pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let mut tcp = Tcp::connect(fleet.addr);
    client.handshake(&mut tcp, &config(host, &anchor), &mut OsRng)
}

#[test]
fn a_poll_resumes_the_session_of_the_poll_before_with_fewer_bytes_and_no_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = config("localhost", &anchor);

    let (full, full_bytes) = poll_once(&mut client, &fleet, &config, &token);
    assert!(!full.resumed && !full.retried, "{full:?}");
    assert_eq!(full.group, X25519, "rustls takes the x25519 share offered");
    let ticket = client
        .ticket()
        .expect("the server sent a ticket")
        .to_record();

    // Resumed: the state machine went from EncryptedExtensions to Finished, so the server
    // sent no Certificate (one would have been refused as an unexpected message).
    let (resumed, resumed_bytes) = poll_once(&mut client, &fleet, &config, &token);
    assert!(resumed.resumed, "{resumed:?}");
    eprintln!("nothing-new poll on the wire: full {full_bytes} B, resumed {resumed_bytes} B");
    assert!(
        resumed_bytes <= RESUMED_POLL_BUDGET,
        "{resumed_bytes} B for a resumed poll"
    );
    assert!(resumed_bytes < full_bytes);
    // The ClientHello asked for no ticket after a resumed handshake (RFC 9149): the server sent
    // none, and the client keeps the one it has.
    assert_eq!(client.ticket().unwrap().to_record(), ticket);

    // The same ticket resumes the next poll too.
    let (again, again_bytes) = poll_once(&mut client, &fleet, &config, &token);
    assert!(again.resumed);
    assert_eq!(
        again_bytes, resumed_bytes,
        "each resumed poll the same bytes"
    );
    assert_eq!(client.ticket().unwrap().to_record(), ticket);
}

#[test]
fn an_unknown_ticket_falls_back_to_a_full_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = config("localhost", &anchor);
    poll_once(&mut client, &fleet, &config, &token);
    // The ticket as a firmware would store it, one byte of the server's opaque part changed.
    let mut record = client.ticket().unwrap().to_record();
    record[86 + 20] ^= 0x55;
    client.set_ticket(Some(Ticket::from_record(&record).unwrap()));

    let (again, _) = poll_once(&mut client, &fleet, &config, &token);
    assert!(
        !again.resumed,
        "the server cannot open the ticket: a full handshake"
    );
    let new = client.ticket().expect("and a new ticket").to_record();
    assert_ne!(new, record, "the refused one is not kept");
}

#[test]
fn the_server_closes_the_connection_after_the_clients_close_notify() {
    // The firmware's close: the request keeps the connection alive; after the answer the
    // client sends close_notify and waits for the server's FIN before it resets, so no frame
    // of the server's crosses the reset.
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = config("localhost", &anchor);
    let (_, mut tcp) = connect(&mut client, fleet.addr, &config);
    send_poll(&mut client, &mut tcp, "localhost", &token, "keep-alive");
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = client.read(&mut tcp, &mut buf).unwrap();
        assert!(n > 0, "the answer ends before the connection");
        answer.extend_from_slice(&buf[..n]);
    }
    assert_eq!(status(&answer), 204);
    client.close(&mut tcp);
    tcp.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = [0u8; 64];
    assert_eq!(
        tcp.stream.read(&mut rest).unwrap(),
        0,
        "the server closes, sending nothing more"
    );
}

#[test]
fn rejects_a_server_of_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, _) = fleet(dir.path());
    let other = Ca::new("another CA");
    assert_eq!(
        handshake_with(&fleet, &other.pem, "localhost"),
        Err(Error::Certificate(CertError::UnknownCa))
    );
}

#[test]
fn rejects_a_certificate_for_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    assert_eq!(
        handshake_with(&fleet, &ca.pem, "npub.example"),
        Err(Error::Certificate(CertError::WrongHostName))
    );
}

#[test]
fn rejects_an_expired_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("npub-tls test CA");
    let leaf = ca.server(&["localhost", "127.0.0.1"], Validity::Expired);
    let fleet = Fleet::start(dir.path(), &leaf);
    assert_eq!(
        handshake_with(&fleet, &ca.pem, "127.0.0.1"),
        Err(Error::Certificate(CertError::Expired))
    );
}

#[test]
fn rejects_a_tampered_record() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut tcp = Tcp::connect(fleet.addr);
    // A ServerHello for x25519 without a PSK is 5 + 4 + 2 + 32 + 1 + 2 + 1 + 2 + 6 + 40 = 95
    // bytes, rustls's ChangeCipherSpec 6; the encrypted EncryptedExtensions' header 5 more.
    tcp.tamper_at = Some(95 + 6 + 5 + 3);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    assert_eq!(
        client.handshake(&mut tcp, &config("localhost", &anchor), &mut OsRng),
        Err(Error::Refused(Refusal::BadRecordMac))
    );
    assert!(!client.is_open());
}

#[test]
fn a_connection_that_must_not_resume_neither_offers_nor_replaces_the_ticket() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let mut config = config("localhost", &anchor);
    poll_once(&mut client, &fleet, &config, &token);
    let kept = client.ticket().unwrap().to_record();
    eprintln!(
        "the server's ticket: {} B of identity",
        client.ticket().unwrap().identity().len()
    );

    // A redirect's hop: a full handshake, and its own tickets are not kept.
    config.resume = false;
    assert!(!poll_once(&mut client, &fleet, &config, &token).0.resumed);
    assert_eq!(client.ticket().unwrap().to_record(), kept);

    // Another host's connection does not offer it, so does not use it up.
    config.resume = true;
    config.host = "127.0.0.1";
    let (done, mut tcp) = connect(&mut client, fleet.addr, &config);
    assert!(!done.resumed);
    client.close(&mut tcp);
    assert_eq!(client.ticket().unwrap().to_record(), kept);
}

#[test]
fn a_server_that_sends_one_intermediate_is_checked_through_it() {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let root_key = KeyPair::generate().unwrap();
    let mut root = CertificateParams::new(Vec::<String>::new()).unwrap();
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    root.distinguished_name.push(DnType::CommonName, "root");
    let root_pem = root.self_signed(&root_key).unwrap().pem();
    let root = Issuer::new(root, root_key);
    let mid_key = KeyPair::generate().unwrap();
    let mut mid = CertificateParams::new(Vec::<String>::new()).unwrap();
    mid.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    mid.distinguished_name
        .push(DnType::CommonName, "intermediate");
    let mid_cert = mid.signed_by(&mid_key, &root).unwrap();
    let mid = Issuer::new(mid, mid_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &mid).unwrap();
    let leaf = Leaf {
        cert_pem: format!("{}{}", cert.pem(), mid_cert.pem()),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
    };
    let fleet = Fleet::start(dir.path(), &leaf);
    let done = handshake_with(&fleet, &root_pem, "localhost").unwrap();
    assert!(!done.resumed);
}

#[test]
fn a_server_that_asks_for_a_client_certificate_gets_an_empty_one_and_the_token_serves() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("npub-tls test CA");
    let devices = Ca::new("device CA");
    let devices_pem = devices.write(dir.path(), "devices");
    let leaf = ca.server(&["localhost", "127.0.0.1"], Validity::Now);
    let fleet = Fleet::start_with(&dir.path().join("srv"), &leaf, |c| {
        c.client_ca = Some(devices_pem.clone());
    });
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = config("localhost", &anchor);
    let (full, _) = poll_once(&mut client, &fleet, &config, &token);
    assert!(!full.resumed && full.certificate_requested);
    assert!(poll_once(&mut client, &fleet, &config, &token).0.resumed);
}

/// A rustls server on 127.0.0.1:0 that offers only secp256r1 and answers every connection's
/// request with a 204 and closes: a server that insists on the group the firmware can fall
/// back to. Its address; it serves `connections` connections.
fn p256_only_server(leaf: &Leaf, connections: usize) -> SocketAddr {
    use rustls::pki_types::pem::PemObject as _;
    let chain = vec![leaf.der.clone()];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = vec![rustls::crypto::ring::kx_group::SECP256R1];
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    server.send_tls13_tickets = 1;
    let server = Arc::new(server);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let mut stream = stream.unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let conn = rustls::ServerConnection::new(Arc::clone(&server)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, &mut stream);
            let mut head = Vec::new();
            let mut buf = [0u8; 512];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tls.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n");
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    addr
}

#[test]
fn a_server_that_insists_on_secp256r1_is_answered_after_its_hello_retry_request() {
    let ca = Ca::new("npub-tls test CA");
    let leaf = ca.server(&["localhost"], Validity::Now);
    let addr = p256_only_server(&leaf, 2);
    let mut der = [0u8; 2048];
    let anchor = anchor(&ca.pem, &mut der);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = config("localhost", &anchor);
    for resumed in [false, true] {
        let (done, mut tcp) = connect(&mut client, addr, &config);
        assert!(done.retried, "{done:?}");
        assert_eq!(done.group, SECP256R1);
        assert_eq!(done.resumed, resumed, "{done:?}");
        assert_eq!(poll(&mut client, &mut tcp, "localhost", "t"), 204);
    }
}
