//! Two replicas on one PostgreSQL and one S3 bucket, as `deploy/local-cluster.sh up` starts them
//! (issue #16, points 3 and 5): changes reach the other replica at once (`LISTEN/NOTIFY`), each
//! rollout transition is made by exactly one replica, a device survives its replica being killed
//! mid-download, and PostgreSQL going away turns requests into 503s that recover by themselves;
//! a statement PostgreSQL does not answer (a lock held elsewhere) is ended by the server's limits
//! and answered 503 in bounded time (`db_timeouts.rs`, one server on the test cluster of
//! `common/postgres.rs`).
//!
//! Each test starts its own cluster (a few seconds: `initdb`, s3s-fs, two replicas). They need
//! PostgreSQL 15's binaries and s3s-fs (both installed by `.ci/run`); outside CI a missing one
//! skips the test with a message.
#[path = "../s3/bucket.rs"]
mod bucket;
#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod db_timeouts;
mod deploy;
mod lb;
mod notify;
mod outage;
mod topology;
mod transitions;

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use cluster::Api;

/// How long a test waits for something that should happen at once before it fails. Generous:
/// the figures (bench/replicas.sh) say how fast; the tests say whether.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Model `kws` with `1.0.0` (conv1) and `2.0.0` (small_net, 134 KB), uploaded through `api`.
pub async fn models(api: &Api) {
    api.call(
        Method::POST,
        "/api/v1/models",
        Some(json!({"name": "kws"})),
        201,
    )
    .await;
    api.upload("kws", "1.0.0", common::conv1_npub()).await;
    let small_net =
        std::fs::read(common::fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite"))
            .unwrap();
    api.upload("kws", "2.0.0", small_net).await;
}

/// Provisions `ids` into `group` through `api`; their tokens, in order.
pub async fn provision(api: &Api, group: &str, ids: &[String]) -> Vec<String> {
    let devices: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "accelerator": "ethos-u55-256", "group": group}))
        .collect();
    let body = api
        .call(
            Method::POST,
            "/api/v1/devices",
            Some(json!({"devices": devices})),
            201,
        )
        .await;
    body.as_array()
        .unwrap()
        .iter()
        .map(|d| d["token"].as_str().unwrap().to_owned())
        .collect()
}

/// A device's manifest poll (`seq` = its last sequence) through `api`: the status.
pub async fn poll(api: &Api, token: &str, seq: u64) -> StatusCode {
    api.as_token(token)
        .req(Method::GET, &format!("/api/v1/device/manifest?seq={seq}"))
        .send()
        .await
        .unwrap()
        .status()
}

/// Polls through `api` until the answer is `want`; how long that took. Panics after
/// [`PATIENCE`].
pub async fn poll_until(api: &Api, token: &str, seq: u64, want: StatusCode) -> Duration {
    let start = Instant::now();
    loop {
        let got = poll(api, token, seq).await;
        if got == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{}: still {got} after {PATIENCE:?}, want {want}",
            api.url
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
