//! A power cut at every flash operation of an install, of an install whose pack is reverted, and
//! of a boot that reverts a pending pack — on the flash and on the monotonic counter's part — and
//! a torn write at every byte boundary of every journal program and erase, each leaving the cut
//! word or sector in a random state with weak bits. After each cut the device reboots and must
//! bind a valid pack, the old or the new, never neither; then the interrupted work runs to
//! completion from where it stopped and must end in the expected state, with no word programmed
//! twice.
//!
//! Each scenario first runs once without a cut to learn its operations; the cut points are then:
//! before each operation, three times inside every program word and every erase sector of each
//! journal or counter operation (the cut word or sector is left in a random state, seeded per
//! point), and
//! inside each pack-data operation after its first byte, half-way and before its last byte. The second
//! test cuts twice: once at every operation of an upgrade, then again at every operation of its
//! recovery (the boot and the resumed install), and recovers from that.
mod common;

use common::*;
use device_agent::nor_emu::{Cut, Op, OpKind};
use device_agent::{Error, Layout, Mapped, RecordingNpu, Slot, Status};
use npub_core::manifest::VerifiedManifest;

#[derive(Clone, Copy)]
enum Action {
    /// Boot, then install the offered pack.
    Install,
    /// Boot (which may revert a pending pack).
    Boot,
}

/// Both parts of a device: the flash and the counter's NOR.
#[derive(Clone)]
struct Board {
    flash: Flash,
    counter: CounterFlash,
}

/// Which part a cut strikes.
#[derive(Clone, Copy, Debug)]
enum Part {
    Flash,
    Counter,
}

struct Scenario {
    name: &'static str,
    layout: Layout,
    board: Board,
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
    /// The offered pack's self-test record (its manifest a version-2 one naming it): the server
    /// serves it, and the NPU answers its digest for the golden input.
    selftest: Option<Vec<u8>>,
}

impl Scenario {
    fn server(&self) -> Server {
        let mut s = Server::default();
        if let Some((pack, _)) = &self.offer {
            s.serve(pack);
            if let Some(record) = &self.selftest {
                s.selftests.insert(sha256(pack), record.clone());
            }
        }
        s
    }

    fn npu(&self) -> RecordingNpu {
        RecordingNpu {
            fail_self_test: self.self_test,
            outputs_sha256: self.selftest.as_deref().map(output_sha256),
            ..RecordingNpu::default()
        }
    }

    /// Powers on, boots and runs the action on `board`, with `cut` armed after the power-on.
    fn act(&self, board: Board, cut: Option<(Part, Cut)>) -> Board {
        let mut agent = start(board, cut, self.layout, &mut self.npu());
        if let Action::Install = self.action {
            let _ = self.install(&mut agent);
        }
        let (flash, counter) = parts(agent);
        Board { flash, counter }
    }

    fn install(&self, agent: &mut Counted) -> Result<(), Error> {
        let (_, m) = self.offer.as_ref().unwrap();
        install(agent, m, &mut self.server(), &mut self.npu()).map(|_| ())
    }

    /// What a reboot binds: the pack's sequence, or `None` for nothing bootable.
    fn reboot(&self, board: Board) -> (Option<u64>, Board) {
        let (agent, booted) =
            boot_counted(board.flash, board.counter, self.layout, &mut self.npu());
        let seq = match booted {
            Ok(b) => Some(b.bound.pack().sequence),
            Err(Error::NoBootableSlot) => None,
            Err(e) => panic!("{}: boot failed with {e}", self.name),
        };
        let (flash, counter) = parts(agent);
        (seq, Board { flash, counter })
    }

    /// The cut points of a run whose operations on each part are `flash` and `counter`, from
    /// the operation numbers `base`.
    fn cut_points(&self, flash: &[Op], counter: &[Op], base: (u64, u64)) -> Vec<(Part, Cut)> {
        let journal_end = self.layout.journal + 2 * self.layout.journal_bank_bytes;
        let mut cuts = Vec::new();
        for (part, ops, first) in [
            (Part::Flash, flash, base.0),
            (Part::Counter, counter, base.1),
        ] {
            for (n, op) in ops.iter().enumerate() {
                let n = first + n as u64;
                cuts.push((part, Cut::BeforeOp(n)));
                // A torn program leaves its cut word undefined, a torn erase its cut sector, at
                // random (seeded per cut point): what matters is which word or sector is cut.
                let unit = match op.kind {
                    OpKind::Program => WRITE,
                    OpKind::Erase => ERASE,
                };
                let inside: Vec<usize> = match part {
                    Part::Flash if op.offset >= journal_end => vec![1, op.len / 2, op.len - 1],
                    // Three cuts per word or sector, each with its own random outcome.
                    _ => (0..op.len)
                        .step_by(unit)
                        .flat_map(|at| [at, at + unit / 2, at + unit - 1])
                        .collect(),
                };
                cuts.extend(
                    inside
                        .into_iter()
                        .map(|after_bytes| (part, Cut::During { op: n, after_bytes })),
                );
            }
        }
        cuts
    }

