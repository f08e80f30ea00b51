//! Uploading every supported form and getting the pack back byte-identical.
use reqwest::Method;
use serde_json::Value;

use crate::common::{TestServer, conv1_npub, files_under, sha256_hex, vela_outputs};

#[tokio::test]
async fn npub_upload_round_trips_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("conv1").await;
    let pack = conv1_npub();
    let r = s.upload("conv1", "1.0.0", pack.clone()).await;
    assert_eq!(r.status(), 201);
    let detail: Value = r.json().await.unwrap();
    assert_eq!(detail["sha256"], sha256_hex(&pack));
    assert_eq!(detail["source"], "npub");
    assert_eq!(detail["size"], pack.len());
    assert_eq!(detail["accelerator"], "ethos-u55-256");
    assert_eq!(detail["region_count"], 3);
    assert_eq!(detail["uploaded_by"], "bootstrap");
    assert_eq!(detail["report"]["valid"], true);
    assert!(
        detail["stream"]["commands"].as_u64().unwrap() > 0,
        "{detail}"
    );
    assert_eq!(s.download("conv1", "1.0.0").await, pack);

    // The stored file is named by its digest, and the detail reads back the same.
    let stored = files_under(&dir.path().join("packs"));
    assert_eq!(stored.len(), 1);
    assert!(stored[0].ends_with(sha256_hex(&pack)));
    let again: Value = s
        .req(Method::GET, "/api/v1/models/conv1/versions/1.0.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again, detail);
    s.stop().await;
}

#[tokio::test]
async fn every_vela_fixture_imports_and_downloads_as_the_core_builds_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("vela").await;
    for (i, path) in vela_outputs().into_iter().enumerate() {
        let upload = std::fs::read(&path).unwrap();
        let expected = npub_core::vela::import(&upload).unwrap();
        let version = format!("{i}.0.0");
        let r = s.upload("vela", &version, upload.clone()).await;
        let status = r.status();
        let detail: Value = r.json().await.unwrap();
        assert_eq!(status, 201, "{}: {detail}", path.display());
        let want_source = if path.extension().unwrap() == "npz" {
            "npz"
        } else {
            "tflite"
        };
        assert_eq!(detail["source"], want_source);
        assert_eq!(detail["source_sha256"], sha256_hex(&upload));
        assert_eq!(detail["sha256"], sha256_hex(&expected.pack));
        assert_eq!(detail["accelerator"], expected.accel.name());
        assert!(detail["io_bindings"]["bindings"].is_array(), "{detail}");
        assert_eq!(
            detail["io_digest"],
            sha256_hex(&expected.io_encoding()),
            "{}",
            path.display()
        );
        assert_eq!(
            s.download("vela", &version).await,
            expected.pack,
            "{}",
            path.display()
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn multipart_npub_with_io_bindings_is_stored_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("conv1").await;
    let tflite =
        std::fs::read(crate::common::fixtures().join("vela_out/u55_256/tflite/conv1_vela.tflite"))
            .unwrap();
    let imported = npub_core::vela::import(&tflite).unwrap();
    let form = reqwest::multipart::Form::new()
        .part(
            "pack",
            reqwest::multipart::Part::bytes(imported.pack.clone()).file_name("conv1.npub"),
        )
        .text("io", imported.io_json());
    let r = s
        .req(Method::POST, "/api/v1/models/conv1/versions/2.0.0")
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let detail: Value = r.json().await.unwrap();
    assert_eq!(status, 201, "{detail}");
    assert_eq!(detail["source"], "npub");
    assert_eq!(detail["io_digest"], sha256_hex(&imported.io_encoding()));
    assert_eq!(s.download("conv1", "2.0.0").await, imported.pack);
    s.stop().await;
}

#[tokio::test]
async fn rejects_io_bindings_that_do_not_fit_the_pack_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    // small_net's bindings point into a scratch region far larger than conv1's.
    let small = std::fs::read(
        crate::common::fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite"),
    )
    .unwrap();
    let io = npub_core::vela::import(&small).unwrap().io_json();
    let form = reqwest::multipart::Form::new()
        .part("pack", reqwest::multipart::Part::bytes(conv1_npub()))
        .text("io", io);
    let r = s
        .req(Method::POST, "/api/v1/models/m/versions/1")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "invalid_pack");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("io bindings: "),
        "{body}"
    );
    assert_eq!(s.rows("versions").await, 0);
    assert!(files_under(&dir.path().join("packs")).is_empty());
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    s.stop().await;
}

