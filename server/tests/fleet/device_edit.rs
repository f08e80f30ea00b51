//! Editing and re-credentialing devices: `PATCH /api/v1/devices/{id}` and
//! `POST /api/v1/devices/{id}/token`.
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet, provision};

async fn send(s: &TestServer, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = s.req(method, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn moving_a_device_to_another_group_changes_its_next_offer_and_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    provision(&s, "field", &["dev-2"]).await;
    let lab = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    let field = deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "field"}),
    )
    .await;
    let sim = Sim::new(&s, &tokens[0]).await;
    let (m, _) = sim.poll_verified().await.unwrap();
    assert_eq!(m.sequence(), lab["sequence"].as_u64().unwrap());

    let (status, dev) = send(
        &s,
        Method::PATCH,
        "/api/v1/devices/dev-1",
        Some(json!({"group": "field", "name": "Bench unit 1", "tags": ["bench", "rev-b"]})),
    )
    .await;
    assert_eq!(status, 200, "{dev}");
    assert_eq!(dev["group"], "field");
    assert_eq!(dev["name"], "Bench unit 1");
    assert_eq!(dev["tags"], json!(["bench", "rev-b"]));
    assert_eq!(dev["accelerator"], "ethos-u55-256", "untouched fields stay");
    let (m, _) = sim.poll_verified().await.unwrap();
    assert_eq!(
        m.sequence(),
        field["sequence"].as_u64().unwrap(),
        "the next poll offers the new group's deployment"
    );

    let (_, audit) = send(&s, Method::GET, "/api/v1/audit", None).await;
    let entry = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "device.update")
        .cloned()
        .expect("audited");
    assert_eq!(entry["object"], "devices/dev-1");
    let detail = entry["detail"].to_string();
    assert!(
        detail.contains("\"from\":\"lab\"") && detail.contains("\"to\":\"field\""),
        "{detail}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_new_device_token_works_and_the_old_one_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let tokens = provision(&s, "lab", &["dev-1"]).await;
    let poll = |token: String| {
        let s = &s;
        async move {
            s.req_as(&token, Method::GET, "/api/v1/device/manifest?seq=0")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(poll(tokens[0].clone()).await, 204);
    let (status, created) = send(&s, Method::POST, "/api/v1/devices/dev-1/token", None).await;
    assert_eq!(status, 200, "{created}");
    let new = created["token"].as_str().unwrap().to_owned();
    assert!(new.starts_with("npub_dev_") && new != tokens[0]);
    assert_eq!(created["id"], "dev-1");
    assert_eq!(
        poll(tokens[0].clone()).await,
        401,
        "the old token is refused"
    );
    assert_eq!(poll(new.clone()).await, 204, "the new one works");
    // It is shown once: the device page does not carry it.
    let (_, page) = send(&s, Method::GET, "/api/v1/devices/dev-1", None).await;
    assert!(!page.to_string().contains(&new));
    s.stop().await;
}

#[tokio::test]
async fn rejects_bad_edits_and_a_token_for_a_revoked_device() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    provision(&s, "lab", &["dev-1"]).await;
    for (body, want) in [
        (json!({"group": "no spaces"}), 422),
        (json!({"tags": ["ok", "bad tag"]}), 422),
        (json!({"name": ""}), 422),
        (json!({"name": "a\u{1b}[31mred"}), 422),
        (json!({"accelerator": "ethos-u99"}), 422),
        (json!({"colour": "red"}), 422),
    ] {
        let (status, e) = send(
            &s,
            Method::PATCH,
            "/api/v1/devices/dev-1",
            Some(body.clone()),
        )
        .await;
        assert!(status == want || status == 400, "{body}: {status} {e}");
        assert!(e["detail"].is_string(), "{body}: {e}");
    }
    // A patch that changes nothing is answered with the device, and audits nothing.
    for body in [json!({}), json!({"group": "lab", "accelerator": null})] {
        let (status, d) = send(&s, Method::PATCH, "/api/v1/devices/dev-1", Some(body)).await;
        assert_eq!((status, d["group"].as_str()), (200, Some("lab")), "{d}");
    }
    let (_, audit) = send(&s, Method::GET, "/api/v1/audit", None).await;
    assert!(
        !audit.to_string().contains("device.update"),
        "nothing changed, nothing audited: {audit}"
    );
    let (status, _) = send(
        &s,
        Method::PATCH,
        "/api/v1/devices/ghost",
        Some(json!({"group": "lab"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = send(&s, Method::POST, "/api/v1/devices/ghost/token", None).await;
    assert_eq!(status, 404);
    let (status, _) = send(&s, Method::POST, "/api/v1/devices/dev-1/revoke", None).await;
    assert_eq!(status, 204);
    let (status, e) = send(&s, Method::POST, "/api/v1/devices/dev-1/token", None).await;
    assert_eq!(status, 409, "{e}");
    s.stop().await;
}

/// An operator's mistake in a tag or a group is answered in words: what was sent, what is
/// allowed, and no Rust range syntax or type names.
#[tokio::test]
async fn rejects_an_invalid_tag_or_group_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    provision(&s, "lab", &["dev-1"]).await;
    for (method, path, body, names) in [
        (
            Method::PATCH,
            "/api/v1/devices/dev-1",
            json!({"tags": ["ok", "bad tag"]}),
            "tags: \"bad tag\" is not allowed",
        ),
        (
            Method::POST,
            "/api/v1/devices",
            json!({"id": "dev-2", "accelerator": "ethos-u55-256", "tags": ["a/b"]}),
            "tags: \"a/b\" is not allowed",
        ),
        (
            Method::POST,
            "/api/v1/devices",
            json!({"devices": [{"id": "dev-3", "accelerator": "ethos-u55-256"}, {"id": "dev-4"}]}),
            "devices[1]: missing field `accelerator`",
        ),
        (
            Method::PATCH,
            "/api/v1/devices/dev-1",
            json!({"group": "no spaces"}),
            "group: \"no spaces\" is not allowed",
        ),
        (
            Method::PATCH,
            "/api/v1/devices/dev-1",
            json!({"tags": [5]}),
            "tags[0]",
        ),
    ] {
        let (status, e) = send(&s, method, path, Some(body.clone())).await;
        assert_eq!(status, 422, "{body}: {e}");
        let detail = e["detail"].as_str().unwrap();
        assert!(detail.contains(names), "{body}: {detail}");
        for jargon in [
            "..=",
            "target type",
            "untagged",
            "variant",
            "Vec<",
            "String",
        ] {
            assert!(!detail.contains(jargon), "{body}: {detail}");
        }
    }
    s.stop().await;
}
