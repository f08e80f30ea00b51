//! The S3-compatible pack store against a real S3 server on loopback (`s3s-fs`, installed by
//! `.ci/run`; skipped with a message only outside CI when it is missing): uploads, restarts, the
//! start-up sweep, ranged downloads streamed from the bucket, interrupted puts, multipart puts,
//! and presigned redirects.
#[path = "../common/mod.rs"]
mod common;
#[path = "../fleet/support.rs"]
#[allow(dead_code)]
mod support;

mod bucket;
mod cut;
mod freeze;
mod frozen;

use std::path::Path;
use std::time::{Duration, SystemTime};

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Role};
use npub_server::store::{PackDigest, PackStore as _, S3Settings, S3Store, Staging};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use bucket::{BUCKET, S3Server};
use common::{TestServer, conv1_npub, files_under, fixtures};
use support::{Sim, deploy, provision};

const PREFIX: &str = "fleet/eu";

fn small_net() -> Vec<u8> {
    std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap()
}

/// A server over `dir` whose packs live in `s3`'s bucket under [`PREFIX`], reached at `endpoint`.
async fn start_via(dir: &Path, s3: &S3Server, endpoint: &str, presign: bool) -> TestServer {
    let settings = s3.settings_via(endpoint);
    TestServer::start_with(dir, |c| {
        c.pack_store = Some(format!("s3://{BUCKET}/{PREFIX}"));
        c.presign_downloads = presign;
        c.aws_overrides = settings;
    })
    .await
}

async fn start(dir: &Path, s3: &S3Server) -> TestServer {
    start_via(dir, s3, &s3.endpoint, false).await
}

/// The store as the server opens it, for looking into the bucket through S3 itself.
fn store(s3: &S3Server) -> S3Store {
    S3Store::open(&S3Settings {
        url: format!("s3://{BUCKET}/{PREFIX}"),
        overrides: s3.settings(),
        presign: false,
    })
    .unwrap()
}

fn key(pack: &[u8]) -> String {
    format!("{PREFIX}/{}", PackDigest::of(pack).hex())
}

/// Waits until the server's background sweep of the store has succeeded once.
async fn wait_for_sweep(s: &TestServer) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while s.state.metrics.store_sweeps_ok() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store was never swept"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn pack_of(s: &TestServer, version: &str) -> Vec<u8> {
    s.download("m", version).await
}

#[tokio::test]
async fn uploads_survive_a_restart_and_download_with_ranges_from_the_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let dir = tmp.path().join("server");
    let s = start(&dir, &s3).await;
    assert!(
        s.banner.contains("pack store:   s3://npub-packs/fleet/eu"),
        "{}",
        s.banner
    );
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    let r = s.upload("m", "2", small_net()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // The same bytes again: one object serves both versions.
    assert_eq!(s.upload("m", "3", conv1_npub()).await.status(), 201);
    let v2 = pack_of(&s, "2").await;
    let mut want = vec![key(&conv1_npub()), key(&v2)];
    want.sort();
    assert_eq!(s3.objects(PREFIX), want);
    // Nothing stays on local disk: no pack files, staging empty.
    assert_eq!(
        files_under(&dir.join("packs")),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(
        files_under(&dir.join("tmp")),
        Vec::<std::path::PathBuf>::new()
    );
    s.stop().await;

    let s = start(&dir, &s3).await;
    assert_eq!(pack_of(&s, "1").await, conv1_npub());
    assert_eq!(pack_of(&s, "2").await, v2);
    assert_eq!(
        s3.objects(PREFIX),
        want,
        "the sweep kept every referenced pack"
    );

    // The operator route reads ranges from the bucket.
    let r = s
        .req(Method::GET, "/api/v1/models/m/versions/2/npub")
        .header("Range", "bytes=1000-1999")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    let range = format!("bytes 1000-1999/{}", v2.len());
    assert_eq!(r.headers()["content-range"], range.as_str());
    assert_eq!(r.bytes().await.unwrap(), v2[1000..2000]);

    // The device route streams from the bucket, with Range, If-Range and If-None-Match.
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    deploy(&s, json!({"model": "m", "version": "2", "group": "lab"})).await;
    let sha = PackDigest::of(&v2).hex();
    let path = format!("/api/v1/device/packs/{sha}");
    let get = |headers: &[(&str, &str)]| {
        let mut r = s.req_as(&tokens[0], Method::GET, &path);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.send()
    };
    let snapshot = s.state.polling.cache.get();
    let entry = snapshot
        .pack(&sha)
        .expect("the assigned pack is in the snapshot");
    assert_eq!(entry.len, v2.len() as u64);
    assert!(
        entry.bytes.is_none(),
        "an S3 store's packs are not held in memory"
    );
    let whole = get(&[]).await.unwrap();
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()["etag"], format!("\"{sha}\"").as_str());
    assert_eq!(whole.bytes().await.unwrap(), v2);
    let tail = get(&[("Range", "bytes=-100")]).await.unwrap();
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap(), v2[v2.len() - 100..]);
    let mid = get(&[("Range", "bytes=5-9"), ("If-Range", &format!("\"{sha}\""))])
        .await
        .unwrap();
    assert_eq!(mid.status(), 206);
    assert_eq!(mid.bytes().await.unwrap(), v2[5..10]);
    let stale = get(&[("Range", "bytes=5-9"), ("If-Range", "\"other\"")])
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);
    assert_eq!(stale.bytes().await.unwrap(), v2);
    let same = get(&[("If-None-Match", &format!("\"{sha}\""))])
        .await
        .unwrap();
    assert_eq!(same.status(), 304);
    let past = get(&[("Range", &format!("bytes={}-", v2.len()))])
        .await
        .unwrap();
    assert_eq!(past.status(), 416);
    let mut sim = Sim::new(&s, &tokens[0]).await;
    sim.install().await;
    s.stop().await;
}

