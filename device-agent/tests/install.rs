//! Install, boot and bind real packs; resume an interrupted download; revert a pack that fails its
//! self-test or never confirms.
mod common;

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::state::{MAX_LOCAL_RETRIES, MAX_TRIAL_BOOTS};
use device_agent::{Error, Poll, RecordingNpu, ReportState, Slot, Status};
use npub_core::Blob;
use npub_core::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape, digest, encode};

#[test]
fn installs_a_real_pack_and_binds_it_zero_copy() {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    let mut npu = RecordingNpu::default();
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("nothing installed");
    };
    assert_eq!(v.slot(), Slot::A);
    assert_eq!(agent.state().active(), Some(Slot::A));
    assert_eq!(agent.state().slot(Slot::A).status(), Status::Confirmed);
    assert_eq!(
        server.served,
        c.pack.len(),
        "every byte fetched exactly once"
    );

    // The registers point into the slot's XIP window (weights, stream) and the arena (scratch).
    let regs = npu.programmed.unwrap();
    assert_eq!(&regs, v.registers());
    let blob = Blob::parse(&c.pack).unwrap();
    let slot_xip = XIP_BASE + layout.slot(Slot::A);
    assert_eq!(regs.qbase, slot_xip + blob.header().cmd_offset);
    assert_eq!(regs.qsize as usize, c.cmd.len());
    assert_eq!(regs.regions, 3);
    let weights = blob.region(0).unwrap();
    assert_eq!(regs.basep[0], slot_xip + weights.data_offset);
    assert!(regs.baked[0] && !regs.baked[1] && !regs.baked[2]);
    // Zero copy: the bytes at BASEP0 in the flash *are* weights.bin.
    let mapped = agent.flash().image();
    let at = (regs.basep[0] - XIP_BASE) as usize;
    assert_eq!(&mapped[at..at + c.weights.len()], &c.weights[..]);
    let q = (regs.qbase - XIP_BASE) as usize;
    assert_eq!(&mapped[q..q + c.cmd.len()], &c.cmd[..]);
    assert_eq!(regs.basep[1], ARENA_BUS);
    assert_eq!(regs.region_bytes[1], c.scratch);
    for r in &regs.basep[..3] {
        assert_eq!(r % 16, 0);
    }
    assert_eq!(&regs.basep[3..], &[0; 5]);

    let states: Vec<_> = server.reports.iter().map(|r| r.state).collect();
    assert!(states.contains(&ReportState::Downloading));
    assert_eq!(
        states[states.len() - 2..],
        [ReportState::Verified, ReportState::Installed]
    );

    // A reboot re-validates and binds the same thing.
    let layout = *agent.layout();
    let mut agent = power_on(agent.into_flash(), layout);
    let mut npu2 = RecordingNpu::default();
    let booted = boot(&mut agent, &mut npu2).unwrap();
    assert_eq!(booted.verified.slot(), Slot::A);
    assert_eq!(npu2.programmed, Some(regs));
}

#[test]
fn an_upgrade_goes_to_the_other_slot_and_keeps_the_old_one() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    server.offer(&b.pack, 2);
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!()
    };
    assert_eq!(v.slot(), Slot::B);
    let s = agent.state();
    assert_eq!((s.active(), s.last_sequence()), (Some(Slot::B), 2));
    assert_eq!(s.slot(Slot::A).status(), Status::Confirmed);
    assert_eq!(
        poll(&mut agent, &mut server, &mut npu).unwrap(),
        Poll::UpToDate
    );
}

#[test]
fn a_dropped_connection_resumes_without_refetching_durable_bytes() {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    let mut npu = RecordingNpu::default();
    server.drop_after = Some(10_000);
    assert_eq!(
        poll(&mut agent, &mut server, &mut npu),
        Err(Error::Transport(device_agent::TransportError::Unreachable))
    );
    let Some((_, _, written)) = agent.state().receiving() else {
        panic!("the download should be resumable");
    };
    assert_eq!(written, 10_000 / ERASE as u32 * ERASE as u32);
    // Reported as still downloading (with why), not failed: a failure would count towards the
    // deployment's auto-abort.
    let last = server.reports.last().expect("a report");
    assert_eq!(last.state, device_agent::ReportState::Downloading);
    assert!(last.reason.is_some());
    assert!(
        !server
            .reports
            .iter()
            .any(|r| r.state == device_agent::ReportState::Failed)
    );
    // The power fails too before the retry.
    let mut agent = power_on(agent.into_flash(), layout);
    server.drop_after = None;
    server.requests.clear();
    let before = server.served;
    assert!(matches!(
        poll(&mut agent, &mut server, &mut npu),
        Ok(Poll::Installed(_))
    ));
    assert_eq!(
        server.requests[0], written,
        "resumed at the journalled offset"
    );
    assert_eq!(server.served - before, c.pack.len() - written as usize);
}

