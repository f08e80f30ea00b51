//! Webhooks end to end: real receivers on 127.0.0.1:0 (`common/webhook_receiver.rs`, answering
//! as each test scripts), the server's background sender, and the Standard Webhooks signature
//! checked the way a receiver would check it.
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

use crate::receiver::{Answer, receiver, verify};

async fn start(dir: &std::path::Path, disable_after: u32, timeout_secs: u64) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.webhook_retry_base_ms = 1;
        c.webhook_disable_after = disable_after;
        c.webhook_timeout = timeout_secs;
    })
    .await
}

/// Registers a webhook; returns its id and secret.
async fn register(s: &TestServer, url: &str, events: &[&str]) -> (i64, String) {
    let r = s
        .req(Method::POST, "/api/v1/webhooks")
        .json(&json!({"url": url, "events": events, "description": "test receiver"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let body: Value = r.json().await.unwrap();
    (
        body["id"].as_i64().unwrap(),
        body["secret"].as_str().unwrap().to_owned(),
    )
}

async fn get(s: &TestServer, path: &str) -> Value {
    let r = s.req(Method::GET, path).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

/// Reads `path` until `done` holds (the sender works in the background); panics after a
/// generous number of looks.
async fn until(s: &TestServer, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..3000 {
        let v = get(s, path).await;
        if done(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{path} never got there: {}", get(s, path).await);
}

/// A fleet with a one-device deployment to group `lab`; returns the deployment id and the
/// device's token.
async fn deployment(s: &TestServer) -> (i64, String) {
    fleet(s).await;
    let token = provision(s, "lab", &["cam-1"]).await.remove(0);
    let d = deploy(
        s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    (d["id"].as_i64().unwrap(), token)
}

/// The oldest delivery of a log page (the log is newest first).
fn oldest(log: &Value) -> &Value {
    log["items"].as_array().unwrap().last().unwrap()
}

async fn post(s: &TestServer, path: &str) -> reqwest::Response {
    s.req(Method::POST, path).send().await.unwrap()
}

#[tokio::test]
async fn deliveries_are_signed_and_retried_after_500s() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, mut got) = receiver(|n| Answer::Status(if n < 2 { 500 } else { 204 })).await;
    let (hook, secret) = register(&s, &url, &["deployment.state_changed"]).await;
    let (id, _) = deployment(&s).await;

    let r = post(&s, &format!("/api/v1/deployments/{id}/pause")).await;
    assert_eq!(r.status(), 200);

    let mut attempts = Vec::new();
    for _ in 0..3 {
        attempts.push(got.recv().await.unwrap());
    }
    for a in &attempts {
        verify(&secret, a);
        assert_eq!(a.header("content-type"), "application/json");
    }
    // One message, three attempts: the same webhook-id each time.
    assert!(attempts[0].header("webhook-id").starts_with("msg_"));
    assert!(
        attempts
            .iter()
            .all(|a| a.header("webhook-id") == attempts[0].header("webhook-id"))
    );
    let body = attempts[0].json();
    assert_eq!(body["type"], "deployment.state_changed");
    assert_eq!(body["data"]["deployment_id"], id);
    assert_eq!(body["data"]["state"], "paused");
    assert_eq!(body["data"]["actor"], "bootstrap");

    let log = until(&s, &format!("/api/v1/webhooks/{hook}/deliveries"), |v| {
        v["items"][0]["state"] == "delivered"
    })
    .await;
    let d = &log["items"][0];
    assert_eq!(d["attempts"], 3);
    assert_eq!(d["last_status"], 204);
    assert_eq!(d["message_id"], attempts[0].header("webhook-id"));
    assert_eq!(d["payload"], body);
    let w = get(&s, &format!("/api/v1/webhooks/{hook}")).await;
    assert_eq!(w["enabled"], true);
    assert_eq!(w["consecutive_failures"], 0);
    assert_eq!(w["pending"], 0);
    assert!(w.get("secret").is_none(), "the secret is shown once: {w}");

    // Resumed: one more event, delivered at the first attempt.
    let r = post(&s, &format!("/api/v1/deployments/{id}/resume")).await;
    assert_eq!(r.status(), 200);
    let resumed = got.recv().await.unwrap();
    verify(&secret, &resumed);
    assert_eq!(resumed.json()["data"]["state"], "active");
    s.stop().await;
}

#[tokio::test]
async fn an_endpoint_is_disabled_after_consecutive_failures() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 3, 10).await;
    let (url, mut got) = receiver(|_| Answer::Status(500)).await;
    let (hook, _) = register(&s, &url, &["key.rotated"]).await;
    let r = s
        .req(Method::POST, "/api/v1/keys/rotate")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());

    let w = until(&s, &format!("/api/v1/webhooks/{hook}"), |v| {
        v["enabled"] == false
    })
    .await;
    assert_eq!(w["consecutive_failures"], 3);
    let reason = w["disabled_reason"].as_str().unwrap();
    assert!(
        reason.contains("3 failed attempts") && reason.contains("500"),
        "{reason}"
    );
    let log = get(&s, &format!("/api/v1/webhooks/{hook}/deliveries")).await;
    assert_eq!(log["items"][0]["state"], "pending");
    assert_eq!(log["items"][0]["attempts"], 3);
    assert_eq!(log["items"][0]["payload"]["type"], "key.rotated");
    for _ in 0..3 {
        got.recv().await.unwrap();
    }

    // Disabled: a new event is not queued for it.
    let r = s
        .req(Method::POST, "/api/v1/keys/rotate")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let log = get(&s, &format!("/api/v1/webhooks/{hook}/deliveries")).await;
    assert_eq!(log["items"].as_array().unwrap().len(), 1, "{log}");

    // Enabled again: its run of failures starts over, and the pending delivery is tried.
    let r = post(&s, &format!("/api/v1/webhooks/{hook}/enable")).await;
    assert_eq!(r.status(), 200);
    let w: Value = r.json().await.unwrap();
    assert_eq!(w["enabled"], true);
    assert_eq!(w["consecutive_failures"], 0);
    got.recv().await.unwrap();
    let audit = get(&s, "/api/v1/audit?action=webhook.").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["webhook.enable", "webhook.create"]);
    s.stop().await;
}

#[tokio::test]
async fn a_hanging_receiver_delays_neither_requests_nor_other_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 1).await;
    let (hanging, mut hung) = receiver(|_| Answer::Hang).await;
    let (healthy, mut got) = receiver(|_| Answer::Status(200)).await;
    let kinds = ["deployment.state_changed", "device.failed"];
    let (slow, _) = register(&s, &hanging, &kinds).await;
    let (fast, secret) = register(&s, &healthy, &kinds).await;
    let (id, token) = deployment(&s).await;

    // The hanging receiver holds its first delivery.
    let r = post(&s, &format!("/api/v1/deployments/{id}/pause")).await;
    assert_eq!(r.status(), 200);
    hung.recv().await.unwrap();
    verify(&secret, &got.recv().await.unwrap());

    // While it hangs: a request that emits an event is answered, and the other webhook gets it.
    let r = post(&s, &format!("/api/v1/deployments/{id}/resume")).await;
    assert_eq!(r.status(), 200);
    let sim = Sim::new(&s, &token).await;
    let (manifest, _) = sim.poll_verified().await.expect("offered");
    let r = sim
        .report_body(json!({"sequence": manifest.sequence(), "state": "failed",
            "reason": "flash verify failed"}))
        .await;
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    let log = get(&s, &format!("/api/v1/webhooks/{slow}/deliveries")).await;
    assert_eq!(
        oldest(&log)["attempts"],
        0,
        "the first delivery is still in flight: {log}"
    );
    let resumed = got.recv().await.unwrap();
    assert_eq!(resumed.json()["data"]["state"], "active");
    let failed = got.recv().await.unwrap();
    verify(&secret, &failed);
    let failed = failed.json();
    assert_eq!(failed["type"], "device.failed");
    assert_eq!(failed["data"]["device_id"], "cam-1");
    assert_eq!(failed["data"]["reason"], "flash verify failed");

    // The hanging attempt ends at --webhook-timeout, as a failure to retry.
    let log = until(&s, &format!("/api/v1/webhooks/{slow}/deliveries"), |v| {
        oldest(v)["attempts"].as_i64() >= Some(1)
    })
    .await;
    let error = oldest(&log)["last_error"].as_str().unwrap();
    assert!(error.contains("no answer within 1 s"), "{error}");
    assert_eq!(oldest(&log)["state"], "pending");
    let log = get(&s, &format!("/api/v1/webhooks/{fast}/deliveries")).await;
    assert!(
        log["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "delivered"),
        "{log}"
    );
    s.stop().await;
}

