//! Tampered manifests, tampered packs and bit rot in flash are refused, and the active pack is
//! never touched.
mod common;

use common::*;
use device_agent::nor_emu::OpKind;
use device_agent::state::MAX_LOCAL_RETRIES;
use device_agent::{Agent, CHUNK_BYTES, Error, Poll, RecordingNpu, Slot, Status};
use npub_core::Error as Core;
use npub_core::{FormatError, ManifestError};

/// A device with `a` installed at sequence 1 in slot A, and the server that installed it.
fn with_one_pack(slot_bytes: u32) -> (Agent<Flash>, Server) {
    let a = small();
    let layout = layout(slot_bytes);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&a.pack, 1);
    poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap();
    (agent, server)
}

/// Slot A's bytes.
fn slot_a(agent: &Agent<Flash>) -> Vec<u8> {
    let start = agent.layout().slot(Slot::A) as usize;
    agent.flash().image()[start..start + agent.layout().slot_bytes as usize].to_vec()
}

/// After a refused install: slot A is still active, byte for byte the same, and boots.
fn assert_untouched(agent: Agent<Flash>, before: &[u8]) {
    assert_eq!(agent.state().active(), Some(Slot::A));
    assert_eq!(agent.state().slot(Slot::A).status(), Status::Confirmed);
    assert_eq!(slot_a(&agent), before);
    let layout = *agent.layout();
    let mut agent = power_on(agent.into_flash(), layout);
    let booted = boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(booted.bound.slot(), Slot::A);
}

#[test]
fn rejects_a_tampered_manifest_before_touching_flash() {
    let (mut agent, mut server) = with_one_pack(64 * 1024);
    let before = slot_a(&agent);
    let ops = agent.flash().ops();
    let b = case("two_io_u55_256");
    let mut m = manifest(&b.pack, 2).to_vec();
    m[30] ^= 0x20; // a letter of the model name
    server.offer_manifest(m, 2);
    server.serve(&b.pack);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected(Core::Manifest(ManifestError::BadSignature { .. }))
        ),
        "{err:?}"
    );
    assert_eq!(agent.flash().ops(), ops, "not one erase or program");
    assert_eq!(agent.state().last_sequence(), 1);
    // Reported failed with the event log, whose last line is the refusal.
    assert_eq!(
        server
            .report_events
            .last()
            .and_then(|l| l.last())
            .map(String::as_str),
        Some("manifest refused seq 2")
    );
    assert_untouched(agent, &before);
}

#[test]
fn rejects_a_replayed_manifest() {
    let (mut agent, mut server) = with_one_pack(64 * 1024);
    let before = slot_a(&agent);
    let ops = agent.flash().ops();
    let a = small();
    let replayed = Error::Rejected(Core::Manifest(ManifestError::Replayed {
        sequence: 1,
        last: 1,
    }));
    // A server (or a man in the middle) that offers the old manifest again: npub-core refuses it.
    server.offer_stale = true;
    assert_eq!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Err(replayed)
    );
    // And so does the agent for a manifest verified earlier, against an older sequence.
    let m = verified(&a.pack, 1, agent.layout().slot_bytes);
    assert_eq!(
        install(&mut agent, &m, &mut server, &mut RecordingNpu::default()),
        Err(replayed)
    );
    assert_eq!(agent.flash().ops(), ops);
    assert_untouched(agent, &before);
}

#[test]
fn rejects_a_manifest_of_the_wrong_length() {
    let (mut agent, mut server) = with_one_pack(64 * 1024);
    let mut m = manifest(&small().pack, 2).to_vec();
    m.push(0);
    server.offer_manifest(m, 2);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert_eq!(
        err,
        Error::Rejected(Core::Manifest(ManifestError::WrongLength { len: 281 }))
    );
}

#[test]
fn rejects_a_tampered_pack_and_reverts_its_slot() {
    let (mut agent, mut server) = with_one_pack(64 * 1024);
    let before = slot_a(&agent);
    let b = case("two_io_u55_256");
    server.offer(&b.pack, 2);
    // The server (or the network) changes one weight byte; the manifest is the genuine one.
    let mut evil = b.pack.clone();
    let last = evil.len() - 1;
    evil[last] ^= 1;
    server.packs.insert(sha256(&b.pack), evil);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected(Core::Manifest(ManifestError::PackHashMismatch { .. }))
        ),
        "{err:?}"
    );
    // The device cannot tell a tampered download from a slot that read back wrong: it takes the
    // same manifest again a bounded number of times, then the sequence stays consumed.
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Failed);
    for _ in 0..MAX_LOCAL_RETRIES {
        let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Rejected(Core::Manifest(ManifestError::PackHashMismatch { .. }))
            ),
            "{err:?}"
        );
    }
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Empty);
    // Only the final failure carries the event log: each attempt, then the mismatch it ended in.
    let logs: Vec<&Vec<String>> = server
        .report_events
        .iter()
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(logs.len(), 1, "{:?}", server.report_events);
    let attempts = [
        "download started seq 2",
        "hash mismatch seq 2",
        "download retried seq 2",
        "hash mismatch seq 2",
        "download retried seq 2",
        "hash mismatch seq 2",
    ];
    assert!(
        logs[0].ends_with(&attempts.map(String::from)),
        "{:?}",
        logs[0]
    );
    assert_eq!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::UpToDate)
    );
    assert_untouched(agent, &before);
}

