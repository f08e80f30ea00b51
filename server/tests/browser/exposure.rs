//! The console says when the server speaks plain HTTP on an address other than loopback (issue
//! 33): a banner on every page, the sign-in page first, from `/readyz`; none on loopback.
use crate::common::{ADMIN, TestServer};
use crate::harness::{Screen, run};

#[tokio::test]
async fn shows_a_banner_when_plain_http_listens_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.listen = "0.0.0.0:0".parse().unwrap()).await;
    // The browser reaches the wildcard address through loopback.
    let base = s.url.replace("0.0.0.0", "127.0.0.1");
    run("exposure", &base, ADMIN, Screen::Desktop, |ui| async move {
        ui.open("").await;
        let text = ui.wait_text("#exposure", "Not encrypted").await;
        assert!(text.contains("--tls-cert"), "{text}");
        ui.sign_in().await;
        ui.open("fleet").await;
        ui.wait_text("#exposure", "Not encrypted").await;
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn shows_no_banner_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    run("exposure-none", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.open("").await;
        ui.wait_text("h1", "Sign in").await;
        // /readyz has been asked by now (the sign-in page renders after the shell's start).
        let ready = ui
            .js(
                "return fetch('/readyz').then((r) => r.json()).then((j) => j.checks.transport.warning)",
                vec![],
            )
            .await;
        assert_eq!(ready, serde_json::Value::Null);
        assert_eq!(
            ui.js("return document.getElementById('exposure').hidden", vec![])
                .await,
            true
        );
    })
    .await;
    s.stop().await;
}