#[tokio::test]
async fn an_endless_answer_is_cut_and_its_status_counts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, mut got) = receiver(|_| Answer::Endless).await;
    let (hook, secret) = register(&s, &url, &["key.rotated"]).await;
    let r = post(&s, &format!("/api/v1/webhooks/{hook}/test")).await;
    assert_eq!(r.status(), 202);
    let queued: Value = r.json().await.unwrap();
    let test = got.recv().await.unwrap();
    verify(&secret, &test);
    assert_eq!(test.header("webhook-id"), queued["message_id"]);
    assert_eq!(test.json()["type"], "webhook.test");
    let log = until(&s, &format!("/api/v1/webhooks/{hook}/deliveries"), |v| {
        v["items"][0]["state"] == "delivered"
    })
    .await;
    assert_eq!(log["items"][0]["attempts"], 1);
    s.stop().await;
}

#[tokio::test]
async fn deleting_a_webhook_drops_its_queue_and_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, _got) = receiver(|_| Answer::Hang).await;
    let (hook, _) = register(&s, &url, &["key.rotated"]).await;
    let listed = get(&s, "/api/v1/webhooks").await;
    assert_eq!(listed[0]["id"], hook);
    assert_eq!(listed[0]["events"], json!(["key.rotated"]));
    let r = s
        .req(Method::DELETE, &format!("/api/v1/webhooks/{hook}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(s.rows("webhooks").await, 0);
    let r = s
        .req(Method::GET, &format!("/api/v1/webhooks/{hook}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let audit = get(&s, "/api/v1/audit?action=webhook.delete").await;
    assert_eq!(audit["items"][0]["object"], format!("webhooks/{hook}"));
    assert_eq!(audit["items"][0]["detail"]["url"], url);
    s.stop().await;
}

#[tokio::test]
async fn the_secret_is_sealed_at_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (_, secret) = register(&s, "https://hooks.example/npub", &["key.rotated"]).await;
    let key = STANDARD.decode(&secret["whsec_".len()..]).unwrap();
    assert_eq!(key.len(), 32);
    let (sealed,): (Vec<u8>,) = sqlx::query_as("SELECT secret_sealed FROM webhooks")
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    assert_eq!(sealed.len(), 60);
    assert!(!sealed.windows(key.len()).any(|w| w == key.as_slice()));
    s.stop().await;
}

async fn refused(s: &TestServer, body: Value) -> String {
    let r = s
        .req(Method::POST, "/api/v1/webhooks")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422, "{body}");
    let e: Value = r.json().await.unwrap();
    e["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn rejects_urls_that_are_not_http() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    for (url, says) in [
        ("ftp://hooks.example/x", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("hooks.example/x", "not a URL"),
        ("https://user:pw@hooks.example/x", "user or password"),
        ("http://a b/", "not a URL"),
    ] {
        let detail = refused(&s, json!({"url": url, "events": ["key.rotated"]})).await;
        assert!(detail.contains(says), "{url}: {detail}");
    }
    assert_eq!(s.rows("webhooks").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_unknown_missing_and_repeated_event_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let url = "https://hooks.example/x";
    let detail = refused(&s, json!({"url": url, "events": []})).await;
    assert!(detail.contains("at least one"), "{detail}");
    let detail = refused(&s, json!({"url": url, "events": ["deployment.exploded"]})).await;
    assert!(
        detail.contains("events[0]") && detail.contains("key.rotated"),
        "{detail}"
    );
    let detail = refused(
        &s,
        json!({"url": url, "events": ["key.rotated", "key.rotated"]}),
    )
    .await;
    assert!(
        detail.contains("events[1]") && detail.contains("twice"),
        "{detail}"
    );
    let detail = refused(&s, json!({"url": url, "events": ["webhook.test"]})).await;
    assert!(detail.contains("not an event kind"), "{detail}");
    s.stop().await;
}

#[tokio::test]
async fn rejects_changes_by_an_operator_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let r = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&json!({"name": "ops", "role": "operator"}))
        .send()
        .await
        .unwrap();
    let token: Value = r.json().await.unwrap();
    let token = token["token"].as_str().unwrap();
    let r = s
        .req_as(token, Method::POST, "/api/v1/webhooks")
        .json(&json!({"url": "https://hooks.example/x", "events": ["key.rotated"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = s
        .req_as(token, Method::GET, "/api/v1/webhooks")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "reading is any operator's");
    s.stop().await;
}

#[tokio::test]
async fn a_rollout_that_pauses_at_its_threshold_says_so_to_its_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, mut got) = receiver(|_| Answer::Status(204)).await;
    let (_, secret) = register(
        &s,
        &url,
        &["deployment.threshold_hit", "deployment.state_changed"],
    )
    .await;
    fleet(&s).await;
    let token = provision(&s, "lab", &["cam-1"]).await.remove(0);
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [100], "failure_threshold": 0.0, "on_failure": "pause"}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    Sim::new(&s, &token)
        .await
        .report(d["sequence"].as_u64().unwrap(), "failed")
        .await;
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let a = got.recv().await.unwrap();
        verify(&secret, &a);
        let body = a.json();
        assert_eq!(body["data"]["deployment_id"], id);
        assert_eq!(body["data"]["state"], "paused", "{body}");
        kinds.push(body["type"].as_str().unwrap().to_owned());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["deployment.state_changed", "deployment.threshold_hit"]
    );
    assert_eq!(deployment_state(&s, id).await, "paused");
    s.stop().await;
}

