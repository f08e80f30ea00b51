//! The device's state is exact: a commit that returned `Ok` is never lost, one misread never moves
//! the state backwards, the replay floor survives the journal, a state the agent could not have
//! written is refused, boot comes before poll, and a refused pack is unbound. One test (or more)
//! per hole of issue #12; each fails on the agent as it was before.
mod common;

use common::*;
use device_agent::nor_emu::{Cut, OpKind};
use device_agent::state::MAX_TRIAL_BOOTS;
use device_agent::{
    Agent, CounterError, Error, MAX_SEQUENCE_STEP, MonotonicCounter, Poll, RecordingNpu, Slot,
    Status,
};
use npub_core::Error as Core;
use npub_core::ManifestError;
use npub_core::manifest::VerifiedManifest;

/// Flash after installing `packs` in order on a blank device, each confirmed, with no counter.
fn installed(layout: &device_agent::Layout, packs: &[(&[u8], u64)]) -> Flash {
    let mut agent = power_on(blank_flash(layout), *layout);
    for &(pack, seq) in packs {
        let mut server = Server::default();
        server.serve(pack);
        let m = verified(pack, seq, layout.slot_bytes);
        install(&mut agent, &m, &mut server, &mut RecordingNpu::default()).unwrap();
    }
    agent.into_flash()
}

/// The same with a monotonic counter.
fn installed_counted(
    layout: &device_agent::Layout,
    packs: &[(&[u8], u64)],
) -> (Flash, CounterFlash) {
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
    parts(agent)
}

fn serving(pack: &[u8]) -> Server {
    let mut s = Server::default();
    s.serve(pack);
    s
}

/// Installs `m` on `flash` (no counter) with the power cut just before the install's first
/// erase or program inside a slot: the journal then holds "receiving" for it, committed.
fn begin_then_cut(flash: Flash, layout: &device_agent::Layout, m: &VerifiedManifest) -> Flash {
    let pack_server = |m: &VerifiedManifest| {
        let mut s = Server::default();
        s.serve(&packs_by_sha(m));
        s
    };
    let mut flash = flash;
    flash.power_on();
    let base = flash.ops();
    let mut dry = Agent::open(flash.clone(), *layout, device()).unwrap();
    let _ = install(
        &mut dry,
        m,
        &mut pack_server(m),
        &mut RecordingNpu::default(),
    );
    let slots = layout.slots[0].min(layout.slots[1]);
    let first = dry.flash().log()[base as usize..]
        .iter()
        .position(|op| op.offset >= slots)
        .unwrap() as u64;
    flash.cut(Cut::BeforeOp(base + first));
    let mut agent = Agent::open(flash, *layout, device()).unwrap();
    let _ = install(
        &mut agent,
        m,
        &mut pack_server(m),
        &mut RecordingNpu::default(),
    );
    assert!(agent.flash().power_was_cut());
    agent.into_flash()
}

/// The test packs, by the SHA-256 a manifest names.
fn packs_by_sha(m: &VerifiedManifest) -> Vec<u8> {
    [
        small(),
        case("two_io_u55_256"),
        case_with_scratch("conv1_u55_256", 16),
    ]
    .into_iter()
    .map(|c| c.pack)
    .find(|p| sha256(p) == m.pack_sha256())
    .unwrap()
}

/// Offset of the journal record programmed by the last journal program in `log[from..]`.
fn last_journal_record(layout: &device_agent::Layout, flash: &Flash, from: u64) -> u32 {
    let end = layout.journal + 2 * layout.journal_bank_bytes;
    flash.log()[from as usize..]
        .iter()
        .rev()
        .find(|op| op.kind == OpKind::Program && op.offset < end)
        .unwrap()
        .offset
}

// ---- hole 1: a journal sequence number is reused, so an acknowledged commit can vanish ----

