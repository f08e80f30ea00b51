//! Provision → deploy → poll → verified manifest → Range download with a resume after a dropped
//! connection → IO bindings → installed; the poll's caching headers; batched last-seen.
use npub_core::manifest::PackCheck;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::TestServer;
use crate::support::{Sim, deploy, deployment, fleet, hex, provision};

/// Reads the head and at most `body_bytes` of the body of a GET, then drops the connection.
async fn partial_get(s: &TestServer, token: &str, path: &str, body_bytes: usize) -> Vec<u8> {
    let addr = s.url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed early");
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..at]).to_string();
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            if got.len() - (at + 4) >= body_bytes {
                return got[at + 4..at + 4 + body_bytes].to_vec();
            }
        }
    }
    // The stream is dropped here, mid-body: the "power cut" of the download.
}

#[tokio::test]
async fn a_device_installs_a_deployment_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    let mut sim = Sim::new(&s, &tokens[0]).await;

    // Nothing deployed: 204 with a poll interval.
    let r = sim.poll().await;
    assert_eq!(r.status(), 204);
    assert_eq!(r.headers()["npub-poll-interval"], "60");

    let d = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let sequence = d["sequence"].as_u64().unwrap();
    assert!(sequence >= 1);
    assert_eq!(d["progress"]["targets"], 1);
    assert_eq!(d["progress"]["counts"]["pending"], 1);

    // 200 with an ETag; the same ETag gets 304.
    let r = sim.poll().await;
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].clone();
    let r = sim
        .req(Method::GET, "/api/v1/device/manifest?seq=0")
        .header("If-None-Match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);

    let (manifest, _) = sim.poll_verified().await.unwrap();
    assert_eq!(manifest.sequence(), sequence);
    assert_eq!(manifest.model_version(), "2.0.0");
    let sha = hex(&manifest.pack_sha256());
    assert_eq!(d["sha256"], sha);
    let len = manifest.pack_len() as usize;
    let path = format!("/api/v1/device/packs/{sha}");

    // The first attempt is cut after 100 bytes; the resume asks for the rest by Range.
    let first = partial_get(&s, &sim.token, &path, 100).await;
    sim.report(sequence, "downloading").await;
    let r = sim
        .req(Method::GET, &path)
        .header("Range", "bytes=100-")
        .header("If-Range", format!("\"{sha}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 100-{}/{len}", len - 1).as_str()
    );
    let rest = r.bytes().await.unwrap();
    let mut check = PackCheck::new(manifest.clone());
    check.feed(&first).unwrap();
    check.feed(&rest).unwrap();
    check.finish().expect("the resumed pack verifies");

    // If-Range with another validator: the whole pack, 200.
    let r = sim
        .req(Method::GET, &path)
        .header("Range", "bytes=100-")
        .header("If-Range", "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().len(), len);
    // Past the end: 416.
    let r = sim
        .req(Method::GET, &path)
        .header("Range", format!("bytes={len}-"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes */{len}").as_str()
    );

    // Range pieces, through the core's pack check.
    let pack = sim.download(manifest.clone(), 1000).await;
    assert_eq!(pack.len(), len);

    // The IO bindings match the manifest's digest.
    let r = sim
        .req(Method::GET, &format!("{path}/io"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let io = r.bytes().await.unwrap();
    manifest.check_io_bindings(Some(&io)).unwrap();

    sim.report(sequence, "verified").await;
    sim.report(sequence, "installed").await;
    sim.last_sequence = sequence;
    assert!(
        sim.poll_verified().await.is_none(),
        "nothing newer after install"
    );

    let d = deployment(&s, d["id"].as_i64().unwrap()).await;
    assert_eq!(d["progress"]["counts"]["installed"], 1);
    assert_eq!(d["phase"], "completed");

    // Last seen is batched: written by a flush, not by the polls.
    let before: serde_json::Value = s
        .req(Method::GET, "/api/v1/devices/dev-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(before["last_seen"].is_null());
    assert_eq!(before["current_version"], "2.0.0");
    assert_eq!(before["current_sequence"], sequence);
    assert_eq!(before["status"], "installed");
    assert_eq!(
        s.state.polling.flush_last_seen(&s.state.db).await.unwrap(),
        1
    );
    let after: serde_json::Value = s
        .req(Method::GET, "/api/v1/devices?group=lab&status=installed")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(after["items"][0]["last_seen"].is_string(), "{after}");
    s.stop().await;
}

#[tokio::test]
async fn sequences_only_grow_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["dev-1"]).await;
    let a = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let b = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "device": "dev-1"}),
    )
    .await;
    assert!(b["sequence"].as_i64() > a["sequence"].as_i64());
    s.stop().await;
    // No periodic cache check: below, only the test's own `refresh_if_stale` may see the bump
    // (with the 1 s default the server's check could rebuild first, and the call would rightly
    // answer "not stale").
    let s = TestServer::start_with(dir.path(), |c| c.cache_check = 3600).await;
    let c = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    assert!(c["sequence"].as_i64() > b["sequence"].as_i64());
    let list: Vec<serde_json::Value> = s
        .req(Method::GET, "/api/v1/deployments")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["sequence"], c["sequence"]);

    // Another replica's change: only the generation row tells; the periodic check rebuilds.
    let fleet = &s.state.polling;
    assert!(
        !fleet
            .refresh_if_stale(&s.state.db, &s.state.store)
            .await
            .unwrap()
    );
    sqlx::query("UPDATE fleet_generation SET value = value + 1")
        .execute(&s.state.db)
        .await
        .unwrap();
    assert!(
        fleet
            .refresh_if_stale(&s.state.db, &s.state.store)
            .await
            .unwrap()
    );
    assert!(
        !fleet
            .refresh_if_stale(&s.state.db, &s.state.store)
            .await
            .unwrap()
    );
    // A database restored from an older backup: the generation row falls behind the snapshot,
    // which must be rebuilt from what the database now holds, not kept as "ahead".
    let before = fleet.cache.get().generation;
    sqlx::query("UPDATE fleet_generation SET value = value - 5")
        .execute(&s.state.db)
        .await
        .unwrap();
    assert!(
        fleet
            .refresh_if_stale(&s.state.db, &s.state.store)
            .await
            .unwrap()
    );
    assert_eq!(fleet.cache.get().generation, before - 5);
    assert!(
        !fleet
            .refresh_if_stale(&s.state.db, &s.state.store)
            .await
            .unwrap()
    );

    // The device API is in the OpenAPI document with its own security scheme.
    let doc: serde_json::Value = s
        .http
        .get(format!("{}/api/v1/openapi.json", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["components"]["securitySchemes"]["device_token"].is_object());
    assert!(doc["components"]["securitySchemes"]["token"].is_object());
    s.stop().await;
}
