//! The dashboard's aggregates (issue 36 item 2): `GET /api/v1/fleet/summary` counts what the
//! filtered device list finds, `GET /api/v1/deployments/{id}/timeline` ends at the deployment's
//! progress with its batches and holds, and every statement of both is read through an index on
//! the backend the tests run on.
use npub_server::fleet::summary::{summary_statements, timeline_statements};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::listing::{assert_indexed, plan};
use crate::support::{Sim, deploy, fleet, provision};

async fn get(s: &TestServer, path: &str) -> (u16, Value) {
    let r = s.req(Method::GET, path).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn post(s: &TestServer, path: &str) -> Value {
    let r = s.req(Method::POST, path).send().await.unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

/// How many devices the device list finds with `query`, page by page.
async fn listed(s: &TestServer, query: &str) -> i64 {
    let (mut n, mut cursor) = (0, None::<String>);
    loop {
        let url = match &cursor {
            None => format!("/api/v1/devices?limit=1000&{query}"),
            Some(c) => format!("/api/v1/devices?limit=1000&{query}&cursor={c}"),
        };
        let (status, page) = get(s, &url).await;
        assert_eq!(status, 200, "{url}: {page}");
        n += page["items"].as_array().unwrap().len() as i64;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return n,
        }
    }
}

fn status_count(summary: &Value, status: &str) -> i64 {
    summary["by_status"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["status"] == status)
        .unwrap_or_else(|| panic!("no {status} in {summary}"))["devices"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn the_summary_counts_what_the_device_list_finds() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let ids: Vec<String> = (0..8).map(|i| format!("lab-{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let tokens = provision(&s, "lab", &refs).await;
    provision(&s, "edge", &["edge-0", "edge-1"]).await;
    let r = s
        .req(Method::DELETE, "/api/v1/devices/edge-1")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [100], "failure_threshold": 1.0}}),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    for t in &tokens[..3] {
        Sim::new(&s, t).await.install().await;
    }
    for (t, why) in [
        (&tokens[3], "self-test failed"),
        (&tokens[4], "self-test failed"),
        (&tokens[5], "flash: verify"),
    ] {
        let r = Sim::new(&s, t)
            .await
            .report_body(json!({"sequence": seq, "state": "failed", "reason": why}))
            .await;
        assert_eq!(r.status(), 204);
    }
    Sim::new(&s, &tokens[6])
        .await
        .report(seq, "downloading")
        .await;

    let (status, summary) = get(&s, "/api/v1/fleet/summary").await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["devices"], 9, "{summary}");
    assert_eq!(
        summary["devices"],
        listed(&s, "").await - 1,
        "the revoked one"
    );
    for (st, want) in [
        ("new", 2),
        ("installed", 3),
        ("failed", 3),
        ("downloading", 1),
        ("revoked", 1),
    ] {
        assert_eq!(status_count(&summary, st), want, "{st}: {summary}");
        assert_eq!(listed(&s, &format!("status={st}")).await, want, "{st}");
    }
    assert_eq!(
        summary["versions"],
        json!([{"model": "kws", "versions": [{"version": "1.0.0", "devices": 3}]}])
    );
    assert_eq!(
        summary["versions"][0]["versions"][0]["devices"],
        listed(&s, "model=kws&version=1.0.0").await
    );
    assert_eq!(summary["no_version"], 6);
    assert_eq!(
        summary["failure_reasons"],
        json!([{"reason": "self-test failed", "devices": 2}, {"reason": "flash: verify", "devices": 1}])
    );
    // The default threshold is three poll intervals (60 s): nobody has been away that long.
    assert_eq!(summary["offline"], json!({"minutes": 3, "devices": 0}));
    s.state.polling.flush_last_seen(&s.state.db).await.unwrap();
    let (_, zero) = get(&s, "/api/v1/fleet/summary?offline_minutes=1").await;
    assert_eq!(
        zero["offline"]["devices"],
        listed(&s, "not_seen_minutes=1").await
    );
    let rollouts = summary["rollouts"].as_array().unwrap();
    assert_eq!(rollouts.len(), 1);
    assert_eq!(rollouts[0]["id"], d["id"]);
    assert_eq!(rollouts[0]["progress"]["counts"]["failed"], 3);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_bad_offline_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for q in ["offline_minutes=0", "offline_minutes=525601"] {
        let (status, body) = get(&s, &format!("/api/v1/fleet/summary?{q}")).await;
        assert_eq!(status, 422, "{q}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("offline_minutes: "),
            "{body}"
        );
    }
    let (status, _) = get(&s, "/api/v1/deployments/99/timeline").await;
    assert_eq!(status, 404);
    s.stop().await;
}

