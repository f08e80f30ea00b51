//! Device certificates (`--client-ca`): one from the CA naming the token's device is taken; one
//! from another CA, an expired one, or one naming another device is refused, each counted by its
//! reason.
use std::path::Path;

use crate::TlsServer;
use crate::certs::{Ca, Validity};
use crate::client;
use crate::support::provision;

/// A server asking for device certificates of `devices` (written to `dir/tls/devices.pem`).
async fn start(dir: &Path, devices: &Ca) -> TlsServer {
    let files = dir.join("tls");
    std::fs::create_dir_all(&files).unwrap();
    let ca = devices.write(&files, "devices");
    TlsServer::start(dir, |c| c.client_ca = Some(ca)).await
}

#[tokio::test]
async fn accepts_a_device_certificate_naming_the_tokens_device() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let cert = devices.device("dev-1", Validity::Now);
    let config = client::config(&s.ca.pem, Some(&cert));
    let mut tls = client::connect(&config, s.addr).await.unwrap();
    let answer = client::get(&mut tls, "/api/v1/device/manifest", &tokens[0], "")
        .await
        .unwrap();
    assert_eq!(answer.status, 204, "{answer:?}");
    // The router's routes too (the lane hands them over with the certificate's name).
    let device = client::get(&mut tls, "/api/v1/device", &tokens[0], "")
        .await
        .unwrap();
    assert_eq!(device.status, 200, "{device:?}");
    s.server.stop().await;
}

/// Connects with `cert` and polls with `token`: the answer, or the error that ended it.
async fn poll_with(s: &TlsServer, cert: &crate::certs::Leaf, token: &str) -> Result<u16, String> {
    let config = client::config(&s.ca.pem, Some(cert));
    // TLS 1.3: the client finishes its side before the server has judged its certificate, so
    // a refusal arrives as an alert on the first read.
    let mut tls = client::connect(&config, s.addr)
        .await
        .map_err(|e| e.to_string())?;
    client::get(&mut tls, "/api/v1/device/manifest", token, "")
        .await
        .map(|a| a.status)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn rejects_a_device_certificate_from_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let stranger = Ca::new("someone else").device("dev-1", Validity::Now);
    let refused = poll_with(&s, &stranger, &tokens[0]).await.unwrap_err();
    assert!(
        refused.contains("UnknownCA") || refused.contains("unknown"),
        "{refused}"
    );
    s.wait_for_metric("npub_tls_client_cert_rejections_total{reason=\"unknown_ca\"} 1")
        .await;
    s.server.stop().await;
}

#[tokio::test]
async fn rejects_an_expired_device_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    let tokens = provision(&s.server, "lab", &["dev-1"]).await;
    let expired = devices.device("dev-1", Validity::Expired);
    let refused = poll_with(&s, &expired, &tokens[0]).await.unwrap_err();
    assert!(refused.contains("CertificateExpired"), "{refused}");
    s.wait_for_metric("npub_tls_client_cert_rejections_total{reason=\"expired\"} 1")
        .await;
    s.server.stop().await;
}

#[tokio::test]
async fn rejects_a_device_certificate_naming_another_device_than_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    let tokens = provision(&s.server, "lab", &["dev-1", "dev-2"]).await;
    // dev-2's certificate with dev-1's token: a stolen token does not pass another's device.
    let other = devices.device("dev-2", Validity::Now);
    assert_eq!(poll_with(&s, &other, &tokens[0]).await, Ok(401));
    let metrics = s.metrics().await;
    assert!(
        metrics.contains("npub_tls_client_cert_rejections_total{reason=\"device_mismatch\"} 1"),
        "{metrics}"
    );
    // Its own token passes.
    assert_eq!(poll_with(&s, &other, &tokens[1]).await, Ok(204));
    s.server.stop().await;
}

#[tokio::test]
async fn accepts_a_device_certificate_alone_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    provision(&s.server, "lab", &["dev-1"]).await;
    let cert = devices.device("dev-1", Validity::Now);
    let config = client::config(&s.ca.pem, Some(&cert));
    let mut tls = client::connect(&config, s.addr).await.unwrap();
    let before = s.server.state.metrics.lane_answers();
    let poll = client::get(&mut tls, "/api/v1/device/manifest", "", "")
        .await
        .unwrap();
    assert_eq!(poll.status, 204, "{poll:?}");
    assert_eq!(
        s.server.state.metrics.lane_answers() - before,
        1,
        "the lane answered"
    );
    let device = client::get(&mut tls, "/api/v1/device", "", "")
        .await
        .unwrap();
    assert_eq!(device.status, 200, "{device:?}");
    let body: serde_json::Value = serde_json::from_slice(&device.body).unwrap();
    assert_eq!(body["id"], "dev-1", "{body}");
    s.server.stop().await;
}

#[tokio::test]
async fn rejects_a_device_certificate_alone_naming_no_enrolled_device() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    provision(&s.server, "lab", &["dev-1"]).await;
    let stranger = devices.device("dev-9", Validity::Now);
    assert_eq!(poll_with(&s, &stranger, "").await, Ok(401));
    let metrics = s.metrics().await;
    assert!(
        metrics.contains("npub_tls_client_cert_rejections_total{reason=\"unknown_device\"} 1"),
        "{metrics}"
    );
    // Without a certificate, no token is no authentication at all.
    let config = client::config(&s.ca.pem, None);
    let mut tls = client::connect(&config, s.addr).await.unwrap();
    let answer = client::get(&mut tls, "/api/v1/device/manifest", "", "")
        .await
        .unwrap();
    assert_eq!(answer.status, 401);
    s.server.stop().await;
}

#[tokio::test]
async fn rejects_a_device_certificate_whose_key_is_not_p256() {
    let dir = tempfile::tempdir().unwrap();
    let devices = Ca::new("npub devices");
    let s = start(dir.path(), &devices).await;
    provision(&s.server, "lab", &["dev-1"]).await;
    // The server asks for P-256 signatures only: a P-384 key cannot answer, so the client sends
    // no certificate, and without a token nothing authenticates it.
    let p384 = devices.device_p384("dev-1");
    assert_eq!(poll_with(&s, &p384, "").await, Ok(401));
    s.server.stop().await;
}
