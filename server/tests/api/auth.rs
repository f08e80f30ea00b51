//! Tokens: missing, wrong, malformed and revoked ones are 401 everywhere; roles are enforced.
use reqwest::Method;
use serde_json::Value;

use crate::common::{ADMIN, TestServer};

/// Every operator route, with a path that exists in shape.
const OPERATOR_ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/models"),
    ("POST", "/api/v1/models"),
    ("GET", "/api/v1/models/m"),
    ("GET", "/api/v1/models/m/versions"),
    ("POST", "/api/v1/models/m/versions/1"),
    ("GET", "/api/v1/models/m/versions/1"),
    ("DELETE", "/api/v1/models/m/versions/1"),
    ("GET", "/api/v1/models/m/versions/1/npub"),
    ("GET", "/api/v1/tokens"),
    ("POST", "/api/v1/tokens"),
    ("DELETE", "/api/v1/tokens/1"),
    ("GET", "/api/v1/webhooks"),
    ("POST", "/api/v1/webhooks"),
    ("GET", "/api/v1/webhooks/1"),
    ("DELETE", "/api/v1/webhooks/1"),
    ("POST", "/api/v1/webhooks/1/enable"),
    ("POST", "/api/v1/webhooks/1/test"),
    ("GET", "/api/v1/webhooks/1/deliveries"),
    ("GET", "/api/v1/audit"),
    ("GET", "/api/v1/keys"),
    ("POST", "/api/v1/keys"),
    ("POST", "/api/v1/keys/updates"),
    ("PATCH", "/api/v1/models/m"),
    ("GET", "/api/v1/models/m/versions/1/release-signatures"),
    ("POST", "/api/v1/models/m/versions/1/release-signatures"),
];

async fn assert_401(s: &TestServer, auth: Option<&str>, why: &str) {
    for (method, path) in OPERATOR_ROUTES {
        let mut rb = s.http.request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", s.url),
        );
        if let Some(value) = auth {
            rb = rb.header("authorization", value);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 401, "{why}: {method} {path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized", "{why}: {method} {path}");
    }
}

#[tokio::test]
async fn missing_wrong_and_malformed_tokens_are_401_on_every_operator_route() {
    let dir = tempfile::tempdir().unwrap();
    // Some hundred failures from one peer: above the default throttle (auth_failures.rs).
    let s = TestServer::start_with(dir.path(), |c| c.auth_failure_burst = 10_000).await;
    assert_401(&s, None, "no header").await;
    assert_401(&s, Some("Bearer npub_op_0000000000"), "unknown token").await;
    assert_401(&s, Some(&format!("Basic {ADMIN}")), "wrong scheme").await;
    assert_401(&s, Some("Bearer "), "empty token").await;
    assert_401(
        &s,
        Some(&format!("Bearer {}", "x".repeat(300))),
        "oversized",
    )
    .await;
    // The scheme is case-insensitive; the token is not.
    let r = s
        .http
        .get(format!("{}/api/v1/models", s.url))
        .header("authorization", format!("bearer {ADMIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_401(
        &s,
        Some(&format!("Bearer {}", ADMIN.to_uppercase())),
        "case-changed",
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn created_tokens_work_until_revoked_and_roles_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let r = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "ci uploader"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    let secret = created["token"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("npub_op_"));
    assert_eq!(created["role"], "operator");
    let id = created["id"].as_i64().unwrap();

    // Listed without its secret; stored only as a hash.
    let list = s
        .req(Method::GET, "/api/v1/tokens")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        list.contains("ci uploader") && !list.contains(&secret),
        "{list}"
    );
    let (stored,): (String,) = sqlx::query_as("SELECT hash FROM tokens WHERE id = $1")
        .bind(id)
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    assert_ne!(stored, secret);

    // The operator token works for operator routes and is refused admin ones.
    let r = s
        .req_as(&secret, Method::POST, "/api/v1/models")
        .json(&serde_json::json!({"name": "m"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = s
        .req_as(&secret, Method::GET, "/api/v1/tokens")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "forbidden");

    // Revoked: 401 on every route from the next request on.
    let r = s
        .req(Method::DELETE, &format!("/api/v1/tokens/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_401(&s, Some(&format!("Bearer {secret}")), "revoked").await;
    let r = s
        .req(Method::DELETE, &format!("/api/v1/tokens/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "revoking twice is a no-op");
    let r = s
        .req(Method::DELETE, "/api/v1/tokens/999")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // The audit log names who did it.
    let audit: Vec<Value> = s
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
    let actions: Vec<(&str, &str)> = audit
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    assert!(
        actions.contains(&("token.revoke", "bootstrap")),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("model.create", "ci uploader")),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("token.create", "bootstrap")),
        "{actions:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_last_admin_token_cannot_be_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let tokens: Vec<Value> = s
        .req(Method::GET, "/api/v1/tokens")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bootstrap = tokens[0]["id"].as_i64().unwrap();
    let r = s
        .req(Method::DELETE, &format!("/api/v1/tokens/{bootstrap}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // With a second admin it can.
    let r = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "second admin", "role": "admin"}))
        .send()
        .await
        .unwrap();
    let second = r.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .req_as(
            &second,
            Method::DELETE,
            &format!("/api/v1/tokens/{bootstrap}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        s.req(Method::GET, "/api/v1/models")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    s.stop().await;
}

#[tokio::test]
async fn a_generated_bootstrap_token_is_printed_once_and_works() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.admin_token = None).await;
    let line = s
        .banner
        .lines()
        .find(|l| l.trim_start().starts_with("admin token:"))
        .unwrap();
    let secret = line.split_whitespace().last().unwrap().to_owned();
    assert!(secret.starts_with("npub_op_"), "{}", s.banner);
    assert_eq!(
        s.req_as(&secret, Method::GET, "/api/v1/tokens")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    s.stop().await;
    let s = TestServer::start_with(dir.path(), |c| c.admin_token = None).await;
    assert!(!s.banner.contains(&secret), "shown only once");
    assert_eq!(
        s.req_as(&secret, Method::GET, "/api/v1/tokens")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    s.stop().await;
}
