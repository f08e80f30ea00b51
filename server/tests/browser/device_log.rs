//! The device's own event log (issue 36, item 5) on the device page: sent with a failure report,
//! shown under that report in the timeline, line by line, as text.
use reqwest::Method;
use serde_json::json;

use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, run};

#[tokio::test]
async fn the_device_page_shows_the_log_a_failure_report_carried() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    let base = s.url.clone();
    let created = api(
        &base,
        Method::POST,
        "/devices",
        Some(json!({"devices": [{"id": "dev-1", "accelerator": "ethos-u55-256", "group": "lab"}]})),
    )
    .await;
    let token = created[0]["token"].as_str().unwrap().to_owned();
    let d = api(
        &base,
        Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    let device = SimDevice::new(&base, "dev-1", &token);
    assert!(device.poll(0).await.is_some());
    let log = [
        "boot count=3",
        "poll seq=1 200",
        "pieces 0..9 ok",
        "<b>verify</b>: sha256 mismatch",
    ];
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/device/status"))
        .bearer_auth(&token)
        .json(
            &json!({"sequence": seq, "state": "failed", "reason": "verify failed", "events": log}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    run("device-log", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("fleet/dev-1").await;
        ui.wait_text(".timeline li[data-state=failed]", "Device log (4 lines")
            .await;
        let lines = ui
            .js(
                "return [...document.querySelectorAll('.timeline li[data-state=failed] .agent-log li')].map((li) => li.textContent);",
                vec![],
            )
            .await;
        assert_eq!(lines, json!(log), "{lines}");
        assert_eq!(
            ui.js("return document.querySelectorAll('.agent-log b').length", vec![])
                .await,
            0,
            "a line is text, not markup"
        );
        ui.screenshot("device-log").await;
    })
    .await;
    s.stop().await;
}
