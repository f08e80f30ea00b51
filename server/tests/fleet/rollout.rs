//! Staged rollouts: batches open on success, a pause holds the rollout (only devices that had
//! started are offered it), resume opens it again, failures abort the deployment, and an
//! operator can abort it.
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::TestServer;
use crate::support::{Sim, deploy, deployment, fleet, provision};

const IDS: [&str; 10] = [
    "d00", "d01", "d02", "d03", "d04", "d05", "d06", "d07", "d08", "d09",
];

/// The simulated devices currently offered a manifest.
async fn offered<'a>(sims: &mut [Sim<'a>]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, sim) in sims.iter().enumerate() {
        let r = sim.poll().await;
        if r.status() == StatusCode::OK {
            out.push(i);
        } else {
            assert_eq!(r.status(), StatusCode::NO_CONTENT);
        }
    }
    out
}

async fn sims<'a>(s: &'a TestServer) -> Vec<Sim<'a>> {
    let tokens = provision(s, "field", &IDS).await;
    let mut out = Vec::new();
    for t in &tokens {
        out.push(Sim::new(s, t).await);
    }
    out
}

async fn post(s: &TestServer, path: &str) -> reqwest::Response {
    s.req(Method::POST, path).send().await.unwrap()
}

#[tokio::test]
async fn a_staged_rollout_advances_batch_by_batch_and_pauses() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field",
               "rollout": {"batches": [10, 50, 100]}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    assert_eq!(d["rollout"]["success_threshold"], 0.9);
    assert_eq!(d["progress"]["batches"][0]["devices"], 1);
    assert_eq!(d["progress"]["batches"][1]["devices"], 4);
    assert_eq!(d["progress"]["batches"][2]["devices"], 5);

    // Batch 0: one canary, the same one on every evaluation.
    let first = offered(&mut sims).await;
    assert_eq!(first.len(), 1);
    sims[first[0]].install().await;
    let d = deployment(&s, id).await;
    assert_eq!(d["open_batches"], 2);
    assert_eq!(d["progress"]["batches"][0]["counts"]["installed"], 1);

    // Batch 1 open: five devices offered (the canary has installed: 204 for it).
    let second = offered(&mut sims).await;
    assert_eq!(second.len(), 4);
    assert!(!second.contains(&first[0]));

    // Paused once every device of batch 1 has started downloading: they may finish, and all
    // succeed, yet batch 2 stays closed.
    let sequence = d["sequence"].as_u64().unwrap();
    for &i in &second {
        sims[i].report(sequence, "downloading").await;
    }
    let r = post(&s, &format!("/api/v1/deployments/{id}/pause")).await;
    assert_eq!(r.status(), 200);
    for &i in &second {
        sims[i].install().await;
    }
    let d = deployment(&s, id).await;
    assert_eq!(d["state"], "paused");
    assert_eq!(d["open_batches"], 2);
    assert!(offered(&mut sims).await.is_empty());

    // Resumed: batch 2 opens at once.
    let r = post(&s, &format!("/api/v1/deployments/{id}/resume")).await;
    assert_eq!(r.status(), 200);
    let third = offered(&mut sims).await;
    assert_eq!(third.len(), 5);
    for &i in &third {
        sims[i].install().await;
    }
    let d = deployment(&s, id).await;
    assert_eq!(d["phase"], "completed");
    assert_eq!(d["progress"]["counts"]["installed"], 10);
    s.stop().await;
}