#[test]
fn survives_a_record_misread_at_mount_that_reads_right_later() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let flash = installed(&layout, &[(&a.pack, 1)]);
    let before = flash.image().to_vec();
    // "Receiving B at 2" is committed (Ok), then the power fails.
    let mut flash = begin_then_cut(flash, &layout, &verified(&b.pack, 2, layout.slot_bytes));
    // From now on every record of that commit misreads (as a torn record would that reads valid
    // again later, or a stuck sense amplifier): mount cannot see it.
    let mut records: Vec<u32> = new_journal_bytes(&layout, &before, flash.image())
        .into_iter()
        .map(|at| at / 128 * 128)
        .collect();
    records.dedup();
    for &at in &records {
        flash.flip_on_read(at + 9, 0);
    }
    // The device installs something else (another build of A's model at 3; pack A itself would
    // be held by the active slot, nothing written): committed, Ok.
    let a2 = case_with_scratch("conv1_u55_256", 16);
    let flash = begin_then_cut(flash, &layout, &verified(&a2.pack, 3, layout.slot_bytes));
    // The misread ends (a fresh image has no stuck bits); the newest acknowledged commit stands.
    let agent = power_on(Flash::from_image(flash.image().to_vec()), layout);
    assert_eq!(agent.state().last_sequence(), 3);
    let (slot, pack, _) = agent
        .state()
        .receiving()
        .expect("receiving the other build at 3");
    assert_eq!((slot, pack.sequence), (Slot::B, 3));
}

// ---- hole 2: one read glitch rolls the whole state back one record ----

#[test]
fn survives_one_misread_of_the_record_that_confirmed_a_pack() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let flash = installed(&layout, &[(&a.pack, 1)]);
    let base = flash.ops();
    let mut agent = power_on(flash, layout);
    let m2 = verified(&b.pack, 2, layout.slot_bytes);
    install(
        &mut agent,
        &m2,
        &mut serving(&b.pack),
        &mut RecordingNpu::default(),
    )
    .unwrap();
    let mut flash = agent.into_flash();
    let newest = last_journal_record(&layout, &flash, base);
    flash.glitch_read(newest + 40, 5);
    let mut agent = power_on(flash, layout);
    assert_eq!(agent.state().active(), Some(Slot::B));
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Confirmed);
    let booted = boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(booted.bound.pack().sequence, 2);
    // And the next install goes to A, not over the confirmed pack.
    assert_eq!(agent.state().install_target(), Slot::A);
}

#[test]
fn survives_one_misread_of_the_record_that_consumed_a_sequence() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let flash = installed(&layout, &[(&a.pack, 1)]);
    let base = flash.ops();
    let mut flash = begin_then_cut(flash, &layout, &verified(&b.pack, 2, layout.slot_bytes));
    let newest = last_journal_record(&layout, &flash, base);
    flash.glitch_read(newest + 8, 1);
    let mut agent = power_on(flash, layout);
    assert_eq!(agent.state().last_sequence(), 2);
    // An older manifest than the consumed one stays refused.
    let mut server = Server::default();
    server.offer(&a.pack, 2);
    server.offer_stale = true;
    let m = verified(&a.pack, 2, layout.slot_bytes);
    assert!(matches!(
        install(&mut agent, &m, &mut server, &mut RecordingNpu::default()),
        Err(Error::Rejected(Core::Manifest(
            ManifestError::Replayed { .. }
        )))
    ));
}

#[test]
fn survives_one_misread_of_the_record_that_used_a_trial_boot() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let flash = installed(&layout, &[(&a.pack, 1)]);
    // B pending: its install stopped right after the pending record.
    let m2 = verified(&b.pack, 2, layout.slot_bytes);
    let mut n = flash.ops();
    let flash = loop {
        let mut f = flash.clone();
        f.cut(Cut::BeforeOp(n));
        let mut agent = Agent::open(f, layout, device()).unwrap();
        let _ = install(
            &mut agent,
            &m2,
            &mut serving(&b.pack),
            &mut RecordingNpu::default(),
        );
        let agent = power_on(agent.into_flash(), layout);
        if matches!(agent.state().slot(Slot::B).status(), Status::Pending { .. }) {
            break agent.into_flash();
        }
        n += 1;
    };
    // A boot records one trial, then the self-test resets the device: the first cut after
    // which the trial is durable.
    let base = flash.ops();
    let cut_after_trial = |n: u64| {
        let mut f = flash.clone();
        f.cut(Cut::BeforeOp(base + n));
        let mut agent = Agent::open(f, layout, device()).unwrap();
        let _ = boot(&mut agent, &mut RecordingNpu::default());
        agent.into_flash()
    };
    let n = (1..)
        .find(|&n| {
            let agent = power_on(cut_after_trial(n), layout);
            agent.state().on_trial() == Some((Slot::B, MAX_TRIAL_BOOTS - 1))
        })
        .unwrap();
    let before = flash.image().to_vec();
    let mut flash = cut_after_trial(n);
    assert!(flash.power_was_cut());
    // One glitch on each record the boot wrote.
    let mut records: Vec<u32> = new_journal_bytes(&layout, &before, flash.image())
        .into_iter()
        .map(|at| at / 128 * 128)
        .collect();
    records.dedup();
    assert!(!records.is_empty());
    for at in records {
        flash.glitch_read(at + 21, 0);
    }
    let agent = power_on(flash, layout);
    assert_eq!(
        agent.state().on_trial(),
        Some((Slot::B, MAX_TRIAL_BOOTS - 1)),
        "a trial boot handed out twice"
    );
}

