//! Rollout control (issue 36 item 3), through the device API as devices see it: a paused
//! deployment holds, an aborted one's untouched devices read `cancelled`, a deployment can pause
//! itself at its failure threshold instead of aborting, its failed devices can be retried with a
//! new manifest, and a group's maintenance window holds new offers outside it. Every change is
//! audited.
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, deployment, fleet, provision};

async fn send(s: &TestServer, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = s.req(method, path);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The audit actions recorded on `object`, oldest first.
async fn audited(s: &TestServer, object: &str) -> Vec<String> {
    let (_, page) = send(
        s,
        Method::GET,
        &format!("/api/v1/audit?object={object}&limit=100"),
        None,
    )
    .await;
    let mut actions: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    actions.reverse();
    actions
}

#[tokio::test]
async fn a_paused_deployment_holds_and_an_aborted_ones_untouched_devices_read_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["a", "b", "c"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let seq = d["sequence"].as_u64().unwrap();
    let started = Sim::new(&s, &tokens[0]).await;
    assert!(started.poll_verified().await.is_some());
    started.report(seq, "downloading").await;
    let (status, _) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/pause"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    // Held: a device that had not started is offered nothing; the one mid-download may finish.
    assert_eq!(
        Sim::new(&s, &tokens[1]).await.poll().await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(started.poll().await.status(), StatusCode::OK);
    let (status, _) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/resume"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        Sim::new(&s, &tokens[1]).await.poll().await.status(),
        StatusCode::OK
    );
    let (status, _) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/abort"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let d = deployment(&s, id).await;
    assert_eq!(d["progress"]["counts"]["pending"], 0, "{d}");
    assert_eq!(d["progress"]["counts"]["cancelled"], 2, "{d}");
    assert_eq!(d["progress"]["counts"]["downloading"], 1, "{d}");
    let (_, list) = send(
        &s,
        Method::GET,
        &format!("/api/v1/deployments/{id}/devices?state=cancelled"),
        None,
    )
    .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(
        audited(&s, &format!("deployments/{id}")).await,
        [
            "deployment.create",
            "deployment.pause",
            "deployment.resume",
            "deployment.abort"
        ]
    );
    s.stop().await;
}

#[tokio::test]
async fn a_deployment_pauses_at_its_failure_threshold_when_asked_and_again_only_on_a_new_failure() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["a", "b", "c", "d", "e"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [100], "failure_threshold": 0.2, "on_failure": "pause"}}),
    )
    .await;
    assert_eq!(d["rollout"]["on_failure"], "pause");
    let id = d["id"].as_i64().unwrap();
    let seq = d["sequence"].as_u64().unwrap();
    // 1 of 5 is not above 0.2; 2 of 5 is.
    Sim::new(&s, &tokens[0]).await.report(seq, "failed").await;
    assert_eq!(deployment(&s, id).await["state"], "active");
    Sim::new(&s, &tokens[1]).await.report(seq, "failed").await;
    let d = deployment(&s, id).await;
    assert_eq!(d["state"], "paused", "{d}");
    assert!(
        d["pause_reason"]
            .as_str()
            .unwrap()
            .starts_with("auto-pause: 2 of 5 offered devices failed"),
        "{d}"
    );
    assert!(d["abort_reason"].is_null());
    // Paused, it holds: a device that has not started is offered nothing.
    assert_eq!(
        Sim::new(&s, &tokens[2]).await.poll().await.status(),
        StatusCode::NO_CONTENT
    );
    // Resumed over those two failures, it stays active...
    let (status, d) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/resume"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(d["state"], "active", "{d}");
    assert!(d["pause_reason"].is_null());
    assert_eq!(
        Sim::new(&s, &tokens[2]).await.poll().await.status(),
        StatusCode::OK
    );
    Sim::new(&s, &tokens[2])
        .await
        .report(seq, "installed")
        .await;
    assert_eq!(deployment(&s, id).await["state"], "active");
    // ...until a new failure.
    Sim::new(&s, &tokens[3])
        .await
        .report(seq, "rolled_back")
        .await;
    assert_eq!(deployment(&s, id).await["state"], "paused");
    assert_eq!(
        audited(&s, &format!("deployments/{id}")).await,
        [
            "deployment.create",
            "deployment.auto_pause",
            "deployment.resume",
            "deployment.auto_pause"
        ]
    );
    s.stop().await;
}

