//! The board's watchdog under the agent, on QEMU against a real npub server: the an547's CMSDK
//! watchdog armed at 1 s (`--watchdog-ms 1000`: the board resets after 1 s without a feed),
//! the 1 MB-class pack through a proxy throttled to 256 KiB/s (about 4 s of download, four times
//! the watchdog). Fed through the transport's `Clock::feed` the install completes without a
//! reset; a firmware that stops feeding 256 KiB into the download (`--starve-once`) is reset by
//! the watchdog, boots again on the same flash, resumes the download from the journal and
//! finishes.
//!
//! Fails, never skips, without `qemu-system-arm`.
mod net;

use std::time::Duration;

use net::LiveServer;
use net::proxy::Proxy;
use net::qemu::{Run, active_bytes, args};

const RUN: Duration = Duration::from_secs(240);

/// How many times the firmware started (one `flash:` line per boot).
fn boots(log: &str) -> usize {
    log.lines().filter(|l| l.starts_with("flash: ")).count()
}

#[test]
fn a_watchdog_of_1_s_is_fed_through_a_slow_install_and_resets_a_starved_board_that_recovers() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let big = fleet.upload("kws", "2.0.0", net::big_pack(1 << 20));
    let fed_token = fleet.provision("dev-1", "lab");
    let starved_token = fleet.provision("dev-2", "lab");
    let trust = fleet.trust_file(dir.path());
    let proxy = Proxy::start(fleet.addr);
    proxy.set_rate(256 * 1024);
    let url = format!("http://{}", proxy.addr);
    let s = fleet.deploy("kws", "2.0.0", "lab");

    // Fed: no reset.
    let flash = dir.path().join("dev-1.nor");
    let mut argv = args(
        &url,
        &fed_token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    argv.extend(["--watchdog-ms", "1000"]);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(log.contains("watchdog: armed at 1000 ms"), "{log}");
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert_eq!(boots(&log), 1, "a watchdog reset: {log}");
    assert!(active_bytes(&flash, big.len()) == big);
    let took = log
        .lines()
        .find(|l| l.starts_with("download: 1049424 bytes in "))
        .expect("the download line")
        .to_owned();
    println!("fed: {took}");

    // Starved 256 KiB into the download: reset, then recovered.
    let flash = dir.path().join("dev-2.nor");
    let marker = dir.path().join("starved");
    let mut argv = args(
        &url,
        &starved_token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    argv.extend([
        "--watchdog-ms",
        "1000",
        "--starve-once",
        marker.to_str().unwrap(),
    ]);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(log.contains("watchdog: no longer fed"), "{log}");
    assert!(marker.exists());
    assert_eq!(boots(&log), 2, "one watchdog reset: {log}");
    assert!(log.contains("resume: sequence"), "{log}");
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert!(active_bytes(&flash, big.len()) == big);
    println!("starved: reset once, resumed and installed");
}
