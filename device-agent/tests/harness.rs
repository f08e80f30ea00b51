//! The adversarial harness: random device lives on the hostile NOR emulation, with an oracle that
//! checks the bound pack, the replay floor, trial boots and the confirmed state after every step.
//!
//! A life starts from a blank device (flash and monotonic counter) and runs random steps:
//! installs of new manifests (two real packs, alternating), the server offering the newest one
//! again (a resume or a retry), replays of older ones, clean reboots, dropped connections,
//! self-tests that fail once, power cuts before or inside any erase or program of the flash or
//! the counter (torn words and sectors with random and weak bits), several in a row during the
//! recovery boots, and at most one read glitch per power cycle (a journal record, or the XIP view
//! of the active pack). The oracle:
//!
//! | never …                    | checked as                                                                 |
//! |----------------------------|----------------------------------------------------------------------------|
//! | brick                      | once a pack was confirmed, every completed boot binds one (and the NPU holds exactly its registers) |
//! | roll back a confirmed pack | a completed boot binds a sequence ≥ the newest one the device confirmed (a commit that returned `Ok`) |
//! | replay                     | a manifest below the floor is refused with `ManifestError::Replayed`, before any erase or program |
//! | lower the floor            | after every step `last_sequence` ≥ the highest sequence whose install the device acknowledged (its download began) |
//! | lose a commit              | the two above, for the records that consume a sequence and confirm a pack; and a pending pack's trial boots never come back |
//! | program a word twice       | the emulation's violation count stays 0 on both parts                      |
//!
//! `NPUB_HARNESS_SECS` bounds the run (default 2 s: the `cargo test` smoke), `NPUB_HARNESS_SEED`
//! picks the lives (default 1); the counts are printed at the end (`-- --nocapture`). A failure
//! prints the life's seed and step; the same seed replays it exactly.
mod common;

use std::time::{Duration, Instant};

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::{
    BoundSlot, Error, NpuRegisters, Report, Slot, Status, Transport, TransportError,
};
use npub_core::Error as Core;
use npub_core::ManifestError;
use npub_core::manifest::VerifiedManifest;

/// Sequences a life may issue: each needs a signed and verified manifest (the slow part).
const SEQUENCES: u64 = 24;
/// Steps in one life.
const STEPS: usize = 60;
/// Power cuts in a row a recovery may suffer before one boot is let through.
const MAX_CONSECUTIVE_CUTS: u32 = 13;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The server side of a life: serves both packs, can drop the connection, and notes whether the
/// agent got as far as asking for pack bytes (its install was acknowledged by then).
struct Net {
    packs: Vec<Vec<u8>>,
    drop_after: Option<usize>,
    asked: bool,
    dropped: bool,
}

impl Transport for Net {
    fn fetch_selftest(
        &mut self,
        _sha256: &[u8; 32],
        _offset: u32,
        _buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }

    fn fetch_manifest(&mut self, _: u64, _: &mut [u8]) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }

    fn fetch_pack(
        &mut self,
        sha: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        self.asked = true;
        let pack = self
            .packs
            .iter()
            .find(|p| sha256(p) == *sha)
            .ok_or(TransportError::Status(404))?;
        let start = (offset as usize).min(pack.len());
        let mut n = buf.len().min(pack.len() - start);
        if let Some(left) = self.drop_after {
            if left == 0 {
                self.dropped = true;
                return Err(TransportError::Unreachable);
            }
            n = n.min(left);
            self.drop_after = Some(left - n);
        }
        buf[..n].copy_from_slice(&pack[start..start + n]);
        Ok(n)
    }

    /// No release trust in the harness: never asked.
    fn fetch_release(
        &mut self,
        _: &[u8; 32],
        _: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }

    fn report(&mut self, _: &Report) -> Result<(), TransportError> {
        Ok(())
    }

    /// The harness's packs are signed by the factory key: no keyring updates.
    fn keyring_sequence(&self) -> Option<u64> {
        None
    }

    fn fetch_keyring_updates(&mut self, _: u64, _: &mut [u8]) -> Result<usize, TransportError> {
        Ok(0)
    }
}

/// An NPU whose self-test can be told to fail, and that counts what it is asked.
#[derive(Default)]
struct Npu {
    programmed: Option<NpuRegisters>,
    fail: bool,
    self_tests: u32,
}

impl device_agent::Npu for Npu {
    fn program(&mut self, regs: &NpuRegisters) {
        self.programmed = Some(*regs);
    }

    fn unbind(&mut self) {
        self.programmed = None;
    }