// ---- hole 3: anti-replay lives only in the mutable journal ----

#[test]
fn boots_a_verifying_pack_and_keeps_the_floor_with_both_journal_banks_erased() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let (mut flash, counter) = installed_counted(&layout, &[(&a.pack, 1), (&b.pack, 2)]);
    let start = layout.journal;
    use embedded_storage::nor_flash::NorFlash;
    flash
        .erase(start, start + 2 * layout.journal_bank_bytes)
        .unwrap();
    let mut npu = RecordingNpu::default();
    let (mut agent, booted) = boot_counted(flash, counter, layout, &mut npu);
    let booted = booted.expect("two intact packs in flash");
    assert_eq!(
        (booted.bound.slot(), booted.bound.pack().sequence),
        (Slot::B, 2)
    );
    assert_eq!(npu.programmed.as_ref(), Some(booted.bound.registers()));
    assert_eq!(agent.state().last_sequence(), 2);
    assert_eq!(agent.state().slot(Slot::A).status(), Status::Confirmed);
    for seq in [1, 2] {
        let m = verified(&a.pack, seq, layout.slot_bytes);
        assert!(
            matches!(
                install(&mut agent, &m, &mut serving(&a.pack), &mut npu),
                Err(Error::Rejected(Core::Manifest(
                    ManifestError::Replayed { .. }
                )))
            ),
            "sequence {seq} accepted again"
        );
    }
    let m3 = verified(&a.pack, 3, layout.slot_bytes);
    let v = install(&mut agent, &m3, &mut serving(&a.pack), &mut npu).unwrap();
    assert_eq!(v.slot(), Slot::A, "over the older pack, not the active one");
    // The rebuilt journal holds from now on: a reboot binds the new pack.
    let (flash, counter) = parts(agent);
    let (_, booted) = boot_counted(flash, counter, layout, &mut RecordingNpu::default());
    assert_eq!(booted.unwrap().bound.pack().sequence, 3);
}

#[test]
fn rejects_a_replayed_manifest_after_the_journal_is_lost_before_the_pack_is() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let (flash, counter) = installed_counted(&layout, &[(&a.pack, 1)]);
    // B's install at 7 starts and consumes 7; the power fails; then the journal is erased.
    let (mut agent, _) = boot_counted(flash, counter, layout, &mut RecordingNpu::default());
    let mut server = serving(&b.pack);
    server.drop_after = Some(0);
    let m7 = verified(&b.pack, 7, layout.slot_bytes);
    assert!(install(&mut agent, &m7, &mut server, &mut RecordingNpu::default()).is_err());
    let (mut flash, counter) = parts(agent);
    use embedded_storage::nor_flash::NorFlash;
    flash
        .erase(
            layout.journal,
            layout.journal + 2 * layout.journal_bank_bytes,
        )
        .unwrap();
    let (mut agent, booted) = boot_counted(flash, counter, layout, &mut RecordingNpu::default());
    assert_eq!(booted.unwrap().bound.pack().sequence, 1);
    let m5 = verified(&b.pack, 5, layout.slot_bytes);
    assert_eq!(
        install(
            &mut agent,
            &m5,
            &mut serving(&b.pack),
            &mut RecordingNpu::default()
        ),
        Err(Error::Rejected(Core::Manifest(ManifestError::Replayed {
            sequence: 5,
            last: 7
        })))
    );
}

