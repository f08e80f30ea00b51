//! Tokens and keys: create a token (its secret shown once, and it works), revoke it after a
//! confirmation; the active signing key is the one the API names; rotate and revoke signing keys
//! through their dialogs (admins only), and save the root key's trust file.
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer};
use crate::harness::{Screen, Ui, run};

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

/// `GET /api/v1/keys` as the admin.
async fn keys(http: &reqwest::Client, base: &str) -> Value {
    let r = http
        .get(format!("{base}/api/v1/keys"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The listed key `key_id` (panics when it is not listed).
fn key<'a>(keys: &'a Value, key_id: &str) -> &'a Value {
    keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_id"] == key_id)
        .unwrap_or_else(|| panic!("key {key_id} is not listed: {keys}"))
}

/// Whether the page has an element matching `css`.
async fn has(ui: &Ui, css: &str) -> bool {
    ui.js(
        "return document.querySelector(arguments[0]) !== null",
        vec![json!(css)],
    )
    .await
        == json!(true)
}

/// The text of the State badge in `key_id`'s row of the keys table, as a JS expression.
fn state_badge(key_id: &str) -> String {
    format!(
        "[...document.querySelectorAll('section[aria-labelledby=keys-title] tbody tr')]\
         .find((tr) => tr.querySelector('code')?.textContent === '{key_id}')\
         ?.querySelector('td[data-label=State] .badge')?.textContent"
    )
}

/// Waits until `key_id`'s row shows the State badge `state`.
async fn wait_state(ui: &Ui, key_id: &str, state: &str) {
    ui.wait_until(&format!("{} === '{state}'", state_badge(key_id)))
        .await;
}

#[tokio::test]
async fn rotates_and_revokes_signing_keys_through_their_dialogs_and_saves_the_root_trust_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let http = s.http.clone();
    let base = s.url.clone();
    run(
        "admin-keys",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            let before = keys(&http, &base).await;
            let old = before["active"]["key_id"].as_str().unwrap().to_owned();
            let root = before["root"]["key_id"].as_str().unwrap().to_owned();
            let root_public = before["root"]["public_key"].as_str().unwrap().to_owned();
            ui.sign_in().await;
            ui.open("admin").await;
            ui.wait_text(".facts .key-id", &old).await;
            ui.wait_text(".facts .root-key-id", &root).await;
            wait_state(&ui, &old, "active").await;
            let revoke_old = format!("button[data-revoke='{old}']");
            assert!(
                !has(&ui, &revoke_old).await,
                "the active key has no Revoke button"
            );

            // Rotate, leaving the dialog's "revoke the previous key" box off.
            ui.click("button[data-action=rotate]").await;
            ui.wait_text("dialog h2", "Rotate the signing key?").await;
            let said = ui.find("dialog").await.text().await.unwrap();
            for words in [
                "It signs every deployment made from now on",
                "Devices learn the new key at their next poll",
                &format!("Also revoke {old} at once"),
            ] {
                assert!(said.contains(words), "the dialog says {words:?}: {said}");
            }
            ui.screenshot("admin-keys-rotate-dialog").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_gone(".facts .key-id", &old).await;
            ui.wait_text("#toast", "is now active").await;
            let rotated = keys(&http, &base).await;
            let new = rotated["active"]["key_id"].as_str().unwrap().to_owned();
            assert_ne!(new, old);
            assert!(key(&rotated, &old)["retired_at"].is_string());
            assert!(
                key(&rotated, &old)["revoked_at"].is_null(),
                "the box was off: the previous key stays trusted"
            );
            ui.wait_text(".facts .key-id", &new).await;
            wait_state(&ui, &new, "active").await;
            wait_state(&ui, &old, "retired").await;
            assert!(
                !has(&ui, &format!("button[data-revoke='{new}']")).await,
                "the new active key has no Revoke button"
            );
            assert!(
                has(&ui, &revoke_old).await,
                "the retired key can be revoked"
            );

            // Revoke the previous key through its own dialog.
            ui.click(&revoke_old).await;
            ui.wait_text("dialog h2", &format!("Revoke key {old}?"))
                .await;
            let said = ui.find("dialog").await.text().await.unwrap();
            assert!(
                said.contains(&format!(
                    "Devices refuse every manifest key {old} signed, for good"
                )),
                "{said}"
            );
            ui.screenshot("admin-keys-revoke-dialog").await;
            ui.click("dialog button[type=submit]").await;
            wait_state(&ui, &old, "revoked").await;
            assert!(
                !has(&ui, &revoke_old).await,
                "a revoked key has no Revoke button"
            );
            let after = keys(&http, &base).await;
            assert!(key(&after, &old)["revoked_at"].is_string());
            assert!(key(&after, &new)["revoked_at"].is_null());
            let changes: Vec<_> = after["keyring_updates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| (u["action"].clone(), u["root_key_id"].clone()))
                .collect();
            assert_eq!(
                changes,
                [(json!("add"), json!(root)), (json!("revoke"), json!(root))]
            );
            ui.wait_text(
                "section[aria-labelledby=keys-title] caption",
                "Keyring updates",
            )
            .await;

            // The root trust file is the root key's public file, as the API serves it.
            ui.capture_downloads().await;
            ui.click(&format!("button[data-root-trust='{root}']")).await;
            let (name, text) = ui.saved().await;
            let served = http
                .get(format!("{base}/api/v1/keys/root/trust"))
                .bearer_auth(ADMIN)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert_eq!(name, format!("root-{root}.key.pub"));
            assert_eq!(text, served);
            assert_eq!(text, format!("npub-ed25519-public-v1 {root_public}\n"));
            ui.wait_text("#toast", "device-agent --root").await;
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn shows_an_operator_the_keys_and_the_root_trust_file_but_no_rotate_or_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let created: Value = s
        .req(reqwest::Method::POST, "/api/v1/tokens")
        .json(&json!({"name": "uploader"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let operator = created["token"].as_str().unwrap().to_owned();
    let r = s
        .req(reqwest::Method::POST, "/api/v1/keys/rotate")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let listed = keys(&s.http, &s.url).await;
    let active = listed["active"]["key_id"].as_str().unwrap().to_owned();
    let root = listed["root"]["key_id"].as_str().unwrap().to_owned();
    let retired = listed["keys"][1]["key_id"].as_str().unwrap().to_owned();
    run(
        "admin-keys-operator",
        &s.url,
        &operator,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.wait_text("#who", "operator").await;
            ui.open("admin").await;
            ui.wait_text(".facts .key-id", &active).await;
            wait_state(&ui, &retired, "retired").await;
            assert!(has(&ui, &format!("button[data-root-trust='{root}']")).await);
            for css in [
                "button[data-action=rotate]",
                "button[data-revoke]",
                "td[data-label=Actions]",
            ] {
                assert!(!has(&ui, css).await, "an operator sees no {css}");
            }
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_revoking_a_key_revoked_meanwhile_and_says_so_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let old = keys(&s.http, &s.url).await["active"]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .req(reqwest::Method::POST, "/api/v1/keys/rotate")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let http = s.http.clone();
    let base = s.url.clone();
    run(
        "admin-keys-conflict",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("admin").await;
            wait_state(&ui, &old, "retired").await;
            ui.click(&format!("button[data-revoke='{old}']")).await;
            ui.wait_text("dialog h2", &format!("Revoke key {old}?"))
                .await;
            // Someone else revokes it while the dialog is open.
            let r = http
                .post(format!("{base}/api/v1/keys/{old}/revoke"))
                .bearer_auth(ADMIN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            ui.click("dialog button[type=submit]").await;
            let said = ui
                .wait_text(
                    "section[aria-labelledby=keys-title] [role=alert]",
                    "could not",
                )
                .await;
            assert_eq!(
                said,
                format!(
                    "The server could not revoke key {old}: the key is the active one or already \
                 revoked (the list shows its state now)."
                )
            );
            assert!(
                !said.contains("conflict") && !said.contains("/api/"),
                "{said}"
            );
            wait_state(&ui, &old, "revoked").await;
        },
    )
    .await;
    s.stop().await;
}
