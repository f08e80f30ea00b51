//! `Idempotency-Key` (issue #31 point 6): a retried request gets the first answer, not a second
//! deployment, version or device; the same key for another request is 422.
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, conv1_npub};
use crate::support::{fleet, provision};

async fn deploy_with(s: &TestServer, key: &str, body: &Value) -> reqwest::Response {
    s.req(Method::POST, "/api/v1/deployments")
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn deployments(s: &TestServer) -> usize {
    s.rows("deployments").await as usize
}

#[tokio::test]
async fn survives_15_concurrent_identical_deployments_with_one_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["dev-1", "dev-2"]).await;
    let body = json!({"model": "kws", "version": "1.0.0", "group": "lab"});
    let answers = futures_util::future::join_all(
        (0..15).map(|_| deploy_with(&s, "5b1d1e7a-0f5e-4c8b-9c60-1d2a7f0b6c11", &body)),
    )
    .await;
    let mut ids = Vec::new();
    let mut replayed = 0;
    for r in answers {
        assert_eq!(r.status(), StatusCode::CREATED);
        replayed += usize::from(r.headers().contains_key("idempotent-replayed"));
        let d: Value = r.json().await.unwrap();
        ids.push(d["id"].as_i64().unwrap());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one deployment, answered 15 times: {ids:?}");
    assert_eq!(replayed, 14);
    assert_eq!(deployments(&s).await, 1);

    // Later, the same key again: the same answer, still one deployment.
    let r = deploy_with(&s, "5b1d1e7a-0f5e-4c8b-9c60-1d2a7f0b6c11", &body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.headers()["idempotent-replayed"], "true");
    assert_eq!(r.json::<Value>().await.unwrap()["id"], ids[0]);
    assert_eq!(deployments(&s).await, 1);
    // Without a key, as before: a second deployment.
    let r = s
        .req(Method::POST, "/api/v1/deployments")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(deployments(&s).await, 2);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_key_reused_for_another_request_with_422() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["dev-1"]).await;
    let first = json!({"model": "kws", "version": "1.0.0", "group": "lab"});
    assert_eq!(deploy_with(&s, "k-1", &first).await.status(), 201);
    let other = json!({"model": "kws", "version": "2.0.0", "group": "lab"});
    let r = deploy_with(&s, "k-1", &other).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("Idempotency-Key"),
        "{body}"
    );
    assert_eq!(deployments(&s).await, 1);
    // Another token's key of the same name is its own.
    let token: Value = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&json!({"name": "second"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r = s
        .req_as(
            token["token"].as_str().unwrap(),
            Method::POST,
            "/api/v1/deployments",
        )
        .header("Idempotency-Key", "k-1")
        .json(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(deployments(&s).await, 2);
    // A key that is not one.
    for bad in ["", "has space", &"x".repeat(256)] {
        let r = deploy_with(&s, bad, &first).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad:?}");
    }
    s.stop().await;
}

#[tokio::test]
async fn survives_a_retried_upload_and_provisioning_with_the_first_answer() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let upload = |key: &'static str, body: Vec<u8>| {
        s.req(Method::POST, "/api/v1/models/m/versions/1")
            .header("Idempotency-Key", key)
            .body(body)
            .send()
    };
    let a = upload("u-1", conv1_npub()).await.unwrap();
    assert_eq!(a.status(), 201);
    let a: Value = a.json().await.unwrap();
    let b = upload("u-1", conv1_npub()).await.unwrap();
    assert_eq!(b.status(), 201, "a retry is the first answer, not 409");
    assert_eq!(b.json::<Value>().await.unwrap(), a);
    assert_eq!(s.rows("versions").await, 1);
    let mut other = conv1_npub();
    other.push(0);
    assert_eq!(upload("u-1", other).await.unwrap().status(), 422);
    // A first request that failed is not kept: the retry runs.
    let c = s
        .req(Method::POST, "/api/v1/models/nope/versions/1")
        .header("Idempotency-Key", "u-2")
        .body(conv1_npub())
        .send()
        .await
        .unwrap();
    assert_eq!(c.status(), 404);
    s.create_model("nope").await;
    let c = s
        .req(Method::POST, "/api/v1/models/nope/versions/1")
        .header("Idempotency-Key", "u-2")
        .body(conv1_npub())
        .send()
        .await
        .unwrap();
    assert_eq!(c.status(), 201);

    // Provisioning: the retry answers the same devices and tokens, and makes none.
    let devices = json!({"devices": [{"id": "d-1", "accelerator": "ethos-u55-256", "group": "g"}]});
    let provision = || {
        s.req(Method::POST, "/api/v1/devices")
            .header("Idempotency-Key", "p-1")
            .json(&devices)
            .send()
    };
    let first: Value = provision().await.unwrap().json().await.unwrap();
    let again = provision().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(s.rows("devices").await, 1);
    // The kept answer holds the device's token, sealed: not in the database in clear.
    let token = first[0]["token"].as_str().unwrap();
    let (stored,): (Vec<u8>,) =
        sqlx::query_as("SELECT body FROM idempotency_keys WHERE key = 'p-1'")
            .fetch_one(&s.state.db)
            .await
            .unwrap();
    assert!(
        !stored.windows(token.len()).any(|w| w == token.as_bytes()),
        "a device token is in the database in clear"
    );

    s.stop().await;
}

#[tokio::test]
async fn survives_a_retried_rollback_with_one_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["dev-1"]).await;
    for v in ["1.0.0", "2.0.0"] {
        let d = json!({"model": "kws", "version": v, "group": "lab"});
        assert_eq!(deploy_with(&s, v, &d).await.status(), 201);
    }
    let rollback = || {
        s.req(Method::POST, "/api/v1/groups/lab/rollback")
            .header("Idempotency-Key", "r-1")
            .json(&json!({"model": "kws", "version": "previous"}))
            .send()
    };
    let first = rollback().await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let before = deployments(&s).await;
    let again = rollback().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(
        deployments(&s).await,
        before,
        "the retry made no second rollback"
    );
    s.stop().await;
}