#[tokio::test]
async fn retry_failed_offers_a_new_manifest_to_the_failed_devices_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["a", "b", "c", "d"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [100], "failure_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let seq = d["sequence"].as_u64().unwrap();
    let mut ok = Sim::new(&s, &tokens[0]).await;
    ok.install().await;
    Sim::new(&s, &tokens[1]).await.report(seq, "failed").await;
    Sim::new(&s, &tokens[2])
        .await
        .report(seq, "rolled_back")
        .await;

    let (status, retry) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/retry-failed"),
        None,
    )
    .await;
    assert_eq!(status, 201, "{retry}");
    let retry_id = retry["id"].as_i64().unwrap();
    let retry_seq = retry["sequence"].as_u64().unwrap();
    assert!(retry_seq > seq);
    assert_eq!(retry["retry_of"], id);
    assert_eq!(retry["version"], "1.0.0");
    assert_eq!(retry["target"]["group"], "lab");
    assert_eq!(retry["progress"]["targets"], 2, "{retry}");
    assert_eq!(retry["rollout"]["batches"], json!([100]));
    assert_eq!(retry["rollout"]["failure_threshold"], 1.0);
    // The failed devices are offered the retry's new manifest, even above the old sequence.
    for t in &tokens[1..3] {
        let mut sim = Sim::new(&s, t).await;
        sim.last_sequence = seq;
        let (m, _) = sim.poll_verified().await.expect("the retry is offered");
        assert_eq!(m.sequence(), retry_seq);
        assert_eq!(sim.install().await, retry_seq);
    }
    // The installed device has nothing newer; the untouched one still gets the original.
    assert_eq!(ok.poll().await.status(), StatusCode::NO_CONTENT);
    let untouched = Sim::new(&s, &tokens[3]).await;
    let (m, _) = untouched.poll_verified().await.unwrap();
    assert_eq!(m.sequence(), seq);
    // A device that is not among the retry's targets cannot report on it.
    let r = untouched
        .report_body(json!({"sequence": retry_seq, "state": "installed"}))
        .await;
    assert_eq!(r.status(), 409);
    let r = deployment(&s, retry_id).await;
    assert_eq!(r["progress"]["counts"]["installed"], 2, "{r}");
    assert_eq!(r["phase"], "completed");
    let (_, devices) = send(
        &s,
        Method::GET,
        &format!("/api/v1/deployments/{retry_id}/devices"),
        None,
    )
    .await;
    let listed: Vec<&str> = devices["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 2, "{devices}");
    assert!(listed.contains(&"b") && listed.contains(&"c"), "{listed:?}");
    // Created, then completed by its last install (audited by the server).
    assert_eq!(
        audited(&s, &format!("deployments/{retry_id}")).await,
        ["deployment.retry", "deployment.completed"]
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_retry_when_nothing_failed() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["a"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let (status, body) = send(
        &s,
        Method::POST,
        &format!("/api/v1/deployments/{id}/retry-failed"),
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("nothing to retry"),
        "{body}"
    );
    let (status, _) = send(
        &s,
        Method::POST,
        "/api/v1/deployments/99/retry-failed",
        None,
    )
    .await;
    assert_eq!(status, 404);
    s.stop().await;
}

/// `HH:MM` of `minutes` after midnight, wrapped to a day.
fn hhmm(minutes: i64) -> String {
    let m = minutes.rem_euclid(1440);
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[tokio::test]
async fn a_maintenance_window_holds_new_offers_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["a", "b"]).await;
    provision(&s, "edge", &["e"]).await;
    let now_utc = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        / 60)
        .rem_euclid(1440);
    // Closed now: it opens two hours from now, for an hour.
    let closed =
        json!({"start": hhmm(now_utc + 120), "end": hhmm(now_utc + 180), "time_zone": "UTC"});
    let (status, body) = send(
        &s,
        Method::PUT,
        "/api/v1/groups/lab/window",
        Some(closed.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, closed);
    let (_, groups) = send(&s, Method::GET, "/api/v1/groups", None).await;
    let lab = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "lab")
        .unwrap();
    assert_eq!(lab["window"], closed);
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "edge"}),
    )
    .await;
    let a = Sim::new(&s, &tokens[0]).await;
    assert_eq!(
        a.poll().await.status(),
        StatusCode::NO_CONTENT,
        "outside the window"
    );
    let e = Sim::new(&s, &provision(&s, "edge", &["e2"]).await[0]).await;
    assert_eq!(
        e.poll().await.status(),
        StatusCode::OK,
        "another group has no window"
    );

    // Open now (in a zone of its own): the same device is offered it.
    let open =
        json!({"start": hhmm(now_utc - 60), "end": hhmm(now_utc + 60), "time_zone": "Etc/GMT"});
    let (status, _) = send(&s, Method::PUT, "/api/v1/groups/lab/window", Some(open)).await;
    assert_eq!(status, 200);
    let r = a.poll().await;
    assert_eq!(r.status(), StatusCode::OK);
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    // Closed again: a device that already holds the manifest is still answered 304.
    send(&s, Method::PUT, "/api/v1/groups/lab/window", Some(closed)).await;
    let r = a
        .req(Method::GET, "/api/v1/device/manifest?seq=0")
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(
        Sim::new(&s, &tokens[1]).await.poll().await.status(),
        StatusCode::NO_CONTENT
    );

    let (status, _) = send(&s, Method::DELETE, "/api/v1/groups/lab/window", None).await;
    assert_eq!(status, 204);
    assert_eq!(
        Sim::new(&s, &tokens[1]).await.poll().await.status(),
        StatusCode::OK
    );
    let (status, body) = send(&s, Method::DELETE, "/api/v1/groups/lab/window", None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        audited(&s, "groups/lab").await,
        [
            "group.window_set",
            "group.window_set",
            "group.window_set",
            "group.window_clear"
        ]
    );
    s.stop().await;
}

