//! Webhooks in the console: register one for a receiver on loopback (its secret shown once),
//! send it a test event and a real one (a deployment paused), see each delivery in the log, and
//! check at the receiver that every delivery is signed with that secret.
use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::harness::{Screen, run};

#[path = "../common/webhook_receiver.rs"]
#[allow(dead_code)]
mod receiver;
use receiver::{Answer, receiver, verify};

#[tokio::test]
async fn registers_a_webhook_and_sees_signed_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    let r = s
        .req(reqwest::Method::POST, "/api/v1/devices")
        .json(&serde_json::json!({"id": "cam-1", "accelerator": "ethos-u55-256", "group": "lab"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = s
        .req(reqwest::Method::POST, "/api/v1/deployments")
        .json(&serde_json::json!({"model": "kws", "version": "1.0.0", "group": "lab"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let deployment: serde_json::Value = r.json().await.unwrap();
    let deployment = deployment["id"].as_i64().unwrap();
    let (url, mut got) = receiver(|_| Answer::Status(200)).await;
    let api = s.url.clone();
    run(
        "webhooks",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("webhooks").await;
            ui.wait_text("main", "No webhooks yet.").await;
            ui.fill("form[aria-label='New webhook'] input[name=url]", &url)
                .await;
            ui.fill(
                "form[aria-label='New webhook'] input[name=description]",
                "loopback receiver",
            )
            .await;
            ui.click("input[value='deployment.state_changed']").await;
            ui.click("form[aria-label='New webhook'] button[type=submit]")
                .await;
            ui.wait_text("dialog h2", "Webhook registered").await;
            let secret = ui
                .find("dialog input.secret")
                .await
                .prop("value")
                .await
                .unwrap()
                .unwrap();
            assert!(secret.starts_with("whsec_"), "{secret}");
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Webhook 1").await;
            assert!(
                !ui.page_text().await.contains(&secret),
                "the secret is not shown again"
            );

            // A test event from the page.
            ui.wait_text("button[data-test-event]", "Send a test event")
                .await;
            ui.click("button[data-test-event]").await;
            let test = got.recv().await.unwrap();
            verify(&secret, &test);
            assert_eq!(test.json()["type"], "webhook.test");

            // A real event: the deployment paused (through the API, as another operator would).
            let r = reqwest::Client::new()
                .post(format!("{api}/api/v1/deployments/{deployment}/pause"))
                .bearer_auth(ADMIN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let paused = got.recv().await.unwrap();
            verify(&secret, &paused);
            assert_eq!(paused.json()["data"]["state"], "paused");

            // Both in the log, delivered (the page refreshes it).
            ui.wait_until(
            "document.querySelectorAll('.deliveries [data-delivery-state=delivered]').length === 2",
        )
        .await;
            ui.wait_text(".deliveries", "deployment.state_changed")
                .await;
            ui.wait_text(".deliveries", "webhook.test").await;
            ui.screenshot("webhook-deliveries").await;
            ui.open("webhooks").await;
            ui.wait_text("main table", "enabled").await;
            ui.wait_text("main table", "deployment.state_changed").await;
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_failing_webhook_reads_disabled_and_can_be_enabled_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| {
        c.webhook_retry_base_ms = 1;
        c.webhook_disable_after = 2;
    })
    .await;
    let (url, mut got) = receiver(|n| Answer::Status(if n < 2 { 503 } else { 200 })).await;
    let r = s
        .req(reqwest::Method::POST, "/api/v1/webhooks")
        .json(&serde_json::json!({"url": url, "events": ["key.rotated"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = s
        .req(reqwest::Method::POST, "/api/v1/keys/rotate")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    run(
        "webhooks-disabled",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            got.recv().await.unwrap();
            got.recv().await.unwrap();
            ui.sign_in().await;
            ui.open("webhooks").await;
            ui.wait_text("main table", "disabled").await;
            ui.wait_text("main table", "2 failed attempts in a row")
                .await;
            ui.open("webhooks/1").await;
            let alert = ui.wait_text("[data-disabled]", "Disabled").await;
            assert!(alert.contains("503"), "{alert}");
            ui.wait_text(".deliveries [data-delivery-state=pending]", "pending")
                .await;
            ui.screenshot("webhook-disabled").await;
            ui.wait_text("main button", "Enable again").await;
            ui.click("main button.primary").await;
            // Enabled: the pending delivery goes out, and the page says so.
            got.recv().await.unwrap();
            ui.wait_text(".deliveries [data-delivery-state=delivered]", "delivered")
                .await;
            ui.wait_gone("main", "Disabled").await;
        },
    )
    .await;
    s.stop().await;
}
