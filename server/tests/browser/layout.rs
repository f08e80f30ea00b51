//! Readable on a 360 px phone: no view scrolls sideways (wide tables scroll inside their own box).
use crate::common::{ADMIN, TestServer, fixtures};
use crate::harness::{PHONE_WIDTH, Screen, run};

#[tokio::test]
async fn every_view_fits_a_phone_screen() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("person-detect").await;
    let pack =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    assert_eq!(s.upload("person-detect", "1.0.0", pack).await.status(), 201);
    // A device and a deployment, so that the fleet and deployment tables have rows.
    for (path, body) in [
        (
            "/api/v1/devices",
            serde_json::json!({"devices": [
                {"id": "cam-0001", "name": "Loading dock camera", "accelerator": "ethos-u55-256", "group": "warehouse-east", "tags": ["outdoor", "ptz"]},
                {"id": "cam-0002", "accelerator": "ethos-u55-128", "group": "warehouse-east"},
            ]}),
        ),
        (
            "/api/v1/deployments",
            serde_json::json!({"model": "person-detect", "version": "1.0.0", "group": "warehouse-east",
                               "rollout": {"batches": [5, 25, 100]}}),
        ),
    ] {
        let r = s
            .req(reqwest::Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{path}: {}", r.text().await.unwrap());
    }
    run("phone", &s.url, ADMIN, Screen::Phone, |ui| async move {
        ui.open("").await;
        ui.wait_text("h1", "Sign in").await;
        // The page's viewport meta makes the layout viewport the device's width.
        assert_eq!(ui.js("return window.innerWidth", vec![]).await, PHONE_WIDTH);
        assert_eq!(
            ui.horizontal_overflow().await,
            0,
            "{}",
            ui.overflowing_elements().await
        );
        ui.sign_in().await;
        for (route, heading) in [
            ("dashboard", "Dashboard"),
            ("models", "Models"),
            ("models/person-detect", "person-detect"),
            ("models/person-detect/versions/1.0.0", "person-detect 1.0.0"),
            ("deploy", "Deploy a version"),
            ("deployments", "Deployments"),
            ("deployments/1", "Deployment #1"),
            ("fleet", "Fleet"),
            ("audit", "Audit log"),
            ("admin", "Tokens and keys"),
            ("webhooks", "Webhooks"),
        ] {
            ui.open(route).await;
            ui.wait_text("h1", heading).await;
            ui.wait_gone("main", "Loading…").await;
            let overflow = ui.horizontal_overflow().await;
            assert_eq!(
                overflow,
                0,
                "#/{route} overflows by {overflow} px:\n{}",
                ui.overflowing_elements().await
            );
            ui.screenshot(&format!("phone-{}", route.replace('/', "-")))
                .await;
        }
        ui.open("models/person-detect/versions/1.0.0").await;
        ui.wait_text("h1", "person-detect 1.0.0").await;
    })
    .await;
    s.stop().await;
}