#[tokio::test]
async fn a_maintenance_window_opens_only_on_its_days() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["a"]).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let minute = (now / 60).rem_euclid(1440);
    // The window opens this minute (today, UTC: 1970-01-01 was a Thursday) and lasts an hour, so
    // whatever the clock does during the test, the day it opened on is today.
    let today = (now.div_euclid(86_400) + 3).rem_euclid(7) as usize;
    let names = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let window = |days: Vec<&str>| json!({"start": hhmm(minute), "end": hhmm(minute + 60), "time_zone": "UTC", "days": days});
    let other_days: Vec<&str> = (0..7).filter(|d| *d != today).map(|d| names[d]).collect();
    let (status, body) = send(
        &s,
        Method::PUT,
        "/api/v1/groups/lab/window",
        Some(window(other_days.clone())),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["days"], json!(other_days));
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let a = Sim::new(&s, &tokens[0]).await;
    assert_eq!(
        a.poll().await.status(),
        StatusCode::NO_CONTENT,
        "the hour is right, the day is not"
    );
    let (status, body) = send(
        &s,
        Method::PUT,
        "/api/v1/groups/lab/window",
        Some(window(vec![names[today]])),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.poll().await.status(), StatusCode::OK, "today");
    // Every day, named: answered as no `days` at all.
    let (_, body) = send(
        &s,
        Method::PUT,
        "/api/v1/groups/lab/window",
        Some(window(names.to_vec())),
    )
    .await;
    assert!(body.get("days").is_none(), "{body}");
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_bad_maintenance_window_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for (body, words) in [
        (
            json!({"start": "25:00", "end": "04:00", "time_zone": "UTC"}),
            "start: \"25:00\"",
        ),
        (
            json!({"start": "02:00", "end": "4pm", "time_zone": "UTC"}),
            "end: \"4pm\"",
        ),
        (
            json!({"start": "02:00", "end": "02:00", "time_zone": "UTC"}),
            "never opens",
        ),
        (
            json!({"start": "02:00", "end": "03:00", "time_zone": "Europe/Atlantis"}),
            "time_zone: \"Europe/Atlantis\"",
        ),
        (
            json!({"start": "02:00", "end": "03:00", "time_zone": "UTC", "days": ["sat", "Sun"]}),
            "days: \"Sun\" is not a day of the week",
        ),
    ] {
        let (status, answer) = send(&s, Method::PUT, "/api/v1/groups/lab/window", Some(body)).await;
        assert_eq!(status, 422, "{answer}");
        assert!(
            answer["detail"].as_str().unwrap().contains(words),
            "{answer}"
        );
    }
    s.stop().await;
}
