//! The firmware's `--boot-check` under QEMU (mps3-an547): the 1 MB-class pack installed from a
//! real server with the check on (its poll within the stack budget), then booted with the check
//! on and off, each boot's time printed (under `NPUB_QEMU_EXTRA="-icount shift=0"` a virtual ms
//! is a million instructions: the figure in docs/performance.md); a byte flipped in the slot's
//! stored manifest in the flash file is refused at the next boot with the check, and the
//! refusal printed, and goes unnoticed without it.
//!
//! QEMU is required: without `qemu-system-arm` this test fails (CI installs it), it never passes
//! by skipping.
mod net;

use std::time::Duration;

use device_agent::Slot;
use net::LiveServer;
use net::qemu::{Run, SLOT_BYTES, XIP_BASE, args, assert_poll_stack_within_budget};

const RUN: Duration = Duration::from_secs(300);

/// The `boot: N ms (boot check on|off)` line's N.
fn boot_ms(log: &str, check: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.starts_with("boot: ") && l.ends_with(&format!(" ms (boot check {check})")))
        .unwrap_or_else(|| panic!("no boot time in: {log}"));
    line["boot: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_firmware_boots_the_1_mb_pack_with_the_boot_check_and_refuses_a_forged_stored_manifest() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let pack = fleet.upload("kws", "1.0.0", net::big_pack(1 << 20));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let (trust_s, flash_s) = (trust.to_str().unwrap(), flash.to_str().unwrap());
    let boot = |extra: &[&str]| {
        let mut a = args(&fleet.url, &token, trust_s, flash_s);
        a.extend_from_slice(extra);
        let (status, log) = Run::start(&a).finish(RUN);
        let log = log.join("\n");
        assert!(status.success(), "{log}");
        log
    };

    let seq = fleet.deploy("kws", "1.0.0", "lab");
    let log = boot(&["--boot-check"]);
    assert!(
        log.contains(&format!("installed: sequence {seq} in slot A")),
        "{log}"
    );
    assert_poll_stack_within_budget(&log);

    let on = boot(&["--boot-check"]);
    assert!(
        on.contains(&format!("boot: sequence {seq} bound from slot A")) && !on.contains("skipped"),
        "{on}"
    );
    let off = boot(&[]);
    assert!(
        off.contains(&format!("boot: sequence {seq} bound from slot A")),
        "{off}"
    );
    println!(
        "{} byte pack: boot {} ms with the boot check, {} ms without",
        pack.len(),
        boot_ms(&on, "on"),
        boot_ms(&off, "off")
    );

    // A byte of the stored manifest's signature flipped in the flash file, its CRC made again:
    // the signature no longer verifies.
    let layout = net::layout(SLOT_BYTES, XIP_BASE);
    let at = (layout.slot(Slot::A) + SLOT_BYTES - net::ERASE as u32 + 512) as usize;
    let mut image = std::fs::read(&flash).unwrap();
    image[at + 8 + 250] ^= 0x40;
    let crc = crc32(&image[at..at + 508]);
    image[at + 508..at + 512].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&flash, &image).unwrap();
    let refused = boot(&["--boot-check"]);
    assert!(
        refused.contains(&format!(
            "boot: skipped sequence {seq} in slot A: boot check: slot A's stored manifest no \
             longer verifies"
        )),
        "{refused}"
    );
    assert!(
        !refused.contains(&format!("boot: sequence {seq} bound")),
        "{refused}"
    );
    let unnoticed = boot(&[]);
    assert!(
        unnoticed.contains(&format!("boot: sequence {seq} bound from slot A")),
        "{unnoticed}"
    );
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
