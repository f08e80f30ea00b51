//! A restart on the same data dir finds everything: models, versions, packs, tokens, the key.
use reqwest::Method;
use serde_json::Value;

use crate::common::{TestServer, conv1_npub, vela_outputs};

#[tokio::test]
async fn restart_on_the_same_data_dir_finds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let pack = conv1_npub();
    let tflite = std::fs::read(&vela_outputs()[0]).unwrap();

    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", pack.clone()).await.status(), 201);
    assert_eq!(s.upload("m", "2", tflite).await.status(), 201);
    let token = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "kept"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let get = |s: &TestServer, path: &str| s.req(Method::GET, path).send();
    let versions: Value = get(&s, "/api/v1/models/m/versions")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys: Value = get(&s, "/api/v1/keys").await.unwrap().json().await.unwrap();
    let audit: Value = get(&s, "/api/v1/audit")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let v2 = s.download("m", "2").await;
    s.stop().await;

    // A different NPUB_ADMIN_TOKEN on a database that has tokens is ignored.
    let s = TestServer::start_with(dir.path(), |c| {
        c.admin_token = Some("npub_op_another-admin-token-that-must-be-ignored".into())
    })
    .await;
    assert_eq!(
        get(&s, "/api/v1/models/m/versions")
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
        versions
    );
    assert_eq!(
        get(&s, "/api/v1/keys")
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
        keys
    );
    assert_eq!(
        get(&s, "/api/v1/audit")
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
        audit
    );
    assert_eq!(s.download("m", "1").await, pack);
    assert_eq!(s.download("m", "2").await, v2);
    assert_eq!(
        s.req_as(&token, Method::GET, "/api/v1/models")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let ignored = s
        .req_as(
            "npub_op_another-admin-token-that-must-be-ignored",
            Method::GET,
            "/api/v1/models",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(ignored.status(), 401);
    s.stop().await;
}

#[tokio::test]
async fn a_second_server_on_a_data_dir_in_use_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let mut config = npub_server::Config::new(dir.path(), "127.0.0.1:0".parse().unwrap());
    config.admin_token = Some(crate::common::ADMIN.into());
    let err = npub_server::Server::start(config).await.unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    s.stop().await;
}
