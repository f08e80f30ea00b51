//! A power cut at every flash operation of an install, of an install whose pack is reverted, and
//! of a boot that reverts a pending pack — and a torn write at every byte boundary of every
//! journal program and erase. After each cut the device reboots and must bind a valid pack, the
//! old or the new, never neither; then the interrupted work runs to completion from where it
//! stopped and must end in the expected state.
//!
//! Each scenario first runs once without a cut to learn its flash operations; the cut points are
//! then: before each operation, inside each journal operation after every byte, and inside each
//! pack-data operation after its first byte, half-way and before its last byte.
mod common;

use common::*;
use device_agent::nor_emu::{Cut, OpKind};
use device_agent::{Agent, Error, Layout, RecordingNpu, Slot, Status};
use npub_core::manifest::VerifiedManifest;

#[derive(Clone, Copy)]
enum Action {
    /// Install the offered pack.
    Install,
    /// Boot (which may revert a pending pack).
    Boot,
}

struct Scenario {
    name: &'static str,
    layout: Layout,
    image: Vec<u8>,
    /// The pack to install (and its verified manifest).
    offer: Option<(Vec<u8>, VerifiedManifest)>,
    action: Action,
    /// `Some(code)`: the new pack's self-test fails, in the action and after every reboot.
    self_test: Option<u32>,
    /// What a reboot right after a cut may bind: the old pack's sequence, the new one's, or
    /// `None` for "nothing bootable" (allowed only before a first pack exists).
    allowed: Vec<Option<u64>>,
    /// What the device must bind once the interrupted work has been run again to the end.
    finally: u64,
}

impl Scenario {
    fn server(&self) -> Server {
        let mut s = Server::default();
        if let Some((pack, _)) = &self.offer {
            s.serve(pack);
        }
        s
    }

    fn npu(&self) -> RecordingNpu {
        RecordingNpu {
            fail_self_test: self.self_test,
            ..RecordingNpu::default()
        }
    }

    /// Runs the action on `flash` (with its cut armed); returns the flash afterwards.
    fn act(&self, flash: Flash) -> Flash {
        let mut agent = Agent::open(flash, self.layout, device()).unwrap();
        let mut npu = self.npu();
        let _ = match self.action {
            Action::Install => self.install(&mut agent, &mut npu),
            Action::Boot => boot(&mut agent, &mut npu).map(|_| ()),
        };
        agent.into_flash()
    }

    fn install(&self, agent: &mut Agent<Flash>, npu: &mut RecordingNpu) -> Result<(), Error> {
        let (_, m) = self.offer.as_ref().unwrap();
        install(agent, m, &mut self.server(), npu).map(|_| ())
    }

    /// What a reboot binds: the pack's sequence, or `None` for nothing bootable.
    fn reboot(&self, flash: Flash) -> (Option<u64>, Flash) {
        let mut agent = power_on(flash, self.layout);
        let seq = match boot(&mut agent, &mut self.npu()) {
            Ok(b) => Some(b.verified.pack().sequence),
            Err(Error::NoBootableSlot) => None,
            Err(e) => panic!("{}: boot failed with {e}", self.name),
        };
        (seq, agent.into_flash())
    }

