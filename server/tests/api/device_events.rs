//! A device's own event log (issue 36, item 5): sent with a status report, bounded, kept with the
//! report in the device's history, and passed on in the `device.failed` webhook.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

use crate::receiver::{Answer, receiver};

/// A server with `cam-1` offered a deployment; the device's simulator and the sequence.
async fn offered(s: &TestServer) -> (String, u64) {
    fleet(s).await;
    let token = provision(s, "lab", &["cam-1"]).await.remove(0);
    deploy(
        s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let sim = Sim::new(s, &token).await;
    let (manifest, _) = sim.poll_verified().await.expect("offered");
    (token, manifest.sequence())
}

async fn history(s: &TestServer) -> Value {
    let r = s
        .req(Method::GET, "/api/v1/devices/cam-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let device: Value = r.json().await.unwrap();
    device["history"]["events"].clone()
}

#[tokio::test]
async fn a_failure_reports_event_log_is_kept_and_sent_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (url, mut got) = receiver(|_| Answer::Status(200)).await;
    let r = s
        .req(Method::POST, "/api/v1/webhooks")
        .json(&json!({"url": url, "events": ["device.failed"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (token, sequence) = offered(&s).await;
    let sim = Sim::new(&s, &token).await;
    let log = [
        "boot 2",
        "poll seq=1 -> 200",
        "piece 0..4096 ok",
        "verify: sha256 mismatch",
    ];
    let r = sim
        .report_body(json!({"sequence": sequence, "state": "failed",
            "reason": "verify failed", "events": log}))
        .await;
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    let events = history(&s).await;
    assert_eq!(events[0]["state"], "failed");
    assert_eq!(events[0]["events"], json!(log));
    // The offer before it has none.
    assert_eq!(events[1]["kind"], "offered");
    assert!(events[1]["events"].is_null(), "{}", events[1]);
    let failed = got.recv().await.unwrap().json();
    assert_eq!(failed["data"]["events"], json!(log));
    s.stop().await;
}

#[tokio::test]
async fn a_report_without_an_event_log_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (token, sequence) = offered(&s).await;
    Sim::new(&s, &token).await.report(sequence, "failed").await;
    let events = history(&s).await;
    assert_eq!(events[0]["state"], "failed");
    assert!(events[0]["events"].is_null());
    s.stop().await;
}

async fn refused(s: &TestServer, token: &str, sequence: u64, events: Value) -> String {
    let r = Sim::new(s, token)
        .await
        .report_body(json!({"sequence": sequence, "state": "failed", "events": events}))
        .await;
    assert_eq!(r.status(), 422, "{events}");
    let e: Value = r.json().await.unwrap();
    e["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn rejects_an_event_log_too_long_or_not_printable_ascii() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (token, sequence) = offered(&s).await;
    let many: Vec<String> = (0..17).map(|i| format!("event {i}")).collect();
    let detail = refused(&s, &token, sequence, json!(many)).await;
    assert!(detail.contains("17 lines, at most 16"), "{detail}");
    let detail = refused(&s, &token, sequence, json!(["ok", "x".repeat(65)])).await;
    assert!(
        detail.contains("events[1]: 65 characters, at most 64"),
        "{detail}"
    );
    let detail = refused(&s, &token, sequence, json!(["a\u{1b}[2J"])).await;
    assert!(
        detail.contains("events[0]") && detail.contains("printable ASCII"),
        "{detail}"
    );
    let detail = refused(&s, &token, sequence, json!(["température"])).await;
    assert!(detail.contains("'é'"), "{detail}");
    // Nothing of the refused reports was recorded.
    let events = history(&s).await;
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["kind"] != "report"),
        "{events}"
    );
    s.stop().await;
}