#[tokio::test]
async fn the_start_up_sweep_removes_old_orphans_from_the_bucket_and_spares_recent_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let dir = tmp.path().join("server");
    let s = start(&dir, &s3).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    s.stop().await;

    // Packs no version names, put through S3 as an upload would: one from a crash long ago, one
    // another replica has just put and not yet committed; and an object that is no pack.
    let staging_dir = tmp.path().join("staging");
    std::fs::create_dir(&staging_dir).unwrap();
    let staging = Staging::new(staging_dir);
    let store = store(&s3);
    let (old, recent) = (b"an old orphan".to_vec(), b"a recent orphan".to_vec());
    for bytes in [&old, &recent] {
        let mut f = staging.create("orphan").await.unwrap();
        f.write(bytes).await.unwrap();
        store.put(&f.finish().await.unwrap()).await.unwrap();
    }
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
    std::fs::File::options()
        .write(true)
        .open(s3.object_file(&key(&old)))
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    let stranger = s3.object_file(&format!("{PREFIX}/README"));
    std::fs::write(&stranger, "not a pack").unwrap();

    let s = start(&dir, &s3).await;
    wait_for_sweep(&s).await;
    let mut want = vec![key(&conv1_npub()), key(&recent), format!("{PREFIX}/README")];
    want.sort();
    assert_eq!(s3.objects(PREFIX), want);
    assert_eq!(pack_of(&s, "1").await, conv1_npub());
    let listed: Vec<PackDigest> = store
        .list()
        .await
        .unwrap()
        .iter()
        .map(|l| l.digest)
        .collect();
    let mut digests = vec![PackDigest::of(&conv1_npub()), PackDigest::of(&recent)];
    digests.sort();
    assert_eq!(listed, digests);
    s.stop().await;
}

#[tokio::test]
async fn an_interrupted_put_leaves_no_visible_pack_and_the_upload_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let pack = small_net();
    // The link to the bucket breaks 32 KiB into every request body; the pack is ~130 KiB.
    let proxy = cut::CutProxy::start(s3.port, 32 * 1024).await;
    let dir = tmp.path().join("server");
    let s = start_via(&dir, &s3, &proxy.endpoint, false).await;
    s.create_model("m").await;
    let r = s.upload("m", "1", pack.clone()).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "unavailable", "{body}");
    assert!(proxy.cuts() >= 1, "the put was cut");
    assert_eq!(s.rows("versions").await, 0);
    assert_eq!(
        s3.objects(""),
        Vec::<String>::new(),
        "no object in the bucket"
    );
    assert_eq!(store(&s3).list().await.unwrap(), vec![]);
    assert_eq!(
        files_under(&dir.join("tmp")),
        Vec::<std::path::PathBuf>::new()
    );

    // The link heals: the same upload goes through.
    proxy.disarm();
    assert_eq!(s.upload("m", "1", pack.clone()).await.status(), 201);
    assert_eq!(s3.objects(PREFIX), vec![key(&s.download("m", "1").await)]);
    s.stop().await;
}

