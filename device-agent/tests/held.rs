//! A manifest for the pack the device already runs (a rollback to the running pack, a deployment
//! of a byte-identical version) is installed without downloading a byte: its sequence is
//! consumed, the active slot is journalled under it, and replaying it is still refused.
mod common;

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::{Error, MonotonicCounter, Poll, RecordingNpu, ReportState, Slot, Status};
use npub_core::ManifestError;

#[test]
fn a_manifest_for_the_running_pack_downloads_nothing() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let (mut agent, _) = boot_counted(blank_flash(&layout), blank_counter(), layout, &mut {
        RecordingNpu::default()
    });
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    server.offer(&b.pack, 2);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    let bound = npu.programmed;
    let (served, flash_ops) = (server.served, agent.flash().ops());
    server.reports.clear();

    // Sequence 3 names the pack slot B already runs.
    server.offer(&b.pack, 3);
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("not installed")
    };
    assert_eq!(v.slot(), Slot::B);
    assert_eq!(server.served, served, "not one pack byte fetched");
    let s = agent.state();
    assert_eq!((s.active(), s.last_sequence()), (Some(Slot::B), 3));
    assert_eq!(s.slot(Slot::B).pack().sequence, 3);
    assert_eq!(
        s.slot(Slot::A).status(),
        Status::Confirmed,
        "slot A untouched"
    );
    assert_eq!(npu.programmed, bound);
    let states: Vec<_> = server
        .reports
        .iter()
        .map(|r| (r.sequence, r.state))
        .collect();
    assert_eq!(states, [(3, ReportState::Installed)]);
    // Only the journal was written: no slot sector was erased or programmed.
    let slots = u64::from(layout.slot(Slot::A))..layout.end();
    let touched = agent.flash().log()[flash_ops as usize..]
        .iter()
        .filter(|op| slots.contains(&u64::from(op.offset)))
        .count();
    assert_eq!(
        touched,
        0,
        "{:?}",
        &agent.flash().log()[flash_ops as usize..]
    );

    // The counter holds the new floor: a replay of sequence 3 (or 2) is refused.
    assert_eq!(agent.counter_mut().read().unwrap(), 3);
    server.offer_stale = true;
    assert!(matches!(
        poll(&mut agent, &mut server, &mut npu),
        Err(Error::Rejected(npub_core::Error::Manifest(
            ManifestError::Replayed {
                sequence: 3,
                last: 3
            }
        )))
    ));

    // A reboot binds slot B under sequence 3.
    let (flash, counter) = parts(agent);
    let (_, booted) = boot_counted(flash, counter, layout, &mut RecordingNpu::default());
    let booted = booted.unwrap();
    assert_eq!(
        (booted.bound.slot(), booted.bound.pack().sequence),
        (Slot::B, 3)
    );
}

#[test]
fn a_manifest_for_the_previous_pack_is_downloaded_into_the_other_slot() {
    // Rolling back to the pack in the inactive slot is an install like any other: the slot was
    // not verified for this manifest, and the active pack must stay bootable meanwhile.
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    server.offer(&b.pack, 2);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    let served = server.served;
    server.offer(&a.pack, 3);
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("not installed")
    };
    assert_eq!(v.slot(), Slot::A);
    assert_eq!(server.served - served, a.pack.len());
}

#[test]
fn survives_a_running_pack_that_no_longer_verifies() {
    // One bit of the active pack rotted: the manifest for it is downloaded into the other slot
    // rather than consumed on a slot that would not boot.
    let b = case("two_io_u55_256");
    let layout = layout(4096);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    server.offer(&b.pack, 1);
    let Poll::Installed(first) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("not installed")
    };
    let at = layout.slot(first.slot()) + 40;
    agent.flash_mut().flip_stored_bit(at, 3);
    let served = server.served;
    server.offer(&b.pack, 2);
    let Poll::Installed(v) = poll(&mut agent, &mut server, &mut npu).unwrap() else {
        panic!("not installed")
    };
    assert_eq!(v.slot(), first.slot().other());
    assert_eq!(server.served - served, b.pack.len());
    assert_eq!(agent.state().active(), Some(first.slot().other()));
}

#[test]
fn survives_a_power_cut_at_every_flash_operation_of_a_held_install() {
    let (a, b) = (small(), case("two_io_u55_256"));
    let layout = layout(4096);
    let mut npu = RecordingNpu::default();
    let (mut agent, _) = boot_counted(blank_flash(&layout), blank_counter(), layout, &mut npu);
    let mut server = Server::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    server.offer(&b.pack, 2);
    poll(&mut agent, &mut server, &mut npu).unwrap();
    let (flash0, counter0) = parts(agent);
    server.offer(&b.pack, 3);
    let cuts = (0..).flat_map(|i| {
        [
            Cut::BeforeOp(flash0.ops() + i),
            Cut::During {
                op: flash0.ops() + i,
                after_bytes: 1,
            },
        ]
    });
    for cut in cuts {
        let (mut flash, counter) = (flash0.clone(), counter0.clone());
        flash.cut(cut);
        let (mut agent, _) = boot_counted(flash, counter, layout, &mut npu);
        let done = poll(&mut agent, &mut server, &mut npu).is_ok();
        let cut_fired = agent.flash().power_was_cut();
        let (flash, counter) = parts(agent);
        // Whatever the cut did, slot B boots, and the device is at sequence 2 or 3.
        let (mut agent, booted) = boot_counted(flash, counter, layout, &mut npu);
        let booted = booted.expect("bootable after the cut");
        assert_eq!(booted.bound.slot(), Slot::B, "{cut:?}");
        let floor = agent.state().last_sequence();
        assert!(floor == 2 || floor == 3, "{cut:?}: floor {floor}");
        // And the next poll finishes the job (or finds it done).
        let outcome = poll(&mut agent, &mut server, &mut npu);
        assert!(
            matches!(outcome, Ok(Poll::Installed(_) | Poll::UpToDate)),
            "{cut:?}: {outcome:?}"
        );
        assert_eq!(agent.state().last_sequence(), 3, "{cut:?}");
        if done && !cut_fired {
            break;
        }
    }
}
