//! The proof at upload (`server/src/catalog/proof.rs`): an upload with its source model (part
//! `source`) is proven against TFLite's reference kernels, the verdict is stored with the version
//! and shown, and a version whose proof diverged is deployed (or rolled back to) only with
//! `override_proof`, audited. The server takes uploads without an interpreter: the proof is then
//! "not run", with the reason.
//!
//! The bit-exact case runs the real pinned interpreter (tflite-runtime 2.14, numpy < 2) from
//! `$NPUB_REFERENCE_VENV` or `~/.cache/npub/tflite-2.14`, which `.ci/run` makes before the tests;
//! the other cases use stand-in interpreters (shell scripts) that answer wrongly or not at all.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::provision;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../npu-model/tests/models")
}

fn vela(model: &str) -> Vec<u8> {
    std::fs::read(models().join(format!("vela/5.2.0/u55_256/{model}_vela.tflite"))).unwrap()
}

fn source(model: &str) -> Vec<u8> {
    std::fs::read(models().join(format!("src/{model}.tflite"))).unwrap()
}

/// The pinned reference interpreter; the test fails (it does not skip) when it is missing.
fn reference_python() -> PathBuf {
    let venv = std::env::var_os("NPUB_REFERENCE_VENV").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/npub/tflite-2.14"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: make the venv as .ci/run does (python3.11 -m venv VENV && VENV/bin/pip \
         install 'tflite-runtime==2.14' 'numpy<2') and set NPUB_REFERENCE_VENV",
        python.display()
    );
    python
}

