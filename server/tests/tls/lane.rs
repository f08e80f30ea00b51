//! The device lane over TLS: polls and pack downloads answered by the lane itself, and sessions
//! resumed, on one server and across replicas sharing `--tls-ticket-key`.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use npub_core::manifest::MANIFEST_V2_BYTES;
use rustls::client::{Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use serde_json::json;
use sha2::Digest as _;

use crate::client::{self, Answer};
use crate::support::{deploy, fleet, provision};
use crate::{TlsServer, certs::Ca};

async fn poll(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    token: &str,
) -> Answer {
    client::get(stream, "/api/v1/device/manifest", token, "")
        .await
        .unwrap()
}

#[tokio::test]
async fn serves_polls_and_pack_downloads_over_tls_from_the_device_lane() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |_| {}).await;
    fleet(&s.server).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let pack = s.server.download("kws", "2.0.0").await;
    deploy(
        &s.server,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;

    let config = client::config(&s.ca.pem, None);
    let mut tls = client::connect(&config, s.addr).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    let before = s.server.state.metrics.lane_answers();
    let manifest = poll(&mut tls, &tokens[0]).await;
    assert_eq!(manifest.status, 200, "{manifest:?}");
    // kws 2.0.0 has a golden vector: a version-2 manifest.
    assert_eq!(manifest.body.len(), MANIFEST_V2_BYTES);
    let sha = sha2::Sha256::digest(&pack);
    let path = format!("/api/v1/device/packs/{}", crate::support::hex(&sha));

    // A range across a TLS record boundary, then the whole pack, on the same connection.
    let range = client::get(&mut tls, &path, &tokens[0], "Range: bytes=100-20099\r\n")
        .await
        .unwrap();
    assert_eq!(range.status, 206, "{range:?}");
    assert_eq!(
        range.header("content-range"),
        Some(format!("bytes 100-20099/{}", pack.len()).as_str())
    );
    assert_eq!(range.body, pack[100..20100]);
    let whole = client::get(&mut tls, &path, &tokens[0], "").await.unwrap();
    assert_eq!(whole.status, 200);
    assert!(whole.body == pack, "the whole pack, byte for byte");
    assert_eq!(
        s.server.state.metrics.lane_answers() - before,
        3,
        "the lane, not the router, answered all three"
    );
    s.server.stop().await;
}

#[tokio::test]
async fn resumes_a_session_on_the_next_connection() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |_| {}).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let config = client::config(&s.ca.pem, None);
    let mut first = client::connect(&config, s.addr).await.unwrap();
    // The tickets come after the handshake: read an answer to receive them.
    assert_eq!(poll(&mut first, &tokens[0]).await.status, 204);
    let mut second = client::connect(&config, s.addr).await.unwrap();
    assert_eq!(
        second.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
    assert_eq!(poll(&mut second, &tokens[0]).await.status, 204);
    assert_eq!(s.server.state.metrics.tls_handshakes("resumed"), 1);
    assert_eq!(s.server.state.metrics.tls_handshakes("full"), 1);
    s.server.stop().await;
}

/// rustls's client cache, counting the TLS 1.3 tickets the server sends.
#[derive(Debug)]
struct CountingTickets {
    inner: rustls::client::ClientSessionMemoryCache,
    received: std::sync::atomic::AtomicUsize,
}

impl rustls::client::ClientSessionStore for CountingTickets {
    fn set_kx_hint(&self, name: ServerName<'static>, group: rustls::NamedGroup) {
        self.inner.set_kx_hint(name, group);
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(&self, name: ServerName<'static>, v: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(name, v);
    }
    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.inner.remove_tls12_session(name);
    }
    fn insert_tls13_ticket(&self, name: ServerName<'static>, v: Tls13ClientSessionValue) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.inner.insert_tls13_ticket(name, v);
    }
    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(name)
    }
}

#[tokio::test]
async fn resumes_every_next_connection_with_the_one_ticket_each_handshake_sends() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |_| {}).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let store = Arc::new(CountingTickets {
        inner: rustls::client::ClientSessionMemoryCache::new(8),
        received: AtomicUsize::new(0),
    });
    let mut config = (*client::config(&s.ca.pem, None)).clone();
    config.resumption = rustls::client::Resumption::store(Arc::clone(&store) as _);
    let config = Arc::new(config);
    // A device polling five times, a new connection each: full, then resumed four times.
    for i in 0..5 {
        let mut tls = client::connect(&config, s.addr).await.unwrap();
        let want = if i == 0 {
            rustls::HandshakeKind::Full
        } else {
            rustls::HandshakeKind::Resumed
        };
        assert_eq!(tls.get_ref().1.handshake_kind(), Some(want), "poll {i}");
        assert_eq!(poll(&mut tls, &tokens[0]).await.status, 204);
        assert_eq!(
            store.received.load(Ordering::Relaxed),
            i + 1,
            "one ticket per handshake, resumed ones too"
        );
    }
    assert_eq!(s.server.state.metrics.tls_handshakes("resumed"), 4);
    s.server.stop().await;
}

#[tokio::test]
async fn resumes_on_another_replica_sharing_the_ticket_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("tickets");
    std::fs::write(&keys, format!("{}\n", "5a".repeat(32))).unwrap();
    let ca = Ca::new("npub test CA");
    let ca_pem = ca.pem.clone();
    let key = keys.clone();
    let a = TlsServer::start_for(&dir.path().join("a"), ca, |c| c.tls_ticket_key = Some(key)).await;
    // The second replica: its own certificate, the same ticket keys.
    let ca_b = Ca::new("npub test CA");
    let b = TlsServer::start_for(&dir.path().join("b"), ca_b, |c| {
        c.tls_ticket_key = Some(keys)
    })
    .await;
    let tokens = provision(&a.server, "lab", &["dev-1"]).await;

    // One client trusting both CAs (each replica's certificate its own).
    let config = client::config(&format!("{ca_pem}{}", b.ca.pem), None);
    let mut first = client::connect(&config, a.addr).await.unwrap();
    assert_eq!(poll(&mut first, &tokens[0]).await.status, 204);
    let other = client::connect(&config, b.addr).await.unwrap();
    assert_eq!(
        other.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed),
        "a ticket sealed by replica a opens on replica b"
    );
    a.server.stop().await;
    b.server.stop().await;
}
