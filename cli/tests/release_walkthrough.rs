//! `docs/examples/release-walkthrough.sh`, the new user's path of `docs/keys.md` from
//! `npub keygen` to a released, deployed and rolled-back model, run for real: this crate's `npub`
//! against an npub-server on 127.0.0.1:0 over a temporary data directory, with curl and jq as a
//! person would have them. A step that no longer answers as the docs say fails the test.
use std::path::PathBuf;
use std::process::Command;

use npub_server::{Config, Server};

const TOKEN: &str = "npub_op_walkthrough-admin-0123456789abcdef0123456789";

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_walkthrough_runs_against_a_real_server() {
    for tool in ["bash", "curl", "jq", "sha256sum"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(found, "the walkthrough needs `{tool}` on PATH");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path().join("data"), "127.0.0.1:0".parse().unwrap());
    config.admin_token = Some(TOKEN.into());
    let server = Server::start(config).await.expect("the server starts");
    let url = format!("http://{}", server.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let vela = repo().join("../shared/fixtures/vela/vela_out/u55_256/tflite");
    let out = tokio::process::Command::new("bash")
        .arg(repo().join("docs/examples/release-walkthrough.sh"))
        .arg(vela.join("conv1_vela.tflite"))
        .arg(vela.join("small_net_vela.tflite"))
        .env("NPUB", env!("CARGO_BIN_EXE_npub"))
        .env("NPUB_URL", &url)
        .env("NPUB_TOKEN", TOKEN)
        .env("TMPDIR", dir.path())
        .output()
        .await
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The steps the docs promise, in their order.
    let mut at = 0;
    for step in [
        "\"action\":\"release-add\"",
        "\"action\":\"release-policy\"",
        "\"meets_rule\":true",
        "\"release_required\":true",
        "is marked release required",
        "\"kind\":\"rollback\"",
        "released, deployed and rolled back",
    ] {
        let found = stdout[at..]
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} missing (in order) from:\n{stdout}\n{stderr}"));
        at += found + step.len();
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
