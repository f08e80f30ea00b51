//! Release signatures on the version page (issue 34): nobody released it yet, an operator
//! attaches the bundle `npub release sign` wrote and sees who released it (key ids, k of the
//! rule), then turns the model's "release required" policy on.
use npub_core::keys::KeyPair;
use npub_core::release::{ReleaseFields, encode_bundle, sign_release};
use reqwest::Method;
use serde_json::Value;

use crate::common::{ADMIN, TestServer, conv1_npub};
use crate::harness::{Screen, run};

#[tokio::test]
async fn attaches_release_signatures_and_turns_the_release_policy_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("kws").await;
    let pack = conv1_npub();
    let r = s.upload("kws", "1.0.0", pack.clone()).await;
    assert_eq!(r.status(), 201);
    let alice = KeyPair::from_seed([0xa1; 32]);
    let fields = ReleaseFields {
        pack_sha256: {
            use sha2::Digest as _;
            sha2::Sha256::digest(&pack).into()
        },
        model_name: "kws",
        model_version: "1.0.0",
        accel: npub_core::Accel::EthosU55_256,
        io_digest: [0; 32],
        selftest_digest: [0; 32],
        signed_at: 1_780_000_000,
    };
    let bundle = encode_bundle(&[sign_release(&fields, &alice).unwrap()]).unwrap();
    let file = dir.path().join("kws-1.0.0.npub.release");
    std::fs::write(&file, &bundle).unwrap();
    // 1.0.1, the same pack released again, goes up through the upload form with its release.
    let pack_file = dir.path().join("kws-1.0.1.npub");
    std::fs::write(&pack_file, &pack).unwrap();
    let fields_101 = ReleaseFields {
        model_version: "1.0.1",
        ..fields
    };
    let release_101 = dir.path().join("kws-1.0.1.npub.release");
    std::fs::write(
        &release_101,
        encode_bundle(&[sign_release(&fields_101, &alice).unwrap()]).unwrap(),
    )
    .unwrap();
    let key_id = alice.key_id().to_string();

    run("release", &s.url, ADMIN, Screen::Desktop, |ui| {
        let key_id = key_id.clone();
        async move {
            ui.sign_in().await;
            ui.open("models/kws/versions/1.0.0").await;
            ui.wait_text(".release .unreleased", "Nobody has released this version")
                .await;
            ui.find("input[type=file][name=release]")
                .await
                .send_keys(file.to_str().unwrap())
                .await
                .unwrap();
            ui.click("form.attach-release button[type=submit]").await;
            let who = ui.wait_text(".release .release-keys", &key_id).await;
            assert!(who.contains("signed") && who.contains("2026"), "{who}");
            assert!(!who.contains("[object"), "{who}");
            ui.wait_text(".release", "the rule needs 1").await;
            ui.click("input[name=release_required]").await;
            ui.wait_text("#toast", "now requires released versions")
                .await;
            ui.screenshot("release").await;
            // The model page lists who released each version and says the policy.
            ui.open("models/kws").await;
            ui.wait_text(".versions tbody tr", &key_id).await;
            ui.wait_text(
                ".model-facts",
                "yes: versions without enough release signatures",
            )
            .await;
            ui.fill("input[name=version]", "1.0.1").await;
            ui.find("input[type=file][name=pack]")
                .await
                .send_keys(pack_file.to_str().unwrap())
                .await
                .unwrap();
            ui.find("input[type=file][name=release]")
                .await
                .send_keys(release_101.to_str().unwrap())
                .await
                .unwrap();
            ui.click("form.upload button[type=submit]").await;
            ui.wait_text(".upload-status .ok", "Stored kws 1.0.1").await;
        }
    })
    .await;
    let m: Value = s
        .req(Method::GET, "/api/v1/models/kws")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["release_required"], true);
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
    let v: Value = s
        .req(Method::GET, "/api/v1/models/kws/versions/1.0.1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["release_key_ids"][0], alice.key_id().to_string());
    s.stop().await;
}
