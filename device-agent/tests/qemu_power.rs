//! Real power cuts: the firmware under QEMU installs from a real npub server and QEMU is killed
//! (SIGKILL) at random moments — while it boots and polls, while the pack streams into flash,
//! while the slot is verified, while the journal commits the result — then started again on the
//! same flash file, over and over. After every kill the flash must boot the old pack or the new
//! one, never neither; each boot must fetch nothing that was already durable (its first range
//! request starts exactly at the journal's durable offset); and in the end the install finishes.
//! When an install completes between two kills, the operator rolls the group to the other version
//! and the cuts go on.
//!
//! `NPUB_QEMU_KILLS` sets the number of kills (default 30); `NPUB_QEMU_SEED` replays a run (the
//! seed is printed). Fails, never skips, without `qemu-system-arm`.
mod net;

use std::collections::HashMap;
use std::time::Duration;

use net::LiveServer;
use net::proxy::Proxy;
use net::qemu::{Run, active_bytes, args, boot_of, state_of};

const RUN: Duration = Duration::from_secs(120);
const PROGRESS: u32 = 16 * 1024;

/// xorshift64*, seeded by the caller.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Where one kill lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Boot, DHCP, the manifest poll, the first range request.
    Poll,
    /// While the pack streams into flash (programming, journal progress records).
    Download,
    /// After the last byte: the pass over the slot in flash, its descriptor.
    Verify,
    /// After `verified`: the pending and confirmed journal records, the bind.
    Commit,
}

#[test]
fn the_firmware_survives_power_cuts_binding_old_or_new_and_never_fetching_a_durable_byte_twice() {
    let kills: usize = std::env::var("NPUB_QEMU_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("NPUB_QEMU_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("power cuts: {kills}, NPUB_QEMU_SEED={seed}");
    let mut rng = Rng(seed);
    net::qemu::firmware();

    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let mut packs = HashMap::new();
    packs.insert(
        "1.0.0",
        fleet.upload("kws", "1.0.0", net::tflite("small_net_vela.tflite")),
    );
    packs.insert(
        "2.0.0",
        fleet.upload("kws", "2.0.0", net::big_pack(1 << 20)),
    );
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

    // 1.0.0, installed without a cut: the "old" pack of the first upgrade.
    let mut old = (fleet.deploy("kws", "1.0.0", "lab"), "1.0.0");
    let (status, log) = Run::start(&argv).finish(RUN);
    assert!(status.success(), "{}", log.join("\n"));
    let mut new = (fleet.deploy("kws", "2.0.0", "lab"), "2.0.0");
    proxy.take_seen();

    let mut by_phase: HashMap<Phase, usize> = HashMap::new();
    let (mut done, mut boots, mut completed) = (0, 0, 0);
    while done < kills {
        let len = packs[new.1].len() as u32;
        let durable = state_of(&flash)
            .receiving()
            .filter(|(_, p, _)| p.sequence == new.0)
            .map(|(_, _, w)| w);
        let phase = match rng.below(10) {
            0..=1 => Phase::Poll,
            2..=6 => Phase::Download,
            7..=8 => Phase::Verify,
            _ => Phase::Commit,
        };
        let reports_left = u64::from((len - durable.unwrap_or(0)).div_ceil(PROGRESS));
        let nth = 1 + rng.below(reports_left);
        let delay_us = match phase {
            Phase::Poll => rng.below(150_000),
            Phase::Download => rng.below(5_000),
            Phase::Verify => rng.below(80_000),
            Phase::Commit => rng.below(4_000),
        };
        let mut run = Run::start(&argv);
        boots += 1;
        let mut seen_reports = 0;
        let last = format!("report: downloading {len} bytes");
        let hit = run.until(RUN, |l| match phase {
            Phase::Poll => l.starts_with("poll: after sequence"),
            Phase::Download => {
                seen_reports += u64::from(l.starts_with("report: downloading"));
                seen_reports == nth
            }
            Phase::Verify => l == last,
            Phase::Commit => l.starts_with("report: verified"),
        });
        let log = if hit.is_some() {
            std::thread::sleep(Duration::from_micros(delay_us));
            done += 1;
            *by_phase.entry(phase).or_default() += 1;
            run.kill()
        } else {
            // It finished before the moment came: the install completed.
            let (status, log) = run.finish(RUN);
            assert!(status.success(), "{}", log.join("\n"));
            log
        };
        let log = log.join("\n");

        // Old or new, never neither.
        let booted = boot_of(&flash)
            .unwrap_or_else(|e| panic!("after boot {boots}: nothing boots: {e}\n{log}"));
        let bound = booted.bound.pack().sequence;
        assert!(
            bound == old.0 || bound == new.0,
            "after boot {boots}: bound sequence {bound}, neither {} nor {}\n{log}",
            old.0,
            new.0
        );

        // Nothing durable fetched again.
        let ranges = Proxy::range_starts(&proxy.take_seen());
        if let Some(&first) = ranges.first() {
            assert_eq!(
                first,
                u64::from(durable.unwrap_or(0)),
                "boot {boots}: the first range request after a cut at durable byte {durable:?}\n{log}"
            );
        }
        if durable == Some(len) {
            assert!(
                ranges.is_empty(),
                "boot {boots}: the whole pack was durable: {ranges:?}\n{log}"
            );
        }

        let state = state_of(&flash);
        if state
            .active()
            .is_some_and(|a| state.slot(a).pack().sequence == new.0)
        {
            // Installed (confirmed) between two cuts: check it, then roll to the other version.
            completed += 1;
            assert!(active_bytes(&flash, len as usize) == packs[new.1]);
            let other = if new.1 == "1.0.0" { "2.0.0" } else { "1.0.0" };
            old = new;
            new = (fleet.rollback("kws", other, "lab"), other);
            println!(
                "boot {boots}: {} installed; rolling the group to {other} (sequence {})",
                old.1, new.0
            );
        }
    }

    // Power stays on: the interrupted install finishes.
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    let state = state_of(&flash);
    assert_eq!(
        state.active().map(|a| state.slot(a).pack().sequence),
        Some(new.0),
        "{log}"
    );
    assert!(active_bytes(&flash, packs[new.1].len()) == packs[new.1]);
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_version"], new.1, "{dev}");
    assert_eq!(dev["current_sequence"], new.0, "{dev}");
    println!(
        "power cuts: {done} in {boots} boots ({} while polling, {} downloading, {} verifying, {} committing); \
         {completed} installs completed between cuts, then {} (sequence {}) finished",
        by_phase.get(&Phase::Poll).unwrap_or(&0),
        by_phase.get(&Phase::Download).unwrap_or(&0),
        by_phase.get(&Phase::Verify).unwrap_or(&0),
        by_phase.get(&Phase::Commit).unwrap_or(&0),
        new.1,
        new.0
    );
}
