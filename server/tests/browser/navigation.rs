//! Leaving a view and mistyped addresses: a dialog does not outlive the view that opened it, an
//! unknown route says "Not found" (and keeps its address), and a rollback can be staged in
//! batches like any deployment.
use serde_json::json;

use crate::common::{ADMIN, TestServer, fixtures};
use crate::fleet::api;
use crate::harness::{Screen, run};

fn vela(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("vela_out/u55_256/tflite/{name}_vela.tflite"))).unwrap()
}

#[tokio::test]
async fn rejects_an_unknown_route_and_a_dialog_left_behind_by_navigation() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    for v in ["1.0.0", "2.0.0"] {
        assert_eq!(s.upload("kws", v, vela("small_net")).await.status(), 201);
    }
    let base = s.url.clone();
    let ids: Vec<String> = (1..=10).map(|i| format!("lab-{i}")).collect();
    let devices: Vec<_> = ids
        .iter()
        .map(|id| json!({"id": id, "accelerator": "ethos-u55-256", "group": "lab"}))
        .collect();
    api(
        &base,
        reqwest::Method::POST,
        "/devices",
        Some(json!({ "devices": devices })),
    )
    .await;
    for v in ["1.0.0", "2.0.0"] {
        api(
            &base,
            reqwest::Method::POST,
            "/deployments",
            Some(json!({"model": "kws", "version": v, "group": "lab"})),
        )
        .await;
    }
    run(
        "navigation",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            // A mistyped address: "Not found", the address kept, a way back.
            ui.open("modles").await;
            ui.wait_text("h1", "Not found").await;
            ui.wait_text("main", "#/modles").await;
            assert!(
                ui.js("return location.hash", vec![])
                    .await
                    .as_str()
                    .unwrap()
                    .ends_with("/modles")
            );
            ui.click("main a[href='#/models']").await;
            ui.wait_text("h1", "Models").await;

            // A rollback staged in batches: the question names them.
            ui.open("fleet?group=lab&rollback=1").await;
            ui.wait_text("#rollback-title", "Roll a group back").await;
            ui.select("select[name=rollback-version]", "1.0.0").await;
            ui.fill("input[name=rollback-batches]", "10, 100").await;
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            let question = ui.wait_text("dialog", "Roll group lab back?").await;
            assert!(question.contains("Batch 1 (10 %)"), "{question}");
            // Leaving the view (Back, a link, a typed address) cancels the dialog with it.
            ui.open("deployments").await;
            ui.wait_text("h1", "Deployments").await;
            ui.wait_until("document.querySelector('dialog') === null")
                .await;
            let all = api(&ui.base, reqwest::Method::GET, "/deployments", None).await;
            assert_eq!(all.as_array().unwrap().len(), 2, "nothing was rolled back");

            // Confirmed, the rollback is a staged deployment.
            ui.open("fleet?group=lab&rollback=1").await;
            ui.wait_text("#rollback-title", "Roll a group back").await;
            ui.select("select[name=rollback-version]", "1.0.0").await;
            ui.fill("input[name=rollback-batches]", "10, 100").await;
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            ui.wait_text("dialog", "Roll group lab back?").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Deployment #3: kws 1.0.0").await;
            let d = api(&ui.base, reqwest::Method::GET, "/deployments/3", None).await;
            assert_eq!(d["kind"], "rollback", "{d}");
            assert_eq!(d["rollout"]["batches"], json!([10, 100]), "{d}");

            // A bad batch list is refused in the form, naming the field.
            ui.open("fleet?group=lab&rollback=1").await;
            ui.wait_text("#rollback-title", "Roll a group back").await;
            ui.fill("input[name=rollback-batches]", "50, 20").await;
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            ui.wait_text(".error", "Batches: batches must grow").await;
        },
    )
    .await;
    s.stop().await;
}
