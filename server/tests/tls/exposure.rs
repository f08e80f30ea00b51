//! Plain HTTP on an address other than loopback is said out loud: in the banner, in `/readyz`
//! (where the web UI reads it for its banner), and not at all on loopback or with TLS.
use reqwest::Method;
use serde_json::Value;

use crate::TlsServer;
use crate::common::TestServer;

async fn transport(s: &TestServer) -> Value {
    let ready: Value = s
        .req(Method::GET, "/readyz")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    ready["checks"]["transport"].clone()
}

#[tokio::test]
async fn warns_about_plain_http_on_an_address_other_than_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.listen = "0.0.0.0:0".parse().unwrap()).await;
    let t = transport(&s).await;
    assert_eq!(t["tls"], false, "{t}");
    let warning = t["warning"].as_str().unwrap_or_else(|| panic!("{t}"));
    assert!(warning.contains("plain HTTP on 0.0.0.0:"), "{warning}");
    assert!(warning.contains("--tls-cert"), "{warning}");
    assert!(s.banner.contains("WARNING:"), "{}", s.banner);
    // The console shows what /readyz says, on every page.
    let index = s
        .req(Method::GET, "/")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(index.contains("id=\"exposure\""), "{index}");
    s.stop().await;
}

#[tokio::test]
async fn says_nothing_on_loopback_or_with_tls() {
    let dir = tempfile::tempdir().unwrap();
    let plain = TestServer::start(&dir.path().join("plain")).await;
    let t = transport(&plain).await;
    assert_eq!(t["warning"], Value::Null, "{t}");
    assert!(!plain.banner.contains("WARNING"), "{}", plain.banner);
    plain.stop().await;

    let tls = TlsServer::start(&dir.path().join("tls"), |c| {
        c.listen = "0.0.0.0:0".parse().unwrap();
    })
    .await;
    let t = transport(&tls.server).await;
    assert_eq!(t["tls"], true, "{t}");
    assert_eq!(t["warning"], Value::Null, "{t}");
    assert!(
        tls.server
            .banner
            .starts_with("npub-server listening on https://"),
        "{}",
        tls.server.banner
    );
    tls.server.stop().await;
}
