//! npub-tls against the real npub-server speaking TLS (rustls, tickets on) on 127.0.0.1:0, with
//! certificates made in the test: a full handshake and a "nothing new" poll, a resumed one
//! (no certificate, fewer bytes), the refusals of a wrong CA, another host name, an expired
//! certificate and a tampered record, and an unknown ticket falling back to a full handshake.
#[path = "../../server/tests/tls/certs.rs"]
mod certs;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use certs::{Ca, Leaf, Validity};
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use npub_server::{Config as ServerConfig, Server};
use npub_tls::{Anchor, CertError, Client, Config, Error, Refusal, Ticket};
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
    let request = format!(
        "GET /api/v1/device/manifest?seq=0 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let mut sent = 0;
    while sent < request.len() {
        sent += client.write(tcp, &request.as_bytes()[sent..]).unwrap();
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match client.read(tcp, &mut buf) {
            Ok(0) | Err(Error::Closed) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A server with a certificate of a fresh CA for localhost and 127.0.0.1; the CA.
fn fleet(dir: &Path) -> (Fleet, Ca) {
    let ca = Ca::new("npub-tls test CA");
    let leaf = ca.server(&["localhost", "127.0.0.1"], Validity::Now);
    (Fleet::start(dir, &leaf), ca)
}

/// The handshake with `ca` as the anchor and `host` as the name; the error if refused.
fn handshake_with(fleet: &Fleet, ca_pem: &str, host: &str) -> Result<npub_tls::Handshake, Error> {
    let mut der = [0u8; 2048];
    let anchor = Anchor::from_pem(ca_pem.as_bytes(), &mut der).unwrap();
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let mut tcp = Tcp::connect(fleet.addr);
    let config = Config {
        host,
        anchor: &anchor,
        now: now(),
        resume: true,
    };
    client.handshake(&mut tcp, &config, &mut OsRng)
}

#[test]
fn a_poll_resumes_the_session_of_the_poll_before_with_fewer_bytes_and_no_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = Anchor::from_pem(ca.pem.as_bytes(), &mut der).unwrap();
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: now(),
        resume: true,
    };

    let mut tcp = Tcp::connect(fleet.addr);
    let full = client.handshake(&mut tcp, &config, &mut OsRng).unwrap();
    assert!(!full.resumed);
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    client.close(&mut tcp);
    let full_bytes = tcp.received + tcp.sent;
    assert!(client.ticket().is_some(), "the server sent a ticket");

    let mut tcp = Tcp::connect(fleet.addr);
    let resumed = client.handshake(&mut tcp, &config, &mut OsRng).unwrap();
    // Resumed: the state machine went from EncryptedExtensions to Finished, so the server
    // sent no Certificate (one would have been refused as an unexpected message).
    assert!(resumed.resumed, "{resumed:?}");
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    client.close(&mut tcp);
    let resumed_bytes = tcp.received + tcp.sent;
    eprintln!("nothing-new poll on the wire: full {full_bytes} B, resumed {resumed_bytes} B");
    assert!(
        resumed_bytes <= RESUMED_POLL_BUDGET,
        "{resumed_bytes} B for a resumed poll"
    );
    assert!(resumed_bytes < full_bytes);

    // The session it resumed gave a ticket again: the next poll resumes too.
    let mut tcp = Tcp::connect(fleet.addr);
    assert!(
        client
            .handshake(&mut tcp, &config, &mut OsRng)
            .unwrap()
            .resumed
    );
    assert_eq!(poll(&mut client, &mut tcp, "127.0.0.1", &token), 204);
}

#[test]
fn an_unknown_ticket_falls_back_to_a_full_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ca) = fleet(dir.path());
    let token = fleet.device();
    let mut der = [0u8; 2048];
    let anchor = Anchor::from_pem(ca.pem.as_bytes(), &mut der).unwrap();
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: now(),
        resume: true,
    };
    let mut tcp = Tcp::connect(fleet.addr);
    client.handshake(&mut tcp, &config, &mut OsRng).unwrap();
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    // The ticket as a firmware would store it, one byte of the server's opaque part changed.
    let mut record = client.ticket().unwrap().to_record();
    record[86 + 20] ^= 0x55;
    client.set_ticket(Some(Ticket::from_record(&record).unwrap()));

    let mut tcp = Tcp::connect(fleet.addr);
    let again = client.handshake(&mut tcp, &config, &mut OsRng).unwrap();
    assert!(
        !again.resumed,
        "the server cannot open the ticket: a full handshake"
    );
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    assert!(client.ticket().is_some(), "and a new ticket");
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
    let anchor = Anchor::from_pem(ca.pem.as_bytes(), &mut der).unwrap();
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: now(),
        resume: true,
    };
    let mut tcp = Tcp::connect(fleet.addr);
    // A ServerHello for secp256r1 without a PSK is 5 + 4 + 2 + 32 + 1 + 2 + 1 + 2 + 6 + 73 = 128
    // bytes, rustls's ChangeCipherSpec 6; the encrypted EncryptedExtensions' header 5 more.
    tcp.tamper_at = Some(128 + 6 + 5 + 3);
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    assert_eq!(
        client.handshake(&mut tcp, &config, &mut OsRng),
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
    let anchor = Anchor::from_pem(ca.pem.as_bytes(), &mut der).unwrap();
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let mut config = Config {
        host: "localhost",
        anchor: &anchor,
        now: now(),
        resume: true,
    };
    let mut tcp = Tcp::connect(fleet.addr);
    client.handshake(&mut tcp, &config, &mut OsRng).unwrap();
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    let kept = client.ticket().unwrap().to_record();
    eprintln!(
        "the server's ticket: {} B of identity",
        client.ticket().unwrap().identity().len()
    );

    // A redirect's hop: a full handshake, and its own tickets are not kept.
    config.resume = false;
    let mut tcp = Tcp::connect(fleet.addr);
    assert!(
        !client
            .handshake(&mut tcp, &config, &mut OsRng)
            .unwrap()
            .resumed
    );
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    assert_eq!(client.ticket().unwrap().to_record(), kept);

    // Another host's connection does not offer it, so does not use it up.
    config.resume = true;
    config.host = "127.0.0.1";
    let mut tcp = Tcp::connect(fleet.addr);
    assert!(
        !client
            .handshake(&mut tcp, &config, &mut OsRng)
            .unwrap()
            .resumed
    );
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
    let anchor = Anchor::from_pem(ca.pem.as_bytes(), &mut der).unwrap();
    let mut bufs = Buffers::new();
    let mut client = bufs.client();
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: now(),
        resume: true,
    };
    let mut tcp = Tcp::connect(fleet.addr);
    assert!(
        !client
            .handshake(&mut tcp, &config, &mut OsRng)
            .unwrap()
            .resumed
    );
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
    let mut tcp = Tcp::connect(fleet.addr);
    assert!(
        client
            .handshake(&mut tcp, &config, &mut OsRng)
            .unwrap()
            .resumed
    );
    assert_eq!(poll(&mut client, &mut tcp, "localhost", &token), 204);
}
