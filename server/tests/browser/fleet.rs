//! The fleet from the browser: register devices (tokens shown once), deploy with a staged
//! rollout, watch simulated devices move the progress bars, pause and resume; roll a group back
//! to a chosen version after a confirmation, abort, and find it all in the audit log.
use fantoccini::key::Key;
use serde_json::{Value, json};

use crate::common::{ADMIN, TestServer, fixtures, sha256_hex};
use crate::device::SimDevice;
use crate::harness::{Screen, Ui, run};

fn vela(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("vela_out/u55_256/tflite/{name}_vela.tflite"))).unwrap()
}

/// An operator API call (the UI is not under test for this step).
pub(crate) async fn api(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut req = reqwest::Client::new()
        .request(method, format!("{base}/api/v1{path}"))
        .bearer_auth(ADMIN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The count shown for `state` in the deployment page's per-state list.
async fn count(ui: &Ui, state: &str) -> i64 {
    ui.js(
        &format!(
            "return Number(document.querySelector('.count-row[data-state={state}] .n').textContent)"
        ),
        vec![],
    )
    .await
    .as_i64()
    .unwrap()
}

#[tokio::test]
async fn deploys_with_a_staged_rollout_and_devices_move_the_progress_bars() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(
        s.upload("kws", "1.0.0", vela("small_net")).await.status(),
        201
    );
    let base = s.url.clone();
    let state = s.state.clone();
    run("deploy", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;

        // Register two devices through the form; their tokens are shown once, in a dialog.
        ui.open("fleet").await;
        ui.wait_text("h1", "Fleet").await;
        ui.fill(
            "textarea[name=devices]",
            "lab-1, Bench one, lab, bench\nlab-2, Shelf two, lab",
        )
        .await;
        ui.click("form[aria-labelledby=register-title] button[type=submit]").await;
        ui.wait_text("dialog h2", "2 devices registered").await;
        let tokens = ui
            .js(
                "return [...document.querySelectorAll('dialog input.device-token')]\
                 .map((i) => [i.dataset.device, i.value])",
                vec![],
            )
            .await;
        let devices: Vec<SimDevice> = tokens
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                let (id, token) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
                assert!(token.starts_with("npub_dev_"), "{pair}");
                SimDevice::new(&base, id, token)
            })
            .collect();
        assert_eq!(devices.len(), 2);
        ui.click("dialog button[type=submit]").await;
        ui.wait_until("document.querySelector('dialog') === null").await;
        let list = ui.wait_text(".devices tbody", "lab-2").await;
        assert!(list.contains("Bench one") && list.contains("new"), "{list}");

        // Deploy 1.0.0 to the group: half of it first, then everyone.
        ui.open("deploy").await;
        ui.wait_text("h1", "Deploy a version").await;
        ui.wait_text("select[name=version]", "1.0.0").await;
        ui.select("select[name=target]", "lab").await;
        ui.fill("input[name=batches]", "50, 100").await;
        ui.fill("input[name=success]", "100").await;
        ui.fill("input[name=failure]", "50").await;
        ui.click("form[aria-labelledby=deploy-title] button[type=submit]").await;
        ui.wait_text("dialog h2", "Deploy kws 1.0.0?").await;
        ui.click("dialog button[type=submit]").await;
        ui.wait_text("h1", "Deployment #1: kws 1.0.0").await;
        ui.wait_text(".summary", "0 of 2 devices installed").await;
        // The forms sent an Idempotency-Key each (registering, deploying), kept with their 201.
        let (kept,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM idempotency_keys WHERE status = 201")
                .fetch_one(&state.db)
                .await
                .unwrap();
        assert_eq!(kept, 2, "one Idempotency-Key per form submitted");
        ui.wait_text(".batches tbody tr", "open").await;
        ui.wait_text(".batches tbody", "waiting").await;

        // Exactly one device is in the first batch.
        let mut offered = Vec::new();
        for d in &devices {
            if let Some(offer) = d.poll(0).await {
                // small_net has a golden vector: a version-2 manifest signs its self-test.
                assert_eq!(offer.manifest.len(), 312);
                offered.push((d, offer.sequence));
            }
        }
        assert_eq!(offered.len(), 1, "the first batch is half of two devices");
        let (first, seq) = offered[0];
        let second = devices.iter().find(|d| d.id != first.id).unwrap();
        let sha = api(&base, reqwest::Method::GET, "/models/kws/versions/1.0.0", None).await["sha256"]
            .as_str()
            .unwrap()
            .to_owned();

        // Downloading shows up in the counts and the bar.
        first.report(seq, "downloading", Some(0.5)).await;
        ui.wait_until("document.querySelector('.count-row[data-state=downloading] .n').textContent === '1'")
            .await;
        assert_eq!(count(&ui, "pending").await, 1);
        let pack = first.download(&sha).await;
        assert_eq!(sha256_hex(&pack), sha);
        first.report(seq, "installed", None).await;
        ui.wait_text(".summary", "1 of 2 devices installed").await;
        let width = ui
            .js("return document.querySelector('.stack span[data-state=installed]').style.width", vec![])
            .await;
        assert_eq!(width, "50%");
        // 100 % of the first batch succeeded: the second batch opened, the other device is offered.
        ui.wait_until("[...document.querySelectorAll('.batches tbody tr')].every((r) => r.textContent.includes('open'))")
            .await;
        assert_eq!(second.poll(0).await.map(|o| o.sequence), Some(seq));
        ui.screenshot("deploy-progress").await;

        // Pause and resume from the page.
        ui.click("button[data-action=pause]").await;
        ui.wait_text(".facts .badge", "paused").await;
        ui.click("button[data-action=resume]").await;
        ui.wait_text(".facts .badge", "active").await;

        second.report(seq, "downloading", Some(0.1)).await;
        second.report(seq, "installed", None).await;
        ui.wait_text(".summary", "2 of 2 devices installed").await;
        ui.wait_text(".facts .badge", "completed").await;
        assert_eq!(count(&ui, "installed").await, 2);

        // The fleet shows what each device runs now.
        state.polling.flush_last_seen(&state.db).await.unwrap();
        ui.open("fleet").await;
        let rows = ui.wait_text(".devices tbody", "kws 1.0.0 (seq 1)").await;
        assert!(rows.contains("installed"), "{rows}");
        assert!(!rows.contains("never"), "last seen is shown: {rows}");
        // Filters, on the server, and in the view's URL.
        ui.select("select[name=status]", "new").await;
        ui.wait_text(".devices", "No device matches").await;
        ui.select("select[name=status]", "").await;
        ui.fill("input[name=q]", "bench").await;
        ui.wait_text(".devices caption", "1 device matching the filters")
            .await;
        ui.wait_until("location.hash === '#/fleet?q=bench'").await;

        // The list of deployments shows it completed.
        ui.open("deployments").await;
        let row = ui.wait_text(".deployments tbody tr", "kws 1.0.0").await;
        assert!(row.contains("completed") && row.contains("group lab"), "{row}");
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn rolls_a_group_back_after_confirming_then_aborts_and_audits_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    assert_eq!(
        s.upload("kws", "1.0.0", vela("small_net")).await.status(),
        201
    );
    assert_eq!(s.upload("kws", "2.0.0", vela("conv1")).await.status(), 201);
    let base = s.url.clone();
    let created = api(
        &base,
        reqwest::Method::POST,
        "/devices",
        Some(json!({"id": "lab-1", "accelerator": "ethos-u55-256", "group": "lab"})),
    )
    .await;
    let device = SimDevice::new(&base, "lab-1", created[0]["token"].as_str().unwrap());
    let v1 = api(
        &base,
        reqwest::Method::GET,
        "/models/kws/versions/1.0.0",
        None,
    )
    .await;
    // 2.0.0 is deployed and installed.
    let d = api(
        &base,
        reqwest::Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "2.0.0", "group": "lab"})),
    )
    .await;
    let seq2 = d["sequence"].as_u64().unwrap();
    assert_eq!(device.poll(0).await.unwrap().sequence, seq2);
    device.report(seq2, "installed", None).await;

    run(
        "rollback",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.open("deployments/1").await;
            ui.wait_text(".summary", "1 of 1 device installed").await;
            ui.click("a[data-action=rollback]").await;
            ui.wait_text("h1", "Fleet").await;
            ui.wait_text("#rollback-title", "Roll a group back").await;
            assert_eq!(
                ui.find("select[name=rollback-group]")
                    .await
                    .prop("value")
                    .await
                    .unwrap()
                    .as_deref(),
                Some("lab")
            );
            ui.select("select[name=rollback-version]", "1.0.0").await;

            // Escape cancels: nothing is created.
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            let question = ui.wait_text("dialog", "Roll group lab back?").await;
            assert!(question.contains("kws 1.0.0"), "{question}");
            ui.press(&Key::Escape.to_string()).await;
            ui.wait_until("document.querySelector('dialog') === null")
                .await;
            let all = api(&ui.base, reqwest::Method::GET, "/deployments", None).await;
            assert_eq!(all.as_array().unwrap().len(), 1, "Escape created nothing");

            // Confirmed: a new deployment, higher sequence, the older pack.
            ui.click("form[aria-labelledby=rollback-title] button[type=submit]")
                .await;
            ui.wait_text("dialog", "Roll group lab back?").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text("h1", "Deployment #2: kws 1.0.0").await;
            ui.wait_text(".facts", "rollback").await;
            let seq: u64 = ui
                .find(".facts .sequence")
                .await
                .text()
                .await
                .unwrap()
                .parse()
                .unwrap();
            assert!(seq > seq2, "rollback sequence {seq} after {seq2}");
            let offer = device.poll(seq2).await.expect("the rollback is offered");
            assert_eq!(offer.sequence, seq);
            let pack = device.download(v1["sha256"].as_str().unwrap()).await;
            assert_eq!(sha256_hex(&pack), v1["sha256"].as_str().unwrap());
            device.report(seq, "downloading", Some(1.0)).await;
            ui.wait_until(
                "document.querySelector('.count-row[data-state=downloading] .n').textContent === '1'",
            )
            .await;

            // Abort while it is under way (a completed one has nothing to abort), confirmed in a
            // dialog.
            ui.click("button[data-action=abort]").await;
            ui.wait_text("dialog h2", "Abort deployment #2?").await;
            ui.click("dialog button[type=submit]").await;
            ui.wait_text(".facts .badge", "aborted").await;
            ui.wait_text(".facts", "aborted by bootstrap").await;
            ui.wait_gone("button", "Pause").await;
            // The device that had it keeps it; the deployment stays aborted, with nothing to do.
            device.report(seq, "installed", None).await;
            ui.wait_text(".summary", "1 of 1 device installed").await;
            ui.wait_text(".facts .badge", "aborted").await;
            ui.wait_gone("button", "Abort").await;

            // The audit log has all of it.
            ui.open("audit").await;
            let log = ui.wait_text(".audit tbody", "deployment.rollback").await;
            for action in [
                "deployment.abort",
                "deployment.create",
                "device.create",
                "version.upload",
            ] {
                assert!(
                    log.contains(action),
                    "{action} not in the audit log:\n{log}"
                );
            }
            ui.fill("input[name=object]", "deployments/2").await;
            ui.wait_until("document.querySelectorAll('.audit tbody tr').length === 2")
                .await;
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn shows_each_new_device_token_with_copy_and_as_a_csv_download() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let base = s.url.clone();
    run(
        "device-tokens",
        &s.url,
        ADMIN,
        Screen::Desktop,
        |ui| async move {
            ui.sign_in().await;
            ui.grant_clipboard().await;
            ui.open("fleet").await;
            ui.wait_text("h1", "Fleet").await;
            ui.capture_downloads().await;
            ui.fill(
                "textarea[name=devices]",
                "lab-1, Bench one, lab\nlab-2, Shelf two, lab\nlab-3, , lab",
            )
            .await;
            ui.click("form[aria-labelledby=register-title] button[type=submit]")
                .await;
            ui.wait_text("dialog h2", "3 devices registered").await;
            // One read-only field per device, not a textarea of lines to pick apart.
            assert_eq!(
                ui.js(
                    "return document.querySelectorAll('dialog textarea').length",
                    vec![]
                )
                .await,
                0
            );
            let fields = ui
                .js(
                    "return [...document.querySelectorAll('dialog input.device-token')]\
                 .map((i) => [i.dataset.device, i.value, i.readOnly])",
                    vec![],
                )
                .await;
            let fields = fields.as_array().unwrap().clone();
            let ids: Vec<&str> = fields.iter().map(|f| f[0].as_str().unwrap()).collect();
            assert_eq!(ids, ["lab-1", "lab-2", "lab-3"]);
            for f in &fields {
                assert!(f[1].as_str().unwrap().starts_with("npub_dev_"), "{f}");
                assert_eq!(f[2], true, "read-only: {f}");
            }
            let token = |i: usize| fields[i][1].as_str().unwrap().to_owned();
            ui.screenshot("device-tokens-dialog").await;

            // Copy puts exactly that device's token on the clipboard.
            ui.click("dialog button[aria-label='Copy token of lab-2']")
                .await;
            ui.wait_text("dialog button[aria-label='Copy token of lab-2']", "Copied")
                .await;
            assert_eq!(ui.clipboard().await, token(1));

            // The CSV holds every id with its token.
            ui.click("dialog button.download-tokens").await;
            let (name, text) = ui.saved().await;
            assert_eq!(name, "npub-device-tokens.csv");
            assert_eq!(
                text,
                format!(
                    "id,token\r\nlab-1,{}\r\nlab-2,{}\r\nlab-3,{}\r\n",
                    token(0),
                    token(1),
                    token(2)
                )
            );
            // Each token is the device's own: the device API takes it.
            for (i, id) in ["lab-1", "lab-2", "lab-3"].into_iter().enumerate() {
                assert!(SimDevice::new(&base, id, &token(i)).poll(0).await.is_none());
            }
            ui.click("dialog button[type=submit]").await;
            ui.wait_until("document.querySelector('dialog') === null")
                .await;
            assert!(!ui.page_text().await.contains(&token(0)), "shown only once");
        },
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_device_that_reported_says_when_and_a_long_reason_leaves_the_table_readable() {
    let dir = tempfile::tempdir().unwrap();
    // No batched last_seen flush during the test: the report is the only sign of life.
    let s = TestServer::start_with(dir.path(), |c| c.last_seen_flush = 3600).await;
    s.create_model("kws").await;
    assert_eq!(
        s.upload("kws", "1.0.0", vela("small_net")).await.status(),
        201
    );
    let base = s.url.clone();
    let mut devices = Vec::new();
    for id in ["lab-1", "lab-2"] {
        let created = api(
            &base,
            reqwest::Method::POST,
            "/devices",
            Some(json!({"id": id, "name": format!("{id} on the bench"), "accelerator": "ethos-u55-256", "group": "lab"})),
        )
        .await;
        devices.push(SimDevice::new(
            &base,
            id,
            created[0]["token"].as_str().unwrap(),
        ));
    }
    let d = api(
        &base,
        reqwest::Method::POST,
        "/deployments",
        Some(json!({"model": "kws", "version": "1.0.0", "group": "lab"})),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    let reason = format!(
        "verify: region 3: baked data [896, 1180544) runs past total_bytes 1179000; {}",
        "the pack was truncated in transit or by the store, retry the download ".repeat(8)
    );
    assert!(devices[0].poll(0).await.is_some());
    devices[0].fail(seq, &reason).await;
    let listed = api(&base, reqwest::Method::GET, "/devices", None).await;
    let failed = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "lab-1")
        .unwrap()
        .clone();
    assert_eq!(
        failed["last_seen"],
        Value::Null,
        "not flushed yet: {failed}"
    );
    let reported_at = failed["last_status_at"].as_str().unwrap().to_owned();

    run("fleet-reasons", &s.url, ADMIN, Screen::Desktop, |ui| async move {
        ui.sign_in().await;
        ui.open("fleet").await;
        let row = ui.wait_text(".devices tbody tr", "lab-1").await;
        assert!(row.contains("failed"), "{row}");
        // Last seen: the report's time, said to be a report, rather than "never".
        let seen = ui
            .js(
                "const c = [...document.querySelectorAll('.devices tbody tr')]\
                   .find((r) => r.textContent.includes('lab-1')).querySelector('td.last-seen');\
                 return [c.textContent, c.querySelector('time')?.dateTime ?? null];",
                vec![],
            )
            .await;
        assert!(seen[0].as_str().unwrap().starts_with("reported "), "{seen}");
        assert!(!seen[0].as_str().unwrap().contains("never"), "{seen}");
        assert_eq!(seen[1], reported_at.as_str());
        // The device that never reported is still "never".
        let other = ui
            .js(
                "return [...document.querySelectorAll('.devices tbody tr')]\
                   .find((r) => r.textContent.includes('lab-2')).querySelector('td.last-seen').textContent",
                vec![],
            )
            .await;
        assert_eq!(other, "never");

        // The long reason is cut in the table, whole one click away, and squeezes nothing.
        let layout = ui
            .js(
                r#"const row = [...document.querySelectorAll('.devices tbody tr')]
                     .find((r) => r.textContent.includes('lab-1'));
                   const cell = (cls) => row.querySelector(`td.${cls}`);
                   const lines = (el) => Math.round(el.getBoundingClientRect().height
                     / parseFloat(getComputedStyle(el).lineHeight));
                   const details = cell('status').querySelector('details.reason');
                   return {
                     status: cell('status').getBoundingClientRect().width,
                     id: lines(row.querySelector('td[data-label=Device] code')),
                     seen: lines(cell('last-seen').querySelector('.cell')),
                     version: lines(row.querySelector('td[data-label="Current version"] .cell')),
                     summary: details?.querySelector('summary').textContent ?? null,
                     full: details?.querySelector('.reason-full').textContent ?? null,
                     title: details?.title ?? null,
                   };"#,
                vec![],
            )
            .await;
        assert!(layout["status"].as_f64().unwrap() <= 18.0 * 16.0 + 1.0, "{layout}");
        assert_eq!(layout["id"], 1, "the device id stays on one line: {layout}");
        assert_eq!(layout["seen"], 1, "last seen stays on one line: {layout}");
        assert!(layout["version"].as_i64().unwrap() <= 2, "{layout}");
        let summary = layout["summary"].as_str().unwrap();
        assert!(summary.ends_with('…') && summary.chars().count() <= 81, "{summary}");
        assert_eq!(layout["full"], reason.as_str());
        assert_eq!(layout["title"], reason.as_str());
        assert_eq!(ui.horizontal_overflow().await, 0, "{}", ui.overflowing_elements().await);
        ui.screenshot("fleet-long-reason").await;
        ui.click(".devices details.reason summary").await;
        ui.wait_until("document.querySelector('.devices details.reason').open").await;
        assert_eq!(ui.horizontal_overflow().await, 0, "{}", ui.overflowing_elements().await);
    })
    .await;
    s.stop().await;
}