/// A pause holds the rollout (issue 36): a device that has not started is offered nothing from
/// it until it resumes, while one that started (mid-download) may finish.
#[tokio::test]
async fn a_paused_deployment_is_offered_only_to_devices_that_had_started() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let sequence = d["sequence"].as_u64().unwrap();
    assert_eq!(offered(&mut sims).await.len(), 10);
    for sim in &sims[..3] {
        sim.report(sequence, "downloading").await;
    }
    let r = post(&s, &format!("/api/v1/deployments/{id}/pause")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        offered(&mut sims).await,
        [0, 1, 2],
        "only the three that started"
    );
    let held: serde_json::Value = s
        .req(Method::GET, &format!("/api/v1/deployments/{id}/devices"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let held: Vec<&serde_json::Value> = held["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["offered"] == false)
        .collect();
    assert_eq!(held.len(), 7, "{held:?}");
    assert!(
        held.iter()
            .all(|t| t["reason"].as_str().unwrap().starts_with("held")),
        "{held:?}"
    );
    // One that started finishes while paused.
    sims[0].install().await;
    // Resumed: offered to every device that has not installed it.
    let r = post(&s, &format!("/api/v1/deployments/{id}/resume")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(offered(&mut sims).await.len(), 9);
    s.stop().await;
}

#[tokio::test]
async fn a_rollout_aborts_itself_when_failures_exceed_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "field",
               "rollout": {"batches": [20, 100], "failure_threshold": 0.4}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let canaries = offered(&mut sims).await;
    assert_eq!(canaries.len(), 2);
    let sequence = d["sequence"].as_u64().unwrap();
    // One success, one failure: 0.5 > 0.4.
    sims[canaries[0]].install().await;
    sims[canaries[1]].report(sequence, "failed").await;
    let d = deployment(&s, id).await;
    assert_eq!(d["state"], "aborted");
    assert!(
        d["abort_reason"]
            .as_str()
            .unwrap()
            .starts_with("auto-abort"),
        "{d}"
    );
    assert_eq!(d["progress"]["counts"]["failed"], 1);
    // The eight devices of the batch that never opened will never hear of it: cancelled, not
    // pending, in the counts and in the device list.
    assert_eq!(d["progress"]["counts"]["pending"], 0, "{d}");
    assert_eq!(d["progress"]["counts"]["cancelled"], 8, "{d}");
    let list = s
        .get_json(&format!("/api/v1/deployments/{id}/devices?state=cancelled"))
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 8, "{list}");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "cancelled" && t["offered"] == false),
        "{list}"
    );
    // No longer offered to anyone; the device that installed it keeps it.
    assert!(offered(&mut sims).await.is_empty());
    let dev: serde_json::Value = s
        .req(
            Method::GET,
            &format!("/api/v1/devices/{}", IDS[canaries[0]]),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(dev["current_version"], "2.0.0");
    // An aborted deployment cannot be resumed or aborted again.
    assert_eq!(
        post(&s, &format!("/api/v1/deployments/{id}/resume"))
            .await
            .status(),
        409
    );
    assert_eq!(
        post(&s, &format!("/api/v1/deployments/{id}/abort"))
            .await
            .status(),
        409
    );
    s.stop().await;
}

/// A device retries a corrupted download and says so (`downloading` with its reason and
/// `attempts`): only the state it reported last counts, so its retries never abort the rollout,
/// and the attempt that fails for good does.
#[tokio::test]
async fn retried_attempts_do_not_count_towards_the_auto_abort_the_last_failed_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "field",
               "rollout": {"batches": [20, 100], "failure_threshold": 0.4}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let canaries = offered(&mut sims).await;
    assert_eq!(canaries.len(), 2);
    let sequence = d["sequence"].as_u64().unwrap();
    let (retrying, fine) = (&sims[canaries[0]], &sims[canaries[1]]);
    for attempts in [1, 2] {
        let r = retrying
            .report_body(
                json!({"sequence": sequence, "state": "downloading", "attempts": attempts,
                                "reason": "pack SHA-256 in flash is not the manifest's"}),
            )
            .await;
        assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    }
    // One device of two has had two failed attempts: still no failure counted.
    let d = deployment(&s, id).await;
    assert_eq!(d["state"], "active", "{d}");
    assert_eq!(d["progress"]["counts"]["failed"], 0, "{d}");
    assert_eq!(d["progress"]["counts"]["downloading"], 1, "{d}");
    let dev: serde_json::Value = s
        .req(
            Method::GET,
            &format!("/api/v1/devices/{}", IDS[canaries[0]]),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        dev["last_reason"], "attempt 2: pack SHA-256 in flash is not the manifest's",
        "{dev}"
    );
    fine.report(sequence, "downloading").await;
    // The third attempt fails for good: 1 of 2 > 0.4.
    let r = retrying
        .report_body(
            json!({"sequence": sequence, "state": "failed", "attempts": 3,
                            "reason": "pack SHA-256 in flash is not the manifest's"}),
        )
        .await;
    assert_eq!(r.status(), 204);
    let d = deployment(&s, id).await;
    assert_eq!(d["state"], "aborted", "{d}");
    assert_eq!(d["progress"]["counts"]["failed"], 1, "{d}");
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_report_claiming_zero_or_too_many_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "field"}),
    )
    .await;
    let sequence = d["sequence"].as_u64().unwrap();
    let first = offered(&mut sims).await[0];
    for attempts in [0, 101] {
        let r = sims[first]
            .report_body(json!({"sequence": sequence, "state": "failed", "attempts": attempts}))
            .await;
        assert_eq!(r.status(), 422);
        let body = r.text().await.unwrap();
        assert!(body.contains("attempts: must be from 1 to 100"), "{body}");
    }
    s.stop().await;
}

#[tokio::test]
async fn an_operator_abort_stops_the_offer() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut sims = sims(&s).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await;
    assert_eq!(offered(&mut sims).await.len(), 10);
    let r = post(&s, &format!("/api/v1/deployments/{}/abort", d["id"])).await;
    assert_eq!(r.status(), 200);
    assert!(offered(&mut sims).await.is_empty());
    let audit: Vec<serde_json::Value> = s
        .req(Method::GET, "/api/v1/audit")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(audit[0]["action"], "deployment.abort");
    s.stop().await;
}

