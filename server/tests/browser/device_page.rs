//! The device page: reached from the fleet table, it says what the device runs and shows its
//! history as a timeline (offers, reports with their reasons); it edits the device and issues a
//! new token, shown once.
use reqwest::Method;
use serde_json::json;

use crate::common::{ADMIN, TestServer, fixtures};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, run};

#[tokio::test]
async fn device_page_shows_its_timeline_edits_it_and_replaces_its_token() {
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
        Some(json!({"devices": [{"id": "dev-1", "name": "Bench unit", "accelerator": "ethos-u55-256", "group": "lab"}]})),
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
    device.report(seq, "downloading", Some(0.5)).await;
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/device/status"))
        .bearer_auth(&token)
        .json(&json!({"sequence": seq, "state": "failed", "reason": "self-test: output 0 out of range"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    run("device-page", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("fleet").await;
        ui.wait_text(".devices", "dev-1").await;
        ui.click("a[aria-label='Device dev-1']").await;
        ui.wait_text("h1", "Device dev-1").await;
        ui.wait_text(".facts", "ethos-u55-256").await;
        // The timeline, newest first: the failure with its reason, the download, the offer.
        let kinds = ui
            .js(
                "return [...document.querySelectorAll('.timeline li')].map((li) => li.dataset.kind + ':' + li.dataset.state);",
                vec![],
            )
            .await;
        assert_eq!(
            kinds,
            json!(["report:failed", "report:downloading", "offered:"]),
            "{kinds}"
        );
        ui.wait_text(".timeline li[data-state=failed]", "self-test: output 0 out of range")
            .await;
        ui.wait_text(".timeline li[data-kind=offered]", "kws 1.0.0").await;
        ui.wait_text(".facts", "reported").await;
        ui.screenshot("device-page").await;

        // Move it to another group, after a confirmation that says what changes.
        ui.js(
            "const g = document.querySelector('form[aria-label=\"Edit device\"] input[name=group]'); g.value = 'field';",
            vec![],
        )
        .await;
        ui.click("form[aria-label='Edit device'] button[type=submit]").await;
        ui.wait_text("dialog h2", "Move dev-1 to group field?").await;
        ui.click("dialog button[type=submit]").await;
        ui.wait_text(".facts", "field").await;
        let moved = api(&base, Method::GET, "/devices/dev-1", None).await;
        assert_eq!(moved["group"], "field");

        // A new token: shown once, the old one refused.
        ui.click("section[aria-label=Credentials] button").await;
        ui.wait_text("dialog h2", "Issue a new token for dev-1?").await;
        ui.click("dialog button[type=submit]").await;
        ui.wait_text("dialog h2", "New token for dev-1").await;
        let secret = ui
            .find("dialog input.secret")
            .await
            .prop("value")
            .await
            .unwrap()
            .unwrap();
        assert!(secret.starts_with("npub_dev_") && secret != token, "{secret}");
        let old = reqwest::Client::new()
            .get(format!("{base}/api/v1/device/manifest?seq=0"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(old.status(), 401);
        let new = reqwest::Client::new()
            .get(format!("{base}/api/v1/device/manifest?seq=0"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_ne!(new.status(), 401);
        ui.click("dialog button[type=submit]").await;
        assert!(!ui.page_text().await.contains(&secret));
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn fleet_table_edits_the_selected_devices_together() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let base = s.url.clone();
    api(
        &base,
        Method::POST,
        "/devices",
        Some(json!({"devices": [
            {"id": "a-1", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "a-2", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "a-3", "accelerator": "ethos-u55-256", "group": "lab", "tags": ["keep"]},
        ]})),
    )
    .await;
    run(
        "batch-edit",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("fleet").await;
            ui.wait_text(".devices", "a-3").await;
            ui.click("input[aria-label='Select a-1']").await;
            ui.click("input[aria-label='Select a-2']").await;
            ui.wait_text(
                "form[aria-label='Edit selected devices']",
                "2 devices selected: a-1, a-2",
            )
            .await;
            ui.fill("input[name=batch-group]", "field").await;
            ui.fill("input[name=batch-tags]", "rev-b, bench").await;
            ui.click("form[aria-label='Edit selected devices'] button[type=submit]")
                .await;
            ui.wait_text("dialog h2", "Edit 2 devices?").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("#toast", "2 devices edited.").await;
            for id in ["a-1", "a-2"] {
                let d = api(&ui.base, Method::GET, &format!("/devices/{id}"), None).await;
                assert_eq!(d["group"], "field", "{id}");
                assert_eq!(d["tags"], json!(["rev-b", "bench"]), "{id}");
            }
            let untouched = api(&ui.base, Method::GET, "/devices/a-3", None).await;
            assert_eq!(untouched["group"], "lab");
            assert_eq!(untouched["tags"], json!(["keep"]));
        },
    )
    .await;
    s.stop().await;
}
