//! The handshake's bounds: a client that stalls in it is closed and counted, and the per-peer
//! cap holds handshaking connections as it holds any other.
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::TlsServer;

/// A TLS record header announcing a ClientHello of 80 bytes, and then nothing.
const STALLED_HELLO: &[u8] = &[0x16, 0x03, 0x01, 0x00, 0x50, 0x01];

/// Reads until the server closes; what it sent.
async fn until_closed(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got).await;
    got
}

#[tokio::test]
async fn rejects_a_client_that_stalls_mid_handshake_once_the_timeout_passes() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |c| c.tls_handshake_timeout = 1).await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    tcp.write_all(STALLED_HELLO).await.unwrap();
    // The server closes the connection without a byte of answer.
    assert!(until_closed(&mut tcp).await.is_empty());
    s.wait_for_metric("npub_tls_handshakes_total{outcome=\"timeout\"} 1")
        .await;
    s.server.stop().await;
}

#[tokio::test]
async fn rejects_plain_http_on_the_tls_listener_as_a_failed_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |_| {}).await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    tcp.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut tcp).await;
    assert!(!answer.starts_with(b"HTTP/"), "no plain answer");
    s.wait_for_metric("npub_tls_handshakes_total{outcome=\"failed\"} 1")
        .await;
    s.server.stop().await;
}

#[tokio::test]
async fn sheds_a_stalled_handshake_when_its_peer_reaches_the_per_peer_cap() {
    let dir = tempfile::tempdir().unwrap();
    // A handshake timeout that never fires during the test: only the cap closes anything.
    let s = TlsServer::start(dir.path(), |c| {
        c.max_connections_per_peer = 2;
        c.tls_handshake_timeout = 3600;
    })
    .await;
    let mut first = TcpStream::connect(s.addr).await.unwrap();
    first.write_all(STALLED_HELLO).await.unwrap();
    let mut second = TcpStream::connect(s.addr).await.unwrap();
    second.write_all(STALLED_HELLO).await.unwrap();
    // The third from the same address: the oldest idle one (the first) makes room.
    let config = crate::client::config(&s.ca.pem, None);
    let third = crate::client::connect(&config, s.addr).await;
    assert!(third.is_ok(), "{:?}", third.err());
    assert!(until_closed(&mut first).await.is_empty());
    s.wait_for_metric("npub_connections_shed_total{reason=\"peer\"} 1")
        .await;
    drop(second);
    s.server.stop().await;
}

/// A client that speaks TLS 1.2 only.
fn tls12_client(ca_pem: &str) -> std::sync::Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::pem_slice_iter(
            ca_pem.as_bytes(),
        )
    {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[tokio::test]
async fn rejects_tls12_unless_the_flag_asks_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let only13 = TlsServer::start(&dir.path().join("a"), |_| {}).await;
    let refused = crate::client::connect(&tls12_client(&only13.ca.pem), only13.addr).await;
    assert!(refused.is_err(), "TLS 1.2 refused by default");
    only13.server.stop().await;

    let both = TlsServer::start(&dir.path().join("b"), |c| c.tls12 = true).await;
    let tls = crate::client::connect(&tls12_client(&both.ca.pem), both.addr)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    both.server.stop().await;
}

#[tokio::test]
async fn rejects_a_connection_past_the_per_peer_cap_by_closing_it_without_a_plain_answer() {
    let dir = tempfile::tempdir().unwrap();
    let s = TlsServer::start(dir.path(), |c| c.max_connections_per_peer = 1).await;
    s.server.create_model("kws").await;
    let config = crate::client::config(&s.ca.pem, None);
    // The one permit, held by a request being answered (an upload whose body is on its way), so
    // that there is no idle connection to close for the next one.
    let mut busy = crate::client::connect(&config, s.addr).await.unwrap();
    let head = format!(
        "POST /api/v1/models/kws/versions/9.9.9 HTTP/1.1\r\nHost: localhost\r\n\
         Authorization: Bearer {}\r\nContent-Length: 100000\r\n\r\npart of it",
        crate::common::ADMIN
    );
    busy.write_all(head.as_bytes()).await.unwrap();
    busy.flush().await.unwrap();
    // The upload is in the router once it is counted in flight.
    for _ in 0..6000 {
        if s.server.state.uploads.available_permits() < 16 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut refused = TcpStream::connect(s.addr).await.unwrap();
    refused.write_all(STALLED_HELLO).await.unwrap();
    let said = until_closed(&mut refused).await;
    assert!(!said.starts_with(b"HTTP/"), "no plain 503 on a TLS port");
    s.wait_for_metric("npub_connections_refused_total{reason=\"peer\"} 1")
        .await;
    drop(busy);
    s.server.stop().await;
}
