//! Key rotation on the firmware under QEMU, against a real npub server: deployed with key 1, the
//! operator rotates with `revoke_previous` and deploys with key 2; the firmware (given the root
//! key with `--root`) applies the root-signed record, keeps the keyring in its flash file and
//! installs. Rebooted on the same flash file with the same factory trust, key 1's manifest
//! replayed by a man in the middle is refused as revoked.
//!
//! QEMU is required: without `qemu-system-arm` this test fails (CI installs it).
mod net;

use std::time::Duration;

use net::proxy::Proxy;
use net::qemu::{Run, boot_of, state_of};
use net::{Body, LiveServer};
use serde_json::json;

const RUN: Duration = Duration::from_secs(120);

#[test]
fn rejects_a_revoked_key_after_the_firmware_followed_a_rotation_and_rebooted() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite"));
    fleet.upload("kws", "2.0.0", net::tflite("conv1_vela.tflite"));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let (status, root) = fleet.call(net::ADMIN, "GET", "/api/v1/keys/root/trust", Body::None);
    assert_eq!(status, 200);
    let root_path = dir.path().join("root.key.pub");
    std::fs::write(&root_path, root).unwrap();
    let flash = dir.path().join("dev-1.nor");
    let (trust_s, root_s, flash_s) = (
        trust.to_str().unwrap(),
        root_path.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    let boot = |url: &str| {
        let args = [
            "--server", url, "--token", &token, "--trust", trust_s, "--root", root_s, "--flash",
            flash_s, "--once",
        ];
        let (status, log) = Run::start(&args).finish(RUN);
        (status, log.join("\n"))
    };

    // Key 1.
    let s1 = fleet.deploy("kws", "1.0.0", "lab");
    let (status, manifest1) =
        fleet.call(&token, "GET", "/api/v1/device/manifest?seq=0", Body::None);
    assert_eq!(status, 200);
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(
        log.contains(&format!("installed: sequence {s1} in slot A")),
        "{log}"
    );

    // Rotate, revoking key 1 in the same record; key 2's deployment is installed.
    fleet.admin(
        "POST",
        "/api/v1/keys/rotate",
        Body::Json(json!({"revoke_previous": true})),
        201,
    );
    let s2 = fleet.deploy("kws", "2.0.0", "lab");
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(
        log.contains("keyring: 144 bytes of updates after sequence 0"),
        "{log}"
    );
    assert!(
        log.contains(&format!("installed: sequence {s2} in slot B")),
        "{log}"
    );
    // The poll that applied the keyring updates and then installed.
    println!("{log}");
    net::qemu::assert_poll_stack_within_budget(&log);

    // Reboot on the same flash file: key 1's manifest, replayed, is refused for its key before a
    // byte of its pack is fetched.
    let proxy = Proxy::start(fleet.addr);
    proxy.replay(Some(manifest1));
    let url = format!("http://{}", proxy.addr);
    let before = state_of(&flash);
    let (status, log) = boot(&url);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("refused: manifest") && log.contains("revoked"),
        "{log}"
    );
    assert!(net::proxy::Proxy::range_starts(&proxy.take_seen()).is_empty());
    assert_eq!(state_of(&flash), before);
    assert_eq!(boot_of(&flash).unwrap().bound.pack().sequence, s2);
}
