//! Exactly one replica acts on each rollout transition: devices report through both replicas at
//! once, and the audit log shows every batch opening and the auto-abort exactly once, each
//! following the one before; a device offered a deployment by both replicas has one `offered`
//! event in its history.
use std::collections::HashSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::cluster::{Api, Cluster};
use crate::{PATIENCE, models, poll, provision};

/// `state` for `sequence` as each of `tokens`, all at once, alternating between the replicas;
/// the statuses.
async fn report_all(apis: &[Api; 2], tokens: &[String], sequence: u64, state: &str) -> Vec<u16> {
    let mut set = JoinSet::new();
    for (i, token) in tokens.iter().enumerate() {
        let api = apis[i % 2].as_token(token);
        let body = json!({"sequence": sequence, "state": state, "reason": (state == "failed").then_some("self-test failed")});
        set.spawn(async move {
            let r = api
                .req(Method::POST, "/api/v1/device/status")
                .json(&body)
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        });
    }
    set.join_all().await
}

/// The devices (indices into `tokens`) that either replica offers a manifest to.
async fn offered(apis: &[Api; 2], tokens: &[String]) -> HashSet<usize> {
    let mut out = HashSet::new();
    for (i, token) in tokens.iter().enumerate() {
        if poll(&apis[i % 2], token, 0).await == StatusCode::OK {
            out.insert(i);
        }
    }
    out
}

fn for_deployment(entries: Vec<Value>, id: i64) -> Vec<Value> {
    let object = format!("deployments/{id}");
    entries
        .into_iter()
        .filter(|e| e["object"] == object)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_reports_racing_through_two_replicas_with_one_transition_each() {
    let Some(cluster) = Cluster::up("--last-seen-flush 1") else {
        return;
    };
    let apis = [cluster.api_a(), cluster.api_b()];
    models(&apis[0]).await;
    let ids: Vec<String> = (0..20).map(|i| format!("dev-{i:02}")).collect();
    let tokens = provision(&apis[0], "fleet", &ids).await;
    // 20 targets in batches of 2, 10, 20; a batch opens once half the offered devices installed.
    let d = apis[1]
        .call(
            Method::POST,
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "1.0.0", "group": "fleet",
                "rollout": {"batches": [10, 50, 100], "success_threshold": 0.5}})),
            201,
        )
        .await;
    let (id, seq) = (d["id"].as_i64().unwrap(), d["sequence"].as_u64().unwrap());

    // Every round: every offered device that has not reported yet reports `installed`, all at
    // once, half through each replica.
    let mut reported: HashSet<usize> = HashSet::new();
    let start = std::time::Instant::now();
    loop {
        let now = offered(&apis, &tokens).await;
        let fresh: Vec<String> = now
            .difference(&reported)
            .map(|&i| tokens[i].clone())
            .collect();
        reported.extend(&now);
        if !fresh.is_empty() {
            let statuses = report_all(&apis, &fresh, seq, "installed").await;
            assert!(statuses.iter().all(|&s| s == 204), "{statuses:?}");
        }
        let open = apis[0]
            .call(Method::GET, &format!("/api/v1/deployments/{id}"), None, 200)
            .await["open_batches"]
            .as_u64()
            .unwrap();
        if open == 3 && reported.len() == tokens.len() {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE * 3,
            "stuck at {open} open batches"
        );
    }
    let opened = for_deployment(apis[1].audit("deployment.batch_open").await, id);
    let steps: Vec<(u64, u64)> = opened
        .iter()
        .map(|e| {
            (
                e["detail"]["from"].as_u64().unwrap(),
                e["detail"]["open_batches"].as_u64().unwrap(),
            )
        })
        .collect();
    // Each transition once, each starting where the one before ended, ending with all open.
    assert!(!steps.is_empty(), "no batch opened: {opened:?}");
    assert_eq!(steps[0].0, 1, "{steps:?}");
    assert_eq!(steps.last().unwrap().1, 3, "{steps:?}");
    assert!(steps.windows(2).all(|w| w[0].1 == w[1].0), "{steps:?}");

    // Auto-abort: ten devices of another group all fail at once, half through each replica.
    let ids: Vec<String> = (0..10).map(|i| format!("bad-{i:02}")).collect();
    let tokens = provision(&apis[1], "bad", &ids).await;
    let d = apis[0]
        .call(
            Method::POST,
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "2.0.0", "group": "bad",
                "rollout": {"batches": [100], "failure_threshold": 0.2}})),
            201,
        )
        .await;
    let (id, seq) = (d["id"].as_i64().unwrap(), d["sequence"].as_u64().unwrap());
    // Both replicas offer it to every device (A's cache through the notification).
    for (i, token) in tokens.iter().enumerate() {
        crate::poll_until(&apis[i % 2], token, 0, StatusCode::OK).await;
        crate::poll_until(&apis[(i + 1) % 2], token, 0, StatusCode::OK).await;
    }
    let statuses = report_all(&apis, &tokens, seq, "failed").await;
    // A report that lands after the abort is still recorded (the device did fail).
    assert!(statuses.iter().all(|&s| s == 204), "{statuses:?}");
    let aborts = for_deployment(apis[0].audit("deployment.auto_abort").await, id);
    assert_eq!(aborts.len(), 1, "{aborts:?}");
    let d = apis[1]
        .call(Method::GET, &format!("/api/v1/deployments/{id}"), None, 200)
        .await;
    assert_eq!(d["state"], "aborted", "{d}");

    // Every bad-* device was offered the deployment by both replicas and has one `offered`
    // event for it (each replica flushed its own pending offer; the first insert wins).
    let deadline = std::time::Instant::now() + PATIENCE;
    for dev in &ids {
        loop {
            let detail = apis[0]
                .call(Method::GET, &format!("/api/v1/devices/{dev}"), None, 200)
                .await;
            let offers = detail["history"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "offered" && e["deployment_id"] == id)
                .count();
            assert!(offers <= 1, "{dev}: {offers} offered events: {detail}");
            if offers == 1 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{dev}: never offered: {detail}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}