#[test]
fn boots_the_confirmed_pack_when_the_journal_cannot_be_written() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let journal_end = layout.journal + 2 * layout.journal_bank_bytes;

    // The active pack rotted; the other confirmed one verifies. Making it active fails.
    let mut flash = installed(&layout, &[(&a.pack, 1), (&b.pack, 2)]);
    flash.flip_stored_bit(layout.slot(Slot::B) + 200, 0);
    flash.protect(layout.journal, journal_end);
    let mut agent = power_on(flash, layout);
    let mut npu = RecordingNpu::default();
    let booted = boot(&mut agent, &mut npu).expect("A verifies");
    assert_eq!(booted.bound.slot(), Slot::A);
    assert_eq!(npu.programmed.as_ref(), Some(booted.bound.registers()));

    // A pending pack whose trial cannot be recorded is not tried; the confirmed one is bound.
    let flash = installed(&layout, &[(&a.pack, 1)]);
    let m2 = verified(&b.pack, 2, layout.slot_bytes);
    let mut n = flash.ops();
    let mut flash = loop {
        let mut f = flash.clone();
        f.cut(Cut::BeforeOp(n));
        let mut agent = Agent::open(f, layout, device()).unwrap();
        let _ = install(
            &mut agent,
            &m2,
            &mut serving(&b.pack),
            &mut RecordingNpu::default(),
        );
        let agent = power_on(agent.into_flash(), layout);
        if matches!(agent.state().slot(Slot::B).status(), Status::Pending { .. }) {
            break agent.into_flash();
        }
        n += 1;
    };
    flash.protect(layout.journal, journal_end);
    let mut agent = power_on(flash, layout);
    let mut npu = RecordingNpu::default();
    let booted = boot(&mut agent, &mut npu).expect("A is confirmed and verifies");
    assert_eq!(booted.bound.slot(), Slot::A);
    assert_eq!(npu.programs, 1, "the untracked trial was not run");
}

#[test]
fn rejects_a_manifest_further_above_the_floor_than_one_step() {
    let a = small();
    let layout = layout(2048);
    let (mut agent, _) = boot_counted(
        blank_flash(&layout),
        blank_counter(),
        layout,
        &mut RecordingNpu::default(),
    );
    let mut npu = RecordingNpu::default();
    // A leaked key signs u64::MAX: the device must not be locked out for good.
    let max = verified(&a.pack, u64::MAX, layout.slot_bytes);
    assert_eq!(
        install(&mut agent, &max, &mut serving(&a.pack), &mut npu),
        Err(Error::SequenceTooFar {
            sequence: u64::MAX,
            floor: 0,
            max_step: MAX_SEQUENCE_STEP
        })
    );
    let past = verified(&a.pack, MAX_SEQUENCE_STEP + 1, layout.slot_bytes);
    assert!(matches!(
        install(&mut agent, &past, &mut serving(&a.pack), &mut npu),
        Err(Error::SequenceTooFar { .. })
    ));
    assert_eq!(agent.state().last_sequence(), 0);
    assert_eq!(agent.flash().ops(), 0, "refused before any erase");
    let step = verified(&a.pack, MAX_SEQUENCE_STEP, layout.slot_bytes);
    install(&mut agent, &step, &mut serving(&a.pack), &mut npu).unwrap();
    assert!(matches!(
        install(&mut agent, &max, &mut serving(&a.pack), &mut npu),
        Err(Error::SequenceTooFar { .. })
    ));
}

/// A counter that reads what it is told (a C `counter.read` returning garbage).
struct Reads(u64);

impl MonotonicCounter for Reads {
    fn read(&mut self) -> Result<u64, CounterError> {
        Ok(self.0)
    }

    fn raise(&mut self, value: u64) -> Result<(), CounterError> {
        self.0 = self.0.max(value);
        Ok(())
    }
}

#[test]
fn rejects_a_counter_more_than_one_step_above_the_journal_floor() {
    let a = small();
    let layout = layout(2048);
    let flash = installed(&layout, &[(&a.pack, 7)]);
    for read in [u64::MAX, 8 + MAX_SEQUENCE_STEP] {
        let refused = Agent::power_on(flash.clone(), Reads(read), layout, device());
        assert_eq!(
            refused.err(),
            Some(Error::Counter(CounterError::AheadOfJournal {
                read,
                journal: 7,
                max_step: MAX_SEQUENCE_STEP
            })),
            "{read}"
        );
    }
    // One step above is still a floor the device could hold (a journal that lost its newer
    // records): adopted.
    let unbooted = Agent::power_on(flash, Reads(7 + MAX_SEQUENCE_STEP), layout, device()).unwrap();
    assert_eq!(unbooted.state().last_sequence(), 7 + MAX_SEQUENCE_STEP);
}

