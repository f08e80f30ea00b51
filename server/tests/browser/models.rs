//! Models and versions: create a model, upload a Vela file through the file input and see it
//! listed and inspected; upload a corrupt `.npub` and see the server's reason.
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, conv1_npub, fixtures};
use crate::harness::{Screen, run};

/// Bytes that are no pack at all.
const JUNK: &str = "this is not an NPU1 pack, whatever its name says";

/// Drops a file named `arguments[0]` holding the text `arguments[1]` on the upload zone, as a
/// drag from the desktop would (WebDriver cannot drag a real file).
const DROP: &str = r#"
    const [name, text] = arguments;
    const data = new DataTransfer();
    data.items.add(new File([text], name));
    const zone = document.querySelector('.dropzone');
    zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
"#;

fn small_net() -> std::path::PathBuf {
    fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")
}

#[tokio::test]
async fn uploads_a_vela_model_through_the_file_input_and_inspects_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let fixture = small_net().canonicalize().unwrap();
    run("upload", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.wait_text(".empty", "No models yet").await;
        ui.fill("input[name=name]", "small-net").await;
        ui.select("select[name=accelerator]", "ethos-u55-256").await;
        ui.click("form[aria-labelledby=new-model-title] button[type=submit]").await;
        ui.wait_text("h1", "small-net").await;

        assert_eq!(
            ui.find("input[name=version]").await.prop("value").await.unwrap().as_deref(),
            Some("1.0.0"),
            "the first version is suggested"
        );
        ui.find("input[type=file][name=pack]")
            .await
            .send_keys(fixture.to_str().unwrap())
            .await
            .unwrap();
        ui.wait_text(".chosen", "small_net_vela.tflite").await;
        ui.click("form.upload button[type=submit]").await;
        ui.wait_text(".upload-status .ok", "Stored small-net 1.0.0").await;
        // The progress bar was driven by the upload's own progress events to the end.
        assert_eq!(ui.js("return document.querySelector('form.upload progress').value", vec![]).await, 100);
        assert_eq!(ui.find(".progress-text").await.text().await.unwrap(), "100%");
        // Listed, with its facts.
        let row = ui.wait_text(".versions tbody tr", "1.0.0").await;
        for want in ["132.7 KiB", "19.0 KiB", "ethos-u55-256", "tflite", "bootstrap"] {
            assert!(row.contains(want), "{want:?} not in the row {row:?}");
        }

        // The detail page shows what `npub inspect` shows.
        ui.click(".versions tbody a").await;
        ui.wait_text("h1", "small-net 1.0.0").await;
        let header = ui.wait_text(".header-table", "magic").await;
        assert!(header.contains("4E 50 55 31") && header.contains("reads \"NPU1\""), "{header}");
        assert!(header.contains("FNV-1a over bytes 32..total_bytes"), "{header}");
        let regions: Vec<String> = ui
            .js(
                "return [...document.querySelectorAll('.region-table tbody tr')].map((r) => r.innerText)",
                vec![],
            )
            .await
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().replace('\t', " "))
            .collect();
        assert_eq!(regions.len(), 3, "{regions:?}");
        assert_eq!(regions[0], "0 weights 0x00000001 BAKED 134976 880");
        assert_eq!(regions[1], "1 scratch 0x00000000 RUNTIME 19424 -");
        ui.wait_text(".inspect-footer", "Verdict: valid NPU1 pack").await;
        ui.wait_text("table", "input").await;
        ui.wait_text("section[aria-labelledby=stream-title]", "conv 3").await;
    })
    .await;

    // What the page showed is what the API has.
    let v: Value = s
        .req(
            reqwest::Method::GET,
            "/api/v1/models/small-net/versions/1.0.0",
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["source"], "tflite");
    s.stop().await;
}

