//! Install, boot and bind real packs; resume an interrupted download; revert a pack that fails its
//! self-test or never confirms.
mod common;

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::state::{MAX_LOCAL_RETRIES, MAX_TRIAL_BOOTS};
use device_agent::{Error, Mapped, Poll, RecordingNpu, ReportState, Slot, Status, verify};
use npub_core::Blob;
use npub_core::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape, digest, encode};

#[test]
fn installs_a_real_pack_and_binds_it_zero_copy() {
    let c = case_for_driver("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    let mut npu = RecordingNpu::default();
    let mut mem = ArenaMem::new();
    let Poll::Installed(v) = agent
        .poll(&mut server, &mut npu, &mut mem.arena(), None)
        .unwrap()
    else {
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

    // The weights are read in place from the slot's XIP window; the scratch and the program's
    // copy are in the arena.
    let regs = npu.programmed.unwrap();
    assert_eq!(&regs, v.registers());
    let blob = Blob::parse(&c.pack).unwrap();
    let slot_xip = XIP_BASE + layout.slot(Slot::A);
    assert_eq!(regs.pack, slot_xip);
    assert_eq!(regs.qsize as usize, c.cmd.len());
    assert_eq!(regs.regions, 3);
    let weights = blob.region(0).unwrap();
    assert_eq!(regs.basep[0], slot_xip + weights.data_offset);
    assert!(regs.baked[0] && !regs.baked[1] && !regs.baked[2]);
    // Zero copy: the bytes at BASEP0 in the flash *are* weights.bin.
    let mapped = agent.flash().image();
    let at = (regs.basep[0] - XIP_BASE) as usize;
    assert_eq!(&mapped[at..at + c.weights.len()], &c.weights[..]);
    // The program runs from SRAM: the stream's copy ends the arena (16-byte aligned), with the
    // COP1 header right before it, and the bytes there are the pack's.
    let arena_len = mem.0.len() as u32;
    let q = (regs.qbase - ARENA_BUS) as usize;
    assert!(regs.qbase + regs.qsize <= ARENA_BUS + arena_len);
    assert!(regs.qbase + regs.qsize + 16 > ARENA_BUS + arena_len);
    assert_eq!(&mem.0[q..q + c.cmd.len()], &c.cmd[..]);
    let payload = regs
        .driver_payload
        .expect("npub pack writes the COP1 header");
    assert_eq!(payload.address + payload.bytes, regs.qbase + regs.qsize);
    let p = (payload.address - ARENA_BUS) as usize;
    let cmd_offset = blob.header().cmd_offset as usize;
    let header = regs.qbase - payload.address;
    assert_eq!(
        &mem.0[p..p + payload.bytes as usize],
        &c.pack[cmd_offset - header as usize..cmd_offset + c.cmd.len()]
    );
    assert_eq!(regs.basep[1], ARENA_BUS);
    assert_eq!(regs.region_bytes[1], c.scratch);
    assert!(regs.basep[2] + regs.region_bytes[2] <= payload.address);
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
    assert_eq!(booted.bound.slot(), Slot::A);
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
    assert_eq!(booted.bound.slot(), Slot::A);
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

#[test]
fn the_npu_runs_the_program_copied_at_bind_not_what_the_slot_reads_later() {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    let mut npu = RecordingNpu::default();
    let mut mem = ArenaMem::new();
    agent
        .poll(&mut server, &mut npu, &mut mem.arena(), None)
        .unwrap();
    let regs = npu.programmed.unwrap();
    // From now on a cell of the stream reads otherwise where the NPU would have fetched it.
    let blob = Blob::parse(&c.pack).unwrap();
    let cell = layout.slot(Slot::A) + blob.header().cmd_offset + 8;
    agent.flash_mut().glitch_mapped(cell, 3);
    assert_ne!(
        agent.flash().mapped()[cell as usize],
        c.pack[cell as usize - layout.slot(Slot::A) as usize]
    );
    // The stream QBASE points at is the copy, still the pack's bytes.
    let q = (regs.qbase - ARENA_BUS) as usize;
    assert_eq!(&mem.0[q..q + c.cmd.len()], &c.cmd[..]);
    // Binding again (a running agent's boot) copies afresh, from a slot read again after the
    // misread pass: the same registers, the same program.
    mem.0[q..q + c.cmd.len()].fill(0);
    let mut npu2 = RecordingNpu::default();
    let booted = agent.boot(&mut npu2, &mut mem.arena()).unwrap();
    assert_eq!(booted.bound.registers(), &regs);
    assert_eq!(&mem.0[q..q + c.cmd.len()], &c.cmd[..]);
}

/// `small_net` installed in slot A: the flash, its layout and the pack's identity in the journal.
fn installed_small_net() -> (Case, device_agent::Layout, Flash, device_agent::PackId) {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap();
    let pack = agent.state().slot(Slot::A).pack();
    (c, layout, agent.into_flash(), pack)
}

#[test]
fn rejects_a_program_copy_that_reads_differently_from_the_pass() {
    let (c, layout, mut flash, pack) = installed_small_net();
    // The same flash, but one bit of the stream reads otherwise: what a weak cell shows the copy
    // after the pass has hashed it.
    let blob = Blob::parse(&c.pack).unwrap();
    let mut other = Flash::from_image(flash.image().to_vec());
    other.flip_stored_bit(layout.slot(Slot::A) + blob.header().cmd_offset + 4, 0);
    other.power_on();
    let mut mem = ArenaMem::new();
    let mut arena = mem.arena();
    let verified = verify::for_boot(&flash, &layout, Slot::A, &pack, None, &mut arena).unwrap();
    // Copied twice (the second time after invalidating the XIP cache), never as the pass read it.
    assert_eq!(
        verify::pin(&mut other, &layout, verified, &mut arena),
        Err(Error::ProgramReadDifferently { slot: Slot::A })
    );
    // One verification binds once: the flash that reads as the pass did needs a pass of its own.
    let verified = verify::for_boot(&flash, &layout, Slot::A, &pack, None, &mut arena).unwrap();
    let registers = *verified.registers();
    let bound = verify::pin(&mut flash, &layout, verified, &mut arena).unwrap();
    assert_eq!(bound.registers(), &registers);
    // An arena other than the one verified with (too short for the copy's place) is refused,
    // not sliced past its end.
    let verified = verify::for_boot(&flash, &layout, Slot::A, &pack, None, &mut arena).unwrap();
    let mut short = device_agent::Arena {
        bytes: &mut [0u8; 64],
        bus_address: ARENA_BUS,
    };
    assert!(matches!(
        verify::pin(&mut flash, &layout, verified, &mut short),
        Err(Error::ArenaTooSmall { .. })
    ));
}

#[test]
fn survives_a_program_copy_misread_once() {
    let (c, layout, mut flash, pack) = installed_small_net();
    let blob = Blob::parse(&c.pack).unwrap();
    let mut mem = ArenaMem::new();
    let mut arena = mem.arena();
    let verified = verify::for_boot(&flash, &layout, Slot::A, &pack, None, &mut arena).unwrap();
    // A cache line spoilt after the pass: the first copy does not hash as the pass did, the
    // second, after an invalidate, does.
    flash.glitch_mapped(layout.slot(Slot::A) + blob.header().cmd_offset + 4, 0);
    let bound = verify::pin(&mut flash, &layout, verified, &mut arena).unwrap();
    let q = (bound.registers().qbase - ARENA_BUS) as usize;
    assert_eq!(&arena.bytes[q..q + c.cmd.len()], &c.cmd[..]);
}

#[test]
fn rejects_an_arena_too_small_for_the_runtime_regions_and_the_program() {
    let c = case_for_driver("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    let mut npu = RecordingNpu::default();
    let blob = Blob::parse(&c.pack).unwrap();
    let runtime = npub_core::arena_bytes_required(&blob) as usize;
    let mut mem = ArenaMem::new();
    // Room for the runtime regions, not for the program's copy as well.
    let mut arena = device_agent::Arena {
        bytes: &mut mem.0[..runtime + 16],
        bus_address: ARENA_BUS,
    };
    let e = agent
        .poll(&mut server, &mut npu, &mut arena, None)
        .unwrap_err();
    let Error::ArenaTooSmall {
        runtime: r,
        program,
        arena: len,
    } = e
    else {
        panic!("{e:?}")
    };
    assert_eq!((r as usize, len), (runtime, runtime + 16));
    assert!(program as usize > c.cmd.len());
    let needed = runtime + program as usize + 15;
    assert!(
        e.to_string()
            .contains(&format!("give the arena at least {needed} bytes")),
        "{e}"
    );
    assert_eq!(npu.programmed, None);
    assert_eq!(agent.state().active(), None);

    // With the arena the message asks for, the pack binds (a new deployment of it).
    server.offer(&c.pack, 2);
    let mut arena = device_agent::Arena {
        bytes: &mut mem.0[..needed],
        bus_address: ARENA_BUS,
    };
    let Poll::Installed(v) = agent.poll(&mut server, &mut npu, &mut arena, None).unwrap() else {
        panic!("not installed");
    };
    assert_eq!(npu.programmed.as_ref(), Some(v.registers()));
}

/// The test flash, but from the moment a write lands in `trigger` one byte of the XIP view reads
/// with `mask` flipped, after every invalidate too: a cell that read one way for the verifying
/// pass and reads another way for every copy after it.
struct SpoiledAfterWrite {
    flash: Flash,
    trigger: std::ops::Range<u32>,
    spoil: (u32, u8),
    view: Option<Vec<u8>>,
}

impl SpoiledAfterWrite {
    fn refresh(&mut self) {
        if let Some(view) = &mut self.view {
            view.copy_from_slice(self.flash.mapped());
            view[self.spoil.0 as usize] ^= self.spoil.1;
        }
    }
}

impl embedded_storage::nor_flash::ErrorType for SpoiledAfterWrite {
    type Error = device_agent::nor_emu::NorEmuError;
}

impl embedded_storage::nor_flash::ReadNorFlash for SpoiledAfterWrite {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        self.flash.read(offset, bytes)
    }

    fn capacity(&self) -> usize {
        self.flash.capacity()
    }
}

impl embedded_storage::nor_flash::NorFlash for SpoiledAfterWrite {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        self.flash.erase(from, to)
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        self.flash.write(offset, bytes)?;
        if self.view.is_none() && self.trigger.contains(&offset) {
            self.view = Some(self.flash.mapped().to_vec());
            self.refresh();
        }
        Ok(())
    }
}

impl Mapped for SpoiledAfterWrite {
    fn mapped(&self) -> &[u8] {
        self.view.as_deref().unwrap_or(self.flash.mapped())
    }

    fn invalidate(&mut self) {
        self.flash.invalidate();
        self.refresh();
    }
}

#[test]
fn rejects_an_install_whose_program_reads_otherwise_after_its_pass_and_binds_the_old_pack() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    let mut mem = ArenaMem::new();
    server.offer(&a.pack, 1);
    agent
        .poll(&mut server, &mut npu, &mut mem.arena(), None)
        .unwrap();
    let bound_a = npu.programmed.unwrap();

    // Slot B's stream reads otherwise from the moment its descriptor is written: after the pass
    // that verified it, before its program is copied.
    let cmd_offset = Blob::parse(&b.pack).unwrap().header().cmd_offset;
    let descriptor = layout.descriptor::<Flash>(Slot::B);
    let flash = SpoiledAfterWrite {
        flash: agent.into_flash(),
        trigger: descriptor..descriptor + ERASE as u32,
        spoil: (layout.slot(Slot::B) + cmd_offset + 4, 1),
        view: None,
    };
    let mut agent = device_agent::Agent::open(flash, layout, device()).unwrap();
    server.offer(&b.pack, 2);
    server.reports.clear();
    let e = agent
        .poll(&mut server, &mut npu, &mut mem.arena(), None)
        .unwrap_err();
    assert_eq!(e, Error::ProgramReadDifferently { slot: Slot::B });
    // A local fault: the slot may be installed again, and A is active and bound again, its
    // program copied afresh at the arena's end.
    let s = agent.state();
    assert_eq!(s.active(), Some(Slot::A));
    assert_eq!(s.slot(Slot::B).status(), Status::Failed);
    assert_eq!(npu.programmed, Some(bound_a));
    let q = (bound_a.qbase - ARENA_BUS) as usize;
    assert_eq!(&mem.0[q..q + a.cmd.len()], &a.cmd[..]);
    // Retried afresh at the next poll: to the rollout still downloading (a `failed` would count
    // towards its auto-abort), with the reason and the attempt that ended.
    let last = server.reports.last().unwrap();
    assert_eq!(last.state, ReportState::Downloading);
    assert_eq!(last.reason, Some(e));
    assert_eq!(last.attempts, Some(1));
    assert!(
        !server
            .reports
            .iter()
            .any(|r| r.state == ReportState::Verified),
        "nothing was bound from it: {:?}",
        server.reports
    );
}
