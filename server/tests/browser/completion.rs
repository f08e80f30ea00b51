//! The deployment page's chart marks a deployment's completion at the moment the API dates it
//! (`completed_at` of `GET /api/v1/deployments/{id}`), on the chart's own time axis, even when it
//! completed well after its last report (here: the one device that never reported left the
//! group); a deployment that has not completed carries no such mark.
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, Ui, run};

/// Registers `id` in `group` and returns it as a simulated device.
async fn device(base: &str, id: &str, group: &str) -> SimDevice {
    let created = api(
        base,
        Method::POST,
        "/devices",
        Some(json!({"id": id, "accelerator": "ethos-u55-256", "group": group})),
    )
    .await;
    SimDevice::new(base, id, created[0]["token"].as_str().unwrap())
}

/// Deploys kws 1.0.0 to every device of `group` at once; returns its `(id, sequence)`.
async fn deploy(base: &str, group: &str) -> (i64, u64) {
    let d = api(
        base,
        Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": group,
                    "rollout": {"batches": [100]}})),
    )
    .await;
    (d["id"].as_i64().unwrap(), d["sequence"].as_u64().unwrap())
}

/// What the page draws for the completion, read from the chart: the marks' `data-at`s and, for
/// the first, its line's x, the time axis' ends (`data-from-ms`, `data-to-ms`) and the x axis'
/// ends; `Date.parse(completed)` with them, so that the test places the API's time on the axis.
async fn drawn(ui: &Ui, completed: &str) -> Value {
    ui.js(
        r#"const svg = document.querySelector('svg.rollout-chart');
           const marks = [...svg.querySelectorAll('.completion-mark')];
           const axis = svg.querySelector('line.axis');
           const line = marks.length ? marks[0].querySelector('line') : null;
           return {
             at: marks.map((m) => m.dataset.at),
             at_ms: marks.map((m) => Number(m.dataset.atMs)),
             x: line ? Number(line.getAttribute('x1')) : null,
             from_ms: Number(svg.dataset.fromMs),
             to_ms: Number(svg.dataset.toMs),
             left: Number(axis.getAttribute('x1')),
             right: Number(axis.getAttribute('x2')),
             completed_ms: Date.parse(arguments[0]),
             as_hold: svg.querySelectorAll('[data-event="deployment.completed"]').length,
           };"#,
        vec![json!(completed)],
    )
    .await
}

#[tokio::test]
async fn the_chart_marks_completion_at_completed_at_and_a_running_deployment_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    let base = s.url.clone();
    // #1: lab-1 installs; lab-2 never reports, so #1 is not complete yet.
    let lab1 = device(&base, "lab-1", "lab").await;
    device(&base, "lab-2", "lab").await;
    let (done, seq) = deploy(&base, "lab").await;
    assert!(lab1.poll(0).await.is_some(), "lab-1 is offered #{done}");
    lab1.report(seq, "installed", None).await;
    let before = api(&base, Method::GET, &format!("/deployments/{done}"), None).await;
    assert_eq!(before["completed_at"], Value::Null, "{before}");
    // More than a second later (the chart's shortest span), lab-2 leaves the group: #1 completes
    // then, long after its last report, which is where the timeline's points end.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    api(
        &base,
        Method::PATCH,
        "/devices/lab-2",
        Some(json!({"group": "elsewhere"})),
    )
    .await;
    let after = api(&base, Method::GET, &format!("/deployments/{done}"), None).await;
    assert_eq!(after["phase"], "completed", "{after}");
    let completed_at = after["completed_at"]
        .as_str()
        .expect("completed_at")
        .to_owned();
    let timeline = api(
        &base,
        Method::GET,
        &format!("/deployments/{done}/timeline"),
        None,
    )
    .await;
    assert_eq!(
        timeline["deployment"]["completed_at"],
        completed_at.as_str()
    );
    let first_ms = timeline["points"][0]["at_ms"].as_f64().unwrap();
    // #2: its only device never reports; it is still rolling out.
    device(&base, "far-1", "far").await;
    let (running, _) = deploy(&base, "far").await;

    run(
        "completion",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;

            ui.open(&format!("deployments/{done}")).await;
            ui.wait_text("h1", &format!("Deployment #{done}: kws"))
                .await;
            ui.wait_until("document.querySelector('svg.rollout-chart .completion-mark') !== null")
                .await;
            let d = drawn(&ui, &completed_at).await;
            assert_eq!(
                d["at"],
                json!([completed_at]),
                "one completion mark, dated as the API: {d}"
            );
            assert_eq!(d["at_ms"][0], d["completed_ms"], "{d}");
            assert_eq!(
                d["as_hold"], 0,
                "the completion is not drawn again as a hold: {d}"
            );
            let f = |k: &str| d[k].as_f64().unwrap_or_else(|| panic!("{k}: {d}"));
            assert_eq!(
                f("from_ms"),
                first_ms,
                "the axis starts at the first point: {d}"
            );
            // Where `completed_at` falls on the axis, and the mark is drawn there, inside the plot.
            let want = f("left")
                + (f("right") - f("left")) * (f("completed_ms") - f("from_ms"))
                    / (f("to_ms") - f("from_ms"));
            assert!(
                (f("x") - want).abs() < 0.01,
                "mark at x {}, want {want}: {d}",
                f("x")
            );
            assert!(
                f("left") < f("x") && f("x") <= f("right"),
                "the mark is on the chart: {d}"
            );
            ui.js(
                "document.querySelector('svg.rollout-chart').scrollIntoView(); return null;",
                vec![],
            )
            .await;
            ui.screenshot("completion-mark").await;

            ui.open(&format!("deployments/{running}")).await;
            ui.wait_text("h1", &format!("Deployment #{running}: kws"))
                .await;
            ui.wait_until("document.querySelector('svg.rollout-chart') !== null")
                .await;
            ui.wait_text(".facts .badge", "active").await;
            assert_eq!(
                ui.js(
                    "return document.querySelectorAll('svg.rollout-chart .completion-mark').length",
                    vec![],
                )
                .await,
                0,
                "a deployment still rolling out has no completion mark"
            );
        },
    )
    .await;
    s.stop().await;
}
