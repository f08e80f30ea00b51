//! The device page: `GET /api/v1/devices/{id}` with its history (offers and reports, newest
//! first, paged).
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

async fn page(s: &TestServer, path: &str) -> Value {
    let r = s.req(Method::GET, path).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

#[tokio::test]
async fn device_page_shows_what_it_runs_and_every_offer_and_report_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    let mut sim = Sim::new(&s, &tokens[0]).await;

    let d1 = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let seq1 = sim.install().await;
    let d2 = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let (m2, _) = sim.poll_verified().await.unwrap();
    let seq2 = m2.sequence();
    // Progress reports of one download collapse into one event.
    for p in [0.25, 0.5, 0.75] {
        let r = sim
            .req(Method::POST, "/api/v1/device/status")
            .json(&json!({"sequence": seq2, "state": "downloading", "progress": p}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }
    sim.report(seq2, "failed").await;
    // Polling again the same deployment is not a second offer.
    sim.poll().await;
    s.state.polling.flush_last_seen(&s.state.db).await.unwrap();

    let dev = page(&s, "/api/v1/devices/dev-1").await;
    assert_eq!(dev["id"], "dev-1");
    assert_eq!(dev["group"], "lab");
    assert_eq!(dev["accelerator"], "ethos-u55-256");
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], seq1);
    assert_eq!(dev["status"], "failed");
    assert!(dev["last_seen"].is_string(), "{dev}");
    let events = dev["history"]["events"].as_array().unwrap();
    let summary: Vec<(String, i64, String)> = events
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["sequence"].as_i64().unwrap(),
                e["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let (s1, s2) = (seq1 as i64, seq2 as i64);
    // An offer is written before the device's next report, so the timeline reads in order.
    assert_eq!(
        summary,
        vec![
            ("report".into(), s2, "failed".into()),
            ("report".into(), s2, "downloading".into()),
            ("offered".into(), s2, String::new()),
            ("report".into(), s1, "installed".into()),
            ("offered".into(), s1, String::new()),
        ],
        "{summary:?}"
    );
    let downloading = events.iter().find(|e| e["state"] == "downloading").unwrap();
    assert_eq!(downloading["progress"], 0.75, "the last progress is kept");
    let failed = &events[summary.iter().position(|e| e.2 == "failed").unwrap()];
    assert_eq!(failed["reason"], "self-test failed");
    assert_eq!(failed["model"], "kws");
    assert_eq!(failed["version"], "2.0.0");
    assert_eq!(failed["deployment_id"], d2["id"]);
    assert!(events.iter().any(|e| e["deployment_id"] == d1["id"]));
    assert!(dev["history"]["next_before"].is_null());

    // Paged: two events at a time, no event repeated or lost.
    let mut seen = Vec::new();
    let mut path = "/api/v1/devices/dev-1?limit=2".to_owned();
    loop {
        let p = page(&s, &path).await;
        let evs = p["history"]["events"].as_array().unwrap();
        assert!(evs.len() <= 2);
        seen.extend(evs.iter().map(|e| e["id"].as_i64().unwrap()));
        match p["history"]["next_before"].as_i64() {
            Some(b) => path = format!("/api/v1/devices/dev-1?limit=2&before={b}"),
            None => break,
        }
    }
    let all: Vec<i64> = events.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(seen, all);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_history_page_of_a_bad_size_or_an_unknown_device() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    provision(&s, "lab", &["dev-1"]).await;
    for q in [
        "limit=0",
        "limit=501",
        "limit=x",
        "before=abc",
        "colour=red",
    ] {
        let r = s
            .req(Method::GET, &format!("/api/v1/devices/dev-1?{q}"))
            .send()
            .await
            .unwrap();
        assert!(
            r.status() == 422 || r.status() == 400,
            "{q}: {}",
            r.status()
        );
        let v: Value = r.json().await.unwrap();
        assert!(v["detail"].is_string(), "{q}: {v}");
    }
    let r = s
        .req(Method::GET, "/api/v1/devices/nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}