    fn self_test(
        &mut self,
        regs: &NpuRegisters,
        _golden: Option<&[u8]>,
    ) -> device_agent::SelfTestResult {
        self.self_tests += 1;
        if self.fail {
            return Err(77);
        }
        if self.programmed.as_ref() != Some(regs) {
            return Err(u32::MAX);
        }
        Ok(None)
    }
}

#[derive(Default, Debug)]
struct Counts {
    lives: u64,
    steps: u64,
    installs: u64,
    confirmed: u64,
    resumed_or_retried: u64,
    retried_after_local_failure: u64,
    replays_refused: u64,
    drops: u64,
    self_test_failures: u64,
    boots: u64,
    cuts: u64,
    torn_cuts: u64,
    counter_cuts: u64,
    /// Cuts that struck a recovery (a boot or a resumed install after a cut).
    recovery_cuts: u64,
    max_consecutive_cuts: u32,
    journal_glitches: u64,
    xip_glitches: u64,
    // The oracle's findings: all must stay 0.
    bricks: u64,
    rollbacks: u64,
    replays_accepted: u64,
    lowered_floors: u64,
    lost_trials: u64,
    program_twice: u64,
}

/// What the oracle knows a life has made durable.
#[derive(Default)]
struct Oracle {
    /// The highest sequence whose install the device acknowledged.
    floor: u64,
    /// The highest sequence the device confirmed with a commit that returned.
    confirmed: u64,
    /// A pending pack's sequence and the fewest trial boots it was seen with.
    trial: Option<(u64, u8)>,
}

struct Life<'a> {
    rng: Rng,
    layout: device_agent::Layout,
    manifests: &'a [VerifiedManifest],
    net: Net,
    oracle: Oracle,
    counts: &'a mut Counts,
    /// The next sequence to issue (1-based).
    next: u64,
    /// Sequences whose install failed locally (a retry of one of them is counted).
    failed_locally: Vec<u64>,
    /// The active slot and its pack's length, when the device last said (for an XIP glitch).
    last_active: Option<(Slot, u32)>,
    /// What the NPU holds while the device runs.
    bound: Option<NpuRegisters>,
    /// Whether the cut armed last tears an operation (rather than stopping before one).
    torn_armed: bool,
    /// Power cuts in a row so far (an install, its recovery boots and resumed installs).
    chain: u32,
    seed: u64,
    step: usize,
    /// What happened in this life, printed when the oracle objects.
    trace: Vec<String>,
}

