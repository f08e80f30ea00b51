//! A deployment's page (`GET /api/v1/deployments/{id}`), its timeline, its devices' pages and the
//! list of deployments (`GET /api/v1/deployments`)
//! take the ranked targets from the cache kept per fleet generation (`fleet/target_cache.rs`)
//! and answer exactly what they answer with nothing kept: each answer is compared with the one
//! a freshly started server (empty cache, same data) gives, through reports, a rename (a new
//! generation), a pause and an abort.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

async fn get(s: &TestServer, path: &str) -> Value {
    s.get_json(path).await
}

/// Everything the three routes answer about deployment `id`: the deployment, its timeline
/// without its last point (drawn at "now"), and its devices, page by page (7 a page), unfiltered
/// and per state.
async fn answers(s: &TestServer, id: i64) -> Value {
    let deployment = get(s, &format!("/api/v1/deployments/{id}")).await;
    let mut timeline = get(s, &format!("/api/v1/deployments/{id}/timeline")).await;
    let points = timeline["points"].as_array_mut().unwrap();
    if deployment["state"] != "aborted" && deployment["phase"] != "completed" {
        points.pop();
    }
    let mut pages = serde_json::Map::new();
    for filter in ["", "pending", "installed", "failed", "skipped", "cancelled"] {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/deployments/{id}/devices?limit=7");
            if !filter.is_empty() {
                path.push_str(&format!("&state={filter}"));
            }
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = get(s, &path).await;
            items.push(page["items"].clone());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        pages.insert(filter.to_owned(), Value::Array(items));
    }
    let listed = get(s, "/api/v1/deployments").await;
    json!({"deployment": deployment, "timeline": timeline, "devices": pages, "listed": listed})
}

/// Asserts that `s` answers twice alike (the second from the cache), and as a server started
/// afresh over the same data does (nothing kept); returns that fresh server.
async fn same_as_uncached(s: TestServer, dir: &std::path::Path, id: i64) -> TestServer {
    let first = answers(&s, id).await;
    assert!(
        !s.state.rollout_targets.is_empty(),
        "the routes keep the ranked targets"
    );
    let again = answers(&s, id).await;
    assert_eq!(first, again, "the cached answer differs from the first");
    s.stop().await;
    let fresh = TestServer::start(dir).await;
    assert!(fresh.state.rollout_targets.is_empty());
    let uncached = answers(&fresh, id).await;
    assert_eq!(
        first, uncached,
        "the cached answer differs from a fresh server's"
    );
    fresh
}