async fn deployment_state(s: &TestServer, id: i64) -> String {
    get(s, &format!("/api/v1/deployments/{id}")).await["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn rejects_a_receiver_on_the_servers_own_host_or_the_metadata_service() {
    let dir = tempfile::tempdir().unwrap();
    // Without the harness's `--webhook-allow-address 127.0.0.1`: the default policy.
    let s = TestServer::start_with(dir.path(), |c| {
        c.webhook_retry_base_ms = 1;
        c.webhook_allow_addresses.clear();
    })
    .await;
    let (url, mut got) = receiver(|_| Answer::Status(200)).await;
    for (target, range) in [
        (url.clone(), "a loopback address"),
        (
            "http://169.254.169.254/latest/meta-data".to_owned(),
            "a link-local address",
        ),
        (
            "http://[::ffff:127.0.0.1]:9/hook".to_owned(),
            "a loopback address",
        ),
    ] {
        let r = s
            .req(Method::POST, "/api/v1/webhooks")
            .json(&json!({"url": target, "events": ["key.rotated"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{target}");
        let body: Value = r.json().await.unwrap();
        let message = body["detail"].as_str().unwrap();
        assert!(
            message.starts_with("url: ") && message.contains(range),
            "{target}: {message}"
        );
    }

    // A name is judged by what it resolves to, at each attempt: `localhost` reaches nothing.
    let by_name = url.replace("127.0.0.1", "localhost");
    let (hook, _) = register(&s, &by_name, &["key.rotated"]).await;
    assert_eq!(
        post(&s, &format!("/api/v1/webhooks/{hook}/test"))
            .await
            .status(),
        202
    );
    let log = until(&s, &format!("/api/v1/webhooks/{hook}/deliveries"), |v| {
        v["items"][0]["attempts"].as_i64().unwrap_or(0) >= 1
    })
    .await;
    let error = log["items"][0]["last_error"].as_str().unwrap();
    assert!(
        error.contains("localhost is ") && error.contains("loopback"),
        "{error}"
    );
    assert!(got.try_recv().is_err(), "the receiver got a delivery");
    s.stop().await;
}

/// The deliveries queued for `hook` so far (queued in the transaction of the change, so the log
/// is complete as soon as the request that caused them answered).
async fn queued(s: &TestServer, hook: i64) -> Vec<Value> {
    get(s, &format!("/api/v1/webhooks/{hook}/deliveries")).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn the_last_install_completes_a_deployment_once_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, mut got) = receiver(|_| Answer::Status(204)).await;
    let (hook, secret) = register(&s, &url, &["deployment.completed"]).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["cam-1", "cam-2", "cam-3"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let path = format!("/api/v1/deployments/{id}");
    assert_eq!(get(&s, &path).await["completed_at"], Value::Null);

    // Two of three installed: not complete, nothing queued.
    for token in &tokens[..2] {
        Sim::new(&s, token).await.install().await;
    }
    assert_eq!(queued(&s, hook).await, Vec::<Value>::new());
    assert_eq!(get(&s, &path).await["completed_at"], Value::Null);

    // The third is mid-download when an operator pauses: it may finish, and its install
    // completes the (paused) deployment.
    let last = Sim::new(&s, &tokens[2]).await;
    let (manifest, _) = last.poll_verified().await.expect("cam-3 is offered it");
    let sequence = manifest.sequence();
    last.report(sequence, "downloading").await;
    assert_eq!(queued(&s, hook).await, Vec::<Value>::new());
    assert_eq!(post(&s, &format!("{path}/pause")).await.status(), 200);
    last.download(manifest, 4096).await;
    last.report(sequence, "installed").await;

    let done = get(&s, &path).await;
    assert_eq!(done["phase"], "completed", "{done}");
    assert!(done["completed_at"].is_string(), "{done}");
    let a = got.recv().await.unwrap();
    verify(&secret, &a);
    let body = a.json();
    assert_eq!(body["type"], "deployment.completed");
    assert_eq!(
        body["data"],
        json!({"deployment_id": id, "sequence": sequence, "state": "paused",
               "targets": 3, "installed": 3, "bound": 0})
    );

    // Once: neither a later success report nor a resume sends it again, and the time stays.
    last.report(sequence, "bound").await;
    assert_eq!(post(&s, &format!("{path}/resume")).await.status(), 200);
    let after = get(&s, &path).await;
    assert_eq!(after["completed_at"], done["completed_at"]);
    let log = queued(&s, hook).await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["message_id"], a.header("webhook-id"));
    s.stop().await;
}

#[tokio::test]
async fn an_aborted_deployment_never_completes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 10, 10).await;
    let (url, _got) = receiver(|_| Answer::Status(204)).await;
    let (hook, _) = register(&s, &url, &["deployment.completed"]).await;
    let (id, token) = deployment(&s).await;
    let dev = Sim::new(&s, &token).await;
    let (manifest, _) = dev.poll_verified().await.expect("offered");
    dev.report(manifest.sequence(), "downloading").await;
    assert_eq!(
        post(&s, &format!("/api/v1/deployments/{id}/abort"))
            .await
            .status(),
        200
    );
    // Its one device finishing after the abort (the report is still recorded) does not make
    // it complete.
    dev.report(manifest.sequence(), "installed").await;
    let d = get(&s, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(d["completed_at"], Value::Null, "{d}");
    assert_eq!(queued(&s, hook).await, Vec::<Value>::new());
    s.stop().await;
}