#[test]
fn a_pack_that_fails_its_self_test_is_reverted_and_the_old_one_rebound() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    let old_regs = npu.programmed.unwrap();

    server.offer(&b.pack, 2);
    npu.fail_self_test = Some(42);
    assert_eq!(
        poll(&mut agent, &mut server, &mut npu),
        Err(Error::SelfTestFailed { code: 42 })
    );
    let s = agent.state();
    assert_eq!(s.active(), Some(Slot::A));
    assert_eq!(s.slot(Slot::B).status(), Status::Failed);
    assert_eq!(s.retries(), MAX_LOCAL_RETRIES);
    assert_eq!(
        npu.programmed,
        Some(old_regs),
        "the NPU runs the old pack again"
    );
    assert!(
        server
            .reports
            .iter()
            .any(|r| r.state == ReportState::RolledBack && r.sequence == 2)
    );
    // A self-test failure may be transient: the server's re-offer is taken, a bounded number of
    // times, then the sequence stays consumed.
    for left in (0..MAX_LOCAL_RETRIES).rev() {
        assert_eq!(
            poll(&mut agent, &mut server, &mut npu),
            Err(Error::SelfTestFailed { code: 42 })
        );
        assert_eq!(agent.state().retries(), left);
        assert_eq!(npu.programmed, Some(old_regs));
    }
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Empty);
    npu.fail_self_test = None;
    assert_eq!(
        poll(&mut agent, &mut server, &mut npu).unwrap(),
        Poll::UpToDate
    );
}

#[test]
fn survives_a_self_test_that_fails_once() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    server.offer(&b.pack, 2);
    npu.fail_self_test = Some(42);
    assert!(poll(&mut agent, &mut server, &mut npu).is_err());
    // The power fails too before the server offers the same manifest again.
    let mut agent = power_on(agent.into_flash(), layout);
    npu.fail_self_test = None;
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("the re-offered manifest was refused");
    };
    assert_eq!((v.slot(), v.pack().sequence), (Slot::B, 2));
    assert_eq!(agent.state().active(), Some(Slot::B));
}

#[test]
fn a_pending_pack_that_never_confirms_is_reverted_after_its_trial_boots() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();

    // The device resets during the new pack's self-test: the power "fails" right after the
    // pending record.
    server.offer(&b.pack, 2);
    let pending_at = ops_until_state(&layout, agent.flash(), &mut server, &b.pack, |s| {
        matches!(s.slot(Slot::B).status(), Status::Pending { .. })
    });
    let mut flash = agent.into_flash();
    flash.cut(Cut::BeforeOp(flash.ops() + pending_at));
    let mut agent = device_agent::Agent::open(flash, layout, device()).unwrap();
    assert!(poll(&mut agent, &mut server, &mut npu).is_err());
    let mut agent = power_on(agent.into_flash(), layout);
    assert_eq!(agent.state().on_trial(), Some((Slot::B, MAX_TRIAL_BOOTS)));

    // Every trial boot "resets" before the self-test can confirm.
    for left in (0..MAX_TRIAL_BOOTS).rev() {
        let mut flash = agent.into_flash();
        flash.cut(Cut::BeforeOp(
            flash.ops() + trial_commit_ops(&layout, &flash),
        ));
        let mut a2 = device_agent::Agent::open(flash, layout, device()).unwrap();
        let _ = boot(&mut a2, &mut RecordingNpu::default());
        assert!(a2.flash().power_was_cut());
        agent = power_on(a2.into_flash(), layout);
        assert_eq!(agent.state().on_trial(), Some((Slot::B, left)));
    }
    let booted = boot(&mut agent, &mut npu).unwrap();
    assert_eq!(booted.verified.slot(), Slot::A);
    let r = booted.reverted.unwrap();
    assert_eq!((r.slot, r.sequence), (Slot::B, 2));
    assert_eq!(
        r.reason,
        Error::TrialBootsExhausted {
            boots: MAX_TRIAL_BOOTS
        }
    );
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Empty);
}

