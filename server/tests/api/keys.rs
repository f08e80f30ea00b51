//! The signing key: generated on first start (0600), listed, importable with a keyring update.
use npub_core::keys::KeyPair;
use npub_core::manifest::{KeyringChange, KeyringUpdate, sign_keyring_update};
use reqwest::Method;
use serde_json::Value;

use crate::common::TestServer;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn first_start_generates_a_private_signing_key_and_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = keys["active"]["key_id"].as_str().unwrap();
    assert_eq!(id.len(), 16);
    assert_eq!(keys["active"]["source"], "generated");
    assert_eq!(keys["active"]["public_key"].as_str().unwrap().len(), 64);
    let file = dir.path().join("keys").join(format!("{id}.key"));
    let pair = npub_core::keys::read_secret_key(&file).unwrap();
    assert_eq!(pair.key_id().to_string(), id);
    assert_eq!(keys["active"]["public_key"], hex(&pair.public_key()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let keys_mode = std::fs::metadata(dir.path().join("keys"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(keys_mode, 0o700, "the key directory is private");
    }
    assert!(s.banner.contains(id), "{}", s.banner);
    s.stop().await;
}

#[tokio::test]
async fn an_imported_key_with_its_keyring_update_becomes_active() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let before: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let old_id = before["active"]["key_id"].as_str().unwrap().to_owned();

    let root = KeyPair::from_seed([7; 32]);
    let signer = KeyPair::from_seed([9; 32]);
    let update = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: signer.public_key(),
        },
        issued_at: 1_700_000_000,
    };
    let record = sign_keyring_update(&update, &root);
    let body = serde_json::json!({
        "secret_key": format!("npub-ed25519-secret-v1 {}", hex(&[9; 32])),
        "keyring_update": hex(&record),
    });

    // Operators may not; admins may.
    let op = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "op"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .req_as(&op, Method::POST, "/api/v1/keys")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let r = s
        .req(Method::POST, "/api/v1/keys")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let after: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(after["active"]["key_id"], signer.key_id().to_string());
    assert_eq!(after["active"]["source"], "imported");
    let old = after["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_id"] == old_id.as_str())
        .unwrap();
    assert_eq!(old["active"], false);
    assert!(old["retired_at"].is_string());
    assert_eq!(after["keyring_updates"][0]["record"], hex(&record));
    assert_eq!(
        after["keyring_updates"][0]["root_key_id"],
        root.key_id().to_string()
    );
    assert_eq!(s.state.keys.active().key_id(), signer.key_id());

    // A key used before is never taken back.
    let r = s
        .req(Method::POST, "/api/v1/keys")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);

    let audit: Vec<Value> = s
        .req(Method::GET, "/api/v1/audit")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e["action"] == "key.import" && e["actor"] == "bootstrap")
    );
    s.stop().await;

    // And it is still the active key after a restart.
    let s = TestServer::start(dir.path()).await;
    assert_eq!(s.state.keys.active().key_id(), signer.key_id());
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_keyring_update_that_does_not_add_the_imported_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let root = KeyPair::from_seed([7; 32]);
    let other = KeyPair::from_seed([8; 32]);
    let update = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: other.public_key(),
        },
        issued_at: 0,
    };
    let record = sign_keyring_update(&update, &root);
    for (what, body) in [
        (
            "update for another key",
            serde_json::json!({"secret_key": hex(&[9; 32]), "keyring_update": hex(&record)}),
        ),
        (
            "truncated update",
            serde_json::json!({"secret_key": hex(&[9; 32]), "keyring_update": hex(&record[..100])}),
        ),
        (
            "bad secret",
            serde_json::json!({"secret_key": "npub-ed25519-secret-v1 abcd"}),
        ),
    ] {
        let r = s
            .req(Method::POST, "/api/v1/keys")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{what}");
    }
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys["keys"].as_array().unwrap().len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn trust_file_is_exactly_what_the_device_agent_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = keys["active"]["key_id"].as_str().unwrap().to_owned();
    let r = s
        .req(Method::GET, &format!("/api/v1/keys/{id}/trust"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-disposition"],
        format!("attachment; filename=\"{id}.key.pub\"").as_str()
    );
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let body = r.bytes().await.unwrap();
    // Byte for byte the public file the server wrote beside its secret key, and readable by the
    // very function `device-agent --trust` calls.
    let on_disk = std::fs::read(dir.path().join("keys").join(format!("{id}.key.pub"))).unwrap();
    assert_eq!(body.as_ref(), on_disk.as_slice());
    let saved = dir.path().join("downloaded.key.pub");
    std::fs::write(&saved, &body).unwrap();
    let key = npub_core::keys::read_public_key(&saved).unwrap();
    assert_eq!(hex(&key), keys["active"]["public_key"].as_str().unwrap());
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_trust_file_request_for_an_unknown_or_malformed_key_id() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for id in ["0123456789abcdef", "not-a-key", "ABCDEF0123456789AB"] {
        let r = s
            .req(Method::GET, &format!("/api/v1/keys/{id}/trust"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{id}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "not_found", "{id}");
    }
    let anonymous = s
        .http
        .get(format!("{}/api/v1/keys/0123456789abcdef/trust", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    s.stop().await;
}