impl Life<'_> {
    fn fail(&self, what: &str) -> ! {
        panic!(
            "life seed {} step {}: {what}\n{}\n(replay this life alone: NPUB_HARNESS_LIFE={})",
            self.seed,
            self.step,
            self.trace.join("\n"),
            self.seed
        );
    }

    fn log(&mut self, event: String) {
        self.trace.push(event);
    }

    /// Arms at most one read glitch for the power cycle about to start.
    fn maybe_glitch(&mut self, flash: &mut Flash, active: Option<(Slot, u32)>) {
        if !self.rng.chance(35) {
            return;
        }
        let journal_end = (self.layout.journal + 2 * self.layout.journal_bank_bytes) as usize;
        let records: Vec<u32> = (self.layout.journal as usize..journal_end)
            .step_by(128)
            .filter(|&at| flash.image()[at..at + 128].iter().any(|&b| b != 0xFF))
            .map(|at| at as u32)
            .collect();
        let bit = self.rng.below(8) as u8;
        match active {
            Some((slot, len)) if self.rng.chance(40) => {
                let at = self.layout.slot(slot) + self.rng.below(u64::from(len)) as u32;
                flash.glitch_mapped(at, bit);
                self.counts.xip_glitches += 1;
                self.log(format!("  glitch XIP {at:#x} bit {bit}"));
            }
            _ if !records.is_empty() => {
                let at = records[self.rng.below(records.len() as u64) as usize];
                let at = at + self.rng.below(128) as u32;
                flash.glitch_read(at, bit);
                self.counts.journal_glitches += 1;
                self.log(format!("  glitch journal read {at:#x} bit {bit}"));
            }
            _ => {}
        }
    }

    /// A random cut on one of the two parts (`true`: the counter's), `within` operations from
    /// the parts' current operation counts.
    fn pick_cut(&mut self, flash_ops: u64, counter_ops: u64, within: u64) -> (bool, Cut) {
        let on_counter = self.rng.chance(15);
        let op = if on_counter { counter_ops } else { flash_ops } + self.rng.below(within);
        self.torn_armed = self.rng.chance(60);
        let cut = if self.torn_armed {
            let span = if self.rng.chance(50) { 128 } else { 600 };
            Cut::During {
                op,
                after_bytes: self.rng.below(span) as usize,
            }
        } else {
            Cut::BeforeOp(op)
        };
        (on_counter, cut)
    }

    /// Whether the power failed during the last operation (on either part); counts it.
    fn note_cut(&mut self, agent: &Counted) -> bool {
        let (main, counter) = (
            agent.flash().power_was_cut(),
            agent.counter().flash().power_was_cut(),
        );
        if main || counter {
            self.counts.cuts += 1;
            if counter {
                self.counts.counter_cuts += 1;
            }
            if self.torn_armed {
                self.counts.torn_cuts += 1;
            }
        }
        main || counter
    }

    /// Powers on and boots, with cuts during the recovery until one boot completes; checks it.
    /// `consecutive`: power cuts in a row before this power-on (0 for a clean reboot).
    fn power_cycle(
        &mut self,
        mut flash: Flash,
        mut counter: CounterFlash,
        mut consecutive: u32,
    ) -> Counted {
        loop {
            flash.power_on();
            counter.power_on();
            let active = self.last_active;
            self.maybe_glitch(&mut flash, active);
            self.torn_armed = false;
            if consecutive < MAX_CONSECUTIVE_CUTS && self.rng.chance(30) {
                let picked = self.pick_cut(flash.ops(), counter.ops(), 4);
                self.log(format!("  arm {picked:?} (flash ops {})", flash.ops()));
                match picked {
                    (true, cut) => counter.cut(cut),
                    (false, cut) => flash.cut(cut),
                }
            }
            let unbooted = device_agent::Agent::power_on(
                flash,
                device_agent::NorCounter::new(counter, 0),
                self.layout,
                device(),
            );
            let mut npu = Npu {
                fail: self.rng.chance(8),
                ..Npu::default()
            };
            let mut mem = ArenaMem::new();
            let (mut agent, booted) = match unbooted {
                Ok(u) => u.boot(&mut npu, &mut mem.arena()),
                Err(e) => self.fail(&format!("power-on failed: {e}")),
            };
            self.counts.boots += 1;
            self.log(format!(
                "boot (self-test fails: {}): {:?} -> {:?}, cut {}",
                npu.fail,
                booted
                    .as_ref()
                    .map(|b| (b.bound.slot(), b.bound.pack().sequence)),
                brief(agent.state()),
                agent.flash().power_was_cut() || agent.counter().flash().power_was_cut()
            ));
            if npu.fail && npu.self_tests > 0 {
                self.counts.self_test_failures += 1;
            }
            if self.note_cut(&agent) {
                if consecutive > 0 {
                    self.counts.recovery_cuts += 1;
                }
                consecutive += 1;
                self.counts.max_consecutive_cuts =
                    self.counts.max_consecutive_cuts.max(consecutive);
                (flash, counter) = parts(agent);
                continue;
            }
            self.check_boot(&booted, &npu);
            self.bound = npu.programmed;
            self.check_state(&mut agent);
            self.chain = consecutive;
            return agent;
        }
    }

    fn check_boot(&mut self, booted: &Result<device_agent::Booted, Error>, npu: &Npu) {
        match booted {
            Ok(b) => {
                let seq = b.bound.pack().sequence;
                if seq < self.oracle.confirmed {
                    self.counts.rollbacks += 1;
                    self.fail(&format!(
                        "rolled back: bound {seq}, confirmed {}",
                        self.oracle.confirmed
                    ));
                }
                if npu.programmed.as_ref() != Some(b.bound.registers()) {
                    self.fail("the NPU does not hold the bound pack's registers");
                }
            }
            Err(e) => {
                if self.oracle.confirmed > 0 {
                    self.counts.bricks += 1;
                    self.fail(&format!(
                        "bricked: {e} after confirming {}",
                        self.oracle.confirmed
                    ));
                }
                if npu.programmed.is_some() {
                    self.fail("nothing bound, yet the NPU holds a pack");
                }
            }
        }
    }

    /// After every step that completed: the state against what the oracle knows, then what the
    /// state makes durable from now on.
    fn check_state(&mut self, agent: &mut Counted) {
        let s = *agent.state();
        if s.last_sequence() < self.oracle.floor {
            self.counts.lowered_floors += 1;
            self.fail(&format!(
                "floor lowered: {} < {}",
                s.last_sequence(),
                self.oracle.floor
            ));
        }
        if let Some((slot, left)) = s.on_trial() {
            let seq = s.slot(slot).pack().sequence;
            match self.oracle.trial {
                Some((t, fewest)) if t == seq && left > fewest => {
                    self.counts.lost_trials += 1;
                    self.fail(&format!(
                        "trial boots of {seq} came back: {left} > {fewest}"
                    ));
                }
                _ => self.oracle.trial = Some((seq, left)),
            }
        }
        let (f, c) = (
            agent.flash().violations(),
            agent.counter().flash().violations(),
        );
        if f + c > 0 {
            self.counts.program_twice += f + c;
            self.fail("a word was programmed twice");
        }
        self.oracle.floor = self.oracle.floor.max(s.last_sequence());
        if let Some(active) = s.active() {
            if s.slot(active).status() == Status::Confirmed {
                let seq = s.slot(active).pack().sequence;
                self.oracle.confirmed = self.oracle.confirmed.max(seq);
                self.last_active = Some((active, s.slot(active).pack().len));
            }
        }
    }

    /// One install attempt of `seq`; after a cut, the recovery: power cycles (which may be cut
    /// again), and the server offering `seq` again (which may be cut again), in a chain.
    fn install(&mut self, agent: Counted, seq: u64) -> Counted {
        let mut agent = agent;
        self.chain = 0;
        loop {
            let (next, cut) = self.install_once(agent, seq);
            agent = next;
            if !cut || self.chain >= MAX_CONSECUTIVE_CUTS || !self.rng.chance(75) {
                return agent;
            }
        }
    }

    /// Returns the agent (rebooted if the power failed) and whether it failed.
    fn install_once(&mut self, mut agent: Counted, seq: u64) -> (Counted, bool) {
        let m = &self.manifests[(seq - 1) as usize];
        let retry = self.failed_locally.contains(&seq);
        self.net.asked = false;
        self.net.dropped = false;
        self.net.drop_after = if self.rng.chance(15) {
            Some(self.rng.below(1200) as usize)
        } else {
            None
        };
        let mut npu = Npu {
            fail: self.rng.chance(12),
            programmed: self.bound,
            ..Npu::default()
        };
        let mut mem = ArenaMem::new();
        let s = *agent.state();
        if s.receiving().is_some_and(|(_, p, _)| p.sequence == seq)
            || s.retryable().is_some_and(|(_, p)| p.sequence == seq)
        {
            self.counts.resumed_or_retried += 1;
        }
        // A new install attempt of a sequence gives it fresh trial boots.
        if self.oracle.trial.is_some_and(|(t, _)| t == seq) {
            self.oracle.trial = None;
        }
        self.torn_armed = false;
        if self.rng.chance(if self.chain > 0 { 70 } else { 45 }) {
            let ops = (agent.flash().ops(), agent.counter().flash().ops());
            let picked = self.pick_cut(ops.0, ops.1, 40);
            self.log(format!("  arm {picked:?} (flash ops {})", ops.0));
            match picked {
                (true, cut) => agent.counter_mut().flash_mut().cut(cut),
                (false, cut) => agent.flash_mut().cut(cut),
            }
        }
        let result = agent.install(m, &mut self.net, &mut npu, &mut mem.arena());
        self.counts.installs += 1;
        self.log(format!(
            "install {seq} (drop {:?}, self-test fails: {}): {:?} -> {:?}, cut {}",
            self.net.drop_after,
            npu.fail,
            result.as_ref().map(|v| v.slot()),
            brief(agent.state()),
            agent.flash().power_was_cut() || agent.counter().flash().power_was_cut()
        ));
        if self.net.dropped {
            self.counts.drops += 1;
        }
        if npu.fail && npu.self_tests > 0 {
            self.counts.self_test_failures += 1;
        }
        if self.note_cut(&agent) {
            if self.chain > 0 {
                self.counts.recovery_cuts += 1;
            }
            let chain = self.chain + 1;
            self.counts.max_consecutive_cuts = self.counts.max_consecutive_cuts.max(chain);
            let (f, c) = parts(agent);
            return (self.power_cycle(f, c, chain), true);
        }
        match &result {
            Ok(v) => {
                self.check_installed(&agent, v, seq);
                self.counts.confirmed += 1;
                if retry {
                    self.counts.retried_after_local_failure += 1;
                }
            }
            Err(Error::Rejected(Core::Manifest(ManifestError::Replayed { .. })))
                if seq > self.oracle.floor =>
            {
                self.fail(&format!(
                    "{seq} refused as replayed, floor {}",
                    self.oracle.floor
                ));
            }
            Err(_) => {}
        }
        self.bound = npu.programmed;
        if agent
            .state()
            .retryable()
            .is_some_and(|(_, p)| p.sequence == seq)
        {
            self.failed_locally.push(seq);
        }
        if self.net.asked && agent.state().last_sequence() < seq {
            self.fail("the download began, yet the sequence is not consumed");
        }
        self.check_state(&mut agent);
        (agent, false)
    }

    fn check_installed(&mut self, agent: &Counted, v: &BoundSlot, seq: u64) {
        let s = agent.state();
        if v.pack().sequence != seq
            || s.active() != Some(v.slot())
            || s.slot(v.slot()).status() != Status::Confirmed
        {
            self.fail("an install returned Ok without confirming its pack");
        }
    }

    fn replay(&mut self, mut agent: Counted) -> Counted {
        if self.oracle.floor < 2 {
            return agent;
        }
        let seq = 1 + self.rng.below(self.oracle.floor - 1);
        let m = &self.manifests[(seq - 1) as usize];
        let ops = (agent.flash().ops(), agent.counter().flash().ops());
        let mut npu = Npu::default();
        let mut mem = ArenaMem::new();
        self.net.drop_after = None;
        let result = agent.install(m, &mut self.net, &mut npu, &mut mem.arena());
        match result {
            Err(Error::Rejected(Core::Manifest(ManifestError::Replayed { .. })))
                if ops == (agent.flash().ops(), agent.counter().flash().ops()) =>
            {
                self.counts.replays_refused += 1;
            }
            other => {
                self.counts.replays_accepted += 1;
                self.fail(&format!(
                    "replay of {seq} below the floor {}: {other:?}",
                    self.oracle.floor
                ));
            }
        }
        agent
    }

    fn run(&mut self) {
        let (f, c) = (blank_flash(&self.layout), blank_counter());
        let mut agent = self.power_cycle(f, c, 0);
        for step in 0..STEPS {
            self.step = step;
            self.counts.steps += 1;
            agent = match self.rng.below(100) {
                // A new deployment.
                0..=44 if self.next <= SEQUENCES => {
                    let seq = self.next;
                    // Servers skip sequences (other groups' deployments).
                    self.next += 1 + self.rng.below(2);
                    self.install(agent, seq)
                }
                // The server offers the newest manifest again.
                0..=69 if self.next > 1 => {
                    let newest = (self.next - 1).min(SEQUENCES);
                    self.install(agent, newest)
                }
                70..=79 => self.replay(agent),
                _ => {
                    let (f, c) = parts(agent);
                    self.power_cycle(f, c, 0)
                }
            };
        }
        self.counts.lives += 1;
    }
}