    /// Cuts the power at every cut point; returns how many were exercised.
    fn run(&self) -> usize {
        let dry = self.act(self.board.clone(), None);
        assert!(!dry.flash.power_was_cut());
        let base = (self.board.flash.ops(), self.board.counter.ops());
        let cuts = self.cut_points(
            &dry.flash.log()[base.0 as usize..],
            &dry.counter.log()[base.1 as usize..],
            base,
        );
        for (i, &(part, cut)) in cuts.iter().enumerate() {
            let mut board = self.board.clone();
            board.flash.seed(i as u64);
            board.counter.seed(i as u64);
            let board = self.act(board, Some((part, cut)));
            assert!(
                board.flash.power_was_cut() || board.counter.power_was_cut(),
                "{}: {part:?} {cut:?} never happened",
                self.name
            );
            self.recover(board, &format!("{part:?} {cut:?}"));
        }
        let flash_ops = dry.flash.log().len() - base.0 as usize;
        let counter_ops = dry.counter.log().len() - base.1 as usize;
        let journal_end = self.layout.journal + 2 * self.layout.journal_bank_bytes;
        let journal_ops = dry.flash.log()[base.0 as usize..]
            .iter()
            .filter(|o| o.offset < journal_end)
            .count();
        let erases = dry.flash.log()[base.0 as usize..]
            .iter()
            .filter(|o| o.kind == OpKind::Erase)
            .count();
        println!(
            "{}: {} cut points over {flash_ops} flash operations ({journal_ops} in the journal, \
             {erases} erases) and {counter_ops} counter operations",
            self.name,
            cuts.len()
        );
        cuts.len()
    }

    /// After a cut: a reboot binds an allowed pack; the interrupted work runs again to its end,
    /// and then a reboot binds the final pack.
    fn recover(&self, board: Board, what: &str) {
        let (seq, board) = self.reboot(board);
        assert!(
            self.allowed.contains(&seq),
            "{}: after {what} the device booted {seq:?}, allowed {:?}",
            self.name,
            self.allowed
        );
        let board = self.finish(board, None);
        let (seq, board) = self.reboot(board);
        assert_eq!(
            seq,
            Some(self.finally),
            "{}: after {what} and recovery",
            self.name
        );
        assert_eq!(
            (board.flash.violations(), board.counter.violations()),
            (0, 0),
            "{}: after {what}: a word programmed twice",
            self.name
        );
    }

    /// The interrupted work, run again: boot, and the install again if there was one; with
    /// `cut` armed after the power-on.
    fn finish(&self, board: Board, cut: Option<(Part, Cut)>) -> Board {
        let mut agent = start(board, cut, self.layout, &mut self.npu());
        if let Action::Install = self.action {
            let _ = self.install(&mut agent);
        }
        let (flash, counter) = parts(agent);
        Board { flash, counter }
    }

    /// Cuts at every operation of the action, then again at every operation of its recovery;
    /// returns how many double cuts were exercised.
    fn run_twice(&self) -> usize {
        let dry = self.act(self.board.clone(), None);
        let base = (self.board.flash.ops(), self.board.counter.ops());
        let firsts = self.cut_points(
            &dry.flash.log()[base.0 as usize..],
            &dry.counter.log()[base.1 as usize..],
            base,
        );
        let mut total = 0;
        for (i, &(part, first)) in firsts.iter().enumerate() {
            // Cuts before operations, and a few torn ones: the second cut is exhaustive.
            if !matches!(first, Cut::BeforeOp(_)) && i % 7 != 0 {
                continue;
            }
            let mut board = self.board.clone();
            board.flash.seed(1000 + i as u64);
            let cut_once = self.act(board, Some((part, first)));
            // The recovery as it runs without a second cut.
            let base2 = (cut_once.flash.ops(), cut_once.counter.ops());
            let dry2 = self.finish(cut_once.clone(), None);
            let seconds = self.cut_points(
                &dry2.flash.log()[base2.0 as usize..],
                &dry2.counter.log()[base2.1 as usize..],
                base2,
            );
            for (j, &(part2, second)) in seconds.iter().enumerate() {
                if !matches!(second, Cut::BeforeOp(_)) && j % 11 != 0 {
                    continue;
                }
                let mut board = cut_once.clone();
                board.flash.seed(2000 + j as u64);
                let board = self.finish(board, Some((part2, second)));
                assert!(board.flash.power_was_cut() || board.counter.power_was_cut());
                self.recover(
                    board,
                    &format!("{part:?} {first:?}, then in the recovery {part2:?} {second:?}"),
                );
                total += 1;
            }
        }
        println!("{}: {total} double cuts", self.name);
        total
    }
}

