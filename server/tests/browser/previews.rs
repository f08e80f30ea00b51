//! Previews that refuse mistakes: the deploy form picks a group or device from lists, its
//! confirmation says who is reached, who is skipped and why, and what each batch holds; a
//! deployment that would reach nobody is refused before any dialog; a rollback names the concrete
//! version "previous" resolves to; a byte-identical upload says so.
use reqwest::Method;
use serde_json::json;

use crate::common::{ADMIN, TestServer, fixtures};
use crate::fleet::api;
use crate::harness::{Screen, run};

fn vela(accel_dir: &str, name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("vela_out/{accel_dir}/tflite/{name}_vela.tflite")))
        .unwrap()
}

#[tokio::test]
async fn deploy_and_rollback_dialogs_say_what_will_happen_and_refuse_nobody_reached() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(
        s.upload("kws", "1.0.0", vela("u55_256", "conv1"))
            .await
            .status(),
        201
    );
    assert_eq!(
        s.upload("kws", "2.0.0", vela("u55_256", "small_net"))
            .await
            .status(),
        201
    );
    let base = s.url.clone();
    api(
        &base,
        Method::POST,
        "/devices",
        Some(json!({"devices": [
            {"id": "cam-1", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "cam-2", "accelerator": "ethos-u55-256", "group": "lab"},
            {"id": "tiny-1", "accelerator": "ethos-u55-128", "group": "lab"},
            {"id": "tiny-2", "accelerator": "ethos-u55-128", "group": "small"},
        ]})),
    )
    .await;
    let fixture = fixtures()
        .join("vela_out/u55_256/tflite/small_net_vela.tflite")
        .canonicalize()
        .unwrap();

    run(
        "previews",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("deploy?model=kws&version=1.0.0").await;
            ui.wait_text("select[name=target]", "lab (3 devices)").await;

            // A group whose every device has another accelerator: refused before any dialog.
            ui.select("select[name=target]", "small").await;
            ui.click("input[name=staged]").await;
            ui.click("form[aria-labelledby=deploy-title] button[type=submit]")
                .await;
            ui.wait_text("[role=alert]", "compiled for ethos-u55-256")
                .await;
            assert_eq!(
                ui.js("return document.querySelector('dialog') === null", vec![])
                    .await,
                true
            );
            let none = api(&ui.base, Method::GET, "/deployments", None).await;
            assert_eq!(none.as_array().unwrap().len(), 0);

            // The mixed group: the dialog says 2 reached, tiny-1 skipped and why.
            ui.select("select[name=target]", "lab").await;
            ui.click("form[aria-labelledby=deploy-title] button[type=submit]")
                .await;
            let dialog = ui.wait_text("dialog", "Deploy kws 1.0.0?").await;
            for want in [
                "2 devices",
                "tiny-1",
                "it is ethos-u55-128; the pack is compiled for ethos-u55-256",
            ] {
                assert!(dialog.contains(want), "{want:?} not in {dialog:?}");
            }
            ui.wait_text("dialog button[type=submit]", "Deploy to 2 devices")
                .await;
            ui.screenshot("deploy-preview").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Deployment #1: kws 1.0.0").await;

            // 2.0.0 next, then "previous" in the rollback form names 1.0.0 before it is made.
            api(
                &ui.base,
                Method::POST,
                "/deployments",
                Some(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
            )
            .await;
            ui.open("fleet?group=lab&rollback=1").await;
            ui.wait_text("#rollback-title", "Roll a group back").await;
            ui.wait_text("select[name=rollback-version]", "before the last one")
                .await;
            ui.select("select[name=rollback-version]", "previous").await;
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            let question = ui.wait_text("dialog", "Roll group lab back?").await;
            assert!(
                question.contains("kws 1.0.0") && question.contains("2 devices"),
                "{question}"
            );
            ui.screenshot("rollback-preview").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Deployment #3: kws 1.0.0").await;

            // The same file again as a new version: stored, and said to be identical.
            ui.open("models/kws").await;
            ui.wait_text("h1", "kws").await;
            ui.js(
                "document.querySelector('input[name=version]').value = '2.0.1';",
                vec![],
            )
            .await;
            ui.find("input[type=file][name=pack]")
                .await
                .send_keys(fixture.to_str().unwrap())
                .await
                .unwrap();
            ui.click("form.upload button[type=submit]").await;
            ui.wait_text(".upload-status .identical", "byte-identical to kws 2.0.0")
                .await;
        },
    )
    .await;
    s.stop().await;
}
