//! A full disk: writes answer 507 naming the disk, nothing is half-written, and writes recover by
//! themselves once space returns (no restart). On a size-limited tmpfs the test mounts itself.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{SmallDisk, TestServer, conv1_npub};

/// Fills the filesystem of `dir` with one file until it is full; returns the file to delete.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write as _;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0xA5u8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    // The last partial blocks too.
    loop {
        match f.write(&chunk[..512]) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = f.sync_all();
    path
}

#[tokio::test]
async fn survives_a_full_disk_with_507_and_recovers_when_space_returns() {
    let Some(disk) = SmallDisk::mount(24 * 1024 * 1024) else {
        return;
    };
    let data = disk.path().join("data");
    let s = TestServer::start_with(&data, |c| c.min_free_space = 0).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);

    for round in 0..3 {
        let filler = fill(disk.path());
        // Every kind of write is refused with 507 and a message naming the disk.
        let r = s
            .req(Method::POST, "/api/v1/models")
            .json(&json!({"name": format!("full-{round}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 507, "round {round}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "insufficient_storage", "{body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(&data.display().to_string()), "{detail}");
        let r = s.upload("m", &format!("full-{round}"), conv1_npub()).await;
        assert_eq!(r.status(), 507, "round {round}");
        // Reads still work.
        let r = s.req(Method::GET, "/api/v1/models").send().await.unwrap();
        assert_eq!(r.status(), 200);

        // Space returns: writes work again at once, on every pooled connection.
        std::fs::remove_file(&filler).unwrap();
        for i in 0..12 {
            let r = s
                .req(Method::POST, "/api/v1/models")
                .json(&json!({"name": format!("after-{round}-{i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(
                r.status(),
                201,
                "round {round}, write {i}: {}",
                r.text().await.unwrap()
            );
        }
        let v = format!("ok-{round}");
        assert_eq!(s.upload("m", &v, conv1_npub()).await.status(), 201);
    }
    // Nothing half-written: the refused versions do not exist, the others do, once each.
    let versions: Value = s
        .req(Method::GET, "/api/v1/models/m/versions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = versions["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["1", "ok-0", "ok-1", "ok-2"]);
    s.stop().await;
}

#[tokio::test]
async fn rejects_an_upload_that_would_eat_into_the_reserve_but_not_other_writes() {
    let Some(disk) = SmallDisk::mount(24 * 1024 * 1024) else {
        return;
    };
    let data = disk.path().join("data");
    // The reserve: everything but 1 MiB of what is free once the server has started.
    let probe = TestServer::start_with(&data, |c| c.min_free_space = 0).await;
    probe.create_model("m").await;
    probe.stop().await;
    let free = npub_server::ops::disk::DataDisk::new(data.clone(), 0)
        .space()
        .unwrap()
        .free;
    let s = TestServer::start_with(&data, |c| c.min_free_space = free - 1024 * 1024).await;
    let big = vec![0u8; 3 * 1024 * 1024];
    // Declared length: refused before the body is read.
    let r = s.upload("m", "big", big.clone()).await;
    assert_eq!(r.status(), 507);
    let body: Value = r.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("--min-free-space") && detail.contains(&data.display().to_string()),
        "{detail}"
    );
    // No declared length (chunked): refused once it crosses the line, its staged bytes removed.
    let chunks = futures_util::stream::iter(
        big.chunks(256 * 1024)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let r = s
        .req(Method::POST, "/api/v1/models/m/versions/chunked")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 507);
    assert!(
        crate::common::files_under(&data.join("tmp")).is_empty(),
        "nothing left in staging"
    );
    // Small writes are not held to the reserve.
    s.create_model("other").await;
    // A small upload fits.
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    let metrics = s
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("npub_data_dir_free_bytes "), "{metrics}");
    assert!(
        metrics.contains(&format!(
            "npub_data_dir_min_free_bytes {}",
            free - 1024 * 1024
        )),
        "{metrics}"
    );
    s.stop().await;

    // Below the reserve already: readiness says writes are not accepted (uploads would all be
    // refused), and polls are served; small writes still commit.
    let s = TestServer::start_with(&data, |c| c.min_free_space = free + 1024 * 1024).await;
    let ready: Value = s
        .http
        .get(format!("{}/readyz", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["checks"]["disk"]["ok"], false, "{ready}");
    assert_eq!(ready["can_accept_writes"], false, "{ready}");
    assert_eq!(ready["can_serve_polls"], true, "{ready}");
    assert_eq!(s.upload("m", "2", conv1_npub()).await.status(), 507);
    s.create_model("third").await;
    s.stop().await;
}
