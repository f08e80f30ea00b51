//! The start-up banner: it names the web UI's address, and its example commands work as written
//! on a fresh server (with the token in `NPUB_TOKEN` and `NAME` replaced), in order.
use std::time::Duration;

use crate::binary::spawn;
use crate::common::{ADMIN, fixtures};

#[tokio::test]
async fn survives_following_the_banner_from_a_fresh_start_to_an_uploaded_version() {
    let dir = tempfile::tempdir().unwrap();
    let running = spawn(dir.path(), &[], None).await;
    // The banner ends with the API line; it is printed at once, before the first request.
    let mut banner = Vec::new();
    for _ in 0..200 {
        banner = running.banner.lock().unwrap().clone();
        if banner.iter().any(|l| l.trim_start().starts_with("API:")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let text = banner.join("\n");
    let web = format!("web UI:       {}/", running.url);
    assert!(text.contains(&web), "{text}");
    // The log says it too (a service's stdout is often not kept).
    let mut running = running;
    let line = running.wait_for_log(&["serving", "web_ui"]).await;
    assert!(line.contains(&format!("{}/", running.url)), "{line}");
    let page = reqwest::get(format!("{}/", running.url)).await.unwrap();
    assert_eq!(page.status(), 200);

    // Where the user runs the commands: their Vela output is model_vela.tflite.
    let work = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixtures().join("vela_out/u55_256/tflite/conv1_vela.tflite"),
        work.path().join("model_vela.tflite"),
    )
    .unwrap();
    let mut ran = Vec::new();
    for label in ["try:", "create:", "upload:"] {
        let line = banner
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label} line in\n{text}"))
            .trim()
            .replace("NAME", "kws");
        // `-w` appends the status, so that a 404 (the model not created first) is seen.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{line} -sS -w '\\n%{{http_code}}'"))
            .current_dir(work.path())
            .env("NPUB_TOKEN", ADMIN)
            .output()
            .expect("sh and curl run");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let status = stdout.lines().last().unwrap_or_default().to_owned();
        assert!(
            out.status.success() && status.starts_with('2'),
            "{label} {line}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ran.push((label, status));
    }
    assert_eq!(
        ran,
        [
            ("try:", "200".into()),
            ("create:", "201".into()),
            ("upload:", "201".into())
        ]
    );
    running.stop().await;
}
