//! Batched last-seen times at fleet scale: one flush writes every device seen, across as many
//! statements as it takes, and never moves a time backwards.
use reqwest::Method;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::TestServer;
use crate::support::provision;

/// More devices than one `UPDATE` of the flush holds (100), so that the flush spans statements.
const DEVICES: usize = 1_201;

async fn last_seen_set(s: &TestServer) -> usize {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM devices WHERE last_seen IS NOT NULL")
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    usize::try_from(n).unwrap()
}

#[tokio::test]
async fn survives_a_flush_of_more_devices_than_one_statement_holds() {
    let dir = TempDir::new().unwrap();
    let s = TestServer::start(dir.path()).await;
    let ids: Vec<String> = (0..DEVICES).map(|i| format!("d-{i:04}")).collect();
    for chunk in ids.chunks(1000) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        provision(&s, "field", &chunk).await;
    }
    let seen = &s.state.polling.last_seen;
    for (i, id) in ids.iter().enumerate() {
        let id: std::sync::Arc<str> = std::sync::Arc::from(id.as_str());
        seen.touch(&id, 1_000_000 + i as i64);
    }
    assert_eq!(
        s.state.polling.flush_last_seen(&s.state.db).await.unwrap(),
        DEVICES
    );
    assert_eq!(last_seen_set(&s).await, DEVICES);

    // An older time flushed later (a delayed poll) does not move the last one back.
    let last: std::sync::Arc<str> = std::sync::Arc::from(ids[DEVICES - 1].as_str());
    seen.touch(&last, 5);
    s.state.polling.flush_last_seen(&s.state.db).await.unwrap();
    let (at,): (i64,) = sqlx::query_as("SELECT last_seen FROM devices WHERE id = $1")
        .bind(&*last)
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    assert_eq!(at, 1_000_000 + DEVICES as i64 - 1);

    let page: Value = s
        .req(Method::GET, "/api/v1/devices/d-0000")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(page["last_seen"].is_string(), "{page}");
    s.stop().await;
}
