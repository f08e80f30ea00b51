//! Which devices, not only how many: `GET /api/v1/deployments/{id}/devices`, previews
//! (`?dry_run=true`) and the refusal of deployments that reach nobody.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet};

/// Provisions `(id, accelerator)` pairs into `group`; returns their tokens.
async fn provision_mixed(s: &TestServer, group: &str, devices: &[(&str, &str)]) -> Vec<String> {
    let body: Vec<Value> = devices
        .iter()
        .map(|(id, accel)| json!({"id": id, "accelerator": accel, "group": group}))
        .collect();
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({ "devices": body }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Vec<Value> = r.json().await.unwrap();
    v.iter()
        .map(|d| d["token"].as_str().unwrap().to_owned())
        .collect()
}

async fn get(s: &TestServer, path: &str) -> (u16, Value) {
    let r = s.req(Method::GET, path).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn post(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let r = s.req(Method::POST, path).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn sequence_counter(s: &TestServer) -> i64 {
    let (v,): (i64,) = sqlx::query_as("SELECT value FROM fleet_sequence WHERE id = 1")
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    v
}

#[tokio::test]
async fn deployment_lists_each_device_with_its_batch_state_reason_and_why_it_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision_mixed(
        &s,
        "lab",
        &[
            ("big-a", "ethos-u55-256"),
            ("big-b", "ethos-u55-256"),
            ("small", "ethos-u55-128"),
        ],
    )
    .await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab",
               "rollout": {"batches": [50, 100], "success_threshold": 1.0, "failure_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let (status, list) = get(&s, &format!("/api/v1/deployments/{id}/devices")).await;
    assert_eq!(status, 200);
    let list = list["items"].as_array().unwrap().clone();
    assert_eq!(list.len(), 3, "{list:?}");
    let first = &list[0];
    assert_eq!(first["batch"], 0);
    assert_eq!(first["offered"], true);
    assert_eq!(first["state"], "pending");
    let second = &list[1];
    assert_eq!(second["batch"], 1);
    assert_eq!(second["offered"], false);
    assert_eq!(second["skipped"], "batch_not_open");
    assert_eq!(second["reason"], "in batch 2 of 2, not open yet");
    let small = &list[2];
    assert_eq!(small["device_id"], "small");
    assert_eq!(small["skipped"], "other_accelerator");
    assert_eq!(small["accelerator"], "ethos-u55-128");
    assert_eq!(
        small["reason"],
        "it is ethos-u55-128; the pack is compiled for ethos-u55-256"
    );

    // The canary fails: the list names it and its reason; filters by state.
    let canary = first["device_id"].as_str().unwrap();
    let token = if canary == "big-a" {
        &tokens[0]
    } else {
        &tokens[1]
    };
    let sim = Sim::new(&s, token).await;
    sim.report(d["sequence"].as_u64().unwrap(), "failed").await;
    let (_, failed) = get(
        &s,
        &format!("/api/v1/deployments/{id}/devices?state=failed"),
    )
    .await;
    let failed = failed["items"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["device_id"], canary);
    assert_eq!(failed[0]["reason"], "self-test failed");
    assert!(failed[0]["updated_at"].is_string());
    let (_, skipped) = get(
        &s,
        &format!("/api/v1/deployments/{id}/devices?state=skipped"),
    )
    .await;
    assert_eq!(skipped["items"].as_array().unwrap().len(), 2);
    let (status, bad) = get(&s, &format!("/api/v1/deployments/{id}/devices?state=done")).await;
    assert_eq!(status, 422, "{bad}");
    let (status, _) = get(&s, "/api/v1/deployments/999/devices").await;
    assert_eq!(status, 404);
    s.stop().await;
}

#[tokio::test]
async fn preview_answers_reach_skips_and_batches_without_taking_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision_mixed(
        &s,
        "lab",
        &[
            ("big-a", "ethos-u55-256"),
            ("big-b", "ethos-u55-256"),
            ("small", "ethos-u55-128"),
        ],
    )
    .await;
    let before = sequence_counter(&s).await;
    let (status, p) = post(
        &s,
        "/api/v1/deployments?dry_run=true",
        json!({"model": "kws", "version": "2.0.0", "group": "lab",
               "rollout": {"batches": [5, 25, 100]}}),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["targets"], 2);
    assert_eq!(p["version"], "2.0.0");
    assert_eq!(p["accelerator"], "ethos-u55-256");
    assert_eq!(p["skipped"][0]["device_id"], "small");
    // Two targets in three batches: no batch is empty while a later one has devices.
    let sizes: Vec<usize> = p["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["devices"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![1, 1, 0], "{p}");
    assert_eq!(
        sequence_counter(&s).await,
        before,
        "a preview takes no sequence"
    );
    assert_eq!(s.rows("deployments").await, 0);

    // The deployment made after it has the devices the preview named, in the same batches.
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab",
               "rollout": {"batches": [5, 25, 100]}}),
    )
    .await;
    assert_eq!(d["sequence"].as_i64().unwrap(), before + 1);
    let (_, list) = get(&s, &format!("/api/v1/deployments/{}/devices", d["id"])).await;
    assert_eq!(list["items"][0]["device_id"], p["batches"][0]["devices"][0]);
    assert_eq!(list["items"][1]["device_id"], p["batches"][1]["devices"][0]);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_deployment_that_reaches_no_compatible_device_naming_the_accelerators() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision_mixed(
        &s,
        "small",
        &[("s1", "ethos-u55-128"), ("s2", "ethos-u55-64")],
    )
    .await;
    let before = sequence_counter(&s).await;
    for path in ["/api/v1/deployments", "/api/v1/deployments?dry_run=true"] {
        let (status, e) = post(
            &s,
            path,
            json!({"model": "kws", "version": "2.0.0", "group": "small"}),
        )
        .await;
        assert_eq!(status, 422, "{path}: {e}");
        let detail = e["detail"].as_str().unwrap();
        assert!(
            detail.contains("compiled for ethos-u55-256")
                && detail.contains("ethos-u55-128")
                && detail.contains("ethos-u55-64"),
            "{detail}"
        );
    }
    let (status, _) = post(
        &s,
        "/api/v1/deployments",
        json!({"model": "kws", "version": "2.0.0", "device": "s1"}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(sequence_counter(&s).await, before, "no sequence consumed");
    assert_eq!(s.rows("deployments").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_deployment_to_an_unknown_group_or_device_with_404() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    for body in [
        json!({"model": "kws", "version": "2.0.0", "group": "nobody-here"}),
        json!({"model": "kws", "version": "2.0.0", "device": "ghost"}),
    ] {
        let (status, e) = post(&s, "/api/v1/deployments", body.clone()).await;
        assert_eq!(status, 404, "{body}: {e}");
        assert_eq!(e["error"], "not_found");
    }
    assert_eq!(s.rows("deployments").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_report_on_a_deployment_that_does_not_offer_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision_mixed(
        &s,
        "lab",
        &[
            ("big-a", "ethos-u55-256"),
            ("big-b", "ethos-u55-256"),
            ("small", "ethos-u55-128"),
        ],
    )
    .await;
    let report = |token: &str, sequence: u64| {
        let token = token.to_owned();
        let s = &s;
        async move {
            Sim::new(s, &token)
                .await
                .report_body(json!({"sequence": sequence, "state": "installed"}))
                .await
                .status()
                .as_u16()
        }
    };

    // Every batch open (one of 100 %): the device's own entry decides. The other accelerator's
    // device is in the group, not among the targets.
    let all = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let all = all["sequence"].as_u64().unwrap();
    assert_eq!(report(&tokens[2], all).await, 409);
    assert_eq!(report(&tokens[0], all).await, 204);

    // A batch still closed: the device's rank among the targets decides.
    let staged = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab",
               "rollout": {"batches": [50, 100], "success_threshold": 1.0, "failure_threshold": 1.0}}),
    )
    .await;
    let id = staged["id"].as_i64().unwrap();
    let staged = staged["sequence"].as_u64().unwrap();
    let (_, list) = get(&s, &format!("/api/v1/deployments/{id}/devices")).await;
    let waiting = list["items"][1]["device_id"].as_str().unwrap();
    assert_eq!(list["items"][1]["offered"], false);
    let token = if waiting == "big-a" {
        &tokens[0]
    } else {
        &tokens[1]
    };
    assert_eq!(report(token, staged).await, 409);
    assert_eq!(report(&tokens[2], staged).await, 409);
    s.stop().await;
}
