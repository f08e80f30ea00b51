//! The dashboard shows the numbers the API counts (`GET /api/v1/fleet/summary`), the deployment
//! page draws its timeline, and a deployment paused from the page offers nothing to a polling
//! device that had not started on it, until it is resumed from the page.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, fixtures};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, Ui, run};

/// A number the page shows, by CSS selector and attribute.
pub(crate) async fn shown(ui: &Ui, css: &str, attr: &str) -> i64 {
    let v = ui
        .js(
            &format!(
                "const el = document.querySelector({css:?}); return el ? Number(el.getAttribute({attr:?})) : null;"
            ),
            vec![],
        )
        .await;
    v.as_i64()
        .unwrap_or_else(|| panic!("{css} [{attr}] is not on the page: {v}"))
}

#[tokio::test]
async fn the_dashboard_shows_the_apis_numbers_and_a_paused_deployment_holds() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    let pack =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    assert_eq!(s.upload("kws", "1.0.0", pack).await.status(), 201);
    let base = s.url.clone();
    let devices: Vec<Value> = (1..=6)
        .map(|i| json!({"id": format!("cam-{i}"), "accelerator": "ethos-u55-256", "group": "lab"}))
        .collect();
    let created = api(
        &base,
        Method::POST,
        "/devices",
        Some(json!({ "devices": devices })),
    )
    .await;
    let sims: Vec<SimDevice> = (0..6)
        .map(|i| {
            SimDevice::new(
                &base,
                &format!("cam-{}", i + 1),
                created[i]["token"].as_str().unwrap(),
            )
        })
        .collect();
    let d = api(
        &base,
        Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": "lab",
                    "rollout": {"batches": [100], "failure_threshold": 0.5, "on_failure": "pause"}})),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    let id = d["id"].as_i64().unwrap();
    for sim in &sims[..3] {
        sim.report(seq, "bound", None).await;
    }
    sims[3]
        .fail(seq, "flash: read-back of sector 3 differs")
        .await;
    let summary = api(&base, Method::GET, "/fleet/summary", None).await;
    let timeline = api(
        &base,
        Method::GET,
        &format!("/deployments/{id}/timeline"),
        None,
    )
    .await;

    run(
        "dashboard",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("dashboard").await;
            ui.wait_text("h1", "Dashboard").await;
            ui.wait_until("document.querySelector('[data-figure=devices]') !== null")
                .await;
            assert_eq!(
                shown(&ui, "[data-figure=devices]", "data-count").await,
                summary["devices"].as_i64().unwrap()
            );
            assert_eq!(
                shown(&ui, "[data-figure=offline]", "data-count").await,
                summary["offline"]["devices"].as_i64().unwrap()
            );
            for b in summary["by_status"].as_array().unwrap() {
                let label = b["status"].as_str().unwrap().replace('_', " ");
                assert_eq!(
                    shown(
                        &ui,
                        &format!(".bar-row[data-label='{label}']"),
                        "data-value"
                    )
                    .await,
                    b["devices"].as_i64().unwrap(),
                    "{label}"
                );
            }
            assert_eq!(summary["versions"][0]["versions"][0]["devices"], 3);
            assert_eq!(
                shown(
                    &ui,
                    "[data-model=kws] .bar-row[data-label='1.0.0']",
                    "data-value"
                )
                .await,
                3
            );
            assert_eq!(
                summary["failure_reasons"][0]["reason"],
                "flash: read-back of sector 3 differs"
            );
            ui.wait_text(".reasons", "flash: read-back of sector 3 differs")
                .await;
            assert_eq!(
                shown(&ui, ".reasons tbody [data-count]", "data-count").await,
                1
            );
            let rollout = &summary["rollouts"][0];
            assert_eq!(rollout["id"], id);
            assert_eq!(
                shown(&ui, ".rollouts tbody small", "data-done").await,
                rollout["progress"]["counts"]["bound"].as_i64().unwrap()
            );
            assert_eq!(shown(&ui, ".rollouts tbody small", "data-failed").await, 1);
            ui.screenshot("dashboard-figures").await;

            // The deployment's chart ends where the API's timeline does.
            ui.open(&format!("deployments/{id}")).await;
            ui.wait_until("document.querySelector('svg.rollout-chart') !== null")
                .await;
            let last = timeline["points"].as_array().unwrap().last().unwrap();
            assert_eq!(
                shown(&ui, "svg.rollout-chart", "data-installed").await,
                last["installed"].as_i64().unwrap()
            );
            assert_eq!(
                shown(&ui, "svg.rollout-chart", "data-failed").await,
                last["failed"].as_i64().unwrap()
            );
            ui.wait_until("document.querySelector('[data-series=failure_limit]') !== null")
                .await;
            ui.js(
                "document.querySelector('svg.rollout-chart').scrollIntoView(); return null;",
                vec![],
            )
            .await;
            ui.screenshot("deployment-chart").await;

            // Paused from the page: cam-6 never started, so it is offered nothing.
            assert!(sims[5].poll(0).await.is_some(), "offered while active");
            ui.click("[data-action=pause]").await;
            ui.wait_until("document.querySelector('[data-action=resume]') !== null")
                .await;
            let paused = api(&base, Method::GET, &format!("/deployments/{id}"), None).await;
            assert_eq!(paused["state"], "paused");
            assert!(sims[4].poll(0).await.is_none(), "a paused deployment holds");
            ui.screenshot("deployment-paused").await;
            ui.click("[data-action=resume]").await;
            ui.wait_until("document.querySelector('[data-action=pause]') !== null")
                .await;
            assert_eq!(sims[4].poll(0).await.map(|o| o.sequence), Some(seq));

            // Retry the failed device from the page: a new deployment, for it alone.
            ui.click("[data-action=retry-failed]").await;
            ui.wait_text("dialog h2", "Retry the failed devices").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Deployment #2").await;
            let retry = api(&base, Method::GET, "/deployments/2", None).await;
            assert_eq!(retry["retry_of"], id);
            assert_eq!(retry["progress"]["targets"], 1);
            let offer = sims[3]
                .poll(seq)
                .await
                .expect("the failed device is offered the retry");
            assert_eq!(offer.sequence, retry["sequence"].as_u64().unwrap());

            // A maintenance window set from the dashboard is the group's (tests/fleet/control.rs holds
            // offers with it).
            ui.open("dashboard").await;
            ui.wait_text(".windows", "any time").await;
            ui.select("select[name=window-group]", "lab").await;
            ui.fill("input[name=window-zone]", "UTC").await;
            ui.click("input[name=window-day-sun]").await;
            ui.click("input[name=window-day-sat]").await;
            ui.click("form[aria-label='Set a maintenance window'] button[type=submit]")
                .await;
            ui.wait_text(".windows", "02:00–04:00 UTC (sat, sun)").await;
            let groups = api(&base, Method::GET, "/groups", None).await;
            assert_eq!(
                groups[0]["window"],
                json!({"start": "02:00", "end": "04:00", "time_zone": "UTC", "days": ["sat", "sun"]})
            );
        },
    )
    .await;
    s.stop().await;
}
