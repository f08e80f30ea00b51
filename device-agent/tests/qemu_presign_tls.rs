//! Presigned downloads over TLS on target (issue 35 point 4, over issue 33's TLS): the npub server
//! speaks TLS (`--tls-cert`) and answers the firmware's pack requests with a 307 to a presigned
//! `https://` URL of its bucket (`--presign-downloads`; the bucket, s3s-fs on loopback, behind a
//! TLS front made here, as a bucket is reached over HTTPS in production). The firmware on QEMU
//! follows each hop through `Link::connect_tls_anonymous`: a second handshake, the bucket checked
//! against the same `--ca` anchor under the hop's host name. The pack is installed byte for byte,
//! every byte of it came through the bucket's TLS front and none from the server. A bucket whose
//! certificate another CA issued is refused before any request reaches it.
//!
//! Fails, never skips, without `qemu-system-arm` or `s3s-fs` (`.ci/run` installs both).
#[path = "../../server/tests/s3/bucket.rs"]
mod bucket;
/// The server tests' certificates (a CA, server certificates), made in the test.
#[path = "../../server/tests/tls/certs.rs"]
mod certs;
mod net;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use net::qemu::{Run, active_bytes, args};
use net::{Body, LiveServer};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const RUN: Duration = Duration::from_secs(300);
/// The names a certificate must carry: the host's loopback, and the same host as the guest
/// reaches it in QEMU's user network (the firmware connects to 10.0.2.2 for 127.0.0.1, and checks
/// the name the URL gives).
const NAMES: &[&str] = &["localhost", "127.0.0.1", "10.0.2.2"];

/// The two CAs of this test binary: the device's (`--ca`), which issues the server's certificate
/// and the good bucket's, and another one, which issues the bad bucket's.
struct Pki {
    ours: certs::Ca,
    other: certs::Ca,
    /// `ours` as a PEM file, for `--ca`.
    ours_file: PathBuf,
}

/// The CAs, made once per test binary. The server's S3 client trusts the system's roots, which
/// `SSL_CERT_FILE` replaces: here with both CAs, so that the server reaches either bucket and
/// only the device tells them apart.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ours = certs::Ca::new("npub test CA");
        let other = certs::Ca::new("another CA");
        let dir = tempfile::tempdir().unwrap().keep();
        let roots = dir.join("roots.pem");
        std::fs::write(&roots, format!("{}{}", ours.pem, other.pem)).unwrap();
        // SAFETY: every test of this binary calls `pki()` first, before it starts any thread or
        // server of its own, so no other thread of this process reads the environment meanwhile
        // (the others wait on this `OnceLock`).
        unsafe { std::env::set_var("SSL_CERT_FILE", &roots) };
        let ours_file = ours.write(&dir, "ca");
        Pki {
            ours,
            other,
            ours_file,
        }
    })
}

/// A TLS front for the bucket on 127.0.0.1:0 (its certificate `leaf`): every connection that
/// completes a handshake is forwarded byte for byte to `upstream`, so the request's `Host`
/// (which the presigned URL's signature covers) reaches s3s-fs as the client sent it.
struct TlsFront {
    /// `https://127.0.0.1:PORT`.
    url: String,
    /// Connections whose first request was a presigned `GET` (its signature in the query); a
    /// connection may carry more than one.
    presigned_gets: Arc<AtomicUsize>,
    /// Connections whose handshake did not complete.
    refused: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

impl TlsFront {
    fn start(upstream: &str, leaf: &certs::Leaf) -> Self {
        let upstream: SocketAddr = upstream
            .strip_prefix("http://")
            .expect("s3s-fs listens on http://")
            .parse()
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let presigned_gets = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let (gets, bad) = (Arc::clone(&presigned_gets), Arc::clone(&refused));
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, gets, bad) = (acceptor.clone(), Arc::clone(&gets), Arc::clone(&bad));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        bad.fetch_add(1, Ordering::SeqCst);
                        return;
                    };
                    let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    // The request line, to count the presigned downloads among the requests.
                    let mut first = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !first.windows(2).any(|w| w == b"\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => first.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = first.split(|&b| b == b'\r').next().unwrap_or_default();
                    if line.starts_with(b"GET ")
                        && line.windows(15).any(|w| w == b"X-Amz-Signature")
                    {
                        gets.fetch_add(1, Ordering::SeqCst);
                    }
                    if up.write_all(&first).await.is_ok() {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    }
                });
            }
        });
        Self {
            url,
            presigned_gets,
            refused,
            _rt: rt,
        }
    }
}

