//! Counts read as English: one helper (`format.js` `plural`) says "1 device", "2 devices", and
//! no view says "1 tokens" or "device(s)".
use serde_json::json;

use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::fleet::api;
use crate::harness::{Screen, run};

#[tokio::test]
async fn survives_a_count_of_one_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    let base = s.url.clone();
    run("wording", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        // The helper itself, as the views import it.
        let said = ui
            .client
            .execute_async(
                "const done = arguments[0];
                 import('/assets/format.js').then((f) => done([
                   f.plural(0, 'device'), f.plural(1, 'device'), f.plural(2, 'device'),
                   f.plural(1, 'entry', 'entries'), f.plural(1200, 'entry', 'entries'), f.bytes(1),
                 ]));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            said,
            json!([
                "0 devices",
                "1 device",
                "2 devices",
                "1 entry",
                "1,200 entries",
                "1 byte"
            ])
        );

        ui.wait_text("caption", "1 model").await;
        ui.open("models/kws").await;
        ui.wait_text(".versions caption", "1 version").await;

        // One device registered through the form: the dialog and the list say it in the singular.
        ui.open("fleet").await;
        ui.wait_text("h1", "Fleet").await;
        ui.fill("textarea[name=devices]", "lab-1, Bench one, lab")
            .await;
        ui.click("form[aria-labelledby=register-title] button[type=submit]")
            .await;
        ui.wait_text("dialog h2", "1 device registered").await;
        ui.click("dialog button[type=submit]").await;
        ui.wait_until("document.querySelector('dialog') === null")
            .await;
        let caption = ui.wait_text(".devices caption", "device").await;
        assert_eq!(caption, "1 device");

        // A second device of the group on another accelerator is skipped by the deployment.
        api(
            &base,
            reqwest::Method::POST,
            "/devices",
            Some(json!({"id": "lab-2", "accelerator": "ethos-u55-128", "group": "lab"})),
        )
        .await;
        api(
            &base,
            reqwest::Method::POST,
            "/deployments",
            Some(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
        )
        .await;
        ui.open("deployments/1").await;
        ui.wait_text(".summary", "0 of 1 device installed").await;
        let offered = ui.wait_text("p.muted", "Offered to").await;
        assert!(
            offered.starts_with("Offered to 1 device: ")
                && offered.contains("; 1 device of the group skipped (other accelerator)"),
            "{offered}"
        );
        let bar = ui
            .js(
                "return document.querySelector('.stack').getAttribute('aria-label')",
                vec![],
            )
            .await;
        assert_eq!(bar, "1 pending of 1 device");
        ui.open("deployments").await;
        ui.wait_text(".deployments caption", "1 deployment").await;

        // The bootstrap admin token is the only one.
        ui.open("admin").await;
        ui.wait_text("h1", "Tokens and keys").await;
        let caption = ui
            .wait_text("section[aria-labelledby=tokens-title] caption", "token")
            .await;
        assert_eq!(caption, "1 token");

        let text = ui.page_text().await;
        assert!(
            !text.contains("(s)") && !text.contains("1 tokens"),
            "{text}"
        );
    })
    .await;
    s.stop().await;
}
