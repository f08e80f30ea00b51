//! The signing key: generated on first start (0600), listed, importable with a keyring update.
use npub_core::keys::KeyPair;
use npub_core::manifest::{Keyring, KeyringChange, KeyringUpdate, sign_keyring_update};
use reqwest::Method;
use serde_json::Value;

use crate::common::TestServer;
use crate::common::postgres::skip_unless_sqlite;

/// Why the key-file checks are skipped on PostgreSQL.
const FILE_STORE: &str = "the key files exist with the file store only; on PostgreSQL the \
                          secrets are sealed rows of key_secrets (keys/secrets.rs tests them)";

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
    assert!(s.banner.contains(id), "{}", s.banner);
    if skip_unless_sqlite(FILE_STORE) {
        return;
    }
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
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
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
    if !skip_unless_sqlite(FILE_STORE) {
        let on_disk = std::fs::read(dir.path().join("keys").join(format!("{id}.key.pub"))).unwrap();
        assert_eq!(body.as_ref(), on_disk.as_slice());
    }
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

async fn keys(s: &TestServer) -> Value {
    s.req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn rotate(s: &TestServer, revoke_previous: bool) -> Value {
    let r = s
        .req(Method::POST, "/api/v1/keys/rotate")
        .json(&serde_json::json!({"revoke_previous": revoke_previous}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn public(v: &Value) -> [u8; 32] {
    unhex(v.as_str().unwrap()).try_into().unwrap()
}

async fn audit_actions(s: &TestServer) -> Vec<String> {
    let audit: Vec<Value> = s
        .req(Method::GET, "/api/v1/audit")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .clone();
    audit
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn rotate_activates_a_new_key_that_a_root_signed_record_adds() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let before = keys(&s).await;
    let root = public(&before["root"]["public_key"]);
    assert_eq!(
        before["root"]["key_id"],
        npub_core::manifest::KeyId::of(&root).to_string()
    );
    let first = public(&before["active"]["public_key"]);

    let answer = rotate(&s, false).await;
    let new_id = answer["key"]["key_id"].as_str().unwrap().to_owned();
    assert_eq!(answer["keyring_update"]["sequence"], 1);
    assert_eq!(answer["keyring_update"]["action"], "add");
    assert_eq!(answer["keyring_update"]["adds"], new_id.as_str());
    assert_eq!(s.state.keys.active().key_id().to_string(), new_id);

    // A device built with the root key and trusting the first key applies the record.
    let mut ring = Keyring::<4>::new();
    ring.add(&first).unwrap();
    let record = unhex(answer["keyring_update"]["record"].as_str().unwrap());
    ring.apply_update(&record, &[root]).unwrap();
    assert_eq!(ring.update_sequence(), 1);
    let new_public = public(&answer["key"]["public_key"]);
    assert!(
        !ring
            .get(npub_core::manifest::KeyId::of(&new_public))
            .unwrap()
            .is_revoked()
    );

    // The second rotation revokes the key it replaces, in the same record.
    let answer = rotate(&s, true).await;
    assert_eq!(answer["keyring_update"]["sequence"], 2);
    assert_eq!(answer["keyring_update"]["action"], "replace");
    assert_eq!(answer["keyring_update"]["revokes"], new_id.as_str());
    let record = unhex(answer["keyring_update"]["record"].as_str().unwrap());
    ring.apply_update(&record, &[root]).unwrap();
    assert!(
        ring.get(npub_core::manifest::KeyId::of(&new_public))
            .unwrap()
            .is_revoked()
    );

    let after = keys(&s).await;
    assert_eq!(after["keys"].as_array().unwrap().len(), 3);
    let revoked = after["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_id"] == new_id.as_str())
        .unwrap();
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    assert_eq!(after["keyring_updates"].as_array().unwrap().len(), 2);
    assert_eq!(
        audit_actions(&s)
            .await
            .iter()
            .filter(|a| *a == "key.rotate")
            .count(),
        2
    );
    s.stop().await;

    // The root key and the rotated key survive a restart.
    let s = TestServer::start(dir.path()).await;
    let again = keys(&s).await;
    assert_eq!(again["root"], before["root"]);
    assert_eq!(again["active"]["key_id"], answer["key"]["key_id"]);
    s.stop().await;
}

#[tokio::test]
async fn revoke_stores_a_revoke_record_for_a_retired_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let before = keys(&s).await;
    let root = public(&before["root"]["public_key"]);
    let first = before["active"]["key_id"].as_str().unwrap().to_owned();
    let add = rotate(&s, false).await;

    let r = s
        .req(Method::POST, &format!("/api/v1/keys/{first}/revoke"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["keyring_update"]["sequence"], 2);
    assert_eq!(answer["keyring_update"]["action"], "revoke");
    assert_eq!(answer["keyring_update"]["revokes"], first.as_str());
    assert!(answer["key"]["revoked_at"].is_string());

    let mut ring = Keyring::<4>::new();
    ring.add(&public(&before["active"]["public_key"])).unwrap();
    for update in [&add, &answer] {
        let record = unhex(update["keyring_update"]["record"].as_str().unwrap());
        ring.apply_update(&record, &[root]).unwrap();
    }
    let first_id = npub_core::manifest::KeyId::from_hex(&first).unwrap();
    assert!(ring.get(first_id).unwrap().is_revoked());
    assert!(audit_actions(&s).await.iter().any(|a| a == "key.revoke"));

    // Twice is refused: the record would not apply on a device.
    let r = s
        .req(Method::POST, &format!("/api/v1/keys/{first}/revoke"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert!(r.text().await.unwrap().contains("already revoked"));
    s.stop().await;
}

#[tokio::test]
async fn rejects_revoking_the_active_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let active = keys(&s).await["active"]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .req(Method::POST, &format!("/api/v1/keys/{active}/revoke"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "conflict");
    let detail = body.to_string();
    assert!(detail.contains("active signing key"), "{detail}");
    assert!(detail.contains("rotate"), "{detail}");
    assert!(
        keys(&s).await["keyring_updates"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let r = s
        .req(Method::POST, "/api/v1/keys/0123456789abcdef/revoke")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn rejects_rotate_and_revoke_by_a_non_admin() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let first = keys(&s).await["active"]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    rotate(&s, false).await;
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
        .req_as(&op, Method::POST, "/api/v1/keys/rotate")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = s
        .req_as(&op, Method::POST, &format!("/api/v1/keys/{first}/revoke"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Operators may still read the root trust file.
    let r = s
        .req_as(&op, Method::GET, "/api/v1/keys/root/trust")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        keys(&s).await["keyring_updates"].as_array().unwrap().len(),
        1
    );
    s.stop().await;
}

#[tokio::test]
async fn root_trust_file_is_what_the_device_agent_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let root = keys(&s).await["root"].clone();
    let id = root["key_id"].as_str().unwrap();
    let r = s
        .req(Method::GET, "/api/v1/keys/root/trust")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-disposition"],
        format!("attachment; filename=\"root-{id}.key.pub\"").as_str()
    );
    let body = r.bytes().await.unwrap();
    if !skip_unless_sqlite(FILE_STORE) {
        let on_disk =
            std::fs::read(dir.path().join("keys").join(format!("root-{id}.key.pub"))).unwrap();
        assert_eq!(body.as_ref(), on_disk.as_slice());
    }
    let saved = dir.path().join("root.key.pub");
    std::fs::write(&saved, &body).unwrap();
    let key = npub_core::keys::read_public_key(&saved).unwrap();
    assert_eq!(hex(&key), root["public_key"].as_str().unwrap());
    s.stop().await;
}

#[tokio::test]
async fn device_keys_route_serves_records_after_n_with_etag_304_and_204() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let token = crate::support::provision(&s, "lab", &["dev-1"])
        .await
        .remove(0);
    let device = |method: Method, path: &str| s.req_as(&token, method, path);
    let keyring_sequence = |r: &reqwest::Response| {
        r.headers()["npub-keyring-sequence"]
            .to_str()
            .unwrap()
            .to_owned()
    };

    // Nothing yet: the poll says 0 and the route has nothing.
    let r = device(Method::GET, "/api/v1/device/manifest?seq=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(keyring_sequence(&r), "0");
    let r = device(Method::GET, "/api/v1/device/keys?after=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    let first = keys(&s).await["active"]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let one = rotate(&s, false).await;
    let two = rotate(&s, false).await;
    let r = s
        .req(Method::POST, &format!("/api/v1/keys/{first}/revoke"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let three: Value = r.json().await.unwrap();

    let r = device(Method::GET, "/api/v1/device/manifest?seq=0")
        .send()
        .await
        .unwrap();
    assert_eq!(keyring_sequence(&r), "3");

    // A device that missed all three gets them in one answer, in order.
    let r = device(Method::GET, "/api/v1/device/keys?after=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let body = r.bytes().await.unwrap();
    let expected: Vec<u8> = [&one, &two, &three]
        .iter()
        .flat_map(|u| unhex(u["keyring_update"]["record"].as_str().unwrap()))
        .collect();
    assert_eq!(body.as_ref(), expected.as_slice());

    let r = device(Method::GET, "/api/v1/device/keys?after=0")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.unwrap().is_empty());

    // After 2: only the third, under another tag.
    let r = device(Method::GET, "/api/v1/device/keys?after=2")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_ne!(r.headers()["etag"].to_str().unwrap(), etag);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &expected[2 * 144..]);

    let r = device(Method::GET, "/api/v1/device/keys?after=3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    // An operator token does not open the device route.
    let r = s
        .req(Method::GET, "/api/v1/device/keys?after=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = device(Method::GET, "/api/v1/device/keys?after=x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // A sequence no database row can hold (schemathesis found it answered 204).
    let r = device(Method::GET, "/api/v1/device/keys?after=9223372036854775808")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("after: at most 9223372036854775807"),
        "{body}"
    );
    s.stop().await;
}
