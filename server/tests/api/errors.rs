//! Every extractor's rejection (path, query, JSON, multipart) is answered in the one
//! `{"error", "detail"}` JSON shape (issue #11 point 7).
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::TestServer;

async fn assert_json_error(r: reqwest::Response, status: u16, what: &str) {
    assert_eq!(r.status(), StatusCode::from_u16(status).unwrap(), "{what}");
    let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
    let text = r.text().await.unwrap();
    assert_eq!(content_type, "application/json", "{what}: {text}");
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
    assert!(body["error"].is_string(), "{what}: {text}");
    assert!(body["detail"].is_string(), "{what}: {text}");
    assert_eq!(body.as_object().unwrap().len(), 2, "{what}: {text}");
}

#[tokio::test]
async fn rejects_every_extractor_failure_with_the_json_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let get = |path: &str| s.req(Method::GET, path).send();
    // Path parameters that do not parse, or are not UTF-8 once percent-decoded.
    assert_json_error(
        get("/api/v1/deployments/abc").await.unwrap(),
        400,
        "path i64",
    )
    .await;
    assert_json_error(get("/api/v1/models/%FF").await.unwrap(), 400, "path utf-8").await;
    assert_json_error(get("/assets/%FF").await.unwrap(), 400, "asset path").await;
    // Query strings.
    assert_json_error(get("/api/v1/audit?limit=abc").await.unwrap(), 400, "query").await;
    assert_json_error(
        get("/api/v1/deployments?bogus=1").await.unwrap(),
        400,
        "query field",
    )
    .await;
    // JSON bodies: no content type, broken syntax, a wrong type.
    let post = |body: &'static str, content_type: Option<&'static str>| {
        let mut rb = s.req(Method::POST, "/api/v1/models").body(body);
        if let Some(ct) = content_type {
            rb = rb.header("content-type", ct);
        }
        rb.send()
    };
    assert_json_error(post("{}", None).await.unwrap(), 415, "json content type").await;
    assert_json_error(
        post("{", Some("application/json")).await.unwrap(),
        400,
        "json syntax",
    )
    .await;
    assert_json_error(
        post(r#"{"name": 1}"#, Some("application/json"))
            .await
            .unwrap(),
        422,
        "json type",
    )
    .await;
    // Multipart uploads: no boundary, a body that is not a form.
    let upload = |content_type: &'static str| {
        s.req(Method::POST, "/api/v1/models/m/versions/1")
            .header("content-type", content_type)
            .body("not a form")
            .send()
    };
    assert_json_error(
        upload("multipart/form-data").await.unwrap(),
        400,
        "no boundary",
    )
    .await;
    assert_json_error(
        upload("multipart/form-data; boundary=x").await.unwrap(),
        400,
        "not a form",
    )
    .await;
    s.stop().await;
}
