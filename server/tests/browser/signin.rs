//! Signing in with an API token, being refused with a bad one, signing out.
use crate::common::{ADMIN, TestServer};
use crate::harness::{Screen, run};

#[tokio::test]
async fn signs_in_with_a_token_refuses_a_bad_one_and_signs_out() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    run("signin", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.open("").await;
        ui.wait_text("h1", "Sign in").await;
        // The navigation is hidden until the token is accepted.
        assert_eq!(
            ui.js("return document.getElementById('nav').hidden", vec![])
                .await,
            true
        );

        ui.fill("input[name=token]", "npub_op_not-a-real-token")
            .await;
        ui.click("form.signin button[type=submit]").await;
        ui.wait_text("[role=alert]", "This token was not accepted")
            .await;
        assert_eq!(
            ui.js("return sessionStorage.getItem('npub.token')", vec![])
                .await,
            serde_json::Value::Null,
            "a refused token is not kept"
        );

        ui.sign_in().await;
        ui.wait_text("#who", "admin").await;
        assert_eq!(
            ui.js("return sessionStorage.getItem('npub.token')", vec![])
                .await,
            ui.token.as_str()
        );
        // A reload keeps the session (sessionStorage), and lands on the same view.
        ui.open("audit").await;
        ui.wait_text("h1", "Audit log").await;

        ui.click("#sign-out").await;
        ui.wait_text("h1", "Sign in").await;
        assert_eq!(
            ui.js("return sessionStorage.getItem('npub.token')", vec![])
                .await,
            serde_json::Value::Null
        );
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_revoked_token_ends_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let created: serde_json::Value = s
        .req(reqwest::Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "short-lived"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = created["token"].as_str().unwrap().to_owned();
    let id = created["id"].as_i64().unwrap();
    let http = s.http.clone();
    let revoke = format!("{}/api/v1/tokens/{id}", s.url);
    run(
        "revoked",
        &s.url,
        &secret,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.wait_text("#who", "operator").await;
            let r = http.delete(revoke).bearer_auth(ADMIN).send().await.unwrap();
            assert_eq!(r.status(), 204);
            ui.open("audit").await;
            ui.wait_text("h1", "Sign in").await;
            ui.wait_text(".notice", "Signed out").await;
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn explains_a_refused_token_in_words_rather_than_the_apis_text() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let created: serde_json::Value = s
        .req(reqwest::Method::POST, "/api/v1/devices")
        .json(&serde_json::json!({"id": "lab-1", "accelerator": "ethos-u55-256"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let device_token = created[0]["token"].as_str().unwrap().to_owned();
    run(
        "signin-refused",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.open("").await;
            ui.wait_text("h1", "Sign in").await;
            for (token, want) in [
                (
                    "npub_op_not-a-real-token",
                    "This token was not accepted: it is unknown or has been revoked. \
                 Check that you pasted all of it.",
                ),
                (
                    device_token.as_str(),
                    "This is a device token. Sign in with an operator token (npub_op_…).",
                ),
                (
                    "hunter2",
                    "This is not an npub operator token: those start with npub_op_.",
                ),
            ] {
                ui.fill("input[name=token]", token).await;
                ui.click("form.signin button[type=submit]").await;
                let shown = ui.wait_text(".status [role=alert]", "token").await;
                assert_eq!(shown, want, "for {token:?}");
                ui.screenshot("signin-refused").await;
                ui.js(
                    "document.querySelector('.status').replaceChildren()",
                    vec![],
                )
                .await;
            }
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_revoked_session_says_why_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let created: serde_json::Value = s
        .req(reqwest::Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "short-lived"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = created["token"].as_str().unwrap().to_owned();
    let revoke = s.req(
        reqwest::Method::DELETE,
        &format!("/api/v1/tokens/{}", created["id"]),
    );
    run(
        "revoked-words",
        &s.url,
        &secret,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            assert_eq!(revoke.send().await.unwrap().status(), 204);
            ui.open("audit").await;
            let notice = ui.wait_text(".notice", "Signed out").await;
            assert_eq!(
                notice,
                "Signed out: the server no longer accepts this token (it may have been revoked). \
             Sign in again."
            );
        },
    )
    .await;
    s.stop().await;
}