#[tokio::test]
async fn survives_a_dead_bucket_by_starting_serving_polls_and_sweeping_once_it_is_back() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let dir = tmp.path().join("server");
    let s = start(&dir, &s3).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", conv1_npub()).await.status(), 201);
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    deploy(&s, json!({"model": "m", "version": "1", "group": "lab"})).await;
    s3.kill();
    // An upload fails with 503 and leaves nothing behind.
    let r = s.upload("m", "2", small_net()).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(s.rows("versions").await, 1);
    assert_eq!(
        files_under(&dir.join("tmp")),
        Vec::<std::path::PathBuf>::new()
    );
    s.stop().await;

    // A replica starts while its bucket cannot be reached, and answers polls from the database.
    let s = start(&dir, &s3).await;
    let sim = Sim::new(&s, &tokens[0]).await;
    assert_eq!(sim.poll().await.status(), 200, "the deployment is offered");
    // A download needs the bucket: 503 with Retry-After, never 500.
    let sha = PackDigest::of(&conv1_npub()).hex();
    let r = sim
        .req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(s.state.metrics.store_sweeps_ok(), 0);
    // Readiness says so once the store has been probed: polls and writes yes, uploads no.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let ready = loop {
        let ready: Value = s
            .http
            .get(format!("{}/readyz", s.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ready["checks"]["pack_store"]["detail"] != "not probed yet" {
            break ready;
        }
        assert!(tokio::time::Instant::now() < deadline, "{ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ready["checks"]["pack_store"]["ok"], false, "{ready}");
    assert_eq!(ready["can_accept_uploads"], false, "{ready}");
    assert_eq!(ready["can_accept_writes"], true, "{ready}");
    assert_eq!(ready["status"], "degraded", "{ready}");

    // The bucket comes back on its address: the sweep retries by itself and downloads work.
    let port = s3.port;
    let root = tmp.path().join("s3");
    let _s3 = S3Server::start_on(&bucket::binary().unwrap(), &root, port);
    wait_for_sweep(&s).await;
    let r = sim
        .req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap(), conv1_npub());
    s.stop().await;
}

#[tokio::test]
async fn a_pack_larger_than_one_put_goes_up_in_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    // conv1's command stream over 17 MiB of baked weights: three parts.
    let case = fixtures().join("cases/conv1_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let mut weights = std::fs::read(case.join("weights.bin")).unwrap();
    weights.resize(17 * 1024 * 1024, 0x5a);
    let big = build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 704,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    let dir = tmp.path().join("server");
    let s = start(&dir, &s3).await;
    s.create_model("m").await;
    let r = s.upload("m", "1", big.clone()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    assert_eq!(s3.objects(PREFIX), vec![key(&big)]);
    assert!(
        s.download("m", "1").await == big,
        "the parts join up to the pack"
    );
    s.stop().await;
}

#[tokio::test]
async fn presigned_downloads_redirect_to_the_bucket_without_the_token() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3Server::start(&tmp.path().join("s3")) else {
        return;
    };
    let s = start_via(&tmp.path().join("server"), &s3, &s3.endpoint, true).await;
    s.create_model("m").await;
    assert_eq!(s.upload("m", "1", small_net()).await.status(), 201);
    let pack = pack_of(&s, "1").await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    deploy(&s, json!({"model": "m", "version": "1", "group": "lab"})).await;
    let sha = PackDigest::of(&pack).hex();
    let path = format!("{}/api/v1/device/packs/{sha}", s.url);
    let manual = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    let r = manual
        .get(&path)
        .bearer_auth(&tokens[0])
        .header("Range", "bytes=0-99")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        location.starts_with(&format!("{}/{BUCKET}/{PREFIX}/{sha}?", s3.endpoint)),
        "{location}"
    );
    assert!(location.contains("X-Amz-Signature="), "{location}");
    // The URL alone authorises the object, with Range.
    let r = manual
        .get(&location)
        .header("Range", "bytes=100-199")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap(), pack[100..200]);
    // …and only that object: another key under the same signature is refused.
    let other = location.replacen(&sha, &"0".repeat(64), 1);
    assert_eq!(manual.get(&other).send().await.unwrap().status(), 403);

    // Conditional and unsatisfiable requests are still answered by the server itself.
    let r = manual
        .get(&path)
        .bearer_auth(&tokens[0])
        .header("If-None-Match", format!("\"{sha}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    let r = manual
        .get(&path)
        .bearer_auth(&tokens[0])
        .header("Range", format!("bytes={}-", pack.len()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);

    // A client that follows redirects (and drops its token on the way) installs as usual.
    let mut sim = Sim::new(&s, &tokens[0]).await;
    sim.install().await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_pack_store_settings_that_cannot_work() {
    let tmp = tempfile::tempdir().unwrap();
    let start = |tweak: fn(&mut npub_server::Config)| {
        let mut config = npub_server::Config::new(tmp.path(), "127.0.0.1:0".parse().unwrap());
        tweak(&mut config);
        npub_server::Server::start(config)
    };
    let err = start(|c| c.presign_downloads = true).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("--presign-downloads needs an s3:// --pack-store"),
        "{err}"
    );
    let err = start(|c| c.pack_store = Some("/var/lib/npub/packs".into()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("--pack-store: \"/var/lib/npub/packs\": a pack store URL starts with s3://"),
        "{err}"
    );
    let err = start(|c| c.pack_store = Some("s3://".into()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no bucket name"), "{err}");
}
