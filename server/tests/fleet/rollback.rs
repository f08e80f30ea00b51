//! Rollback by version: a higher sequence pointing at the older pack; the old manifest replayed
//! to the verifier is refused.
use npub_core::manifest::verify;
use npub_core::{Error, ManifestError};
use reqwest::Method;
use serde_json::json;

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

#[tokio::test]
async fn rollback_is_a_newer_deployment_of_the_older_pack() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    let mut sim = Sim::new(&s, &tokens[0]).await;

    let v1 = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let (m1, m1_bytes) = sim.poll_verified().await.unwrap();
    sim.download(m1, 8192).await;
    sim.report(v1["sequence"].as_u64().unwrap(), "installed")
        .await;
    sim.last_sequence = v1["sequence"].as_u64().unwrap();

    let v2 = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let s2 = sim.install().await;
    assert_eq!(s2, v2["sequence"].as_u64().unwrap());

    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback")
        .json(&json!({"model": "kws", "version": "previous"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let rb: serde_json::Value = r.json().await.unwrap();
    assert_eq!(rb["kind"], "rollback");
    assert_eq!(rb["version"], "1.0.0");
    assert_eq!(rb["sha256"], v1["sha256"]);
    assert!(rb["sequence"].as_u64().unwrap() > s2);

    // The device gets it through the normal poll: the older pack under a newer sequence.
    let (m3, _) = sim.poll_verified().await.expect("the rollback is offered");
    assert_eq!(m3.sequence(), rb["sequence"].as_u64().unwrap());
    assert_eq!(m3.model_version(), "1.0.0");
    let pack = sim.download(m3, 4096).await;
    assert_eq!(
        crate::common::sha256_hex(&pack),
        v1["sha256"].as_str().unwrap()
    );
    sim.report(rb["sequence"].as_u64().unwrap(), "installed")
        .await;
    sim.last_sequence = rb["sequence"].as_u64().unwrap();

    // The first manifest of 1.0.0, replayed, is refused: its sequence is not newer.
    assert!(matches!(
        verify(&m1_bytes, &sim.keyring, &sim.policy()),
        Err(Error::Manifest(ManifestError::Replayed { .. }))
    ));

    let audit: Vec<serde_json::Value> = s
        .req(Method::GET, "/api/v1/audit?limit=5")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
    assert!(audit.iter().any(|e| e["action"] == "deployment.rollback"));
    let dev: serde_json::Value = s
        .req(Method::GET, "/api/v1/devices/dev-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(dev["current_version"], "1.0.0");

    // An explicit version works too; "previous" with no history is a 404.
    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback")
        .json(&json!({"model": "kws", "version": "2.0.0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = s
        .req(Method::POST, "/api/v1/groups/empty/rollback")
        .json(&json!({"model": "kws", "version": "previous"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn previous_resolves_per_accelerator_configuration_in_a_mixed_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("vision").await;
    let shared = crate::common::fixtures().join("vela_out");
    let u55_128_conv1 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../npub-core/tests/data/vela/accel/conv1_ethos-u55-128_vela.tflite");
    for (version, file) in [
        ("1.0.0", shared.join("u55_256/tflite/conv1_vela.tflite")),
        ("1.0.0-u128", u55_128_conv1),
        (
            "2.0.0-u128",
            shared.join("u55_128/tflite/small_net_vela.tflite"),
        ),
    ] {
        let r = s
            .upload("vision", version, std::fs::read(file).unwrap())
            .await;
        assert_eq!(r.status(), 201, "{version}: {}", r.text().await.unwrap());
    }
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"devices": [
            {"id": "big-a", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "big-b", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "small", "accelerator": "ethos-u55-128", "group": "lab"},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // The U55-128 device gets its first pack before the U55-256 ones get theirs, then moves on.
    for v in ["1.0.0-u128", "1.0.0", "2.0.0-u128"] {
        deploy(&s, json!({"model": "vision", "version": v, "group": "lab"})).await;
    }

    // "previous" across the whole group's history would be 1.0.0: the U55-256 devices would be
    // re-flashed with what they run and the device that changed would stay. Per configuration
    // it is 1.0.0-u128, for the U55-128 device only; the preview names it before anything is made.
    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback?dry_run=true")
        .json(&json!({"model": "vision", "version": "previous"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let p: serde_json::Value = r.json().await.unwrap();
    let rollbacks = p["rollbacks"].as_array().unwrap();
    assert_eq!(rollbacks.len(), 1, "{p}");
    assert_eq!(rollbacks[0]["version"], "1.0.0-u128");
    assert_eq!(rollbacks[0]["accelerator"], "ethos-u55-128");
    assert_eq!(rollbacks[0]["targets"], 1);
    assert_eq!(rollbacks[0]["batches"][0]["devices"], json!(["small"]));
    assert_eq!(s.rows("deployments").await, 3, "a preview makes nothing");

    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback")
        .json(&json!({"model": "vision", "version": "previous"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let made: serde_json::Value = r.json().await.unwrap();
    assert_eq!(made["version"], "1.0.0-u128");
    assert_eq!(made["deployments"].as_array().unwrap().len(), 1);
    assert_eq!(made["progress"]["targets"], 1);
    assert_eq!(made["sha256"], rollbacks[0]["sha256"]);
    s.stop().await;
}