#[tokio::test]
async fn a_timeline_ends_at_the_progress_with_its_batches_and_holds() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let ids: Vec<String> = (0..8).map(|i| format!("t-{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let tokens = provision(&s, "lab", &refs).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [25, 100], "success_threshold": 0.9, "failure_threshold": 0.5}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let seq = d["sequence"].as_u64().unwrap();
    // Batch 1 is two devices: whoever is offered it installs, and batch 2 opens.
    let mut offered = Vec::new();
    for t in &tokens {
        let sim = Sim::new(&s, t).await;
        if sim.poll_verified().await.is_some() {
            offered.push(t.clone());
        }
    }
    assert_eq!(offered.len(), 2);
    Sim::new(&s, &offered[0]).await.install().await;
    let (_, t) = get(&s, &format!("/api/v1/deployments/{id}/timeline")).await;
    assert!(
        t["batches"][1]["opened_at"].is_null(),
        "one of two is below 0.9: {t}"
    );
    Sim::new(&s, &offered[1]).await.install().await;
    // A device of batch 2 fails.
    let mut failed = false;
    for tok in &tokens {
        if offered.contains(tok) {
            continue;
        }
        let sim = Sim::new(&s, tok).await;
        if sim.poll_verified().await.is_some() {
            sim.report(seq, "failed").await;
            failed = true;
            break;
        }
    }
    assert!(failed, "batch 2 is offered");
    post(&s, &format!("/api/v1/deployments/{id}/pause")).await;

    let (status, t) = get(&s, &format!("/api/v1/deployments/{id}/timeline")).await;
    assert_eq!(status, 200, "{t}");
    let points = t["points"].as_array().unwrap();
    assert!(points.len() >= 2, "{t}");
    let first = &points[0];
    assert_eq!(
        (first["installed"].as_u64(), first["failed"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(first["offered"], 2, "batch 1 at creation: {t}");
    let last = points.last().unwrap();
    let progress = &t["deployment"]["progress"];
    assert_eq!(last["installed"], progress["counts"]["installed"]);
    assert_eq!(last["failed"], progress["counts"]["failed"]);
    assert_eq!(last["offered"], 8);
    assert_eq!(last["failure_limit"], 4.0, "0.5 of 8 offered");
    let times: Vec<i64> = points
        .iter()
        .map(|p| p["at_ms"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let installed: Vec<u64> = points
        .iter()
        .map(|p| p["installed"].as_u64().unwrap())
        .collect();
    assert!(installed.windows(2).all(|w| w[0] <= w[1]), "{installed:?}");
    assert!(t["batches"][0]["opened_at"].is_string(), "{t}");
    assert!(t["batches"][1]["opened_at"].is_string(), "{t}");
    assert_eq!(t["batches"][0]["devices"], 2);
    assert_eq!(t["batches"][1]["devices"], 6);
    let events: Vec<&str> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["deployment.pause"], "{t}");
    s.stop().await;
}

#[tokio::test]
async fn every_dashboard_statement_uses_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    for (what, sql, binds) in summary_statements(1_800_000_000_000) {
        let p = plan(&s, &sql, binds).await;
        let (table, index, sorts) = match what {
            "status" => ("devices", Some("devices_by_revoked_state"), false),
            // Either index that starts with `revoked_at` counts them without the table.
            "revoked" => ("devices", None, false),
            "reasons" => ("devices", Some("devices_by_revoked_state"), true),
            "versions" => ("devices", Some("devices_by_revoked_version"), false),
            "offline" => ("devices", Some("devices_by_revoked_seen"), false),
            "rollouts" => ("deployments", Some("deployments_by_state"), true),
            other => panic!("a statement the test does not know: {other}"),
        };
        assert_indexed(what, &p, (table, "d"), index, sorts);
    }
    for (what, sql, binds) in timeline_statements(1, 1_800_000_000_000, 1000) {
        let p = plan(&s, &sql, binds).await;
        let (table, alias, index) = match what {
            "span" | "buckets" => (
                "device_deployments",
                "dd",
                Some("device_deployments_by_time"),
            ),
            "events" => ("audit", "a", Some("audit_by_object")),
            other => panic!("a statement the test does not know: {other}"),
        };
        assert_indexed(what, &p, (table, alias), index, what == "buckets");
    }
    s.stop().await;
}
