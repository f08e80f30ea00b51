//! The trust state's MAC on target (issue 35, point 6): the firmware on QEMU with
//! `--demo-device-key` (a public demo key, marked as such) installs from a real npub server,
//! and its flash file boots again under the same key; a firmware without the key reads the
//! same records as torn (it finds no pack), and the host agent, which has no key, finds no
//! journal state in the file either.
//!
//! Fails, never skips, without `qemu-system-arm`.
mod net;

use std::time::Duration;

use net::LiveServer;
use net::qemu::{Run, args, state_of};

const RUN: Duration = Duration::from_secs(180);

#[test]
fn the_firmware_seals_its_records_under_the_demo_key_and_boots_only_under_it() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite"));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let url = format!("http://{}", fleet.addr);
    let plain = args(
        &url,
        &token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    let mut sealed = plain.clone();
    sealed.push("--demo-device-key");
    let s = fleet.deploy("kws", "1.0.0", "lab");

    let (status, log) = Run::start(&sealed).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(
        log.contains("trust: records sealed under the QEMU demo device key"),
        "{log}"
    );
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    // The host's agent, without the key, reads every record as torn.
    assert_eq!(state_of(&flash).last_sequence(), 0);

    // A reboot under the key binds the pack; without it, nothing is found.
    let (status, log) = Run::start(&sealed).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(log.contains(&format!("boot: sequence {s} bound")), "{log}");
    let (_, log) = Run::start(&plain).finish(RUN);
    let log = log.join("\n");
    assert!(log.contains("boot: no pack installed yet"), "{log}");
}