#[test]
fn rejects_a_hostile_header_at_the_first_chunk() {
    let (mut agent, mut server) = with_one_pack(256 * 1024);
    let before = slot_a(&agent);
    let b = case("small_net_u55_256");
    server.offer(&b.pack, 2);
    let mut evil = b.pack.clone();
    // region_count: a table far past total_bytes.
    evil[12..16].copy_from_slice(&0x1000_0000u32.to_le_bytes());
    server.packs.insert(sha256(&b.pack), evil);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected(Core::Format(FormatError::RegionTableOutOfBounds { .. }))
        ),
        "{err:?}"
    );
    assert_eq!(
        server.served,
        a_pack_len() + CHUNK_BYTES,
        "abandoned after one chunk"
    );
    assert_untouched(agent, &before);
}

fn a_pack_len() -> usize {
    small().pack.len()
}

#[test]
fn rejects_a_bit_flipped_in_flash_after_the_write() {
    let b = case("two_io_u55_256");
    let (agent, mut server) = with_one_pack(64 * 1024);
    let before = slot_a(&agent);
    let layout = *agent.layout();
    server.offer(&b.pack, 2);
    // Learn which operation programs the pack's last piece, then let a bit rot right after it,
    // before the read-back.
    let mut dry = power_on(Flash::from_image(agent.flash().image().to_vec()), layout);
    poll(&mut dry, &mut server, &mut RecordingNpu::default()).unwrap();
    let slot_b = layout.slot(Slot::B);
    let (last, _) = dry
        .flash()
        .log()
        .iter()
        .enumerate()
        .rev()
        .find(|(_, op)| {
            op.kind == OpKind::Program
                && op.offset >= slot_b
                && op.offset < layout.pack_capacity::<Flash>() + slot_b
        })
        .unwrap();
    let mut flash = agent.into_flash();
    let base = flash.ops();
    flash.flip_stored_bit_after_op(base + last as u64, slot_b + 100, 3);
    let mut agent = power_on(flash, layout);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected(Core::Manifest(ManifestError::PackHashMismatch { .. }))
        ),
        "{err:?}"
    );
    // A local fault: the same manifest may be installed again.
    assert_eq!(agent.state().slot(Slot::B).status(), Status::Failed);
    assert_eq!(agent.state().retries(), MAX_LOCAL_RETRIES);
    let layout = *agent.layout();
    let mut agent = power_on(agent.into_flash(), layout);
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::Installed(_))
    ));
    assert_eq!(agent.state().active(), Some(Slot::B));
    assert_eq!(slot_a(&agent), before, "slot A untouched throughout");
}

#[test]
fn boot_falls_back_when_the_active_pack_rots_in_flash() {
    let (mut agent, mut server) = with_one_pack(64 * 1024);
    let b = case("two_io_u55_256");
    server.offer(&b.pack, 2);
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::Installed(_))
    ));
    let layout = *agent.layout();
    let mut flash = agent.into_flash();
    flash.flip_stored_bit(layout.slot(Slot::B) + 200, 0);
    let mut agent = power_on(flash, layout);
    let booted = boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(booted.bound.slot(), Slot::A);
    let events: Vec<&str> = agent.events().lines().collect();
    assert_eq!(events, ["boot: slot does not verify seq 2"]);
    assert_eq!(
        agent.state().active(),
        Some(Slot::A),
        "the next install overwrites the rotten slot"
    );
    assert_eq!(agent.state().install_target(), Slot::B);

    // With both rotten there is nothing to bind.
    let mut flash = agent.into_flash();
    flash.flip_stored_bit(layout.slot(Slot::A) + 200, 0);
    let mut agent = power_on(flash, layout);
    assert_eq!(
        boot(&mut agent, &mut RecordingNpu::default()).unwrap_err(),
        Error::NoBootableSlot
    );
    let events: Vec<&str> = agent.events().lines().collect();
    assert_eq!(
        events,
        [
            "boot: slot does not verify seq 1",
            "boot: slot does not verify seq 2",
            "boot: nothing bootable"
        ]
    );
}
