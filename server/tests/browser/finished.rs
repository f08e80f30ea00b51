//! A finished deployment offers nothing to do: once every target installed it (completed) or it
//! was aborted, there is no Pause, Resume or Abort, and no batch says "open". The list's filter
//! is by deployment state; the bars' legend says that its colours are device states.
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, Ui, run};

/// The `data-action`s of the deployment page's buttons, in order.
async fn actions(ui: &Ui) -> Value {
    ui.js(
        "return [...document.querySelectorAll('main [data-action]')].map((b) => b.dataset.action)",
        vec![],
    )
    .await
}

/// The text of each batch's state cell.
async fn batch_states(ui: &Ui) -> Value {
    ui.js(
        "return [...document.querySelectorAll('.batches tbody tr')]\
         .map((r) => r.querySelector('td[data-label=Offered]').textContent)",
        vec![],
    )
    .await
}

/// Registers `id` in `group` and returns it as a simulated device.
async fn device(base: &str, id: &str, group: &str) -> SimDevice {
    let created = api(
        base,
        reqwest::Method::POST,
        "/devices",
        Some(json!({"id": id, "accelerator": "ethos-u55-256", "group": group})),
    )
    .await;
    SimDevice::new(base, id, created[0]["token"].as_str().unwrap())
}

/// Deploys kws 1.0.0 to `group` in two batches; returns its sequence.
async fn deploy(base: &str, group: &str) -> u64 {
    let d = api(
        base,
        reqwest::Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": group,
                    "rollout": {"batches": [50, 100], "success_threshold": 1.0}})),
    )
    .await;
    d["sequence"].as_u64().unwrap()
}

#[tokio::test]
async fn completed_and_aborted_deployments_offer_no_pause_or_abort_and_no_open_batch() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(s.upload("kws", "1.0.0", conv1_npub()).await.status(), 201);
    let base = s.url.clone();
    // #1 completes: both devices of `lab` install it.
    let lab = [
        device(&base, "lab-1", "lab").await,
        device(&base, "lab-2", "lab").await,
    ];
    let seq = deploy(&base, "lab").await;
    for _ in 0..2 {
        for d in &lab {
            if d.poll(0).await.is_some() {
                d.report(seq, "installed", None).await;
            }
        }
    }
    // #2 is aborted with one batch open and one device installed.
    let shelf = [
        device(&base, "shelf-1", "shelf").await,
        device(&base, "shelf-2", "shelf").await,
    ];
    let seq = deploy(&base, "shelf").await;
    for d in &shelf {
        if d.poll(0).await.is_some() {
            d.report(seq, "downloading", Some(0.5)).await;
        }
    }
    api(&base, reqwest::Method::POST, "/deployments/2/abort", None).await;
    for d in &shelf {
        if d.poll(0).await.is_some() {
            d.report(seq, "installed", None).await;
        }
    }
    // #3 is still running.
    device(&base, "far-1", "far").await;
    deploy(&base, "far").await;
    let completed = api(&base, reqwest::Method::GET, "/deployments/1", None).await;
    assert_eq!(
        completed["progress"]["counts"]["installed"], 2,
        "{completed}"
    );

    run("finished", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;

        ui.open("deployments/1").await;
        ui.wait_text(".summary", "2 of 2 devices installed").await;
        ui.wait_text(".facts .badge", "completed").await;
        assert_eq!(actions(&ui).await, json!(["rollback"]), "completed: only a rollback");
        assert_eq!(batch_states(&ui).await, json!(["done", "done"]));
        ui.wait_text(".facts", "all 2 done").await;
        ui.screenshot("finished-completed").await;

        ui.open("deployments/2").await;
        ui.wait_text(".facts .badge", "aborted").await;
        assert_eq!(actions(&ui).await, json!(["rollback"]), "aborted: only a rollback");
        assert_eq!(batch_states(&ui).await, json!(["closed", "never opened"]));
        let facts = ui.find(".facts").await.text().await.unwrap();
        assert!(!facts.contains(" open\n") && facts.contains("none is offered now"), "{facts}");
        ui.screenshot("finished-aborted").await;

        ui.open("deployments/3").await;
        ui.wait_text(".facts .badge", "active").await;
        assert_eq!(actions(&ui).await, json!(["pause", "abort", "rollback"]));
        assert_eq!(batch_states(&ui).await, json!(["open", "waiting"]));

        // The list filters by deployment state; device states are only the bars' colours.
        ui.open("deployments").await;
        ui.wait_text(".deployments caption", "3 deployments").await;
        let options = ui
            .js(
                "return [...document.querySelectorAll('select[name=state] option')].map((o) => o.value)",
                vec![],
            )
            .await;
        assert_eq!(options, json!(["", "active", "paused", "completed", "aborted"]));
        ui.wait_text("label", "Deployment state").await;
        assert_eq!(
            ui.js("return document.querySelector('form.filters .legend') === null", vec![]).await,
            true,
            "the legend of device states is not part of the filter"
        );
        ui.wait_text(".legend-title", "devices per state").await;
        for (state, want) in [("completed", "#1"), ("aborted", "#2"), ("active", "#3")] {
            ui.select("select[name=state]", state).await;
            ui.wait_text(".deployments caption", "1 deployment").await;
            let row = ui.find(".deployments tbody tr").await.text().await.unwrap();
            assert!(row.starts_with(want) && row.contains(state), "{state}: {row}");
        }
    })
    .await;
    s.stop().await;
}
