//! An object store that accepts connections and never answers (issue #31 point 4): no request
//! waits on it longer than `--store-timeout`, none holds a lock meanwhile, devices get 503 with
//! `Retry-After`, and a replica starts and serves polls while it is frozen.
use std::time::Duration;

use npub_server::store::PackDigest;
use reqwest::Method;
use serde_json::json;

use crate::bucket::{BUCKET, S3Server};
use crate::common::{TestServer, conv1_npub};
use crate::freeze::FreezeProxy;
use crate::support::{Sim, deploy, provision};
use crate::{PREFIX, small_net};

/// Seconds the server gives one store call: long enough that "the upload is still waiting" is
/// not a race on a loaded machine.
const STORE_TIMEOUT: u64 = 10;

async fn start(dir: &std::path::Path, s3: &S3Server, proxy: &FreezeProxy) -> TestServer {
    let settings = s3.settings_via(&proxy.endpoint);
    TestServer::start_with(dir, |c| {
        c.pack_store = Some(format!("s3://{BUCKET}/{PREFIX}"));
        c.aws_overrides = settings;
        c.store_timeout = STORE_TIMEOUT;
    })
    .await
}

#[tokio::test]
async fn survives_a_frozen_store_without_holding_a_lock_and_answers_devices_503() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let proxy = FreezeProxy::start(s3.port).await;
    let dir = tmp.path().join("server");
    let s = start(&dir, &s3, &proxy).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    deploy(&s, json!({"model": "m", "version": "1", "group": "lab"})).await;

    proxy.freeze();
    // An upload now waits on the store...
    let upload = {
        let (url, http) = (s.url.clone(), s.http.clone());
        tokio::spawn(async move {
            http.post(format!("{url}/api/v1/models/m/versions/2"))
                .bearer_auth(crate::common::ADMIN)
                .body(small_net())
                .send()
                .await
                .unwrap()
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(STORE_TIMEOUT);
    while proxy.held() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the put never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ...and while it does, every other write goes on: no lock is held across the store call.
    s.create_model("other").await;
    let tokens2 = provision(&s, "lab", &["dev-2"]).await;
    assert_eq!(tokens2.len(), 1);
    let sim = Sim::new(&s, &tokens[0]).await;
    assert_eq!(sim.poll().await.status(), 200, "polls are answered");
    assert!(
        !upload.is_finished(),
        "the upload is still waiting on the store"
    );
    let r = upload.await.unwrap();
    assert_eq!(r.status(), 503, "the upload gives up after --store-timeout");
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(s.rows("versions").await, 1);

    // A device's download: 503 with Retry-After, never 500.
    let sha = PackDigest::of(&conv1_npub()).hex();
    let r = sim
        .req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    s.stop().await;

    // A replica starts while the store is frozen and serves polls.
    let s = start(&dir, &s3, &proxy).await;
    let sim = Sim::new(&s, &tokens[0]).await;
    assert_eq!(sim.poll().await.status(), 200);
    assert_eq!(s.state.metrics.store_sweeps_ok(), 0);

    // Thawed: uploads and downloads work again.
    proxy.thaw();
    let r = s.upload("m", "2", small_net()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = sim
        .req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    s.stop().await;
}
