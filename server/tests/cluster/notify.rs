//! `LISTEN/NOTIFY`: with the periodic generation check turned down to once an hour, a change made
//! through replica A still reaches replica B's poll cache at once, and still does after
//! PostgreSQL restarted under both (the listener reconnects by itself).
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::cluster::Cluster;
use crate::{models, poll_until, provision};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_database_restart_and_b_offers_what_a_deployed_at_once() {
    // An hour between generation checks: only a notification can tell B in time.
    let Some(cluster) = Cluster::up("--cache-check 3600") else {
        return;
    };
    let (a, b) = (cluster.api_a(), cluster.api_b());
    models(&a).await;
    let tokens = provision(&a, "lab", &["dev-1".to_owned()]).await;
    // B learns of the new device (a cache change too) without being asked.
    poll_until(&b, &tokens[0], 0, StatusCode::NO_CONTENT).await;

    let d = a
        .call(
            Method::POST,
            "/api/v1/deployments",
            Some(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
            201,
        )
        .await;
    let took = poll_until(&b, &tokens[0], 0, StatusCode::OK).await;
    eprintln!("B offered A's deployment after {took:?}");
    let seq = d["sequence"].as_u64().unwrap();

    // PostgreSQL goes away and comes back: every connection of both replicas dies, the
    // listener's too.
    cluster.script(&["db-stop"]);
    cluster.script(&["db-start"]);
    let d2 = loop {
        // A's pool finds its connections dead: 503 until it has new ones.
        let r = a
            .req(Method::POST, "/api/v1/deployments")
            .json(&json!({"model": "kws", "version": "2.0.0", "group": "lab"}))
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            201 => break r.json::<serde_json::Value>().await.unwrap(),
            503 => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            s => panic!(
                "deploying after the restart: {s} {}",
                r.text().await.unwrap()
            ),
        }
    };
    assert!(d2["sequence"].as_u64().unwrap() > seq);
    let took = poll_until(&b, &tokens[0], seq, StatusCode::OK).await;
    eprintln!("after the restart, B offered A's deployment after {took:?}");
}
