//! The release trust in flash (issue 34): kept with the keyring in one commit, so that a power cut
//! at or inside any flash operation of a release-key update leaves the keyring's update sequence
//! and the release trust old together or new together, never a mix (a sequence that says a
//! revocation was applied while the revoked key still counts, or the reverse).
mod common;

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::{Agent, Device, Layout, Poll, RecordingNpu, Trust};
use npub_core::keypair::KeyPair;
use npub_core::manifest::KeyId;
use npub_core::release::{ReleaseChange, TrustChange, TrustUpdate, sign_trust_update};

fn alice() -> KeyPair {
    KeyPair::from_seed([0xA1; 32])
}

fn bob() -> KeyPair {
    KeyPair::from_seed([0xB0; 32])
}

fn release_root() -> KeyPair {
    KeyPair::from_seed([0x77; 32])
}

/// Banks large enough for the release record beside the keyring's (six 512-byte sectors).
fn release_layout() -> Layout {
    Layout::contiguous(0, 6 * ERASE as u32, 64 * 1024, ERASE as u32, XIP_BASE)
}

/// The test device with Alice as its factory release key and the release root.
fn device_with_release() -> Device {
    Device {
        trust: Trust::new(&[signing_key().public_key()], &[root_key().public_key()])
            .unwrap()
            .with_release(&[alice().public_key()], &[release_root().public_key()])
            .unwrap(),
        ..device()
    }
}

fn open(mut flash: Flash, layout: Layout) -> Agent<Flash> {
    flash.power_on();
    Agent::open(flash, layout, device_with_release()).unwrap()
}

fn release_record(sequence: u64, change: ReleaseChange) -> Vec<u8> {
    let update = TrustUpdate {
        sequence,
        change: TrustChange::Release(change),
        issued_at: 1_700_000_000,
    };
    sign_trust_update(&update, &release_root())
        .unwrap()
        .to_vec()
}

/// Update 1 adds Bob, update 2 revokes Alice.
fn records() -> Vec<Vec<u8>> {
    vec![
        release_record(
            1,
            ReleaseChange::AddKey {
                public_key: bob().public_key(),
            },
        ),
        release_record(
            2,
            ReleaseChange::RevokeKey {
                key_id: KeyId::of(&alice().public_key()),
            },
        ),
    ]
}

fn server_with(records: &[Vec<u8>]) -> Server {
    Server {
        keyring_updates: records.to_vec(),
        ..Server::default()
    }
}

fn alice_revoked(agent: &Agent<Flash>) -> bool {
    agent
        .release_trust()
        .key(KeyId::of(&alice().public_key()))
        .expect("Alice's entry")
        .is_revoked()
}

/// After power-on: update 1 with Alice trusted, or update 2 with Alice revoked; Bob trusted in
/// both. The next poll brings it to update 2 for good.
fn assert_old_or_new(flash: Flash, layout: Layout, what: &str) {
    let mut agent = open(flash, layout);
    let found = agent.keyring().update_sequence();
    assert!(found == 1 || found == 2, "{what}: keyring at {found}");
    assert_eq!(
        alice_revoked(&agent),
        found == 2,
        "{what}: sequence {found}"
    );
    assert!(
        agent
            .release_trust()
            .key(KeyId::of(&bob().public_key()))
            .is_some_and(|k| !k.is_revoked()),
        "{what}: Bob"
    );
    let polled = poll(
        &mut agent,
        &mut server_with(&records()),
        &mut RecordingNpu::default(),
    );
    assert!(matches!(polled, Ok(Poll::UpToDate)), "{what}: {polled:?}");
    let agent = open(agent.into_flash(), layout);
    assert_eq!(
        agent.keyring().update_sequence(),
        2,
        "{what}: after healing"
    );
    assert!(alice_revoked(&agent), "{what}: after healing");
}

#[test]
fn survives_a_power_cut_at_and_inside_every_flash_operation_of_a_release_key_update() {
    let layout = release_layout();
    let mut agent = open(blank_flash(&layout), layout);
    poll(
        &mut agent,
        &mut server_with(&records()[..1]),
        &mut RecordingNpu::default(),
    )
    .unwrap();
    assert_eq!(agent.keyring().update_sequence(), 1);
    assert!(!alice_revoked(&agent));
    let flash = agent.into_flash();

    let base = flash.ops();
    let mut dry = open(flash.clone(), layout);
    poll(
        &mut dry,
        &mut server_with(&records()),
        &mut RecordingNpu::default(),
    )
    .unwrap();
    let ops = dry.flash().ops() - base;
    // Erases of the bank, two release copies, two keyring copies.
    assert!(ops >= 5, "{ops}");
    let mut cuts = 0;
    for n in 0..ops {
        let mut cases = vec![Cut::BeforeOp(base + n)];
        for after_bytes in [0, 16, 300, 760] {
            cases.push(Cut::During {
                op: base + n,
                after_bytes,
            });
        }
        for (i, cut) in cases.into_iter().enumerate() {
            for seed in 0..2 {
                let mut f = flash.clone();
                f.seed(seed * 31 + n + i as u64);
                f.cut(cut);
                let mut agent = Agent::open(f, layout, device_with_release()).unwrap();
                let _ = poll(
                    &mut agent,
                    &mut server_with(&records()),
                    &mut RecordingNpu::default(),
                );
                let f = agent.into_flash();
                if f.power_was_cut() {
                    cuts += 1;
                }
                assert_old_or_new(f, layout, &format!("{cut:?} seed {seed}"));
            }
        }
    }
    assert!(cuts > 0);
}

#[test]
fn rejects_a_release_trust_the_banks_cannot_hold() {
    // The common layout's banks hold two keyring records and no release record.
    let layout = layout(2048);
    let mut agent = open(blank_flash(&layout), layout);
    let polled = poll(
        &mut agent,
        &mut server_with(&records()[..1]),
        &mut RecordingNpu::default(),
    );
    assert!(
        matches!(
            polled,
            Err(device_agent::Error::ReleaseTrustNoRoom { needed: 2560, .. })
        ),
        "{polled:?}"
    );
    assert_eq!(agent.keyring().update_sequence(), 0, "nothing applied");
}
