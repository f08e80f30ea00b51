//! Writers racing each other (issue #11 point 3): 20 tasks creating deployments and rollbacks
//! beside 6 creating models, devices and tokens, while devices poll and their last-seen times
//! are flushed. Every request must succeed: a deferred transaction that read before another
//! writer committed once answered 500 `database is locked` at once.
use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::TestServer;
use crate::support::{Sim, fleet, provision};

const DEPLOYERS: usize = 20;
const DEPLOYMENTS_EACH: usize = 10;
const CREATORS: usize = 6;
const CREATIONS_EACH: usize = 10;
const DEVICES: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn survives_concurrent_deployments_rollbacks_creations_and_polls_with_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(TestServer::start(dir.path()).await);
    fleet(&s).await;
    let ids: Vec<String> = (0..DEVICES).map(|i| format!("poller-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let tokens = provision(&s, "lab", &ids).await;
    let r = s
        .req(Method::POST, "/api/v1/deployments")
        .json(&json!({"model": "kws", "version": "1.0.0", "group": "lab"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..DEPLOYERS {
        let s = Arc::clone(&s);
        writers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for i in 0..DEPLOYMENTS_EACH {
                let version = if (t + i) % 2 == 0 { "1.0.0" } else { "2.0.0" };
                let r = if i % 3 == 2 {
                    s.req(Method::POST, "/api/v1/groups/lab/rollback")
                        .json(&json!({"model": "kws", "version": version}))
                } else {
                    s.req(Method::POST, "/api/v1/deployments")
                        .json(&json!({"model": "kws", "version": version, "group": "lab"}))
                }
                .send()
                .await
                .unwrap();
                if r.status() != StatusCode::CREATED {
                    failures.push(format!(
                        "deploy {t}/{i}: {} {}",
                        r.status(),
                        r.text().await.unwrap()
                    ));
                }
            }
            failures
        }));
    }
    for t in 0..CREATORS {
        let s = Arc::clone(&s);
        writers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for i in 0..CREATIONS_EACH {
                let (path, body) = match (t + i) % 3 {
                    0 => ("/api/v1/models", json!({"name": format!("m-{t}-{i}")})),
                    1 => (
                        "/api/v1/devices",
                        json!({"id": format!("new-{t}-{i}"), "accelerator": "ethos-u55-256",
                               "group": "other"}),
                    ),
                    _ => ("/api/v1/tokens", json!({"name": format!("t-{t}-{i}")})),
                };
                let r = s.req(Method::POST, path).json(&body).send().await.unwrap();
                if r.status() != StatusCode::CREATED {
                    failures.push(format!(
                        "{path} {t}/{i}: {} {}",
                        r.status(),
                        r.text().await.unwrap()
                    ));
                }
            }
            failures
        }));
    }
    // Devices poll until the writers are done; their last-seen times are flushed all along.
    let mut readers = Vec::new();
    for token in tokens {
        let s = Arc::clone(&s);
        let stop = Arc::clone(&stop);
        readers.push(tokio::spawn(async move {
            let sim = Sim::new(&s, &token).await;
            let mut failures = Vec::new();
            let mut polls = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || polls == 0 {
                let r = sim.poll().await;
                if !matches!(r.status().as_u16(), 200 | 204) {
                    failures.push(format!("poll: {}", r.status()));
                }
                polls += 1;
            }
            failures
        }));
    }
    let flusher = {
        let s = Arc::clone(&s);
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut failures = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Err(e) = s.state.polling.flush_last_seen(&s.state.db).await {
                    failures.push(format!("last-seen flush: {e}"));
                }
                tokio::task::yield_now().await;
            }
            failures
        })
    };
    let mut failures = Vec::new();
    for w in writers {
        failures.extend(w.await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        failures.extend(r.await.unwrap());
    }
    failures.extend(flusher.await.unwrap());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let (deployments,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM deployments")
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    assert_eq!(deployments as usize, 1 + DEPLOYERS * DEPLOYMENTS_EACH);
    Arc::try_unwrap(s)
        .ok()
        .expect("every task is done")
        .stop()
        .await;
}
