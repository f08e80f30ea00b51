//! Release signatures on the firmware under QEMU (issue 34): a server holding the online signing
//! key deploys a pack nobody released, and the firmware (given a release key with
//! `--release-trust` and the release root with `--release-root`, as `run-qemu.sh` passes them)
//! refuses it before a byte of the pack is fetched and reports why; once the release signature is
//! served beside the same deployment, the firmware installs it. The server is the test's own
//! (`fake_server/`), over the guest's user network like the real one.
//!
//! QEMU is required: without `qemu-system-arm` this test fails (CI installs it).
mod fake_server;
mod net;

use std::time::Duration;

use fake_server::{Fake, MODEL, Served, VERSION, bundle, key_file, keys, manifest, pack, release};
use net::qemu::{Run, assert_poll_stack_within_budget};

const RUN: Duration = Duration::from_secs(120);

#[test]
fn rejects_an_unreleased_pack_on_the_firmware_and_installs_it_once_released() {
    net::qemu::firmware();
    let keys = keys();
    let dir = tempfile::tempdir().unwrap();
    let pack = pack(1);
    let fake = Fake::start(Served {
        manifest: manifest(&keys, &pack, 1, MODEL, VERSION),
        sequence: 1,
        pack: pack.clone(),
        ..Served::default()
    });
    let trust = key_file(dir.path(), "online", &keys.online);
    let alice = key_file(dir.path(), "alice", &keys.release[0]);
    let release_root = key_file(dir.path(), "release-root", &keys.release_root);
    let flash = dir.path().join("dev-1.nor");
    let boot = || {
        let args = [
            "--server",
            &fake.url,
            "--token",
            "npub_dev_test",
            "--trust",
            trust.to_str().unwrap(),
            "--release-trust",
            alice.to_str().unwrap(),
            "--release-root",
            release_root.to_str().unwrap(),
            "--flash",
            flash.to_str().unwrap(),
            "--once",
        ];
        let (status, log) = Run::start(&args).finish(RUN);
        (status, log.join("\n"))
    };

    // Unreleased: refused with the check that failed, nothing fetched, the server told.
    let (status, log) = boot();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("release: the server has no release signatures for this pack"),
        "{log}"
    );
    assert!(
        log.contains(
            "refused: release: this model needs 1 release signature(s) and the deployment \
             carries none"
        ),
        "{log}"
    );
    assert_eq!(fake.pack_requests(), 0, "{log}");
    assert!(fake.failed_reason().contains("carries none"));

    // Released by Alice: the same deployment installs.
    fake.served.lock().unwrap().release =
        Some(bundle(&[release(&keys.release[0], &pack, MODEL, VERSION)]));
    let (status, log) = boot();
    println!("{log}");
    assert!(status.success(), "{log}");
    assert!(log.contains("installed: sequence 1 in slot A"), "{log}");
    assert!(fake.pack_requests() > 0);
    assert_poll_stack_within_budget(&log);
}