/// `npub_pack_bytes_served_total` from the server's metrics.
fn bytes_served(fleet: &LiveServer) -> u64 {
    let (status, body) = fleet.call(net::ADMIN, "GET", "/metrics", Body::None);
    assert_eq!(status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("npub_pack_bytes_served_total "))
        .expect("the counter is exported")
        .trim()
        .parse()
        .unwrap()
}

/// A bucket behind a TLS front whose certificate `bucket_ca` issued, and an npub server over TLS
/// (its certificate from the device's CA) that keeps its packs there and presigns downloads.
fn start(dir: &Path, bucket_ca: &certs::Ca) -> (bucket::S3Server, TlsFront, LiveServer) {
    let s3 = bucket::S3Server::start(&dir.join("s3"))
        .expect("s3s-fs is installed (.ci/run installs it)");
    let front = TlsFront::start(&s3.endpoint, &bucket_ca.server(NAMES, certs::Validity::Now));
    assert!(front.url.starts_with("https://127.0.0.1:"), "{}", front.url);
    let settings = s3.settings_via(&front.url);
    let (cert, key) = pki()
        .ours
        .server(NAMES, certs::Validity::Now)
        .write(dir, "server");
    let fleet = LiveServer::start_with(
        &dir.join("server"),
        Some(Box::new(move |c| {
            c.tls_cert = Some(cert.clone());
            c.tls_key = Some(key.clone());
            c.admin_listen = Some("127.0.0.1:0".parse().unwrap());
            c.pack_store = Some(format!("s3://{}/packs", bucket::BUCKET));
            c.presign_downloads = true;
            c.aws_overrides = settings.clone();
        })),
    );
    assert!(
        fleet.device_url.starts_with("https://"),
        "{}",
        fleet.device_url
    );
    (s3, front, fleet)
}

#[test]
fn the_firmware_follows_a_presigned_redirect_to_an_https_bucket() {
    let pki = pki();
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let (_s3, front, fleet) = start(dir.path(), &pki.ours);
    let pack = fleet.upload("kws", "2.0.0", net::big_pack(256 << 10));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let served = bytes_served(&fleet);
    let s = fleet.deploy("kws", "2.0.0", "lab");
    let mut argv = args(
        &fleet.device_url,
        &token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    argv.extend(["--ca", pki.ours_file.to_str().unwrap()]);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(
        log.contains(&format!("installed: sequence {s} in slot")),
        "{log}"
    );
    assert!(active_bytes(&flash, pack.len()) == pack);
    assert_eq!(
        bytes_served(&fleet),
        served,
        "every pack byte came from the bucket"
    );
    let gets = front.presigned_gets.load(Ordering::SeqCst);
    assert!(gets >= 1, "the pack came through the bucket's TLS front");
    assert_eq!(front.refused.load(Ordering::SeqCst), 0, "{log}");
    // A handshake with the server for the manifest, and one per hop to the bucket: the count the
    // firmware prints is of both.
    let handshakes: u32 = log
        .lines()
        .find_map(|l| {
            l.strip_prefix("tls: ")?
                .split_once(" handshakes so far")?
                .0
                .parse()
                .ok()
        })
        .expect("the handshake count");
    assert!(handshakes as usize > gets, "{handshakes} handshakes: {log}");
    let line = log
        .lines()
        .find(|l| l.starts_with("download: ") && l.contains(" bytes in "))
        .expect("the download line");
    println!("presigned over TLS: {gets} presigned GETs, {handshakes} handshakes; {line}");
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_sequence"], s, "{dev}");
}

#[test]
fn rejects_a_redirect_to_a_bucket_the_ca_file_does_not_vouch_for() {
    let pki = pki();
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let (_s3, front, fleet) = start(dir.path(), &pki.other);
    fleet.upload("kws", "2.0.0", net::big_pack(64 << 10));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let s = fleet.deploy("kws", "2.0.0", "lab");
    let mut argv = args(
        &fleet.device_url,
        &token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    argv.extend(["--ca", pki.ours_file.to_str().unwrap(), "--attempts", "1"]);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("TLS: the server's certificate is not issued by the CA given"),
        "{log}"
    );
    assert!(!log.contains("installed: "), "{log}");
    assert!(
        front.refused.load(Ordering::SeqCst) >= 1,
        "the firmware reached the bucket and refused it: {log}"
    );
    assert_eq!(
        front.presigned_gets.load(Ordering::SeqCst),
        0,
        "no request reached the bucket: {log}"
    );
    let dev = fleet.device("dev-1");
    assert_ne!(dev["current_sequence"], s, "{dev}");
}
