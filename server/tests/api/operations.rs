//! The OpenAPI document covers every route; /healthz; /metrics counts requests and uploads.
use reqwest::Method;
use serde_json::Value;

use crate::common::{TestServer, conv1_npub};

/// Every route the server serves. A route added to the server without being added here fails
/// `every_served_path_is_documented_and_every_documented_path_is_served` only if it is also
/// undocumented — utoipa-axum registers a route and documents it in one call — so this list is
/// the reviewer's view of the API.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/api/v1/openapi.json"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/tokens"),
    ("post", "/api/v1/tokens"),
    ("delete", "/api/v1/tokens/{id}"),
    ("get", "/api/v1/webhooks"),
    ("post", "/api/v1/webhooks"),
    ("get", "/api/v1/webhooks/{id}"),
    ("delete", "/api/v1/webhooks/{id}"),
    ("post", "/api/v1/webhooks/{id}/enable"),
    ("post", "/api/v1/webhooks/{id}/test"),
    ("get", "/api/v1/webhooks/{id}/deliveries"),
    ("get", "/api/v1/models"),
    ("post", "/api/v1/models"),
    ("get", "/api/v1/models/{name}"),
    ("patch", "/api/v1/models/{name}"),
    (
        "get",
        "/api/v1/models/{name}/versions/{version}/release-signatures",
    ),
    (
        "post",
        "/api/v1/models/{name}/versions/{version}/release-signatures",
    ),
    ("get", "/api/v1/models/{name}/versions"),
    ("post", "/api/v1/models/{name}/versions/{version}"),
    ("get", "/api/v1/models/{name}/versions/{version}"),
    ("delete", "/api/v1/models/{name}/versions/{version}"),
    ("get", "/api/v1/models/{name}/versions/{version}/npub"),
    ("get", "/api/v1/models/{name}/versions/{version}/selftest"),
    ("get", "/api/v1/keys"),
    ("post", "/api/v1/keys"),
    ("get", "/api/v1/keys/{key_id}/trust"),
    // The fleet (server/src/fleet/).
    ("post", "/api/v1/devices"),
    ("get", "/api/v1/devices"),
    ("get", "/api/v1/devices/{id}"),
    ("delete", "/api/v1/devices/{id}"),
    ("patch", "/api/v1/devices/{id}"),
    ("post", "/api/v1/devices/{id}/revoke"),
    ("post", "/api/v1/devices/{id}/token"),
    ("post", "/api/v1/deployments"),
    ("get", "/api/v1/deployments"),
    ("get", "/api/v1/deployments/{id}"),
    ("get", "/api/v1/deployments/{id}/devices"),
    ("post", "/api/v1/deployments/{id}/pause"),
    ("post", "/api/v1/deployments/{id}/resume"),
    ("post", "/api/v1/deployments/{id}/retry-failed"),
    ("get", "/api/v1/deployments/{id}/timeline"),
    ("get", "/api/v1/fleet/summary"),
    ("post", "/api/v1/deployments/{id}/abort"),
    ("get", "/api/v1/groups"),
    ("post", "/api/v1/groups/{group}/rollback"),
    ("put", "/api/v1/groups/{group}/window"),
    ("delete", "/api/v1/groups/{group}/window"),
    ("get", "/api/v1/device"),
    ("get", "/api/v1/device/manifest"),
    ("get", "/api/v1/device/packs/{sha256}"),
    ("get", "/api/v1/device/packs/{sha256}/io"),
    ("get", "/api/v1/device/packs/{sha256}/release"),
    ("get", "/api/v1/device/packs/{sha256}/selftest"),
    ("post", "/api/v1/device/status"),
    ("get", "/api/v1/device/keys"),
    ("get", "/api/v1/keys/root/trust"),
    ("post", "/api/v1/keys/rotate"),
    ("post", "/api/v1/keys/updates"),
    ("post", "/api/v1/keys/{key_id}/revoke"),
];

#[tokio::test]
async fn every_served_path_is_documented_and_every_documented_path_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let doc: Value = s
        .http
        .get(format!("{}/api/v1/openapi.json", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                documented.push((method.clone(), path.clone()));
            }
        }
    }
    documented.sort();
    let mut expected: Vec<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    expected.sort();
    assert_eq!(documented, expected);

    // Every documented operation is routed: an unrouted path gets the fallback's 404 ("route …
    // not found"), an unrouted method 405.
    for (method, path) in &documented {
        let concrete = path
            .replace("{id}", "1")
            .replace("{name}", "m")
            .replace("{version}", "1");
        let r = s
            .req(
                Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                &concrete,
            )
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert_ne!(status, 405, "{method} {path}");
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert!(
            body.is_object() || status.is_success(),
            "{method} {path}: {status}"
        );
        if status == 404 {
            let detail = body["detail"].as_str().unwrap();
            assert!(
                !detail.starts_with("route "),
                "{method} {path} is not routed: {detail}"
            );
        }
    }
    // The fallbacks answer in the same shape.
    let r = s.req(Method::GET, "/api/v1/nope").send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["detail"],
        "route GET /api/v1/nope not found"
    );
    let r = s.req(Method::PUT, "/api/v1/models").send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_request");
    // Operator routes declare the bearer scheme.
    assert!(doc["components"]["securitySchemes"]["token"].is_object());
    s.stop().await;
}

#[tokio::test]
async fn healthz_answers_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let r = s
        .http
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    for path in ["/livez", "/readyz"] {
        let r = s.http.get(format!("{}{path}", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    s.stop().await;
}

#[tokio::test]
async fn metrics_count_requests_by_route_uploads_and_bytes_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let pack = conv1_npub();
    assert_eq!(s.upload("m", "1", pack.clone()).await.status(), 201);
    assert_eq!(s.upload("m", "2", vec![0; 8]).await.status(), 422);
    s.download("m", "1").await;
    assert_eq!(
        s.http
            .get(format!("{}/api/v1/models", s.url))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let text = s
        .http
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        r#"npub_http_requests_total{method="POST",route="/api/v1/models",status="2xx"} 1"#,
        r#"npub_http_requests_total{method="GET",route="/api/v1/models",status="4xx"} 1"#,
        r#"npub_http_requests_total{method="POST",route="/api/v1/models/{name}/versions/{version}",status="4xx"} 1"#,
        r#"npub_http_requests_total{method="GET",route="/api/v1/models/{name}/versions/{version}/npub",status="2xx"} 1"#,
        r#"npub_uploads_total{source="npub",outcome="stored"} 1"#,
        r#"npub_uploads_total{source="npub",outcome="rejected"} 1"#,
        &format!("npub_upload_bytes_total {}", pack.len()),
        &format!("npub_pack_bytes_served_total {}", pack.len()),
        r#"npub_http_request_duration_seconds_count{method="POST",route="/api/v1/models"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    s.stop().await;
}
