//! Keyboard use: sign in and move around with keys alone, a visible focus ring, and a dialog
//! that keeps focus inside, closes on Escape and gives focus back to what opened it.
use fantoccini::key::Key;

use crate::common::{ADMIN, TestServer, fixtures};
use crate::harness::{Screen, run};

/// The focused element's `tag#id.class "text"`, for messages and comparisons.
const FOCUSED: &str = "const e = document.activeElement; \
     return `${e.tagName.toLowerCase()}.${e.className} ${(e.textContent || e.value || '').trim().slice(0, 40)}`;";

#[tokio::test]
async fn works_from_the_keyboard_and_dialogs_trap_focus_and_close_on_escape() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    let pack =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    assert_eq!(s.upload("kws", "1.0.0", pack).await.status(), 201);
    run("keyboard", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.open("").await;
        ui.wait_text("h1", "Sign in").await;
        // The token field has focus on arrival; typing and Enter sign in.
        let focused = ui.js(FOCUSED, vec![]).await;
        assert!(focused.as_str().unwrap().starts_with("input."), "{focused}");
        ui.press(&format!("{}{}", ui.token, Key::Enter)).await;
        ui.wait_text("h1", "Models").await;

        // Tab from the top reaches the skip link first, then the navigation; focus is visible.
        ui.client.refresh().await.unwrap();
        ui.wait_text("h1", "Models").await;
        ui.press(&Key::Tab.to_string()).await;
        let first = ui.js(FOCUSED, vec![]).await;
        assert!(first.as_str().unwrap().contains("Skip to content"), "{first}");
        let outline = ui
            .js("return getComputedStyle(document.activeElement).outlineStyle", vec![])
            .await;
        assert_eq!(outline, "solid", "the focused element shows a focus ring");

        // Open the version page from the keyboard: focus the link, Enter.
        ui.open("models/kws").await;
        ui.wait_text(".versions", "1.0.0").await;
        ui.js("document.querySelector('.versions tbody a').focus()", vec![]).await;
        ui.press(&Key::Enter.to_string()).await;
        ui.wait_text("h1", "kws 1.0.0").await;
        let heading = ui.js(FOCUSED, vec![]).await;
        assert!(heading.as_str().unwrap().starts_with("h1"), "navigation moves focus to the heading: {heading}");

        // The delete dialog: focus inside, Tab wraps around inside it, Escape cancels.
        ui.js(
            "[...document.querySelectorAll('button')].find((b) => b.textContent.startsWith('Delete')).focus()",
            vec![],
        )
        .await;
        ui.press(&Key::Enter.to_string()).await;
        ui.wait_text("dialog h2", "Delete kws 1.0.0?").await;
        for _ in 0..5 {
            let inside = ui
                .js("return document.querySelector('dialog').contains(document.activeElement)", vec![])
                .await;
            assert_eq!(inside, true, "focus left the dialog: {}", ui.js(FOCUSED, vec![]).await);
            ui.press(&Key::Tab.to_string()).await;
        }
        ui.chord(Key::Shift, Key::Tab).await;
        let inside = ui
            .js("return document.querySelector('dialog').contains(document.activeElement)", vec![])
            .await;
        assert_eq!(inside, true, "Shift+Tab left the dialog");
        ui.press(&Key::Escape.to_string()).await;
        ui.wait_until("document.querySelector('dialog') === null").await;
        let back = ui.js(FOCUSED, vec![]).await;
        assert!(back.as_str().unwrap().contains("Delete version"), "focus returns to the opener: {back}");
        // Escape cancelled: the version is still there.
        ui.open("models/kws").await;
        ui.wait_text(".versions", "1.0.0").await;
    })
    .await;
    s.stop().await;
}
