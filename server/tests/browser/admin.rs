//! Tokens and keys: create a token (its secret shown once, and it works), revoke it after a
//! confirmation; the active signing key is the one the API names.
use crate::common::{ADMIN, TestServer};
use crate::harness::{Screen, run};

#[tokio::test]
async fn creates_shows_once_and_revokes_a_token_and_lists_the_signing_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let keys: serde_json::Value = s
        .req(reqwest::Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key_id = keys["active"]["key_id"].as_str().unwrap().to_owned();
    let http = s.http.clone();
    let base = s.url.clone();
    run("admin", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("admin").await;
        ui.wait_text("h1", "Tokens and keys").await;
        ui.wait_text(".facts .key-id", &key_id).await;

        // The trust file button saves exactly what the API serves (and device-agent reads).
        ui.js(
            // The page's CSP (connect-src 'self') forbids fetching blob: URLs, so the saved
            // blob is read where it is made; the anchor's click (the browser's save) is recorded.
            r#"const make = URL.createObjectURL.bind(URL);
               URL.createObjectURL = (blob) => {
                 blob.text().then((text) => { document.body.dataset.savedText = text; });
                 return make(blob);
               };
               HTMLAnchorElement.prototype.click = function () {
                 document.body.dataset.savedName = this.download;
               };"#,
            vec![],
        )
        .await;
        ui.click(&format!(".facts button[data-trust='{key_id}']"))
            .await;
        ui.wait_until("document.body.dataset.savedText !== undefined")
            .await;
        let saved = ui
            .js(
                "return [document.body.dataset.savedName, document.body.dataset.savedText];",
                vec![],
            )
            .await;
        let served = http
            .get(format!("{base}/api/v1/keys/{key_id}/trust"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(saved[0], format!("{key_id}.key.pub").as_str());
        assert_eq!(saved[1], served.as_str());
        assert!(served.starts_with("npub-ed25519-public-v1 "), "{served}");
        ui.wait_text("#toast", ".key.pub").await;

        ui.fill(
            "form[aria-label='New token'] input[name=name]",
            "CI uploader",
        )
        .await;
        ui.click("form[aria-label='New token'] button[type=submit]")
            .await;
        ui.wait_text("dialog h2", "Token “CI uploader” created")
            .await;
        let secret = ui
            .find("dialog input.secret")
            .await
            .prop("value")
            .await
            .unwrap()
            .unwrap();
        assert!(secret.starts_with("npub_op_"), "{secret}");
        let works = http
            .get(format!("{base}/api/v1/models"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(works.status(), 200);
        ui.click("dialog button[type=submit]").await;
        ui.wait_text("table", "CI uploader").await;
        assert!(
            !ui.page_text().await.contains(&secret),
            "the secret is not shown again"
        );

        ui.click("button[aria-label='Revoke token CI uploader']")
            .await;
        ui.wait_text("dialog h2", "Revoke token “CI uploader”?")
            .await;
        ui.click("dialog button[type=submit]").await;
        ui.wait_text("table", "revoked").await;
        let refused = http
            .get(format!("{base}/api/v1/models"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn copies_a_new_operator_token_from_its_one_time_dialog() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let http = s.http.clone();
    let base = s.url.clone();
    run(
        "admin-copy",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.grant_clipboard().await;
            ui.open("admin").await;
            ui.wait_text("h1", "Tokens and keys").await;
            ui.fill("form[aria-label='New token'] input[name=name]", "uploader")
                .await;
            ui.click("form[aria-label='New token'] button[type=submit]")
                .await;
            ui.wait_text("dialog h2", "Token “uploader” created").await;
            let field = ui.find("dialog input.secret").await;
            let secret = field.prop("value").await.unwrap().unwrap();
            assert_eq!(
                field.prop("readOnly").await.unwrap().as_deref(),
                Some("true")
            );
            ui.click("dialog button[aria-label='Copy token uploader']")
                .await;
            ui.wait_text("dialog button.copy", "Copied").await;
            let copied = ui.clipboard().await;
            assert_eq!(copied, secret);
            ui.screenshot("admin-copy-dialog").await;
            let works = http
                .get(format!("{base}/api/v1/models"))
                .bearer_auth(&copied)
                .send()
                .await
                .unwrap();
            assert_eq!(works.status(), 200);
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("section[aria-labelledby=tokens-title] caption", "2 tokens")
                .await;
        },
    )
    .await;
    s.stop().await;
}
