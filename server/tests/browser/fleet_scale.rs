//! The fleet page at 10,000 devices (issue 36 item 7): it shows a page of the fleet, not the
//! fleet; paging and each filter change the view's URL and its rows; a shared URL opens the same
//! view; and the operator of the issue finds the 37 offline devices of group `lab` that run
//! version 1.2.0. How long the page takes to become usable is printed (a figure for
//! `docs/performance.md`, never an assertion). On the same 10,000 devices (provisioning them is
//! most of the test's time): the dashboard shows the numbers `GET /api/v1/fleet/summary` counts,
//! and a rollout to the other 9,880 paused from its page offers nothing to a polling device until
//! it is resumed from the page.
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, conv1_npub, fixtures};
use crate::dashboard::shown;
use crate::device::SimDevice;
use crate::fleet::api;
use crate::harness::{Screen, Ui, run};

const FLEET: usize = 10_000;
const LAB: usize = 120;
const OFFLINE: usize = 37;

/// The rows the table shows now.
async fn rows(ui: &Ui) -> Vec<String> {
    let v = ui
        .js(
            "return [...document.querySelectorAll('.devices tbody tr code')].map((c) => c.textContent)",
            vec![],
        )
        .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

async fn hash(ui: &Ui) -> String {
    ui.js("return decodeURIComponent(location.hash)", vec![])
        .await
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_fleet_page_at_ten_thousand_devices_pages_and_filters_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let base = s.url.clone();
    s.create_model("kws").await;
    let pack =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    assert_eq!(s.upload("kws", "1.2.0", pack).await.status(), 201);

    // 10,000 devices, 1,000 a request: `lab-000`… in group lab, `site-0000`… in group field.
    let mut lab = Vec::new();
    let mut field = None;
    for chunk in 0..FLEET / 1_000 {
        let devices: Vec<Value> = (chunk * 1_000..(chunk + 1) * 1_000)
            .map(|i| {
                if i < LAB {
                    json!({"id": format!("lab-{i:03}"), "group": "lab", "accelerator": "ethos-u55-256"})
                } else {
                    json!({"id": format!("site-{i:05}"), "group": "field", "accelerator": "ethos-u55-256"})
                }
            })
            .collect();
        let made = api(
            &base,
            reqwest::Method::POST,
            "/devices",
            Some(json!({ "devices": devices })),
        )
        .await;
        for d in made.as_array().unwrap() {
            let id = d["id"].as_str().unwrap();
            if id.starts_with("lab-") {
                lab.push(SimDevice::new(&base, id, d["token"].as_str().unwrap()));
            } else if field.is_none() {
                field = Some(SimDevice::new(&base, id, d["token"].as_str().unwrap()));
            }
        }
    }
    assert_eq!(lab.len(), LAB);

    // Group lab runs 1.2.0; 37 of its devices then go quiet for two hours.
    api(
        &base,
        reqwest::Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.2.0", "group": "lab"})),
    )
    .await;
    for d in &lab {
        let offer = d.poll(0).await.expect("the deployment is offered to lab");
        d.report(offer.sequence, "installed", None).await;
    }
    s.state.polling.flush_last_seen(&s.state.db).await.unwrap();
    let two_hours_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 2 * 3_600_000;
    let offline: Vec<String> = lab[..OFFLINE].iter().map(|d| d.id.clone()).collect();
    for id in &offline {
        sqlx::query("UPDATE devices SET last_seen = $1 WHERE id = $2")
            .bind(two_hours_ago)
            .bind(id)
            .execute(&s.state.db)
            .await
            .unwrap();
    }
    let through_api = api(
        &base,
        reqwest::Method::GET,
        "/devices?group=lab&version=1.2.0&not_seen_minutes=60&limit=100",
        None,
    )
    .await;
    assert_eq!(through_api["items"].as_array().unwrap().len(), OFFLINE);

    let shared = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let keep = std::sync::Arc::clone(&shared);
    run("fleet-10k", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        // From the route change to a table of 100 rows: what an operator waits for.
        ui.js(
            "window.__fleetAsked = performance.now(); location.hash = '#/fleet';",
            vec![],
        )
        .await;
        ui.wait_until("document.querySelectorAll('.devices tbody tr').length === 100")
            .await;
        let ms = ui
            .js("return performance.now() - window.__fleetAsked", vec![])
            .await
            .as_f64()
            .unwrap();
        println!("figure: the fleet page showed its first 100 of {FLEET} devices in {ms:.0} ms");
        assert_eq!(
            ui.js("return document.querySelectorAll('.devices tbody tr').length", vec![])
                .await,
            100,
            "a page of the fleet, not the fleet"
        );
        let first = rows(&ui).await;
        assert_eq!(first[0], "lab-000");
        ui.wait_text(".devices caption", "devices 1–100").await;

        // The next page: other rows, and a cursor in the URL.
        ui.click("nav.pager button:last-child").await;
        ui.wait_text(".devices caption", "devices 101–200").await;
        let second = rows(&ui).await;
        assert_eq!(second.len(), 100);
        assert_eq!(second[0], "lab-100");
        assert!(second.iter().all(|id| !first.contains(id)), "{second:?}");
        assert!(hash(&ui).await.contains("cursor="), "{}", hash(&ui).await);
        // Back to the first.
        ui.click("nav.pager button:first-child").await;
        ui.wait_text(".devices caption", "devices 1–100").await;
        assert_eq!(rows(&ui).await, first);

        // A filter starts from the first page, narrows the rows, and goes into the URL.
        ui.select("select[name=group]", "lab").await;
        ui.wait_until("[...document.querySelectorAll('.devices tbody tr code')].every((c) => c.textContent.startsWith('lab-'))")
            .await;
        ui.wait_text(".devices caption", "matching the filters").await;
        let h = hash(&ui).await;
        assert!(h.contains("group=lab") && !h.contains("cursor="), "{h}");

        // The operator's question: lab, 1.2.0, not seen for over an hour.
        ui.fill("input[name=version]", "1.2.0").await;
        ui.select("select[name=not_seen_minutes]", "60").await;
        ui.wait_text(".devices caption", &format!("{OFFLINE} devices matching the filters"))
            .await;
        let found = rows(&ui).await;
        assert_eq!(found, offline);
        let h = hash(&ui).await;
        for part in ["group=lab", "version=1.2.0", "not_seen_minutes=60"] {
            assert!(h.contains(part), "{part} not in {h}");
        }
        ui.screenshot("fleet-10k-offline-lab").await;
        *keep.lock().unwrap() = h;
    })
    .await;
    let shared = shared.lock().unwrap().clone();

    // The URL is the view: opened afresh, it shows the same 37.
    run(
        "fleet-10k-shared",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open(shared.trim_start_matches("#/")).await;
            ui.wait_text(
                ".devices caption",
                &format!("{OFFLINE} devices matching the filters"),
            )
            .await;
            assert_eq!(rows(&ui).await.len(), OFFLINE);
        },
    )
    .await;

    // The dashboard and a held rollout, on the same fleet: version 1.3.0 to group field.
    assert_eq!(s.upload("kws", "1.3.0", conv1_npub()).await.status(), 201);
    let d = api(
        &base,
        reqwest::Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.3.0", "group": "field"})),
    )
    .await;
    let (id, seq) = (d["id"].as_i64().unwrap(), d["sequence"].as_u64().unwrap());
    assert_eq!(d["progress"]["targets"], FLEET - LAB);
    let probe = field.expect("group field has devices");
    let summary = api(&base, reqwest::Method::GET, "/fleet/summary", None).await;
    assert_eq!(summary["devices"], FLEET);
    assert_eq!(summary["offline"]["devices"], OFFLINE);
    run(
        "dashboard-10k",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("dashboard").await;
            ui.wait_until("document.querySelector('[data-figure=devices]') !== null")
                .await;
            for (css, want) in [
                ("[data-figure=devices]", &summary["devices"]),
                ("[data-figure=offline]", &summary["offline"]["devices"]),
            ] {
                assert_eq!(
                    shown(&ui, css, "data-count").await,
                    want.as_i64().unwrap(),
                    "{css}"
                );
            }
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
            for v in summary["versions"][0]["versions"].as_array().unwrap() {
                let version = v["version"].as_str().unwrap();
                assert_eq!(
                    shown(
                        &ui,
                        &format!("[data-model=kws] .bar-row[data-label='{version}']"),
                        "data-value"
                    )
                    .await,
                    v["devices"].as_i64().unwrap(),
                    "{version}"
                );
            }
            assert_eq!(summary["versions"][0]["versions"][0]["version"], "1.2.0");
            assert_eq!(summary["versions"][0]["versions"][0]["devices"], LAB);
            // The lab rollout completed; the field one is the rollout in progress.
            let rollouts = summary["rollouts"].as_array().unwrap();
            assert_eq!(rollouts.len(), 1, "{rollouts:?}");
            assert_eq!(rollouts[0]["id"], id);
            assert_eq!(rollouts[0]["progress"]["targets"], FLEET - LAB);
            assert_eq!(shown(&ui, ".rollouts tbody small", "data-done").await, 0);
            ui.screenshot("dashboard-10k").await;

            // Paused from its page: a field device that had not started is offered nothing;
            // resumed from the page, it is offered the rollout again.
            assert_eq!(probe.poll(0).await.map(|o| o.sequence), Some(seq));
            ui.open(&format!("deployments/{id}")).await;
            ui.wait_until("document.querySelector('[data-action=pause]') !== null")
                .await;
            ui.click("[data-action=pause]").await;
            ui.wait_until("document.querySelector('[data-action=resume]') !== null")
                .await;
            let paused = api(
                &base,
                reqwest::Method::GET,
                &format!("/deployments/{id}"),
                None,
            )
            .await;
            assert_eq!(paused["state"], "paused");
            assert!(probe.poll(0).await.is_none(), "a paused deployment holds");
            ui.click("[data-action=resume]").await;
            ui.wait_until("document.querySelector('[data-action=pause]') !== null")
                .await;
            assert_eq!(probe.poll(0).await.map(|o| o.sequence), Some(seq));
        },
    )
    .await;
    s.stop().await;
}