    /// Cuts the power at every cut point; returns how many were exercised.
    fn run(&self) -> usize {
        let dry = self.act(Flash::from_image(self.image.clone()));
        assert!(!dry.power_was_cut());
        let journal_end = self.layout.journal + 2 * self.layout.journal_bank_bytes;
        let mut cuts = Vec::new();
        for (n, op) in dry.log().iter().enumerate() {
            let n = n as u64;
            cuts.push(Cut::BeforeOp(n));
            let inside: Vec<usize> = if op.offset < journal_end {
                (1..op.len).collect()
            } else {
                vec![1, op.len / 2, op.len - 1]
            };
            cuts.extend(
                inside
                    .into_iter()
                    .map(|after_bytes| Cut::During { op: n, after_bytes }),
            );
        }
        for &cut in &cuts {
            let mut flash = Flash::from_image(self.image.clone());
            flash.cut(cut);
            let flash = self.act(flash);
            assert!(
                flash.power_was_cut(),
                "{}: {cut:?} never happened",
                self.name
            );
            let (seq, flash) = self.reboot(flash);
            assert!(
                self.allowed.contains(&seq),
                "{}: after {cut:?} the device booted {seq:?}, allowed {:?}",
                self.name,
                self.allowed
            );
            // Finish the interrupted work, then power-cycle once more.
            let mut agent = power_on(flash, self.layout);
            if let Action::Install = self.action {
                let _ = self.install(&mut agent, &mut self.npu());
            }
            let (seq, _) = self.reboot(agent.into_flash());
            assert_eq!(
                seq,
                Some(self.finally),
                "{}: after {cut:?} and recovery",
                self.name
            );
        }
        let ops = dry.log().len();
        let journal_ops = dry.log().iter().filter(|o| o.offset < journal_end).count();
        let erases = dry.log().iter().filter(|o| o.kind == OpKind::Erase).count();
        println!(
            "{}: {} cut points over {ops} flash operations ({journal_ops} in the journal, {erases} erases)",
            self.name,
            cuts.len()
        );
        cuts.len()
    }
}

/// The flash after installing `packs` in order, each confirmed.
fn installed(layout: &Layout, packs: &[(&[u8], u64)]) -> Vec<u8> {
    let mut agent = power_on(blank_flash(layout), *layout);
    for &(pack, seq) in packs {
        let mut server = Server::default();
        server.serve(pack);
        let m = verified(pack, seq, layout.slot_bytes);
        install(&mut agent, &m, &mut server, &mut RecordingNpu::default()).unwrap();
    }
    agent.into_flash().image().to_vec()
}

#[test]
fn every_cut_during_installs_and_reverts_leaves_a_bootable_pack() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let blank = blank_flash(&layout).image().to_vec();
    let one = installed(&layout, &[(&a.pack, 1)]);
    let m1 = verified(&a.pack, 1, layout.slot_bytes);
    let m2 = verified(&b.pack, 2, layout.slot_bytes);

    // Slot B pending (its install was cut right after the pending record): the state a boot
    // finds when the new pack reset the device during its self-test.
    let pending = {
        let mut n = 1;
        loop {
            let mut f = Flash::from_image(one.clone());
            f.cut(Cut::BeforeOp(n));
            let mut agent = Agent::open(f, layout, device()).unwrap();
            let mut server = Server::default();
            server.serve(&b.pack);
            let _ = install(&mut agent, &m2, &mut server, &mut RecordingNpu::default());
            let agent = power_on(agent.into_flash(), layout);
            if matches!(agent.state().slot(Slot::B).status, Status::Pending { .. }) {
                break agent.into_flash().image().to_vec();
            }
            n += 1;
        }
    };

    let scenarios = [
        Scenario {
            name: "first install",
            layout,
            image: blank,
            offer: Some((a.pack.clone(), m1.clone())),
            action: Action::Install,
            self_test: None,
            allowed: vec![None, Some(1)],
            finally: 1,
        },
        Scenario {
            name: "upgrade",
            layout,
            image: one.clone(),
            offer: Some((b.pack.clone(), m2.clone())),
            action: Action::Install,
            self_test: None,
            allowed: vec![Some(1), Some(2)],
            finally: 2,
        },
        Scenario {
            name: "install reverted by its self-test",
            layout,
            image: one.clone(),
            offer: Some((b.pack.clone(), m2.clone())),
            action: Action::Install,
            self_test: Some(7),
            allowed: vec![Some(1)],
            finally: 1,
        },
        Scenario {
            name: "boot reverting a pending pack",
            layout,
            image: pending,
            offer: None,
            action: Action::Boot,
            self_test: Some(7),
            allowed: vec![Some(1)],
            finally: 1,
        },
    ];
    let total: usize = scenarios.iter().map(Scenario::run).sum();
    println!("power-cut points exercised: {total}");
    assert!(
        total > 2000,
        "expected thousands of cut points, got {total}"
    );
}