#[tokio::test]
async fn existing_version_is_409_and_identical_packs_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let pack = conv1_npub();
    assert_eq!(s.upload("m", "1", pack.clone()).await.status(), 201);
    let r = s.upload("m", "1", pack.clone()).await;
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "conflict");
    let first: Value = s.upload("m", "2", pack.clone()).await.json().await.unwrap();
    assert_eq!(
        first["identical_to"],
        serde_json::json!(["1"]),
        "a byte-identical upload says so in its 201"
    );
    assert_eq!(
        files_under(&dir.path().join("packs")).len(),
        1,
        "deduplicated"
    );
    let one: Value = s
        .req(Method::GET, "/api/v1/models/m/versions/1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["identical_to"], serde_json::json!(["2"]));

    // Deleting one version keeps the shared file; deleting the last removes it.
    let del = |v: &str| {
        s.req(Method::DELETE, &format!("/api/v1/models/m/versions/{v}"))
            .send()
    };
    assert_eq!(del("1").await.unwrap().status(), 204);
    assert_eq!(files_under(&dir.path().join("packs")).len(), 1);
    assert_eq!(s.download("m", "2").await, pack);
    assert_eq!(del("2").await.unwrap().status(), 204);
    assert!(files_under(&dir.path().join("packs")).is_empty());
    assert_eq!(del("2").await.unwrap().status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn delete_of_a_referenced_version_is_409() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    // Stand-ins for the fleet API's deployments table: a row referring to the version, with
    // either kind of foreign key, must block the delete.
    for action in ["ON DELETE RESTRICT", ""] {
        let create = format!(
            "CREATE TABLE test_deployments (version_id INTEGER NOT NULL \
             REFERENCES versions (id) {action})"
        );
        sqlx::query(sqlx::AssertSqlSafe(create))
            .execute(&s.state.db)
            .await
            .unwrap();
        sqlx::query("INSERT INTO test_deployments SELECT id FROM versions")
            .execute(&s.state.db)
            .await
            .unwrap();
        let r = s
            .req(Method::DELETE, "/api/v1/models/m/versions/1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 409, "{action}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["detail"].as_str().unwrap().contains("deployment"),
            "{body}"
        );
        assert_eq!(s.rows("versions").await, 1);
        assert_eq!(files_under(&dir.path().join("packs")).len(), 1);
        sqlx::query("DROP TABLE test_deployments")
            .execute(&s.state.db)
            .await
            .unwrap();
    }
    let r = s
        .req(Method::DELETE, "/api/v1/models/m/versions/1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "deletable once nothing refers to it");
    s.stop().await;
}

#[tokio::test]
async fn rejects_uploads_over_the_limit_with_413_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pack = conv1_npub();
    let limit = pack.len() as u64 - 1;
    let s = TestServer::start_with(dir.path(), |c| c.max_upload_bytes = limit).await;
    s.create_model("m").await;
    // With a Content-Length: refused before reading.
    let r = s.upload("m", "1", pack.clone()).await;
    assert_eq!(r.status(), 413);
    // Streamed without a length: refused when the limit is crossed.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        pack.chunks(100).map(|c| Ok(c.to_vec())).collect();
    let r = s
        .req(Method::POST, "/api/v1/models/m/versions/1")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "payload_too_large");
    assert_eq!(s.rows("versions").await, 0);
    assert!(files_under(&dir.path().join("packs")).is_empty());
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    s.stop().await;
}

#[tokio::test]
async fn model_accelerator_is_enforced_and_names_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let r = s
        .req(Method::POST, "/api/v1/models")
        .json(&serde_json::json!({"name": "small", "accelerator": "ethos-u55-128"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = s.upload("small", "1", conv1_npub()).await;
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("ethos-u55-128"),
        "{body}"
    );

    for bad in [
        r#"{"name": "a/b"}"#,
        r#"{"name": "x", "accelerator": "gpu"}"#,
        r#"{"nam": "x"}"#,
    ] {
        let r = s
            .req(Method::POST, "/api/v1/models")
            .header("content-type", "application/json")
            .body(bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{bad}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{bad}");
    }
    let r = s
        .req(Method::POST, "/api/v1/models")
        .json(&serde_json::json!({"name": "small"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = s.upload("nope", "1", conv1_npub()).await;
    assert_eq!(r.status(), 404);
    let r = s.upload("small", "bad version", conv1_npub()).await;
    assert_eq!(r.status(), 422);
    s.stop().await;
}

#[tokio::test]
async fn a_raw_npz_without_quantisation_is_stored_with_its_warnings_said() {
    // Vela 4.x's C++ core writes no quantisation arrays: the stream is valid, so the pack is
    // stored, and the upload answer (and the version page after it) says what is unknown.
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let npz = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../npub-core/tests/data/vela/matrix/files/4.0.1-regor-u55-256-default-conv1-raw__conv1_vela.npz",
        ),
    )
    .unwrap();
    let r = s.upload("m", "1", npz).await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let warnings = v["warnings"].as_array().unwrap();
    assert!(!warnings.is_empty(), "{v}");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("quantis")),
        "{warnings:?}"
    );
    let again: Value = s
        .req(Method::GET, "/api/v1/models/m/versions/1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["warnings"], v["warnings"]);
    // A clean .npub upload has none.
    assert_eq!(s.upload("m", "2", conv1_npub()).await.status(), 201);
    let clean: Value = s
        .req(Method::GET, "/api/v1/models/m/versions/2")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(clean["warnings"], serde_json::json!([]));
    s.stop().await;
}
