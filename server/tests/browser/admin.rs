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