/// A state in one line: floor, retries, active, and each slot's status and sequence.
fn brief(s: &device_agent::State) -> String {
    let slot = |x: Slot| {
        let e = s.slot(x);
        format!("{:?}@{}", e.status(), e.pack().sequence)
    };
    format!(
        "floor {} retries {} active {:?} A {} B {}",
        s.last_sequence(),
        s.retries(),
        s.active(),
        slot(Slot::A),
        slot(Slot::B)
    )
}

#[test]
fn the_harness_finds_no_brick_rollback_replay_lowered_floor_or_lost_commit() {
    let secs: u64 = std::env::var("NPUB_HARNESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let seed: u64 = std::env::var("NPUB_HARNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let layout = layout(2048);
    let packs = vec![small().pack, case("two_io_u55_256").pack];
    let manifests: Vec<VerifiedManifest> = (1..=SEQUENCES)
        .map(|s| verified(&packs[(s % 2) as usize], s, layout.slot_bytes))
        .collect();
    let mut counts = Counts::default();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let only: Option<u64> = std::env::var("NPUB_HARNESS_LIFE")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut life_no = 0u64;
    while (Instant::now() < deadline && only.is_none()) || life_no == 0 {
        let life_seed = only.unwrap_or(seed.wrapping_mul(1_000_003).wrapping_add(life_no));
        let mut life = Life {
            rng: Rng(life_seed),
            layout,
            manifests: &manifests,
            net: Net {
                packs: packs.clone(),
                drop_after: None,
                asked: false,
                dropped: false,
            },
            oracle: Oracle::default(),
            counts: &mut counts,
            next: 1,
            failed_locally: Vec::new(),
            seed: life_seed,
            step: 0,
            last_active: None,
            bound: None,
            torn_armed: false,
            chain: 0,
            trace: Vec::new(),
        };
        life.run();
        life_no += 1;
    }
    println!("harness (seed {seed}, {secs} s): {counts:#?}");
    assert_eq!(
        (
            counts.bricks,
            counts.rollbacks,
            counts.replays_accepted,
            counts.lowered_floors,
            counts.lost_trials,
            counts.program_twice
        ),
        (0, 0, 0, 0, 0, 0)
    );
    assert!(counts.cuts > 0 && counts.confirmed > 0 && counts.replays_refused > 0);
}
