//! The smaller holes of issue #11 point 10: control characters in free text, status reports from
//! devices the rollout never offered the deployment, the data-dir lock, the `io` part's own
//! limit, and the role check before the body.
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, conv1_npub};
use crate::support::{Sim, deploy, deployment, fleet, provision};

async fn error_of(r: reqwest::Response) -> (StatusCode, String, String) {
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    let field = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    (status, field("error"), field("detail"))
}

#[tokio::test]
async fn rejects_control_characters_in_free_text_with_422() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for (i, bad) in [
        "nul\0byte",
        "\x1b[2J\x1b[Hcleared",
        "carriage\rreturn",
        "c1\u{9b}31m",
    ]
    .into_iter()
    .enumerate()
    {
        let r = s
            .req(Method::POST, "/api/v1/models")
            .json(&json!({"name": format!("m{i}"), "description": bad}))
            .send()
            .await
            .unwrap();
        let (status, _, detail) = error_of(r).await;
        assert_eq!(status, 422, "{bad:?}");
        assert!(
            detail.starts_with("description: control character"),
            "{detail}"
        );
    }
    let r = s
        .req(Method::POST, "/api/v1/models")
        .json(&json!({"name": "ok", "description": "two lines\n\tand a tab"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "multi-line text keeps \\n and \\t");
    assert_eq!(s.rows("models").await, 1);

    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let sim = Sim::new(&s, &tokens[0]).await;
    for bad in ["a\nsecond line", "\x1b]0;owned\x07", "nul\0"] {
        let r = sim
            .req(Method::POST, "/api/v1/device/status")
            .json(&json!({"sequence": d["sequence"], "state": "failed", "reason": bad}))
            .send()
            .await
            .unwrap();
        let (status, _, detail) = error_of(r).await;
        assert_eq!(status, 422, "{bad:?}");
        assert!(detail.starts_with("reason: control character"), "{detail}");
    }
    let (state,): (Option<String>,) = sqlx::query_as("SELECT last_reason FROM devices")
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    assert_eq!(state, None, "nothing was recorded");
    s.stop().await;
}

#[tokio::test]
async fn rejects_status_from_a_device_outside_every_open_batch() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let ids: Vec<String> = (0..10).map(|i| format!("dev-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let tokens = provision(&s, "lab", &ids).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab",
               "rollout": {"batches": [10, 100], "success_threshold": 1.0}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let sequence = d["sequence"].as_u64().unwrap();
    let mut outside = 0;
    for token in &tokens {
        let sim = Sim::new(&s, token).await;
        if sim.poll().await.status() == StatusCode::OK {
            continue; // the one device of the first batch
        }
        outside += 1;
        let r = sim
            .req(Method::POST, "/api/v1/device/status")
            .json(&json!({"sequence": sequence, "state": "installed"}))
            .send()
            .await
            .unwrap();
        let (status, error, detail) = error_of(r).await;
        assert_eq!(
            (status, error.as_str()),
            (StatusCode::CONFLICT, "conflict"),
            "{detail}"
        );
    }
    assert_eq!(outside, 9);
    let progress = &deployment(&s, id).await["progress"];
    assert_eq!(progress["offered"], 1, "{progress}");
    assert_eq!(progress["counts"]["installed"], 0, "{progress}");
    assert_eq!(progress["batches"][1]["open"], false, "{progress}");
    assert_eq!(s.rows("device_deployments").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_second_server_after_the_lock_file_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    std::fs::remove_file(dir.path().join("lock")).unwrap();
    let mut config = npub_server::Config::new(dir.path(), "127.0.0.1:0".parse().unwrap());
    config.admin_token = Some(crate::common::ADMIN.into());
    let err = npub_server::Server::start(config)
        .await
        .expect_err("a second server started on a directory in use");
    assert!(err.to_string().contains("in use"), "{err}");
    // The first server still serves.
    assert_eq!(
        s.http
            .get(format!("{}/healthz", s.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_an_oversized_io_part_naming_the_part_and_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let form = reqwest::multipart::Form::new()
        .part("pack", reqwest::multipart::Part::bytes(conv1_npub()))
        .part(
            "io",
            reqwest::multipart::Part::bytes(vec![b' '; 300 * 1024]),
        );
    let r = s
        .req(Method::POST, "/api/v1/models/m/versions/1")
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (status, error, detail) = error_of(r).await;
    assert_eq!(
        (status, error.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    assert_eq!(
        detail,
        format!(
            "multipart part `io` is larger than its limit of {} bytes",
            256 * 1024
        )
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_an_operator_token_on_admin_routes_before_reading_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let r = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&json!({"name": "ci"}))
        .send()
        .await
        .unwrap();
    let operator = r.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    for (path, body) in [
        ("/api/v1/tokens", r#"{"bogus": 1}"#),
        ("/api/v1/tokens", "not json"),
        ("/api/v1/keys", r#"{"secret_key": "zz"}"#),
    ] {
        let r = s
            .req_as(&operator, Method::POST, path)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, error, _) = error_of(r).await;
        assert_eq!(
            (status, error.as_str()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{path} {body}"
        );
    }
    s.stop().await;
}
