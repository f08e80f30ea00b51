//! Who can see what: a device sees only its own assignment, a revoked device gets 401, and
//! operator and device tokens never open each other's routes.
use reqwest::Method;
use serde_json::json;

use crate::common::{ADMIN, TestServer};
use crate::support::{Sim, deploy, fleet, hex, provision};

#[tokio::test]
async fn a_device_sees_only_its_own_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let a = provision(&s, "alpha", &["dev-a"]).await;
    let b = provision(&s, "beta", &["dev-b"]).await;
    let sim_a = Sim::new(&s, &a[0]).await;
    let sim_b = Sim::new(&s, &b[0]).await;
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "device": "dev-a"}),
    )
    .await;
    let d_b = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "beta"}),
    )
    .await;

    let (m_a, _) = sim_a.poll_verified().await.unwrap();
    let (m_b, _) = sim_b.poll_verified().await.unwrap();
    assert_eq!(m_a.model_version(), "1.0.0");
    assert_eq!(m_b.model_version(), "2.0.0");
    // A cannot download B's pack, nor its IO bindings; an unknown digest is the same 404.
    let b_pack = format!("/api/v1/device/packs/{}", hex(&m_b.pack_sha256()));
    assert_eq!(
        sim_a
            .req(Method::GET, &b_pack)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let io = format!("{b_pack}/io");
    assert_eq!(
        sim_a.req(Method::GET, &io).send().await.unwrap().status(),
        404
    );
    let unknown = format!("/api/v1/device/packs/{}", "0".repeat(64));
    assert_eq!(
        sim_a
            .req(Method::GET, &unknown)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // A cannot report on B's deployment.
    let r = sim_a
        .req(Method::POST, "/api/v1/device/status")
        .json(&json!({"sequence": d_b["sequence"], "state": "installed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn revoked_devices_and_foreign_tokens_get_401() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let t = provision(&s, "lab", &["dev-1", "dev-2"]).await;
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let sim1 = Sim::new(&s, &t[0]).await;
    let sim2 = Sim::new(&s, &t[1]).await;
    assert_eq!(sim1.poll().await.status(), 200);

    // Operator token on device routes, device token on operator routes, no token: 401.
    let r = s
        .req_as(ADMIN, Method::GET, "/api/v1/device/manifest?seq=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = sim1
        .req(Method::GET, "/api/v1/devices")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = sim1
        .req(Method::GET, "/api/v1/models")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = s
        .http
        .get(format!("{}/api/v1/device/manifest?seq=0", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Revoked (DELETE and POST …/revoke): 401 from the next request on; the other still works.
    let r = s
        .req(Method::DELETE, "/api/v1/devices/dev-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(sim1.poll().await.status(), 401);
    assert_eq!(sim2.poll().await.status(), 200);
    let r = s
        .req(Method::POST, "/api/v1/devices/dev-2/revoke")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(sim2.poll().await.status(), 401);
    let listed: Vec<serde_json::Value> = s
        .req(Method::GET, "/api/v1/devices?status=revoked")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 2);

    // Provisioning refuses a duplicate id and an unknown accelerator.
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"id": "dev-1", "accelerator": "ethos-u55-256"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"id": "dev-9", "accelerator": "gpu"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    s.stop().await;
}
