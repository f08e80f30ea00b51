//! The network failing under the firmware on QEMU, against a real npub server: the connection
//! reset in the middle of a window, an answer cut short (FIN), the server itself stopped in the
//! middle of the download and started again (same port, same data). Each time the firmware
//! abandons the attempt with the transport's error, backs off, polls again, resumes from the
//! journal's durable offset (its first range request starts exactly there) and finishes.
//!
//! Fails, never skips, without `qemu-system-arm`.
mod net;

use std::time::Duration;

use net::LiveServer;
use net::proxy::{Cut, Proxy};
use net::qemu::{Run, active_bytes, args, state_of};

const RUN: Duration = Duration::from_secs(180);

/// The resume asked from `at`, and nothing below it afterwards.
fn assert_resumed_from(ranges: &[u64], at: u64) {
    let i = ranges
        .iter()
        .position(|&r| r == at)
        .unwrap_or_else(|| panic!("no range request from byte {at}: {ranges:?}"));
    assert!(
        ranges[i..].iter().all(|&r| r >= at),
        "a byte below the durable {at} fetched again: {ranges:?}"
    );
}

/// The byte a `resume:` line names.
fn resumed_at(log: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| l.strip_prefix("resume: sequence "))
        .and_then(|r| r.split(" at byte ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
}

#[test]
fn the_firmware_resumes_after_a_reset_a_truncated_answer_and_a_server_restart() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = LiveServer::start(&dir.path().join("server"));
    let big = fleet.upload("kws", "2.0.0", net::big_pack(1 << 20));
    let small = fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite"));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let proxy = Proxy::start(fleet.addr);
    let url = format!("http://{}", proxy.addr);
    let argv = args(
        &url,
        &token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );

    // A reset 300 kB into the download. (QEMU's user network hands the host side's RST to the
    // guest as the connection's end, so the firmware sees the body stop short; the host tests
    // see the RST itself.)
    let s = fleet.deploy("kws", "2.0.0", "lab");
    proxy.take_seen();
    proxy.cut_after(300_000, Cut::Reset);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(
        log.contains("failed: transport")
            && (log.contains("ConnectionReset") || log.contains("the body ended after")),
        "{log}"
    );
    let at = resumed_at(&log).expect("a resume");
    assert!(at >= 256 * 1024, "{at}: {log}");
    assert_resumed_from(&Proxy::range_starts(&proxy.take_seen()), at);
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert!(active_bytes(&flash, big.len()) == big);
    println!("reset: resumed at byte {at}");

    // An answer cut short (FIN) 60 kB into the smaller pack.
    let s = fleet.rollback("kws", "1.0.0", "lab");
    proxy.cut_after(60_000, Cut::Fin);
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(
        log.contains("failed: transport") && log.contains("the body ended after"),
        "{log}"
    );
    let at = resumed_at(&log).expect("a resume");
    assert!(at >= 32 * 1024, "{at}: {log}");
    assert_resumed_from(&Proxy::range_starts(&proxy.take_seen()), at);
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert!(active_bytes(&flash, small.len()) == small);
    println!("truncated: resumed at byte {at}");

    // The server stops (as if it crashed) 400 kB into the download and comes back.
    let s = fleet.rollback("kws", "2.0.0", "lab");
    proxy.take_seen();
    proxy.set_rate(2 << 20);
    let mut run = Run::start(&argv);
    let mark = proxy.down_bytes() + 400_000;
    run.until(RUN, |l| l.starts_with("download: from byte"))
        .expect("the download starts");
    assert!(proxy.wait_down_bytes(mark, RUN), "400 kB went through");
    fleet.kill();
    proxy.set_rate(0);
    // The firmware notices and backs off (each retry is a line); then the server returns.
    let mut retries = 0;
    run.until(RUN, |l| {
        retries += usize::from(l.starts_with("retry: in"));
        retries == 2
    })
    .expect("the firmware retries while the server is down");
    fleet.start_again();
    let (status, log) = run.finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    let at = resumed_at(&log).expect("a resume");
    assert!(at > 0, "{log}");
    let ranges = Proxy::range_starts(&proxy.take_seen());
    assert_eq!(ranges.first(), Some(&0));
    assert_resumed_from(&ranges, at);
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert!(active_bytes(&flash, big.len()) == big);
    let state = state_of(&flash);
    assert_eq!(state.last_sequence(), s);
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_sequence"], s, "{dev}");
    assert_eq!(dev["last_state"], "bound", "{dev}");
    println!("server restart: resumed at byte {at}");
}
