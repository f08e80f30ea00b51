//! The firmware on QEMU's Cortex-M55 board (`mps3-an547`), over its LAN9118 and smoltcp, against
//! a real npub server on loopback (guest 10.0.2.2 = host 127.0.0.1), with its flash in a host
//! file: it installs what the operator deploys, reports, and the fleet view shows it bound; a
//! rollback by version brings the old pack back; a replayed older manifest is refused. Every
//! install's poll stays within the 8 KiB stack budget (the firmware paints its stack).
//!
//! QEMU is required: without `qemu-system-arm` this test fails (CI installs it), it never passes
//! by skipping.
mod net;

use std::time::Duration;

use net::LiveServer;
use net::proxy::Proxy;
use net::qemu::{Run, active_bytes, args, assert_poll_stack_within_budget, boot_of, state_of};

const RUN: Duration = Duration::from_secs(120);

#[test]
fn the_firmware_installs_reports_rolls_back_by_version_and_refuses_a_replay_over_tcp() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let v1 = fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite"));
    let v2 = fleet.upload("kws", "2.0.0", net::big_pack(1 << 20));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let (trust_s, flash_s) = (trust.to_str().unwrap(), flash.to_str().unwrap());
    let boot = |url: &str| {
        let run = Run::start(&args(url, &token, trust_s, flash_s));
        let (status, log) = run.finish(RUN);
        (status, log.join("\n"))
    };

    // Nothing deployed: up to date, nothing installed.
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(
        log.contains("boot: no pack installed yet") && log.contains("up to date: sequence 0"),
        "{log}"
    );

    // Version 1: installed over TCP, reported, bound in the fleet's view.
    let s1 = fleet.deploy("kws", "1.0.0", "lab");
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(log.contains("net: 10.0.2.15/24 via 10.0.2.2"), "{log}");
    assert!(
        log.contains(&format!("installed: sequence {s1} in slot A")),
        "{log}"
    );
    assert_poll_stack_within_budget(&log);
    assert!(
        log.contains("report: verified") && log.contains("report: bound"),
        "{log}"
    );
    assert!(
        active_bytes(&flash, v1.len()) == v1,
        "slot A holds 1.0.0 in the flash file"
    );
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], s1, "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");
    // 1.0.0 has a golden vector (a version-2 manifest) and this board no NPU: the log and the
    // `installed` report the server keeps say the self-test was skipped, not passed.
    assert!(
        log.contains("self-test skipped: no NPU on this board"),
        "{log}"
    );
    assert_eq!(
        installed_reason(&dev, s1).as_deref(),
        Some(device_agent::SELFTEST_SKIPPED),
        "{dev}"
    );

    // Version 2, the 1 MB-class pack: installed into slot B in 64 KiB range windows.
    let s2 = fleet.deploy("kws", "2.0.0", "lab");
    let (status, manifest2) = fleet.call(
        &token,
        "GET",
        "/api/v1/device/manifest?seq=0",
        net::Body::None,
    );
    assert_eq!(status, 200);
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(
        log.contains(&format!("boot: sequence {s1} bound from slot A")),
        "{log}"
    );
    assert!(
        log.contains(&format!("installed: sequence {s2} in slot B")),
        "{log}"
    );
    let figures = log
        .lines()
        .find(|l| l.starts_with("download: ") && l.contains("KiB/s"))
        .unwrap();
    println!("v2 ({} bytes): {figures}", v2.len());
    assert_poll_stack_within_budget(&log);
    let ranges = log.matches("download: from byte").count();
    assert_eq!(ranges, 1, "one download, from byte 0: {log}");
    assert!(active_bytes(&flash, v2.len()) == v2, "slot B holds 2.0.0");
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_version"], "2.0.0", "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");
    // 2.0.0 has no golden vector (a version-1 manifest): nothing to skip, nothing said.
    assert_eq!(installed_reason(&dev, s2), None, "{dev}");

    // Roll back by version: a newer sequence for 1.0.0, installed like any update.
    let s3 = fleet.rollback("kws", "1.0.0", "lab");
    assert!(s3 > s2);
    let (status, log) = boot(&fleet.url);
    assert!(status.success(), "{log}");
    assert!(
        log.contains(&format!("installed: sequence {s3} in slot A")),
        "{log}"
    );
    assert_poll_stack_within_budget(&log);
    assert!(
        active_bytes(&flash, v1.len()) == v1,
        "slot A holds 1.0.0 again"
    );
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_version"], "1.0.0", "{dev}");
    assert_eq!(dev["current_sequence"], s3, "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");

    // The 2.0.0 manifest, replayed by a man in the middle, is refused before a byte of its pack
    // is fetched; the rollback stays active.
    let proxy = Proxy::start(fleet.addr);
    proxy.replay(Some(manifest2));
    let url = format!("http://{}", proxy.addr);
    let before = state_of(&flash);
    let (status, log) = boot(&url);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("refused: manifest") && log.contains("replay"),
        "{log}"
    );
    assert!(!log.contains("download: from byte"), "{log}");
    assert!(net::proxy::Proxy::range_starts(&proxy.take_seen()).is_empty());
    assert_eq!(state_of(&flash), before);
    let booted = boot_of(&flash).unwrap();
    assert_eq!(booted.bound.pack().sequence, s3);

    // Honest again: up to date.
    proxy.replay(None);
    let (status, log) = boot(&url);
    assert!(status.success(), "{log}");
    assert!(log.contains(&format!("up to date: sequence {s3}")), "{log}");

    // A newer manifest, tampered with by the man in the middle: one signature byte, then one
    // signed byte. On the Cortex-M the verifier runs salty's assembly field arithmetic, which the
    // host's unit tests never execute: every install above proves it accepts what the server
    // signed; this proves it refuses what the server did not, before a byte of the pack is fetched.
    let s4 = fleet.deploy("kws", "2.0.0", "lab");
    let (status, manifest4) = fleet.call(
        &token,
        "GET",
        "/api/v1/device/manifest?seq=0",
        net::Body::None,
    );
    assert_eq!(status, 200);
    assert_eq!(manifest4.len(), 280, "a bare NPM1 manifest");
    for (what, at) in [("signature byte", 216 + 17), ("signed byte", 120)] {
        let mut forged = manifest4.clone();
        forged[at] ^= 0x04;
        proxy.replay(Some(forged));
        let before = state_of(&flash);
        let (status, log) = boot(&url);
        assert_eq!(status.code(), Some(1), "{what}: {log}");
        assert!(
            log.contains("refused: manifest") && log.contains("signature does not verify"),
            "{what} of sequence {s4} flipped: {log}"
        );
        assert!(!log.contains("download: from byte"), "{what}: {log}");
        assert_eq!(state_of(&flash), before, "{what}: nothing written");
        let booted = boot_of(&flash).unwrap();
        assert_eq!(
            booted.bound.pack().sequence,
            s3,
            "{what}: the rollback stays bound"
        );
    }
}

/// The reason of the `installed` report for `sequence` in the device's history (the API's
/// `GET /api/v1/devices/{id}`); panics when there is no such report.
fn installed_reason(dev: &serde_json::Value, sequence: u64) -> Option<String> {
    let events = dev["history"]["events"].as_array().expect("a history");
    let report = events
        .iter()
        .find(|e| e["sequence"] == sequence && e["state"] == "installed")
        .unwrap_or_else(|| panic!("no installed report for sequence {sequence}"));
    report["reason"].as_str().map(str::to_owned)
}