#[tokio::test]
async fn a_deployments_pages_from_the_cache_equal_the_uncached_answers() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let ids: Vec<String> = (0..20).map(|i| format!("cam-{i:02}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let tokens = provision(&s, "lab", &ids).await;
    // Four devices of the group with another accelerator: skipped, listed after the targets.
    let others: Vec<Value> = (0..4)
        .map(|i| json!({"id": format!("npu128-{i}"), "accelerator": "ethos-u55-128", "group": "lab"}))
        .collect();
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"devices": others}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [10, 50, 100], "success_threshold": 0.5,
                           "failure_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let s = same_as_uncached(s, dir.path(), id).await;

    // Reports: the first batch's devices, one installs, one fails (the next batch opens).
    let mut offered = Vec::new();
    for token in &tokens {
        let dev = Sim::new(&s, token).await;
        if let Some((manifest, _)) = dev.poll_verified().await {
            offered.push((dev, manifest.sequence()));
        }
    }
    assert_eq!(offered.len(), 2, "batch 0 of 20 targets at 10 %");
    offered[0].0.report(offered[0].1, "installed").await;
    offered[1].0.report(offered[1].1, "failed").await;
    let s = same_as_uncached(s, dir.path(), id).await;

    // A rename is a new generation: the cached entry of the old one answers no more.
    let target = get(&s, &format!("/api/v1/deployments/{id}/devices?limit=1")).await["items"][0]
        ["device_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .req(Method::PATCH, &format!("/api/v1/devices/{target}"))
        .json(&json!({"name": "renamed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let first = get(&s, &format!("/api/v1/deployments/{id}/devices?limit=1")).await;
    assert_eq!(first["items"][0]["name"], "renamed", "{first}");
    // A device moved out of the group, another revoked: no longer targets.
    let r = s
        .req(Method::PATCH, &format!("/api/v1/devices/{}", ids[19]))
        .json(&json!({"group": "elsewhere"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = s
        .req(Method::POST, "/api/v1/devices/npu128-0/revoke")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let s = same_as_uncached(s, dir.path(), id).await;

    let r = s
        .req(Method::POST, &format!("/api/v1/deployments/{id}/pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let s = same_as_uncached(s, dir.path(), id).await;
    let r = s
        .req(Method::POST, &format!("/api/v1/deployments/{id}/abort"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let s = same_as_uncached(s, dir.path(), id).await;
    s.stop().await;
}

/// The change a request makes, then: the deployment's answers come from the kept ranking moved
/// forward by the devices the change touched (`fleet/ranking.rs`), never from ranking the group
/// again, and equal a fresh server's.
#[tokio::test]
async fn a_fleet_change_moves_the_kept_ranking_forward_instead_of_ranking_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let lab: Vec<String> = (0..30).map(|i| format!("lab-{i:02}")).collect();
    let lab: Vec<&str> = lab.iter().map(String::as_str).collect();
    provision(&s, "lab", &lab).await;
    provision(&s, "elsewhere", &["away-0", "away-1"]).await;
    let others: Vec<Value> = (0..3)
        .map(|i| json!({"id": format!("npu128-{i}"), "accelerator": "ethos-u55-128", "group": "lab"}))
        .collect();
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"devices": others}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [10, 50, 100], "success_threshold": 0.5,
                           "failure_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    answers(&s, id).await;
    let device = |id: &str, accelerator: &str, group: &str| json!({"devices": [{"id": id, "accelerator": accelerator, "group": group}]});
    // (what, method, path, body, the status it answers)
    let changes = [
        (
            "provisioned into the group",
            Method::POST,
            "/api/v1/devices",
            Some(device("lab-new-0", "ethos-u55-256", "lab")),
            201,
        ),
        (
            "provisioned elsewhere",
            Method::POST,
            "/api/v1/devices",
            Some(device("away-2", "ethos-u55-256", "elsewhere")),
            201,
        ),
        (
            "a target renamed",
            Method::PATCH,
            "/api/v1/devices/lab-03",
            Some(json!({"name": "third"})),
            200,
        ),
        (
            "a target moved out",
            Method::PATCH,
            "/api/v1/devices/lab-04",
            Some(json!({"group": "elsewhere"})),
            200,
        ),
        (
            "a device moved in",
            Method::PATCH,
            "/api/v1/devices/away-0",
            Some(json!({"group": "lab"})),
            200,
        ),
        (
            "a target given another accelerator",
            Method::PATCH,
            "/api/v1/devices/lab-05",
            Some(json!({"accelerator": "ethos-u55-128"})),
            200,
        ),
        (
            "a skipped device given the pack's accelerator",
            Method::PATCH,
            "/api/v1/devices/npu128-1",
            Some(json!({"accelerator": "ethos-u55-256"})),
            200,
        ),
        (
            "a target revoked",
            Method::POST,
            "/api/v1/devices/lab-06/revoke",
            None,
            204,
        ),
        (
            "another deployment made (no device changed)",
            Method::POST,
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "1.0.0", "group": "elsewhere"})),
            201,
        ),
    ];
    for (what, method, path, body, status) in changes {
        let mut r = s.req(method, path);
        if let Some(body) = body {
            r = r.json(&body);
        }
        assert_eq!(r.send().await.unwrap().status(), status, "{what}");
        let (ranked, moved) = s.state.rollout_targets.rankings();
        get(&s, &format!("/api/v1/deployments/{id}")).await;
        get(&s, &format!("/api/v1/deployments/{id}/devices?limit=5")).await;
        let (ranked_after, moved_after) = s.state.rollout_targets.rankings();
        assert_eq!(ranked_after, ranked, "{what}: the group was ranked again");
        assert!(
            moved_after > moved,
            "{what}: the kept ranking was not moved forward"
        );
    }
    let fresh = same_as_uncached(s, dir.path(), id).await;
    fresh.stop().await;
}