/// Powers both parts on, arms `cut`, then powers the agent on and boots it.
fn start(
    mut board: Board,
    cut: Option<(Part, Cut)>,
    layout: Layout,
    npu: &mut RecordingNpu,
) -> Counted {
    board.flash.power_on();
    board.counter.power_on();
    match cut {
        Some((Part::Flash, cut)) => board.flash.cut(cut),
        Some((Part::Counter, cut)) => board.counter.cut(cut),
        None => {}
    }
    let unbooted = device_agent::Agent::power_on(
        board.flash,
        device_agent::NorCounter::new(board.counter, 0),
        layout,
        device(),
    )
    .unwrap();
    let mut mem = ArenaMem::new();
    unbooted.boot(npu, &mut mem.arena()).0
}

/// A device after installing `packs` in order, each confirmed.
fn installed(layout: &Layout, packs: &[(&[u8], u64)]) -> Board {
    let (mut agent, _) = boot_counted(
        blank_flash(layout),
        blank_counter(),
        *layout,
        &mut RecordingNpu::default(),
    );
    for &(pack, seq) in packs {
        let mut server = Server::default();
        server.serve(pack);
        let m = verified(pack, seq, layout.slot_bytes);
        install(&mut agent, &m, &mut server, &mut RecordingNpu::default()).unwrap();
    }
    let (flash, counter) = parts(agent);
    Board { flash, counter }
}

fn scenarios() -> Vec<Scenario> {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let blank = Board {
        flash: blank_flash(&layout),
        counter: blank_counter(),
    };
    let one = installed(&layout, &[(&a.pack, 1)]);
    let m1 = verified(&a.pack, 1, layout.slot_bytes);
    let m2 = verified(&b.pack, 2, layout.slot_bytes);

    // Slot B pending (its install was cut right after the pending record): the state a boot
    // finds when the new pack reset the device during its self-test.
    let pending = (one.flash.ops()..one.flash.ops() + 200)
        .find_map(|n| {
            let cut = Some((Part::Flash, Cut::BeforeOp(n)));
            let mut agent = start(one.clone(), cut, layout, &mut RecordingNpu::default());
            let mut server = Server::default();
            server.serve(&b.pack);
            let _ = install(&mut agent, &m2, &mut server, &mut RecordingNpu::default());
            let (flash, counter) = parts(agent);
            // Look without booting: a boot would try the pending pack.
            let unbooted = power_on_counted(flash, counter, layout);
            let pending = matches!(
                unbooted.state().slot(Slot::B).status(),
                Status::Pending { .. }
            );
            let (flash, counter) = unbooted.into_parts();
            pending.then_some(Board {
                flash,
                counter: counter.into_flash(),
            })
        })
        .unwrap();
    vec![
        Scenario {
            name: "first install",
            layout,
            board: blank,
            offer: Some((a.pack.clone(), m1.clone())),
            action: Action::Install,
            self_test: None,
            allowed: vec![None, Some(1)],
            finally: 1,
            selftest: None,
        },
        Scenario {
            name: "upgrade",
            layout,
            board: one.clone(),
            offer: Some((b.pack.clone(), m2.clone())),
            action: Action::Install,
            self_test: None,
            allowed: vec![Some(1), Some(2)],
            finally: 2,
            selftest: None,
        },
        Scenario {
            name: "install reverted by its self-test",
            layout,
            board: one.clone(),
            offer: Some((b.pack.clone(), m2.clone())),
            action: Action::Install,
            self_test: Some(7),
            allowed: vec![Some(1)],
            finally: 1,
            selftest: None,
        },
        Scenario {
            name: "boot reverting a pending pack",
            layout,
            board: pending,
            offer: None,
            action: Action::Boot,
            self_test: Some(7),
            allowed: vec![Some(1)],
            finally: 1,
            selftest: None,
        },
    ]
}

#[test]
fn every_cut_during_installs_and_reverts_leaves_a_bootable_pack() {
    let total: usize = scenarios().iter().map(Scenario::run).sum();
    println!("power-cut points exercised: {total}");
    assert!(total > 1000, "expected a thousand cut points, got {total}");
}

#[test]
fn a_second_cut_in_the_recovery_leaves_a_bootable_pack() {
    let scenarios = scenarios();
    let total: usize = scenarios[..2].iter().map(Scenario::run_twice).sum();
    println!("double cuts exercised: {total}");
    assert!(total > 300, "expected hundreds of double cuts, got {total}");
}