/// Runs the install of `pack` at sequence 2 on a copy of `flash` and returns how many flash
/// operations it takes until the journal first holds a state for which `reached` is true.
fn ops_until_state(
    layout: &device_agent::Layout,
    flash: &Flash,
    server: &mut Server,
    pack: &[u8],
    reached: impl Fn(&device_agent::State) -> bool,
) -> u64 {
    for n in 1..100_000 {
        let mut copy = Flash::from_image(flash.image().to_vec());
        copy.cut(Cut::BeforeOp(n));
        let mut agent = device_agent::Agent::open(copy, *layout, device()).unwrap();
        let m = verified(pack, 2, layout.slot_bytes);
        let _ = install(&mut agent, &m, server, &mut RecordingNpu::default());
        let agent = power_on(agent.into_flash(), *layout);
        if reached(agent.state()) {
            return n;
        }
    }
    panic!("the install of that pack never reached the state")
}

/// Operations the boot's trial record takes (two copies, and an erase when it starts a journal
/// session), found by trying.
fn trial_commit_ops(layout: &device_agent::Layout, flash: &Flash) -> u64 {
    let before = power_on(Flash::from_image(flash.image().to_vec()), *layout);
    let (slot, left) = before.state().on_trial().unwrap();
    for n in 1..=4 {
        let mut copy = Flash::from_image(flash.image().to_vec());
        copy.cut(Cut::BeforeOp(n));
        let mut agent = device_agent::Agent::open(copy, *layout, device()).unwrap();
        let _ = boot(&mut agent, &mut RecordingNpu::default());
        let after = power_on(agent.into_flash(), *layout);
        if after.state().on_trial() == Some((slot, left - 1)) {
            return n;
        }
    }
    unreachable!()
}

/// conv1's IO bindings as its meta.json gives them: the input at offset 512 of the scratch
/// region, the output at offset 0 (COP1 streams address IO inside region 1).
fn conv1_io() -> &'static [u8] {
    let int8 = Dtype::from_name("int8").unwrap();
    let bindings = [
        IoBinding {
            kind: IoKind::Input,
            index: 0,
            name: Name::truncated("input"),
            region: 1,
            offset: 512,
            bytes: 192,
            shape: Shape::new(&[1, 8, 8, 3]).unwrap(),
            dtype: int8,
            scale: 0.0078125,
            zero_point: 0,
        },
        IoBinding {
            kind: IoKind::Output,
            index: 0,
            name: Name::truncated("conv/out"),
            region: 1,
            offset: 0,
            bytes: 512,
            shape: Shape::new(&[1, 8, 8, 8]).unwrap(),
            dtype: int8,
            scale: 0.05,
            zero_point: -128,
        },
    ];
    Box::leak(encode(&bindings).unwrap().into_boxed_slice())
}

#[test]
fn binds_the_applications_io_inside_the_arena() {
    let c = small();
    let io = conv1_io();
    let layout = layout(4096);
    let dev = device_agent::Device {
        io_bindings: Some(io),
        ..device()
    };
    let mut agent = device_agent::Agent::open(blank_flash(&layout), layout, dev).unwrap();
    let mut server = Server::default();
    server.serve(&c.pack);
    server.offer_manifest(manifest_with_io(&c.pack, 1, digest(io)).to_vec(), 1);
    let mut npu = RecordingNpu::default();
    assert!(matches!(
        poll(&mut agent, &mut server, &mut npu),
        Ok(Poll::Installed(_))
    ));
    let regs = npu.programmed.unwrap();
    assert_eq!(regs.io_count, 2);
    let input = regs.io[0].unwrap();
    let output = regs.io[1].unwrap();
    assert_eq!(
        (input.kind, input.index, input.bytes),
        (IoKind::Input, 0, 192)
    );
    assert_eq!(input.address, regs.basep[1] + 512);
    assert_eq!(
        (output.kind, output.address, output.bytes),
        (IoKind::Output, regs.basep[1], 512)
    );
    // A reboot resolves them again, to the same addresses.
    let mut agent = device_agent::Agent::open(agent.into_flash(), layout, dev).unwrap();
    let mut npu2 = RecordingNpu::default();
    boot(&mut agent, &mut npu2).unwrap();
    assert_eq!(npu2.programmed, Some(regs));
}

#[test]
fn rejects_a_pack_whose_io_is_not_the_applications() {
    let c = small();
    let layout = layout(4096);
    let dev = device_agent::Device {
        io_bindings: Some(conv1_io()),
        ..device()
    };
    let mut agent = device_agent::Agent::open(blank_flash(&layout), layout, dev).unwrap();
    let mut server = Server::default();
    server.offer(&c.pack, 1); // io_digest all zeros: declares no IO
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert_eq!(err, Error::IoBindingsMismatch);
    assert_eq!(agent.flash().ops(), 0, "refused before any erase");
    assert_eq!(
        agent.state().last_sequence(),
        0,
        "and without consuming the sequence"
    );
}