#[tokio::test]
async fn shows_the_servers_reason_when_it_refuses_a_corrupt_pack() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let mut corrupt = conv1_npub();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55; // a payload byte: the header checksum no longer matches
    let file = dir.path().join("corrupt.npub");
    std::fs::write(&file, &corrupt).unwrap();
    // The reason the API gives for these bytes, to compare with what the page shows.
    let refused = s.upload("m", "9.9.9", corrupt.clone()).await;
    assert_eq!(refused.status(), 422);
    let reason = refused.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("checksum"), "{reason}");
    let junk = s.upload("m", "9.9.9", JUNK.as_bytes().to_vec()).await;
    assert_eq!(junk.status(), 422);
    let junk_reason = junk.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_owned();

    run("corrupt", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("models/m").await;
        ui.wait_text("h1", "m").await;
        ui.fill("input[name=version]", "1.0.0").await;
        ui.find("input[type=file][name=pack]")
            .await
            .send_keys(file.to_str().unwrap())
            .await
            .unwrap();
        ui.click("form.upload button[type=submit]").await;
        let shown = ui
            .wait_text(".upload-status [role=alert]", "invalid_pack")
            .await;
        assert_eq!(shown, format!("invalid_pack: {reason}"));
        ui.wait_text(".upload-status", "The server refused this file")
            .await;
        ui.wait_text(".empty", "No versions yet").await;

        // Drag and drop: a file of another kind is refused in the page, a dropped pack is sent.
        ui.js(DROP, vec![json!("notes.txt"), json!("hello")]).await;
        ui.wait_text(
            ".upload-status [role=alert]",
            "choose a .npub, *_vela.tflite or .npz file",
        )
        .await;
        ui.js(DROP, vec![json!("junk.npub"), json!(JUNK)]).await;
        ui.wait_text(".chosen", "junk.npub").await;
        ui.click("form.upload button[type=submit]").await;
        let shown = ui
            .wait_text(".upload-status [role=alert]", "invalid_pack")
            .await;
        assert_eq!(shown, format!("invalid_pack: {junk_reason}"));
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn after_an_upload_the_version_count_is_current_and_no_file_is_left_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("small-net").await;
    let fixture = small_net().canonicalize().unwrap();
    run(
        "upload-again",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("models/small-net").await;
            ui.wait_text("h1", "small-net").await;
            assert_eq!(ui.find(".version-count").await.text().await.unwrap(), "0");
            ui.find("input[type=file][name=pack]")
                .await
                .send_keys(fixture.to_str().unwrap())
                .await
                .unwrap();
            ui.wait_text(".chosen", "small_net_vela.tflite").await;
            ui.click("form.upload button[type=submit]").await;
            ui.wait_text(".upload-status .ok", "Stored small-net 1.0.0")
                .await;
            ui.wait_text(".versions caption", "1 version").await;
            // The model's facts agree with the table without a reload.
            ui.wait_text(".version-count", "1").await;
            ui.screenshot("upload-again-stored").await;

            // The next version is suggested, but the stored file is no longer chosen.
            assert_eq!(
                ui.find("input[name=version]")
                    .await
                    .prop("value")
                    .await
                    .unwrap()
                    .as_deref(),
                Some("1.0.1")
            );
            assert_eq!(
                ui.find(".chosen").await.text().await.unwrap(),
                "No file chosen"
            );
            assert_eq!(
                ui.js(
                    "return document.getElementById('pack-file').files.length",
                    vec![]
                )
                .await,
                0
            );
            // So one more click uploads nothing: it asks for a file.
            ui.click("form.upload button[type=submit]").await;
            ui.wait_text(
                ".upload-status [role=alert]",
                "Choose a file to upload first.",
            )
            .await;
            assert_eq!(ui.find(".version-count").await.text().await.unwrap(), "1");
        },
    )
    .await;
    let versions: Value = s
        .req(reqwest::Method::GET, "/api/v1/models/small-net/versions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(versions["items"].as_array().unwrap().len(), 1, "{versions}");
    s.stop().await;
}

#[tokio::test]
async fn names_the_regions_the_stream_uses_and_the_empty_one_it_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("conv").await;
    // Regions: 0 baked weights, 1 scratch of 704 bytes, 2 scratch of 0 bytes.
    assert_eq!(s.upload("conv", "1.0.0", conv1_npub()).await.status(), 201);
    let v: Value = s
        .req(reqwest::Method::GET, "/api/v1/models/conv/versions/1.0.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["stream"]["regions_used"], 0b11,
        "the API's bit mask: {}",
        v["stream"]
    );
    run(
        "regions-used",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("models/conv/versions/1.0.0").await;
            ui.wait_text("h1", "conv 1.0.0").await;
            let shown = ui.wait_text(".regions-used", "BASEP").await;
            assert_eq!(
                shown,
                "2 of 3 regions: BASEP0, BASEP1; not touched: BASEP2 (0 bytes)"
            );
            ui.js(
                "document.querySelector('section[aria-labelledby=stream-title]').scrollIntoView()",
                vec![],
            )
            .await;
            ui.screenshot("regions-used").await;
        },
    )
    .await;
    s.stop().await;
}