/// What `token`'s device is offered in `snapshot`: its id and the assignment's sequence, pack
/// and manifest bytes.
fn offer(
    snapshot: &npub_server::device::snapshot::Snapshot,
    token: &str,
) -> (String, Option<(u64, String, Vec<u8>)>) {
    let enrolled = snapshot
        .enrolled(token.as_bytes())
        .expect("the device is in the snapshot");
    let assignment = enrolled
        .assignment
        .as_ref()
        .map(|a| (a.sequence, a.sha256.clone(), a.manifest.to_vec()));
    (enrolled.entry.id.to_string(), assignment)
}

/// Devices provisioned while a staged rollout is open join its ranking and can move its batch
/// boundary. The snapshot extended with them (the database not read again) offers every device
/// exactly what a snapshot read from the database offers it.
#[tokio::test]
async fn provisioning_into_an_open_rollout_offers_what_a_database_read_offers() {
    let dir = tempfile::tempdir().unwrap();
    // No periodic cache check: the counts below are of provisioning's own snapshots. With the
    // 1 s default, a check that read the generation between a provisioning's commit and its
    // extension took the rebuild lock first and read the fleet (CI saw 1 extension of 2).
    let s = TestServer::start_with(dir.path(), |c| c.cache_check = 3600).await;
    fleet(&s).await;
    let mut tokens = provision(&s, "field", &IDS).await;
    tokens.extend(provision(&s, "lab", &["lab-0"]).await);
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field",
               "rollout": {"batches": [30, 100]}}),
    )
    .await;
    deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let (read, extended, _) = s.state.polling.cache.builds();

    let more: Vec<String> = (10..20).map(|i| format!("d{i:02}")).collect();
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    tokens.extend(provision(&s, "field", &more).await);
    tokens.extend(provision(&s, "lab", &["lab-1", "lab-2"]).await);
    let (read_now, extended_now, _) = s.state.polling.cache.builds();
    assert_eq!(
        extended_now,
        extended + 2,
        "each provisioning extended the snapshot"
    );
    assert_eq!(read_now, read, "nothing was read from the database");

    let grown = s.state.polling.cache.get();
    s.state
        .polling
        .cache
        .rebuild(&s.state.db, &s.state.store)
        .await
        .unwrap();
    let from_db = s.state.polling.cache.get();
    assert_eq!(grown.generation, from_db.generation);
    let offers: Vec<_> = tokens.iter().map(|t| offer(&grown, t)).collect();
    for (t, o) in tokens.iter().zip(&offers) {
        assert_eq!(*o, offer(&from_db, t), "{}", o.0);
    }
    // 30 % of 20 field devices, and every lab device, new ones included.
    let offered = |prefix: &str| {
        offers
            .iter()
            .filter(|(id, a)| id.starts_with(prefix) && a.is_some())
            .count()
    };
    assert_eq!(offered("d"), 6);
    assert_eq!(offered("lab-"), 3);
    let r = Sim::new(&s, &tokens[tokens.len() - 1]).await.poll().await;
    assert_eq!(r.status(), StatusCode::OK);

    let metrics = s
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "npub_fleet_snapshots_total{{kind=\"extended\"}} {extended_now}\n"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("npub_fleet_devices 23\n"), "{metrics}");
    s.stop().await;
}

/// A target that leaves (revoked here) changes the shares the rollout rules count, so the rules
/// run again then, not only at the next report: three targets at `[40, 100]` put two in the
/// first batch; one installs (1 of 2, under the 0.9 needed); when the third leaves, the first
/// batch is one device, the installed one, and the next batch opens at once, with its audit
/// entry.
#[tokio::test]
async fn a_target_leaving_runs_the_rollout_rules_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let ids = ["t0", "t1", "t2"];
    let tokens = provision(&s, "trio", &ids).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "trio",
               "rollout": {"batches": [40, 100], "success_threshold": 0.9,
                           "failure_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    // The devices in rank order, from the deployment's own list.
    let page = s
        .get_json(&format!("/api/v1/deployments/{id}/devices"))
        .await;
    let ranked: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["device_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ranked.len(), 3, "{page}");
    let token = |dev: &str| &tokens[ids.iter().position(|i| *i == dev).unwrap()];
    let mut first = Sim::new(&s, token(&ranked[0])).await;
    first.install().await;
    let d = deployment(&s, id).await;
    assert_eq!(
        d["open_batches"], 1,
        "1 of 2 installed holds the first batch: {d}"
    );
    let r = post(&s, &format!("/api/v1/devices/{}/revoke", ranked[2])).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let d = deployment(&s, id).await;
    assert_eq!(
        d["open_batches"], 2,
        "the first batch is now the installed device: {d}"
    );
    let audit = s
        .get_json(&format!(
            "/api/v1/audit?action=deployment.batch_open&object=deployments/{id}"
        ))
        .await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
    // The second device, in the batch just opened, is offered it.
    let second = Sim::new(&s, token(&ranked[1])).await;
    assert!(second.poll_verified().await.is_some());
    s.stop().await;
}
