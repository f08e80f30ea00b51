//! A deployment completes at every event that can finish it, not only at a success report: the
//! last outstanding target revoked, deleted, moved to another group or given another
//! accelerator. Each time, exactly once: `completed_at`, one `deployment.completed` webhook
//! event queued and one `deployment.completed` audit entry by the server (`npub-server`).
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::receiver::{Answer, receiver};
use crate::support::{Sim, deploy, fleet, provision};

async fn get(s: &TestServer, path: &str) -> Value {
    s.get_json(path).await
}

async fn send(s: &TestServer, method: Method, path: &str, body: Option<Value>) {
    let mut r = s.req(method, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
}

/// A server with a receiver for `deployment.completed` (hook id returned), fleet `kws`, devices
/// `ids` in group `lab` and a one-batch deployment to it (its failure threshold `failures`);
/// returns (server, hook, deployment id, the devices' tokens).
async fn rollout(
    dir: &std::path::Path,
    ids: &[&str],
    failures: f64,
) -> (TestServer, i64, i64, Vec<String>) {
    let s = TestServer::start_with(dir, |c| c.webhook_retry_base_ms = 1).await;
    let (url, _got) = receiver(|_| Answer::Status(204)).await;
    let r = s
        .req(Method::POST, "/api/v1/webhooks")
        .json(&json!({"url": url, "events": ["deployment.completed"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let hook = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    fleet(&s).await;
    let tokens = provision(&s, "lab", ids).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [100], "failure_threshold": failures}}),
    )
    .await;
    (s, hook, d["id"].as_i64().unwrap(), tokens)
}

/// The `deployment.completed` events queued for `hook`, and the audit entries of that action for
/// deployment `id`.
async fn records(s: &TestServer, hook: i64, id: i64) -> (Vec<Value>, Vec<Value>) {
    let queued = get(s, &format!("/api/v1/webhooks/{hook}/deliveries")).await["items"]
        .as_array()
        .unwrap()
        .clone();
    let audit = get(
        s,
        &format!("/api/v1/audit?action=deployment.completed&object=deployments/{id}"),
    )
    .await["items"]
        .as_array()
        .unwrap()
        .clone();
    (queued, audit)
}

/// Asserts deployment `id` completed once with `installed` of its `targets` installed.
async fn completed_once(s: &TestServer, hook: i64, id: i64, targets: u64, installed: u64) {
    let d = get(s, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(d["phase"], "completed", "{d}");
    assert!(d["completed_at"].is_string(), "{d}");
    let (queued, audit) = records(s, hook, id).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["event"], "deployment.completed", "{queued:?}");
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["actor"], "npub-server");
    assert_eq!(
        audit[0]["detail"],
        json!({"sequence": d["sequence"], "targets": targets, "installed": installed, "bound": 0})
    );
}

async fn not_completed(s: &TestServer, hook: i64, id: i64) {
    let d = get(s, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(d["completed_at"], Value::Null, "{d}");
    assert_ne!(d["phase"], "completed", "{d}");
    assert_eq!(records(s, hook, id).await, (vec![], vec![]));
}

/// Two of three devices installed; the third, never reporting, then leaves the targets by
/// `leave` (a request on `/api/v1/devices/cam-3…`).
async fn last_target_leaves(method: Method, path: &str, body: Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (s, hook, id, tokens) = rollout(dir.path(), &["cam-1", "cam-2", "cam-3"], 0.2).await;
    for token in &tokens[..2] {
        Sim::new(&s, token).await.install().await;
    }
    not_completed(&s, hook, id).await;
    send(&s, method.clone(), path, body.clone()).await;
    completed_once(&s, hook, id, 2, 2).await;
    // The same request again (or any later change) completes nothing twice.
    send(&s, method, path, body).await;
    send(
        &s,
        Method::PATCH,
        "/api/v1/devices/cam-1",
        Some(json!({"name": "renamed"})),
    )
    .await;
    completed_once(&s, hook, id, 2, 2).await;
    s.stop().await;
}

#[tokio::test]
async fn revoking_the_last_outstanding_target_completes_the_deployment() {
    last_target_leaves(Method::POST, "/api/v1/devices/cam-3/revoke", None).await;
}

#[tokio::test]
async fn deleting_the_last_outstanding_target_completes_the_deployment() {
    last_target_leaves(Method::DELETE, "/api/v1/devices/cam-3", None).await;
}

#[tokio::test]
async fn moving_the_last_outstanding_target_to_another_group_completes_the_deployment() {
    last_target_leaves(
        Method::PATCH,
        "/api/v1/devices/cam-3",
        Some(json!({"group": "elsewhere"})),
    )
    .await;
}

#[tokio::test]
async fn another_accelerator_for_the_last_outstanding_target_completes_the_deployment() {
    last_target_leaves(
        Method::PATCH,
        "/api/v1/devices/cam-3",
        Some(json!({"accelerator": "ethos-u55-128"})),
    )
    .await;
}

#[tokio::test]
async fn a_target_leaving_while_others_are_outstanding_completes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (s, hook, id, tokens) = rollout(dir.path(), &["cam-1", "cam-2", "cam-3"], 0.2).await;
    Sim::new(&s, &tokens[0]).await.install().await;
    send(&s, Method::POST, "/api/v1/devices/cam-3/revoke", None).await;
    send(
        &s,
        Method::PATCH,
        "/api/v1/devices/cam-1",
        Some(json!({"group": "elsewhere"})),
    )
    .await;
    // cam-2 is still outstanding (and cam-1, which installed, has left too).
    not_completed(&s, hook, id).await;
    // Its install completes it, audited like the others.
    Sim::new(&s, &tokens[1]).await.install().await;
    completed_once(&s, hook, id, 1, 1).await;
    s.stop().await;
}

#[tokio::test]
async fn the_last_install_is_audited_once() {
    let dir = tempfile::tempdir().unwrap();
    let (s, hook, id, tokens) = rollout(dir.path(), &["cam-1", "cam-2"], 0.2).await;
    for token in &tokens {
        Sim::new(&s, token).await.install().await;
    }
    completed_once(&s, hook, id, 2, 2).await;
    s.stop().await;
}

#[tokio::test]
async fn a_retry_completes_when_its_last_outstanding_member_is_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let (s, hook, id, tokens) = rollout(dir.path(), &["cam-1", "cam-2", "cam-3"], 1.0).await;
    Sim::new(&s, &tokens[0]).await.install().await;
    for token in &tokens[1..] {
        let dev = Sim::new(&s, token).await;
        let (manifest, _) = dev.poll_verified().await.expect("offered");
        dev.report(manifest.sequence(), "failed").await;
    }
    let r = s
        .req(
            Method::POST,
            &format!("/api/v1/deployments/{id}/retry-failed"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let retry = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    Sim::new(&s, &tokens[1]).await.install().await;
    not_completed(&s, hook, retry).await;
    // cam-3, the retry's other member, is revoked: every member left has installed it.
    send(&s, Method::POST, "/api/v1/devices/cam-3/revoke", None).await;
    completed_once(&s, hook, retry, 1, 1).await;
    // The retried deployment does not complete: cam-2 failed it.
    let d = get(&s, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(d["completed_at"], Value::Null, "{d}");
    s.stop().await;
}