#[test]
fn every_cut_of_a_device_with_a_device_key_leaves_a_bootable_pack() {
    // Journal, descriptors and (here unused) keyring records carry a MAC instead of a CRC: a
    // torn record must fail its MAC as it failed its CRC, and nothing else may change.
    seal_records_with(Some([0x5A; 32]));
    let scenarios = scenarios();
    let total: usize = scenarios[..2].iter().map(Scenario::run).sum();
    println!("power-cut points exercised with a device key: {total}");
    assert!(total > 500, "expected hundreds of cut points, got {total}");
}

/// The record's `output_sha256` (bytes 8..40 of NPS1).
fn output_sha256(record: &[u8]) -> [u8; 32] {
    npub_core::release::SelfTest::parse(record)
        .unwrap()
        .output_sha256()
}

/// A version-2 manifest for `pack` naming `record`, as the device verifies it.
fn verified_v2(pack: &[u8], sequence: u64, slot_bytes: u32, record: &[u8]) -> VerifiedManifest {
    use npub_core::manifest::{ManifestFields, Policy, sign_manifest_v2};
    let fields = ManifestFields {
        model_version: "2.0.0",
        ..manifest_fields(pack, sequence, "two_io", [0; 32])
    };
    let m = sign_manifest_v2(&fields, &sha256(record), &signing_key()).unwrap();
    let policy = Policy {
        hw_class: HW_CLASS,
        accel: npub_core::Accel::EthosU55_256,
        slot_bytes,
        last_sequence: 0,
        now: None,
    };
    npub_core::manifest::verify(&m, &keyring(), &policy).unwrap()
}

/// Issue 37: the upgrade to a version-2 manifest's pack, its self-test record (1,500 bytes: three
/// pieces, three sectors) fetched after the pack and programmed after it in the slot. The power
/// is cut before every erase and program of the record and inside each at every program word
/// (torn, with weak bits): the descriptor is not written yet, so each reboot binds the old pack,
/// and the next poll fetches the record again (each sector erased again as it is entered, no word
/// programmed twice), verifies it against the manifest and installs the new pack.
#[test]
fn every_cut_while_the_self_test_record_is_programmed_leaves_the_old_pack_and_the_next_poll_installs()
 {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let input: Vec<u8> = (0..1452u32).map(|i| (i * 7 + 3) as u8).collect();
    let record = npub_core::release::encode_selftest(&input, &[0x5A; 32]).unwrap();
    assert_eq!(record.len(), 1500);
    let scenario = Scenario {
        name: "upgrade with a self-test record",
        layout,
        board: installed(&layout, &[(&a.pack, 1)]),
        offer: Some((
            b.pack.clone(),
            verified_v2(&b.pack, 2, layout.slot_bytes, &record),
        )),
        action: Action::Install,
        self_test: None,
        // Until the descriptor names the record, the new pack is not bootable.
        allowed: vec![Some(1)],
        finally: 2,
        selftest: Some(record.clone()),
    };
    // Where the record goes: slot B (slot A holds pack 1), from the sector after the pack.
    let start = layout.slot(Slot::B) + b.pack.len().next_multiple_of(ERASE) as u32;
    let end = start + record.len().next_multiple_of(ERASE) as u32;

    let dry = scenario.act(scenario.board.clone(), None);
    let image = &dry.flash.mapped()[start as usize..start as usize + record.len()];
    assert!(
        image == record.as_slice(),
        "the record is in flash after the pack"
    );
    let base = scenario.board.flash.ops();
    let ops: Vec<(u64, Op)> = dry.flash.log()[base as usize..]
        .iter()
        .enumerate()
        .map(|(n, op)| (base + n as u64, *op))
        .filter(|(_, op)| op.offset >= start && op.offset < end)
        .collect();
    let erases = ops.iter().filter(|(_, o)| o.kind == OpKind::Erase).count();
    assert_eq!(
        (ops.len(), erases),
        (6, 3),
        "three sectors erased and programmed: {ops:?}"
    );
    let mut cuts = Vec::new();
    for &(n, op) in &ops {
        cuts.push(Cut::BeforeOp(n));
        cuts.extend((0..op.len).step_by(WRITE).map(|at| Cut::During {
            op: n,
            after_bytes: at + WRITE / 2,
        }));
    }
    for (i, &cut) in cuts.iter().enumerate() {
        let mut board = scenario.board.clone();
        board.flash.seed(3000 + i as u64);
        let board = scenario.act(board, Some((Part::Flash, cut)));
        assert!(board.flash.power_was_cut(), "{cut:?} never happened");
        scenario.recover(board, &format!("{cut:?}"));
    }
    println!(
        "self-test record: {} cut points over its {} flash operations",
        cuts.len(),
        ops.len()
    );
    assert!(cuts.len() > 100, "{}", cuts.len());
}
