//! PostgreSQL stopped under load: while it is down, operator requests through either replica
//! fail with 503 (never 500, never a hang), device polls are still answered from memory; once it
//! is back, both replicas serve again without being restarted, and every device whose creation
//! was answered 201 exists.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::cluster::{Api, Cluster};
use crate::{models, provision};

/// What one load worker saw: (device id it tried to create, status, while the database was
/// down or just coming back).
type Outcomes = Vec<(String, u16, bool)>;

/// Creates devices through `api`, one request each, until `stop`; records every outcome.
async fn create_devices(
    api: Api,
    name: &'static str,
    down: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Outcomes {
    let mut out = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = format!("{name}-{n:04}");
        let r = api
            .req(Method::POST, "/api/v1/devices")
            .json(
                &json!({"devices": [{"id": id, "accelerator": "ethos-u55-256", "group": "load"}]}),
            )
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!("creating {id} through {}: {e} (a hang or a reset)", api.url)
            });
        out.push((id, r.status().as_u16(), down.load(Ordering::Relaxed)));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_postgresql_stopped_under_load_with_503s_and_nothing_lost() {
    let Some(cluster) = Cluster::up("") else {
        return;
    };
    let (a, b) = (cluster.api_a(), cluster.api_b());
    models(&a).await;
    let device = provision(&b, "polling", &["poller".to_owned()])
        .await
        .remove(0);
    crate::poll_until(&a, &device, 0, StatusCode::NO_CONTENT).await;

    let down = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let workers = [
        tokio::spawn(create_devices(
            a.clone(),
            "via-a",
            Arc::clone(&down),
            Arc::clone(&stop),
        )),
        tokio::spawn(create_devices(
            b.clone(),
            "via-b",
            Arc::clone(&down),
            Arc::clone(&stop),
        )),
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;

    down.store(true, Ordering::Relaxed);
    cluster.script(&["db-stop"]);
    // While it is down, the poll path still answers from memory, through both replicas.
    for _ in 0..20 {
        for api in [&a, &b] {
            assert_eq!(crate::poll(api, &device, 0).await, StatusCode::NO_CONTENT);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Health says what works: polls do, writes do not. Readiness stays 200 (the replica serves
    // polls, so a load balancer keeps sending them), liveness too.
    let ready = a.req(Method::GET, "/readyz").send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["can_serve_polls"], true, "{ready}");
    assert_eq!(ready["can_accept_writes"], false, "{ready}");
    assert_eq!(ready["checks"]["database"]["ok"], false, "{ready}");
    for path in ["/healthz", "/livez"] {
        let r = a.req(Method::GET, path).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    cluster.script(&["db-start"]);

    // Recovered without a restart: both replicas accept writes again.
    let deadline = std::time::Instant::now() + crate::PATIENCE;
    for api in [&a, &b] {
        while api
            .req(Method::GET, "/readyz")
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()["can_accept_writes"]
            != true
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not recover",
                api.url
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    down.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut outcomes = Vec::new();
    for w in workers {
        outcomes.extend(w.await.unwrap());
    }

    let wrong: Vec<_> = outcomes
        .iter()
        .filter(|(_, status, _)| *status != 201 && *status != 503)
        .collect();
    assert!(wrong.is_empty(), "neither 201 nor 503: {wrong:?}");
    assert!(
        outcomes.iter().any(|(_, s, down)| *s == 503 && *down),
        "no request failed while the database was down: {outcomes:?}"
    );
    for prefix in ["via-a", "via-b"] {
        let last = outcomes
            .iter()
            .rev()
            .find(|(id, _, _)| id.starts_with(prefix))
            .unwrap();
        assert_eq!(last.1, 201, "{prefix} did not recover: {outcomes:?}");
    }
    // Nothing lost: every 201 is a device the database has, whichever replica is asked.
    let listed = b
        .call(Method::GET, "/api/v1/devices?group=load", None, 200)
        .await;
    let listed: std::collections::HashSet<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    // (A 503 may still have committed: a connection cut during COMMIT cannot tell.)
    for (id, status, _) in &outcomes {
        if *status == 201 {
            assert!(
                listed.contains(id.as_str()),
                "{id} was created (201) and is gone"
            );
        }
    }
}
