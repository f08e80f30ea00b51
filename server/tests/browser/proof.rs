//! The proof on the version page (issue 37): a version whose proof diverged shows the verdict,
//! where each output first differs and that deploying it needs an override; a version uploaded
//! without its source model says it is not proven, and both show their golden vector.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::Method;

use crate::common::{ADMIN, TestServer};
use crate::harness::{Screen, run};

fn model_file(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../npu-model/tests/models")
            .join(rel),
    )
    .unwrap()
}

#[tokio::test]
async fn the_version_page_shows_the_proof_and_the_golden_vector() {
    let dir = tempfile::tempdir().unwrap();
    // A reference that answers something else than the model computes.
    let wrong = dir.path().join("wrong.sh");
    std::fs::write(
        &wrong,
        "#!/bin/sh\nfor s in \"$3\"/set-*; do printf '\\177\\177' > \"$s/output-0.bin\"; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = TestServer::start_with(&dir.path().join("data"), |c| {
        c.reference_python = Some(wrong)
    })
    .await;
    s.create_model("pool").await;
    let form = reqwest::multipart::Form::new()
        .part(
            "pack",
            reqwest::multipart::Part::bytes(model_file("vela/5.2.0/u55_256/pool_vela.tflite"))
                .file_name("pool_vela.tflite"),
        )
        .part(
            "source",
            reqwest::multipart::Part::bytes(model_file("src/pool.tflite")).file_name("pool.tflite"),
        );
    let r = s
        .req(Method::POST, "/api/v1/models/pool/versions/1.0.0")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = s
        .upload(
            "pool",
            "2.0.0",
            model_file("vela/5.2.0/u55_256/pool_vela.tflite"),
        )
        .await;
    assert_eq!(r.status(), 201);

    run("proof", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("models/pool/versions/1.0.0").await;
        ui.wait_text(".proof .badge", "diverged").await;
        ui.wait_text(".proof .proof-summary", "DIVERGES").await;
        ui.wait_text(".proof .proof-divergence", "First differing element")
            .await;
        ui.wait_text(".proof .notice", "override_proof").await;
        ui.wait_text(".proof", "Golden output SHA-256").await;
        ui.screenshot("proof-diverged").await;
        ui.open("models/pool/versions/2.0.0").await;
        ui.wait_text(".proof .no-proof", "Not proven").await;
        ui.wait_text(".proof", "Golden output SHA-256").await;
    })
    .await;
    s.stop().await;
}
