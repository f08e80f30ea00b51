//! Range per RFC 9110 on both pack downloads, the device route and the operator route (issue #11
//! point 8): a suffix longer than the pack is the whole pack (206), several ranges or an unknown
//! unit are ignored (200), the unit is case-insensitive, and the operator route honours Range,
//! If-Range and If-None-Match like the device route.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TestServer, conv1_npub};
use crate::support::{Sim, deploy, fleet, hex, provision};

/// What a download route answered: status, `Content-Range`, body.
type Got = (u16, Option<String>, Vec<u8>);

async fn get(rb: reqwest::RequestBuilder) -> Got {
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let range = r
        .headers()
        .get("content-range")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, range, r.bytes().await.unwrap().to_vec())
}

/// Runs every case against one route; `request` builds a GET of the pack.
async fn check_route(route: &str, pack: &[u8], request: impl Fn() -> reqwest::RequestBuilder) {
    let len = pack.len();
    let sha = crate::common::sha256_hex(pack);
    let with_range = |spec: String| request().header("range", spec);

    let suffix = get(with_range(format!("bytes=-{}", len + 1000))).await;
    assert_eq!(
        suffix,
        (
            206,
            Some(format!("bytes 0-{}/{len}", len - 1)),
            pack.to_vec()
        ),
        "{route}: a suffix longer than the pack"
    );
    let several = get(with_range("bytes=0-9,20-29".into())).await;
    assert_eq!(
        several,
        (200, None, pack.to_vec()),
        "{route}: several ranges"
    );
    let unknown = get(with_range("items=0-9".into())).await;
    assert_eq!(unknown, (200, None, pack.to_vec()), "{route}: unknown unit");
    let upper = get(with_range("BYTES=0-9".into())).await;
    assert_eq!(
        upper,
        (206, Some(format!("bytes 0-9/{len}")), pack[..10].to_vec()),
        "{route}: unit case"
    );
    let tail = get(with_range("bytes=100-".into()).header("if-range", format!("\"{sha}\""))).await;
    assert_eq!(
        tail,
        (
            206,
            Some(format!("bytes 100-{}/{len}", len - 1)),
            pack[100..].to_vec()
        ),
        "{route}: If-Range naming the pack"
    );
    let stale = get(with_range("bytes=100-".into()).header("if-range", "\"other\"")).await;
    assert_eq!(
        stale,
        (200, None, pack.to_vec()),
        "{route}: If-Range naming another"
    );
    let cached = get(request().header("if-none-match", format!("\"{sha}\""))).await;
    assert_eq!(cached, (304, None, Vec::new()), "{route}: If-None-Match");
    let (status, range, body) = get(with_range(format!("bytes={len}-"))).await;
    assert_eq!(
        (status, range),
        (416, Some(format!("bytes */{len}"))),
        "{route}: past the end"
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"], "range_not_satisfiable", "{route}");
}

#[tokio::test]
async fn survives_rfc9110_range_requests_on_both_download_routes() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let sim = Sim::new(&s, &tokens[0]).await;
    let (manifest, _) = sim.poll_verified().await.expect("offered");
    let sha = hex(&manifest.pack_sha256());
    let pack = conv1_npub();
    assert_eq!(crate::common::sha256_hex(&pack), sha);

    check_route("operator", &pack, || {
        s.req(Method::GET, "/api/v1/models/kws/versions/1.0.0/npub")
    })
    .await;
    check_route("device", &pack, || {
        sim.req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
    })
    .await;
    s.stop().await;
}
