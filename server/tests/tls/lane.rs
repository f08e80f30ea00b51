//! The device lane over TLS: polls and pack downloads answered by the lane itself, and sessions
//! resumed, on one server and across replicas sharing `--tls-ticket-key`.
use npub_core::manifest::MANIFEST_V2_BYTES;
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
