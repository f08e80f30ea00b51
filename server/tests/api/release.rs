//! Release signatures on the server (issue 34, `docs/release.md`): bundles stored beside each
//! version and checked before they are, release keyring records uploaded into the one sequence,
//! the "release required" policy, and the device route that serves a deployment's bundle.
use npub_core::Accel;
use npub_core::keys::KeyPair;
use npub_core::manifest::{KeyId, KeyringChange};
use npub_core::release::{
    ModelId, ReleaseChange, ReleaseFields, ReleasePolicy, TrustChange, TrustUpdate, encode_bundle,
    sign_release, sign_trust_update,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TestServer, conv1_npub};
use crate::support::{deploy, fleet, provision};

/// A release key of its own for each test person.
fn alice() -> KeyPair {
    KeyPair::from_seed([0xa1; 32])
}
fn bob() -> KeyPair {
    KeyPair::from_seed([0xb0; 32])
}
/// The release root, offline: never the server's.
fn release_root() -> KeyPair {
    KeyPair::from_seed([0x52; 32])
}

fn unhex32(text: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// What a release of `model`/`version` as the server stores it must say.
struct Facts {
    sha: [u8; 32],
    accel: Accel,
    io: [u8; 32],
    /// The version's self-test record's SHA-256 (zeros: no golden vector).
    selftest: [u8; 32],
}

async fn facts(s: &TestServer, model: &str, version: &str) -> Facts {
    let v: Value = s
        .req(
            Method::GET,
            &format!("/api/v1/models/{model}/versions/{version}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    Facts {
        sha: unhex32(v["sha256"].as_str().unwrap()),
        accel: Accel::from_word(v["accel_word"].as_i64().unwrap() as u32),
        io: v["io_digest"].as_str().map(unhex32).unwrap_or([0; 32]),
        selftest: v["golden"]["selftest_sha256"]
            .as_str()
            .map(unhex32)
            .unwrap_or([0; 32]),
    }
}

/// One signature by `key` over `fields` made from `f`, as `tweak` changes them.
fn signature(
    key: &KeyPair,
    model: &str,
    version: &str,
    f: &Facts,
) -> [u8; npub_core::release::RELEASE_BYTES] {
    let fields = ReleaseFields {
        pack_sha256: f.sha,
        model_name: model,
        model_version: version,
        accel: f.accel,
        io_digest: f.io,
        selftest_digest: f.selftest,
        signed_at: 1_780_000_000,
    };
    sign_release(&fields, key).unwrap()
}

/// A one-signature bundle by `key` releasing `model`/`version` as the server has it.
async fn release(s: &TestServer, key: &KeyPair, model: &str, version: &str) -> Vec<u8> {
    let f = facts(s, model, version).await;
    encode_bundle(&[signature(key, model, version, &f)]).unwrap()
}

async fn attach(s: &TestServer, model: &str, version: &str, bundle: Vec<u8>) -> reqwest::Response {
    s.req(
        Method::POST,
        &format!("/api/v1/models/{model}/versions/{version}/release-signatures"),
    )
    .body(bundle)
    .send()
    .await
    .unwrap()
}

/// A release record signed by the release root.
fn record(sequence: u64, change: ReleaseChange) -> Vec<u8> {
    let update = TrustUpdate {
        sequence,
        change: TrustChange::Release(change),
        issued_at: 1_780_000_000,
    };
    sign_trust_update(&update, &release_root())
        .unwrap()
        .to_vec()
}

async fn upload_record(s: &TestServer, record: Vec<u8>) -> reqwest::Response {
    s.req(Method::POST, "/api/v1/keys/updates")
        .body(record)
        .send()
        .await
        .unwrap()
}

async fn expect(r: reqwest::Response, status: u16, words: &str) -> String {
    let got = r.status().as_u16();
    let text = r.text().await.unwrap();
    assert_eq!(got, status, "{text}");
    // The JSON error's detail, unescaped.
    let detail = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["detail"].as_str().map(str::to_owned))
        .unwrap_or(text);
    assert!(detail.contains(words), "{words:?} not in {detail}");
    detail
}

async fn one_version(s: &TestServer) {
    s.create_model("kws").await;
    let r = s.upload("kws", "1.0.0", conv1_npub()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

async fn audit_count(s: &TestServer, action: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM audit WHERE action = $1")
        .bind(action)
        .fetch_one(&s.state.db)
        .await
        .unwrap();
    n
}

#[tokio::test]
async fn stores_merges_and_shows_the_release_signatures_of_a_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let path = "/api/v1/models/kws/versions/1.0.0/release-signatures";
    expect(
        s.req(Method::GET, path).send().await.unwrap(),
        404,
        "release signatures",
    )
    .await;

    let by_alice = release(&s, &alice(), "kws", "1.0.0").await;
    let r = attach(&s, "kws", "1.0.0", by_alice.clone()).await;
    assert_eq!(r.status(), 201);
    let info: Value = r.json().await.unwrap();
    assert_eq!(
        info["signatures"][0]["key_id"],
        alice().key_id().to_string()
    );
    assert_eq!(info["signatures"][0]["known"], false);
    // A second signer's bundle is merged: both, Alice's first.
    let by_bob = release(&s, &bob(), "kws", "1.0.0").await;
    let r = attach(&s, "kws", "1.0.0", by_bob).await;
    assert_eq!(r.status(), 201);
    let both =
        npub_core::release::merge_bundles(&by_alice, &release(&s, &bob(), "kws", "1.0.0").await)
            .unwrap();
    let r = s.req(Method::GET, path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.bytes().await.unwrap().to_vec(), both);
    let info: Value = s
        .req(Method::GET, path)
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = info["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [alice().key_id().to_string(), bob().key_id().to_string()]
    );
    assert_eq!(info["threshold"], 1);
    assert_eq!(info["meets_rule"], true);
    assert!(
        info["signatures"][0]["signed_at"]
            .as_str()
            .unwrap()
            .starts_with("2026-")
    );
    // The listing says who released each version.
    let list: Value = s
        .req(Method::GET, "/api/v1/models/kws/versions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        list["items"][0]["release_key_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Replacing (after a key leaked): Bob's alone.
    let r = s
        .req(Method::POST, &format!("{path}?replace=true"))
        .body(release(&s, &bob(), "kws", "1.0.0").await)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let info: Value = r.json().await.unwrap();
    assert_eq!(info["signatures"].as_array().unwrap().len(), 1);
    assert_eq!(audit_count(&s, "version.release").await, 3);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_bundle_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    expect(
        attach(&s, "kws", "1.0.0", b"not a bundle at all".to_vec()).await,
        422,
        "not a valid bundle",
    )
    .await;
    let mut long = release(&s, &alice(), "kws", "1.0.0").await;
    long.resize(2000, 0);
    expect(
        attach(&s, "kws", "1.0.0", long).await,
        413,
        "release bundle",
    )
    .await;
    assert_eq!(audit_count(&s, "version.release").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_release_of_another_pack() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let mut f = facts(&s, "kws", "1.0.0").await;
    f.sha[0] ^= 1;
    let bundle = encode_bundle(&[signature(&alice(), "kws", "1.0.0", &f)]).unwrap();
    expect(
        attach(&s, "kws", "1.0.0", bundle).await,
        422,
        "another pack",
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_release_of_another_model_or_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let f = facts(&s, "kws", "1.0.0").await;
    let other_model = encode_bundle(&[signature(&alice(), "vww", "1.0.0", &f)]).unwrap();
    expect(
        attach(&s, "kws", "1.0.0", other_model).await,
        422,
        "model \"vww\", not \"kws\"",
    )
    .await;
    let other_version = encode_bundle(&[signature(&alice(), "kws", "2.0.0", &f)]).unwrap();
    expect(
        attach(&s, "kws", "1.0.0", other_version).await,
        422,
        "version \"2.0.0\"",
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_release_for_another_accelerator_or_io_digest() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let mut f = facts(&s, "kws", "1.0.0").await;
    f.accel = Accel::EthosU55_128;
    let bundle = encode_bundle(&[signature(&alice(), "kws", "1.0.0", &f)]).unwrap();
    expect(attach(&s, "kws", "1.0.0", bundle).await, 422, "accelerator").await;
    let mut f = facts(&s, "kws", "1.0.0").await;
    f.io = [7; 32];
    let bundle = encode_bundle(&[signature(&alice(), "kws", "1.0.0", &f)]).unwrap();
    expect(attach(&s, "kws", "1.0.0", bundle).await, 422, "IO digest").await;
    s.stop().await;
}

/// A version with a golden vector (the fleet's kws 2.0.0, which the functional model runs) is
/// released only with its self-test record's SHA-256: the digest its version-2 manifests sign
/// and devices hold the release to. A pack without one (kws 1.0.0, no IO bindings) only without.
#[tokio::test]
async fn rejects_a_release_that_names_another_selftest_than_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let mut f = facts(&s, "kws", "2.0.0").await;
    assert_ne!(f.selftest, [0; 32], "kws 2.0.0 has a golden vector");
    f.selftest = [0; 32];
    let bundle = encode_bundle(&[signature(&alice(), "kws", "2.0.0", &f)]).unwrap();
    expect(attach(&s, "kws", "2.0.0", bundle).await, 422, "--selftest").await;
    f.selftest = [9; 32];
    let bundle = encode_bundle(&[signature(&alice(), "kws", "2.0.0", &f)]).unwrap();
    let why = "self-test with SHA-256 0909";
    expect(attach(&s, "kws", "2.0.0", bundle).await, 422, why).await;
    let bundle = release(&s, &alice(), "kws", "2.0.0").await;
    assert_eq!(attach(&s, "kws", "2.0.0", bundle).await.status(), 201);

    let mut f = facts(&s, "kws", "1.0.0").await;
    assert_eq!(f.selftest, [0; 32], "kws 1.0.0 has none");
    f.selftest = [9; 32];
    let bundle = encode_bundle(&[signature(&alice(), "kws", "1.0.0", &f)]).unwrap();
    expect(
        attach(&s, "kws", "1.0.0", bundle).await,
        422,
        "without --selftest",
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_signature_that_does_not_verify_against_a_known_release_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let add = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
    );
    assert_eq!(upload_record(&s, add).await.status(), 201);
    let f = facts(&s, "kws", "1.0.0").await;
    let mut forged = signature(&alice(), "kws", "1.0.0", &f);
    forged[250] ^= 0x40;
    let bundle = encode_bundle(&[forged]).unwrap();
    expect(
        attach(&s, "kws", "1.0.0", bundle).await,
        422,
        &format!("signature 0 (key {})", alice().key_id()),
    )
    .await;
    // Alice's real one is verified and shown as known.
    let r = attach(
        &s,
        "kws",
        "1.0.0",
        release(&s, &alice(), "kws", "1.0.0").await,
    )
    .await;
    assert_eq!(r.status(), 201);
    let info: Value = r.json().await.unwrap();
    assert_eq!(info["signatures"][0]["known"], true);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_signature_by_a_revoked_release_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    for (seq, change) in [
        (
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
        ),
        (
            2,
            ReleaseChange::RevokeKey {
                key_id: alice().key_id(),
            },
        ),
    ] {
        assert_eq!(upload_record(&s, record(seq, change)).await.status(), 201);
    }
    expect(
        attach(
            &s,
            "kws",
            "1.0.0",
            release(&s, &alice(), "kws", "1.0.0").await,
        )
        .await,
        422,
        "revoked",
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn an_upload_takes_its_release_signatures_as_a_multipart_part() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    // The release of the very pack, made before the upload: its SHA-256 is the file's.
    let pack = conv1_npub();
    let sha: [u8; 32] = sha2_of(&pack);
    let f = Facts {
        sha,
        accel: Accel::EthosU55_256,
        io: [0; 32],
        selftest: [0; 32],
    };
    let bundle = encode_bundle(&[signature(&alice(), "kws", "1.0.0", &f)]).unwrap();
    let form = |bundle: Vec<u8>| {
        reqwest::multipart::Form::new()
            .part("pack", reqwest::multipart::Part::bytes(pack.clone()))
            .part("release", reqwest::multipart::Part::bytes(bundle))
    };
    let r = s
        .req(Method::POST, "/api/v1/models/kws/versions/1.0.0")
        .multipart(form(bundle.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["release_key_ids"][0], alice().key_id().to_string());
    let stored = s
        .req(
            Method::GET,
            "/api/v1/models/kws/versions/1.0.0/release-signatures",
        )
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(stored.to_vec(), bundle);
    // The same release for version 1.0.1: refused, and the version is not stored.
    let r = s
        .req(Method::POST, "/api/v1/models/kws/versions/1.0.1")
        .multipart(form(bundle))
        .send()
        .await
        .unwrap();
    expect(r, 422, "version \"1.0.0\" of \"kws\", not \"1.0.1\"").await;
    let r = s
        .req(Method::GET, "/api/v1/models/kws/versions/1.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

fn sha2_of(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

#[tokio::test]
async fn stores_release_records_in_the_keyring_sequence_and_serves_them_to_devices() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let add = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
    );
    let policy = ReleasePolicy::new(ModelId::of("kws"), 1, &[alice().key_id()]).unwrap();
    let set = record(2, ReleaseChange::SetPolicy(policy));
    let r = upload_record(&s, add.clone()).await;
    assert_eq!(r.status(), 201);
    let info: Value = r.json().await.unwrap();
    assert_eq!(info["action"], "release-add");
    assert_eq!(info["adds"], alice().key_id().to_string());
    assert_eq!(info["root_key_id"], release_root().key_id().to_string());
    assert_eq!(upload_record(&s, set.clone()).await.status(), 201);
    // A rotation after them takes the next sequence: one sequence for both kinds.
    let r = s
        .req(Method::POST, "/api/v1/keys/rotate")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let updates = keys["keyring_updates"].as_array().unwrap();
    let actions: Vec<&str> = updates
        .iter()
        .map(|u| u["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["release-add", "release-policy", "add"]);
    assert_eq!(updates[2]["sequence"], 3);
    assert!(
        updates[1]["policy"]
            .as_str()
            .unwrap()
            .starts_with(&format!("1 of {}", alice().key_id()))
    );
    // Devices get the records verbatim, in order, with the server's own.
    crate::support::fleet(&s).await;
    let token = &provision(&s, "lab", &["d1"]).await[0];
    let r = s
        .req_as(token, Method::GET, "/api/v1/device/keys?after=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.bytes().await.unwrap();
    assert_eq!(body.len(), 3 * 144);
    assert_eq!(&body[..144], &add[..]);
    assert_eq!(&body[144..288], &set[..]);
    assert_eq!(audit_count(&s, "key.release_record").await, 2);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_release_record_out_of_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let add = |seq| {
        record(
            seq,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
        )
    };
    expect(upload_record(&s, add(2)).await, 409, "the next one is 1").await;
    assert_eq!(upload_record(&s, add(1)).await.status(), 201);
    expect(upload_record(&s, add(1)).await, 409, "--seq 2").await;
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_record_that_is_not_a_release_record_devices_could_apply() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    // Not a record.
    expect(upload_record(&s, vec![0; 100]).await, 422, "keyring record").await;
    // A signing-key record (action 1): the server's own root makes those.
    let signing = TrustUpdate {
        sequence: 1,
        change: TrustChange::Keyring(KeyringChange::Add {
            public_key: bob().public_key(),
        }),
        issued_at: 1,
    };
    let signing = sign_trust_update(&signing, &release_root())
        .unwrap()
        .to_vec();
    expect(upload_record(&s, signing).await, 422, "actions 1 to 3").await;
    // A release record naming this server's root as its signer.
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let root = KeyId::from_hex(keys["root"]["key_id"].as_str().unwrap()).unwrap();
    let mut by_server_root = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
    );
    by_server_root[8..16].copy_from_slice(&root.0);
    expect(
        upload_record(&s, by_server_root).await,
        422,
        "this server's own root key",
    )
    .await;
    // A key revoked for good, added again.
    for (seq, change) in [
        (
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
        ),
        (
            2,
            ReleaseChange::RevokeKey {
                key_id: alice().key_id(),
            },
        ),
    ] {
        assert_eq!(upload_record(&s, record(seq, change)).await.status(), 201);
    }
    let again = record(
        3,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
    );
    expect(upload_record(&s, again).await, 422, "would refuse it").await;
    assert_eq!(audit_count(&s, "key.release_record").await, 2);
    s.stop().await;
}

async fn patch_policy(s: &TestServer, on: bool) -> Value {
    let r = s
        .req(Method::PATCH, "/api/v1/models/kws")
        .json(&json!({"release_required": on}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

async fn try_deploy(s: &TestServer, version: &str) -> reqwest::Response {
    s.req(Method::POST, "/api/v1/deployments")
        .json(&json!({"model": "kws", "version": version, "group": "lab"}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn rejects_deploying_an_unreleased_version_of_a_release_required_model() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["d1"]).await;
    let policy = patch_policy(&s, true).await;
    assert_eq!(policy["release_required"], true);
    assert_eq!(policy["unreleased_deployed"], json!([]));
    expect(try_deploy(&s, "1.0.0").await, 409, "release required").await;
    let r = s
        .req(Method::POST, "/api/v1/deployments?dry_run=true")
        .json(&json!({"model": "kws", "version": "1.0.0", "group": "lab"}))
        .send()
        .await
        .unwrap();
    expect(r, 409, "not released").await;
    assert_eq!(s.rows("deployments").await, 0);
    // Released: deployed.
    attach(
        &s,
        "kws",
        "1.0.0",
        release(&s, &alice(), "kws", "1.0.0").await,
    )
    .await;
    assert_eq!(try_deploy(&s, "1.0.0").await.status(), 201);
    // Stored unreleased is fine; the model shows the policy.
    let m: Value = s
        .req(Method::GET, "/api/v1/models/kws")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["release_required"], true);
    // With a policy of 2 of Alice and Bob stored, Alice's signature alone no longer meets it.
    for (seq, change) in [
        (
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
        ),
        (
            2,
            ReleaseChange::AddKey {
                public_key: bob().public_key(),
            },
        ),
        (
            3,
            ReleaseChange::SetPolicy(
                ReleasePolicy::new(ModelId::of("kws"), 2, &[alice().key_id(), bob().key_id()])
                    .unwrap(),
            ),
        ),
    ] {
        assert_eq!(upload_record(&s, record(seq, change)).await.status(), 201);
    }
    expect(try_deploy(&s, "1.0.0").await, 409, "needs 2").await;
    let info: Value = s
        .req(
            Method::GET,
            "/api/v1/models/kws/versions/1.0.0/release-signatures",
        )
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["threshold"], 2);
    assert_eq!(info["policy_keys"].as_array().unwrap().len(), 2);
    assert_eq!(info["meets_rule"], false);
    assert!(info["problem"].as_str().unwrap().contains("needs 2"));
    attach(
        &s,
        "kws",
        "1.0.0",
        release(&s, &bob(), "kws", "1.0.0").await,
    )
    .await;
    assert_eq!(try_deploy(&s, "1.0.0").await.status(), 201);
    assert_eq!(audit_count(&s, "model.release_policy").await, 1);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_rollback_to_an_unreleased_version_and_names_it_when_the_policy_is_turned_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    provision(&s, "lab", &["d1"]).await;
    // 1.0.0 deployed unreleased while the policy is off, then 2.0.0 released.
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    attach(
        &s,
        "kws",
        "2.0.0",
        release(&s, &alice(), "kws", "2.0.0").await,
    )
    .await;
    deploy(
        &s,
        json!({"model": "kws", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    let on = patch_policy(&s, true).await;
    assert_eq!(on["unreleased_deployed"], json!(["1.0.0"]));
    assert!(on["warning"].as_str().unwrap().contains("1.0.0"));
    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback")
        .json(&json!({"model": "kws", "version": "1.0.0"}))
        .send()
        .await
        .unwrap();
    expect(r, 409, "release required").await;
    // Released: the rollback goes through.
    attach(
        &s,
        "kws",
        "1.0.0",
        release(&s, &bob(), "kws", "1.0.0").await,
    )
    .await;
    let r = s
        .req(Method::POST, "/api/v1/groups/lab/rollback")
        .json(&json!({"model": "kws", "version": "1.0.0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // Off again: audited too; the same value twice is not a change.
    patch_policy(&s, false).await;
    patch_policy(&s, false).await;
    assert_eq!(audit_count(&s, "model.release_policy").await, 2);
    s.stop().await;
}

#[tokio::test]
async fn serves_a_deployments_release_signatures_to_its_devices_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let lab = provision(&s, "lab", &["d1"]).await.remove(0);
    let other = provision(&s, "other", &["d2"]).await.remove(0);
    let f1 = facts(&s, "kws", "1.0.0").await;
    let sha1 = crate::support::hex(&f1.sha);
    let path = format!("/api/v1/device/packs/{sha1}/release");
    deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    // Deployed unreleased: the contract's 404.
    let r = s.req_as(&lab, Method::GET, &path).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["error"].as_str(), body["detail"].as_str()),
        (
            Some("not_found"),
            Some("no release signatures for this pack")
        ),
        "the contract's words under the not_found code: {body}"
    );
    // Attached after the deployment: served at once (the snapshot follows).
    let bundle = release(&s, &alice(), "kws", "1.0.0").await;
    assert_eq!(
        attach(&s, "kws", "1.0.0", bundle.clone()).await.status(),
        201
    );
    let r = s.req_as(&lab, Method::GET, &path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(
        etag,
        format!("\"r-{}\"", crate::support::hex(&sha2_of(&bundle)))
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), bundle);
    let r = s
        .req_as(&lab, Method::GET, &path)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    // A device not assigned the pack: 404 like a download; no token: 401.
    let r = s.req_as(&other, Method::GET, &path).send().await.unwrap();
    expect(r, 404, "for this device").await;
    let r = s.http.get(format!("{}{path}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    // Another pack than the assigned one: 404.
    let f2 = facts(&s, "kws", "2.0.0").await;
    let r = s
        .req_as(
            &lab,
            Method::GET,
            &format!(
                "/api/v1/device/packs/{}/release",
                crate::support::hex(&f2.sha)
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_model_patch_that_is_not_a_release_policy() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    for body in [
        json!({}),
        json!({"release_required": "yes"}),
        json!({"release_required": true, "name": "x"}),
    ] {
        let r = s
            .req(Method::PATCH, "/api/v1/models/kws")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{body}: {}", r.text().await.unwrap());
    }
    let r = s
        .req(Method::PATCH, "/api/v1/models/nope")
        .json(&json!({"release_required": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(audit_count(&s, "model.release_policy").await, 0);
    s.stop().await;
}

#[tokio::test]
async fn rejects_release_signatures_for_a_version_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    one_version(&s).await;
    let bundle = release(&s, &alice(), "kws", "1.0.0").await;
    expect(
        attach(&s, "kws", "9.9.9", bundle.clone()).await,
        404,
        "version",
    )
    .await;
    expect(attach(&s, "vww", "1.0.0", bundle).await, 404, "model").await;
    // Without a token: 401, before the body is read.
    let r = s
        .http
        .post(format!(
            "{}/api/v1/models/kws/versions/1.0.0/release-signatures",
            s.url
        ))
        .body(vec![0u8; 16])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_release_record_from_an_operator_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let r = s
        .req(Method::POST, "/api/v1/tokens")
        .json(&json!({"name": "ci releaser"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let operator = r.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let add = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
    );
    let r = s
        .req_as(&operator, Method::POST, "/api/v1/keys/updates")
        .body(add)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(s.rows("keyring_updates").await, 0);
    // An operator may attach release signatures (a CI job that releases) and set the policy.
    one_version(&s).await;
    let bundle = release(&s, &alice(), "kws", "1.0.0").await;
    let r = s
        .req_as(
            &operator,
            Method::POST,
            "/api/v1/models/kws/versions/1.0.0/release-signatures",
        )
        .body(bundle)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    s.stop().await;
}
