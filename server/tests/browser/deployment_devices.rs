//! The deployment page lists its devices: "1 of 3 devices failed" leads to the device and its
//! reason, and skipped devices say why.
use reqwest::Method;
use serde_json::json;

use crate::common::{ADMIN, TestServer, fixtures};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, run};

#[tokio::test]
async fn deployment_page_names_which_devices_failed_and_why_and_who_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    let pack =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    assert_eq!(s.upload("kws", "1.0.0", pack).await.status(), 201);
    let base = s.url.clone();
    let created = api(
        &base,
        Method::POST,
        "/devices",
        Some(json!({"devices": [
            {"id": "cam-1", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "cam-2", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "tiny-1", "accelerator": "ethos-u55-128", "group": "lab"},
        ]})),
    )
    .await;
    let d = api(
        &base,
        Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": "lab",
                    "rollout": {"batches": [100], "failure_threshold": 1.0}})),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    let id = d["id"].as_i64().unwrap();
    let cam1 = SimDevice::new(&base, "cam-1", created[0]["token"].as_str().unwrap());
    cam1.report(seq, "bound", None).await;
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/device/status"))
        .bearer_auth(created[1]["token"].as_str().unwrap())
        .json(&json!({"sequence": seq, "state": "failed", "reason": "flash: read-back of sector 3 differs"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    run(
        "deployment-devices",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open(&format!("deployments/{id}")).await;
            ui.wait_text(".device-list", "tiny-1").await;
            ui.wait_text(".device-list", "other accelerator").await;
            ui.wait_text(
                ".device-list",
                "it is ethos-u55-128; the pack is compiled for ethos-u55-256",
            )
            .await;
            // The failed count leads to the failed device and its reason.
            ui.click(".count-row[data-state=failed] button").await;
            ui.wait_until("document.querySelectorAll('.device-list tbody tr').length === 1")
                .await;
            let only = ui
                .js(
                    "return document.querySelector('.device-list tbody tr').textContent;",
                    vec![],
                )
                .await;
            let only = only.as_str().unwrap();
            assert!(
                only.contains("cam-2") && only.contains("flash: read-back of sector 3 differs"),
                "{only}"
            );
            ui.screenshot("deployment-devices-failed").await;
            ui.click(".device-list a[href='#/fleet/cam-2']").await;
            ui.wait_text("h1", "Device cam-2").await;
            ui.wait_text(".timeline", "flash: read-back of sector 3 differs")
                .await;
        },
    )
    .await;
    s.stop().await;
}
