//! The audit log: what was done through the API (here: by another token) is listed, newest
//! first, and the filter narrows it.
use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::harness::{Screen, run};

#[tokio::test]
async fn lists_who_did_what_and_filters_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    // A hostile-looking token name is shown as text, never interpreted.
    let r = s
        .req(reqwest::Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "<img src=x onerror=alert(1)>"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    run("audit", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("audit").await;
        let first = ui.wait_text(".audit tbody tr", "token.create").await;
        assert!(first.contains("<img src=x onerror=alert(1)>"), "{first}");
        assert_eq!(
            ui.js(
                "return document.querySelectorAll('main img').length",
                vec![]
            )
            .await,
            0,
            "a name is text, not markup"
        );
        ui.wait_text(".audit tbody", "version.upload").await;
        ui.wait_text(".audit tbody", "models/kws/versions/1.0.0")
            .await;
        ui.wait_text(".audit tbody", "model.create").await;
        let rows = "return document.querySelectorAll('.audit tbody tr').length";
        // token.create (bootstrap and ours), model.create, version.upload, key.generate …
        assert!(ui.js(rows, vec![]).await.as_i64().unwrap() >= 4);
        ui.fill("input[name=action]", "version.upload").await;
        ui.wait_until("document.querySelectorAll('.audit tbody tr').length === 1")
            .await;
        ui.wait_text(".audit caption", "1 of").await;
    })
    .await;
    s.stop().await;
}