// ---- hole 5: invalid states are representable ----

/// CRC-32 (IEEE), bit by bit: the test's own, independent of the crate's table.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A journal record as `src/journal.rs` lays it out: slot A confirmed and active, holding a pack
/// of `len` bytes at sequence 1.
fn record_with_slot_a(seq: u32, len: u32) -> [u8; 128] {
    let mut r = [0u8; 128];
    r[0..4].copy_from_slice(b"NPJ2");
    r[4..8].copy_from_slice(&seq.to_le_bytes());
    r[8..16].copy_from_slice(&1u64.to_le_bytes());
    r[16] = 0; // active: A
    r[20] = 3; // confirmed
    r[24..28].copy_from_slice(&len.to_le_bytes());
    r[28..36].copy_from_slice(&1u64.to_le_bytes());
    r[40..72].copy_from_slice(&[0xAB; 32]);
    let crc = crc32(&r[..124]);
    r[124..].copy_from_slice(&crc.to_le_bytes());
    r
}

#[test]
fn rejects_a_crc_valid_record_whose_pack_is_longer_than_the_slot() {
    use embedded_storage::nor_flash::NorFlash;
    let layout = layout(2048);
    let mut flash = blank_flash(&layout);
    // As a firmware that shrank the slot without a new magic would find it: a record that is
    // well formed, names a pack longer than the slot, in both copies.
    let record = record_with_slot_a(5, 2 * layout.slot_bytes);
    flash.write(layout.journal, &record).unwrap();
    flash.write(layout.journal + 128, &record).unwrap();
    let mut agent = power_on(flash, layout);
    assert_eq!(
        boot(&mut agent, &mut RecordingNpu::default()).unwrap_err(),
        Error::NoBootableSlot
    );
    // Corruption, not a state: the device still installs its first pack.
    let a = small();
    let m = verified(&a.pack, 1, layout.slot_bytes);
    install(
        &mut agent,
        &m,
        &mut serving(&a.pack),
        &mut RecordingNpu::default(),
    )
    .unwrap();
}

#[test]
fn poll_before_boot_does_not_confirm_the_older_of_two_pending_packs() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    // The first pack (1) is pending: its install stopped right after the pending record.
    let blank = blank_flash(&layout);
    let m1 = verified(&a.pack, 1, layout.slot_bytes);
    let flash = (0..)
        .find_map(|n| {
            let mut f = blank.clone();
            f.cut(Cut::BeforeOp(n));
            let mut agent = Agent::open(f, layout, device()).unwrap();
            let _ = install(
                &mut agent,
                &m1,
                &mut serving(&a.pack),
                &mut RecordingNpu::default(),
            );
            let agent = power_on(agent.into_flash(), layout);
            matches!(agent.state().slot(Slot::A).status(), Status::Pending { .. })
                .then(|| agent.into_flash())
        })
        .unwrap();
    // Power-on, and a poll at once: 2 is installed.
    let mut agent = power_on(flash, layout);
    let mut server = Server::default();
    server.offer(&b.pack, 2);
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::Installed(_))
    ));
    // The next boot binds 2, not the older pending 1.
    let mut agent = power_on(agent.into_flash(), layout);
    let booted = boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(booted.bound.pack().sequence, 2);
    assert_eq!(agent.state().on_trial(), None);
}

#[test]
fn unbinds_a_refused_first_pack() {
    let a = small();
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut npu = RecordingNpu {
        fail_self_test: Some(9),
        ..RecordingNpu::default()
    };
    let m = verified(&a.pack, 1, layout.slot_bytes);
    assert_eq!(
        install(&mut agent, &m, &mut serving(&a.pack), &mut npu),
        Err(Error::SelfTestFailed { code: 9 })
    );
    assert_eq!(npu.programmed, None, "the refused pack stays programmed");
}

// ---- the NOR section: read glitches reach the XIP view the verification reads ----

#[test]
fn survives_a_glitch_in_the_xip_view_of_the_active_pack_at_boot() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(2048);
    let mut flash = installed(&layout, &[(&a.pack, 1), (&b.pack, 2)]);
    flash.power_on();
    flash.glitch_mapped(layout.slot(Slot::B) + 100, 4);
    let mut agent = Agent::open(flash, layout, device()).unwrap();
    let booted = boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(booted.bound.slot(), Slot::B);
    assert_eq!(agent.state().active(), Some(Slot::B));
}