/// A stand-in interpreter running `body` (`$2` is the source model, `$3` the work directory).
fn stub(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Uploads `model`'s Vela output as `name`/`version`, with its source model when `with_source`.
async fn upload(
    s: &TestServer,
    name: &str,
    version: &str,
    model: &str,
    src: Option<Vec<u8>>,
) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new().part(
        "pack",
        reqwest::multipart::Part::bytes(vela(model)).file_name(format!("{model}_vela.tflite")),
    );
    if let Some(src) = src {
        form = form.part(
            "source",
            reqwest::multipart::Part::bytes(src).file_name(format!("{model}.tflite")),
        );
    }
    let r = s
        .req(
            Method::POST,
            &format!("/api/v1/models/{name}/versions/{version}"),
        )
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

async fn get_version(s: &TestServer, name: &str, version: &str) -> Value {
    let r = s
        .req(
            Method::GET,
            &format!("/api/v1/models/{name}/versions/{version}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn post(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let r = s.req(Method::POST, path).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn an_upload_with_its_source_model_is_proven_bit_exact_and_shown() {
    let python = reference_python();
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.reference_python = Some(python)).await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "{detail}");
    let proof = &detail["proof"];
    assert_eq!(proof["status"], "bit_exact", "{proof}");
    assert_eq!(detail["proof_status"], "bit_exact");
    let inputs = npub_server::catalog::proof::DEFAULT_INPUTS;
    assert!(
        proof["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("bit-exact on {inputs}/{inputs}")),
        "{proof}"
    );
    assert_eq!(proof["report"]["outputs"][0]["bit_exact"], inputs);
    // Stored with the version: the JSON view and the listing say the same.
    let stored = get_version(&s, "pool", "1.0.0").await;
    assert_eq!(stored["proof"], detail["proof"]);
    let list: Value = s
        .req(Method::GET, "/api/v1/models/pool/versions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"][0]["proof_status"], "bit_exact");
    // A bit-exact version deploys without an override.
    provision(&s, "lab", &["d1"]).await;
    let (status, body) = post(
        &s,
        "/api/v1/deployments",
        json!({"model": "pool", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.stop().await;
}

#[tokio::test]
async fn every_upload_the_functional_model_runs_gets_its_golden_vector() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("fc").await;
    let (status, detail) = upload(&s, "fc", "1.0.0", "fc", None).await;
    assert_eq!(status, 201, "{detail}");
    assert!(detail["proof"].is_null(), "no source, no proof: {detail}");
    let imported = npub_core::vela::import(&vela("fc")).unwrap();
    let io = imported.io.clone();
    let model = npu_model::Model::load(&imported.pack, &io).unwrap();
    let golden = npu_model::golden::compute(&model, &io).unwrap();
    let hex = crate::common::sha256_hex;
    assert_eq!(
        detail["golden"],
        json!({
            "input_bytes": golden.input.len(),
            "input_sha256": hex(&golden.input),
            "output_sha256": golden
                .output_sha256
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "selftest_sha256": hex(&golden.record().unwrap()),
        })
    );
    assert_eq!(
        get_version(&s, "fc", "1.0.0").await["golden"],
        detail["golden"]
    );
    // The self-test record a release signs, byte for byte what npu-model makes.
    let r = s
        .req(Method::GET, "/api/v1/models/fc/versions/1.0.0/selftest")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().to_vec(), golden.record().unwrap());
    let r = s
        .req(Method::GET, "/api/v1/models/nope/versions/1.0.0/selftest")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

/// A version with a golden vector is deployed with a version-2 manifest that signs its
/// self-test record's SHA-256, and its devices fetch that record beside the pack (the same
/// assignment rule as the pack); a release signature must name the same record.
#[tokio::test]
async fn a_version_with_a_golden_vector_is_deployed_with_its_selftest_signed() {
    use npub_core::manifest::{MANIFEST_V2_BYTES, ManifestView, sha256};
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("fc").await;
    let (status, detail) = upload(&s, "fc", "1.0.0", "fc", None).await;
    assert_eq!(status, 201, "{detail}");
    let tokens = provision(&s, "lab", &["d1", "d2"]).await;
    let (status, body) = post(
        &s,
        "/api/v1/deployments",
        json!({"model": "fc", "version": "1.0.0", "device": "d1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let record = s
        .req(Method::GET, "/api/v1/models/fc/versions/1.0.0/selftest")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let device = |token: &str, path: &str| {
        s.http
            .get(format!("{}{path}", s.url))
            .bearer_auth(token.to_owned())
            .send()
    };
    let r = device(&tokens[0], "/api/v1/device/manifest?seq=0")
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let manifest = r.bytes().await.unwrap().to_vec();
    assert_eq!(manifest.len(), MANIFEST_V2_BYTES, "a version-2 manifest");
    let view = ManifestView::new(&manifest).unwrap();
    assert_eq!(view.selftest_digest(), Some(sha256(&record)));
    let pack = hex(&view.pack_sha256());
    let path = format!("/api/v1/device/packs/{pack}/selftest");
    let r = device(&tokens[0], &path).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["etag"].to_str().unwrap(),
        format!("\"s-{}\"", hex(&sha256(&record)))
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), record);
    // Ranges as for the pack: a device fetches the record in pieces over its kept connection.
    let ranged = |range: String| {
        s.http
            .get(format!("{}{path}", s.url))
            .bearer_auth(tokens[0].to_owned())
            .header("range", range)
            .send()
    };
    let len = record.len();
    let r = ranged("bytes=10-19".into()).await.unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"].to_str().unwrap(),
        format!("bytes 10-19/{len}")
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), record[10..20]);
    let r = ranged("bytes=48-".into()).await.unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"].to_str().unwrap(),
        format!("bytes 48-{}/{len}", len - 1)
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), record[48..]);
    let r = ranged(format!("bytes={len}-")).await.unwrap();
    assert_eq!(r.status(), 416, "a range past the record's end");
    assert_eq!(
        r.headers()["content-range"].to_str().unwrap(),
        format!("bytes */{len}")
    );
    // Not assigned to d2, and no token at all: as the pack's download.
    assert_eq!(device(&tokens[1], &path).await.unwrap().status(), 404);
    let r = s.http.get(format!("{}{path}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    s.stop().await;
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_diverged_proof_needs_an_audited_override_to_deploy_or_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    // A reference that answers something else than the model computes.
    let wrong = stub(
        dir.path(),
        "wrong.sh",
        r#"for s in "$3"/set-*; do printf '\177\177\177\177' > "$s/output-0.bin"; done"#,
    );
    let s = TestServer::start_with(&dir.path().join("data"), |c| {
        c.reference_python = Some(wrong)
    })
    .await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "a diverged proof stores the version: {detail}");
    assert_eq!(detail["proof"]["status"], "diverged", "{detail}");
    let d = &detail["proof"]["report"]["outputs"][0]["divergence"];
    assert_eq!(d["input"], 0, "{d}");
    assert!(
        detail["proof"]["summary"]
            .as_str()
            .unwrap()
            .contains("DIVERGES")
    );
    let (status, _) = upload(&s, "pool", "2.0.0", "pool", None).await;
    assert_eq!(status, 201);
    provision(&s, "lab", &["d1"]).await;

    let deploy = json!({"model": "pool", "version": "1.0.0", "group": "lab"});
    let (status, body) = post(&s, "/api/v1/deployments", deploy.clone()).await;
    assert_eq!(status, 409, "{body}");
    let detail_text = body["detail"].as_str().unwrap_or_default().to_owned() + &body.to_string();
    assert!(detail_text.contains("override_proof"), "{body}");
    let (status, _) = post(&s, "/api/v1/deployments?dry_run=true", deploy.clone()).await;
    assert_eq!(status, 409, "a preview is refused alike");

    let mut with = deploy.clone();
    with["override_proof"] = json!(true);
    let (status, body) = post(&s, "/api/v1/deployments", with).await;
    assert_eq!(status, 201, "{body}");
    let audited: (String,) = sqlx::query_as(
        "SELECT detail FROM audit WHERE action = 'deployment.create' ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&s.state.db)
    .await
    .unwrap();
    let audited: Value = serde_json::from_str(&audited.0).unwrap();
    assert!(
        audited["override_proof"]
            .as_str()
            .unwrap()
            .contains("DIVERGES"),
        "the override and what it overrode are audited: {audited}"
    );

    // 2.0.0 (no proof) deploys as before; rolling back to 1.0.0 needs the override again.
    let (status, body) = post(
        &s,
        "/api/v1/deployments",
        json!({"model": "pool", "version": "2.0.0", "group": "lab"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let back = json!({"model": "pool", "version": "previous"});
    let (status, body) = post(&s, "/api/v1/groups/lab/rollback", back.clone()).await;
    assert_eq!(status, 409, "{body}");
    let mut with = back;
    with["override_proof"] = json!(true);
    let (status, body) = post(&s, "/api/v1/groups/lab/rollback", with).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["version"], "1.0.0");
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM audit WHERE action = 'deployment.rollback' \
         AND detail LIKE '%DIVERGES%'",
    )
    .fetch_one(&s.state.db)
    .await
    .unwrap();
    assert_eq!(n, 1);
    s.stop().await;
}

#[tokio::test]
async fn without_an_interpreter_the_upload_is_stored_and_the_proof_not_run() {
    let dir = tempfile::tempdir().unwrap();
    // No --reference-python at all.
    let s = TestServer::start(&dir.path().join("a")).await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "{detail}");
    assert_eq!(detail["proof"]["status"], "not_run");
    assert!(
        detail["proof"]["reason"]
            .as_str()
            .unwrap()
            .contains("--reference-python"),
        "{detail}"
    );
    assert!(
        !detail["golden"].is_null(),
        "the golden vector needs no interpreter"
    );
    s.stop().await;

    // An interpreter configured but missing at upload time.
    let missing = dir.path().join("no-venv/bin/python");
    let s = TestServer::start_with(&dir.path().join("b"), |c| {
        c.reference_python = Some(missing.clone())
    })
    .await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "{detail}");
    assert_eq!(detail["proof"]["status"], "not_run");
    assert_eq!(
        detail["proof"]["summary"],
        format!(
            "not run: the reference interpreter {} does not exist",
            missing.display()
        )
    );
    // Not proven is not diverged: it deploys as a version without a proof does.
    provision(&s, "lab", &["d1"]).await;
    let (status, body) = post(
        &s,
        "/api/v1/deployments",
        json!({"model": "pool", "version": "1.0.0", "group": "lab"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.stop().await;
}

#[tokio::test]
async fn a_reference_run_past_the_timeout_is_stopped_and_the_proof_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let hangs = stub(dir.path(), "hangs.sh", "exec sleep 600");
    let s = TestServer::start_with(&dir.path().join("data"), |c| {
        c.reference_python = Some(hangs);
        c.proof_timeout = 1;
    })
    .await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "{detail}");
    assert_eq!(detail["proof"]["status"], "not_run");
    assert!(
        detail["proof"]["reason"]
            .as_str()
            .unwrap()
            .contains("took longer than 1 s"),
        "{detail}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_reference_run_that_fails_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let fails = stub(
        dir.path(),
        "fails.sh",
        "echo \"ModuleNotFoundError: No module named 'tflite_runtime'\" >&2; exit 1",
    );
    let s = TestServer::start_with(&dir.path().join("data"), |c| {
        c.reference_python = Some(fails)
    })
    .await;
    s.create_model("pool").await;
    let (status, detail) = upload(&s, "pool", "1.0.0", "pool", Some(source("pool"))).await;
    assert_eq!(status, 201, "{detail}");
    assert_eq!(
        detail["proof"]["reason"],
        "the reference run of the source model exited with status 1: ModuleNotFoundError: No \
         module named 'tflite_runtime'"
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_source_part_that_is_not_a_tflite_model() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("pool").await;
    let (status, body) = upload(&s, "pool", "1.0.0", "pool", Some(b"not a model".to_vec())).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("multipart part `source`"),
        "{body}"
    );
    assert_eq!(s.rows("versions").await, 0);
    s.stop().await;
}
