//! The keyring the agent owns: keyring updates from the server applied in order before a
//! manifest is verified, stored in flash (power-cut safe like the journal) and read back at
//! power-on, so that a revoked key stays revoked across reboots.
mod common;

use common::*;
use device_agent::nor_emu::Cut;
use device_agent::{DeviceKeyring, Error, Poll, RecordingNpu};
use npub_core::manifest::{KeyId, KeyringChange};
use npub_core::{KeyringError, ManifestError};

fn id(key: &npub_core::keypair::KeyPair) -> KeyId {
    key.key_id()
}

fn add(key: &npub_core::keypair::KeyPair) -> KeyringChange {
    KeyringChange::Add {
        public_key: key.public_key(),
    }
}

fn revoke(key: &npub_core::keypair::KeyPair) -> KeyringChange {
    KeyringChange::Revoke { key_id: id(key) }
}

fn is_revoked(ring: &DeviceKeyring, key: &npub_core::keypair::KeyPair) -> Option<bool> {
    ring.get(id(key)).map(|e| e.is_revoked())
}

/// Rotation to key 2, then key 1 revoked: the server's two records.
fn rotated_server() -> Server {
    let mut server = Server::default();
    server.publish(1, add(&signing_key_2()));
    server.publish(2, revoke(&signing_key()));
    server
}

#[test]
fn applies_updates_in_order_before_verifying_and_keeps_them_across_power_on() {
    let c = small();
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    assert_eq!(agent.keyring().update_sequence(), 0);
    assert_eq!(is_revoked(agent.keyring(), &signing_key()), Some(false));

    let mut server = rotated_server();
    // Signed by key 2, which only the first update makes trusted.
    server.offer_manifest(manifest_signed_by(&c.pack, 1, &signing_key_2()).to_vec(), 1);
    server.serve(&c.pack);
    let mut npu = RecordingNpu::default();
    assert!(matches!(
        poll(&mut agent, &mut server, &mut npu),
        Ok(Poll::Installed(_))
    ));
    assert_eq!(server.keyring_requests, [0]);
    assert_eq!(agent.keyring().update_sequence(), 2);
    assert_eq!(is_revoked(agent.keyring(), &signing_key()), Some(true));
    assert_eq!(is_revoked(agent.keyring(), &signing_key_2()), Some(false));

    // Up to date: the next poll asks for nothing.
    let _ = poll(&mut agent, &mut server, &mut npu);
    assert_eq!(server.keyring_requests, [0]);

    // A reboot reads the keyring from flash, not the factory keyring.
    let agent = power_on(agent.into_flash(), layout);
    assert_eq!(agent.keyring(), &{
        let mut ring = DeviceKeyring::new();
        let k1 = ring.add(&signing_key().public_key()).unwrap();
        ring.add(&signing_key_2().public_key()).unwrap();
        ring.revoke(k1).unwrap();
        ring.set_update_sequence(2);
        ring
    });
}

#[test]
fn catches_up_several_updates_in_one_poll() {
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    let keys: Vec<_> = (20..25)
        .map(|n| npub_core::keypair::KeyPair::from_seed([n; 32]))
        .collect();
    let mut server = Server::default();
    let mut seq = 0;
    for k in &keys {
        seq += 1;
        server.publish(seq, add(k));
    }
    seq += 1;
    server.publish(seq, revoke(&signing_key()));
    seq += 1;
    server.publish(
        seq,
        KeyringChange::Replace {
            revoke: id(&keys[0]),
            public_key: signing_key_2().public_key(),
        },
    );
    // Nothing to install; the keyring still catches up.
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::UpToDate)
    ));
    // Seven records, four per request: two requests, the second after the fourth.
    assert_eq!(server.keyring_requests, [0, 4]);
    assert_eq!(agent.keyring().update_sequence(), 7);
    assert_eq!(agent.keyring().entries().count(), 7);
    assert_eq!(is_revoked(agent.keyring(), &keys[0]), Some(true));
    assert_eq!(is_revoked(agent.keyring(), &signing_key()), Some(true));
    let agent = power_on(agent.into_flash(), layout);
    assert_eq!(agent.keyring().update_sequence(), 7);
}

#[test]
fn rejects_a_manifest_signed_by_a_revoked_key_after_a_reboot() {
    let c = small();
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.publish(
        1,
        KeyringChange::Replace {
            revoke: id(&signing_key()),
            public_key: signing_key_2().public_key(),
        },
    );
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::UpToDate)
    ));

    // After a reboot, a server that announces nothing (an attacker replaying an old manifest,
    // say) meets the stored keyring, not the factory one.
    let mut agent = power_on(agent.into_flash(), layout);
    let mut replay = Server::default();
    replay.offer(&c.pack, 1);
    let err = poll(&mut agent, &mut replay, &mut RecordingNpu::default()).unwrap_err();
    assert_eq!(
        err,
        Error::Rejected(npub_core::Error::Manifest(ManifestError::KeyRevoked {
            key_id: id(&signing_key())
        }))
    );
    assert_eq!(replay.served, 0);
    assert_eq!(agent.state().active(), None);

    // Key 2 still installs.
    let mut honest = Server::default();
    honest.offer_manifest(manifest_signed_by(&c.pack, 1, &signing_key_2()).to_vec(), 1);
    honest.serve(&c.pack);
    assert!(matches!(
        poll(&mut agent, &mut honest, &mut RecordingNpu::default()),
        Ok(Poll::Installed(_))
    ));
}

#[test]
fn rejects_a_keyring_update_not_signed_by_a_root_and_keeps_the_ones_before_it() {
    let c = small();
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.publish(1, add(&signing_key_2()));
    // Sequence 2 signed by a key that is not a root of this device.
    let stranger = npub_core::keypair::KeyPair::from_seed([0x66; 32]);
    let forged = npub_core::manifest::sign_keyring_update(
        &npub_core::manifest::KeyringUpdate {
            sequence: 2,
            change: revoke(&signing_key_2()),
            issued_at: 0,
        },
        &stranger,
    );
    server.keyring_updates.push(forged.to_vec());
    server.offer(&c.pack, 1);
    let err = poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap_err();
    assert_eq!(
        err,
        Error::KeyringUpdate {
            sequence: 2,
            error: npub_core::Error::Keyring(KeyringError::UpdateUnknownRootKey {
                key_id: stranger.key_id()
            })
        }
    );
    // Nothing was installed with a keyring the server says is stale; the first update is kept.
    assert_eq!(server.served, 0);
    assert_eq!(agent.keyring().update_sequence(), 1);
    let agent = power_on(agent.into_flash(), layout);
    assert_eq!(agent.keyring().update_sequence(), 1);
    assert_eq!(is_revoked(agent.keyring(), &signing_key_2()), Some(false));
}

/// A flash whose keyring holds update 1 (key 2 added), and the server that also has update 2
/// (key 1 revoked).
fn flash_with_one_update(layout: &device_agent::Layout) -> (Flash, Server) {
    let mut agent = power_on(blank_flash(layout), *layout);
    let mut server = Server::default();
    server.publish(1, add(&signing_key_2()));
    poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap();
    assert_eq!(agent.keyring().update_sequence(), 1);
    server.publish(2, revoke(&signing_key()));
    (agent.into_flash(), server)
}

/// After a cut, power-on finds update 1 or update 2, never anything else; the next poll brings
/// it to update 2 for good.
fn assert_old_or_new(flash: Flash, layout: device_agent::Layout, server: &Server, what: &str) {
    let mut agent = power_on(flash, layout);
    let found = agent.keyring().update_sequence();
    assert!(found == 1 || found == 2, "{what}: keyring at {found}");
    assert_eq!(
        is_revoked(agent.keyring(), &signing_key()),
        Some(found == 2),
        "{what}"
    );
    assert_eq!(is_revoked(agent.keyring(), &signing_key_2()), Some(false));
    let mut server = Server {
        keyring_updates: server.keyring_updates.clone(),
        ..Server::default()
    };
    poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap();
    for _ in 0..2 {
        agent = power_on(agent.into_flash(), layout);
        assert_eq!(
            agent.keyring().update_sequence(),
            2,
            "{what}: after healing"
        );
    }
}

#[test]
fn survives_a_power_cut_at_and_inside_every_flash_operation_of_a_keyring_update() {
    let layout = layout(2048);
    let (flash, server) = flash_with_one_update(&layout);
    let base = flash.ops();
    let mut dry = power_on(flash.clone(), layout);
    poll(
        &mut dry,
        &mut Server {
            keyring_updates: server.keyring_updates.clone(),
            ..Server::default()
        },
        &mut RecordingNpu::default(),
    )
    .unwrap();
    let ops = dry.flash().ops() - base;
    // An erase and two programs.
    assert!(ops >= 3, "{ops}");
    let mut cuts = 0;
    for n in 0..ops {
        let mut cases = vec![Cut::BeforeOp(base + n)];
        for after_bytes in [0, 16, 200, 496, 1000] {
            cases.push(Cut::During {
                op: base + n,
                after_bytes,
            });
        }
        for (i, cut) in cases.into_iter().enumerate() {
            for seed in 0..3 {
                let mut f = flash.clone();
                f.seed(seed * 31 + n + i as u64);
                f.cut(cut);
                let mut agent = power_on_keeping_cut(f, layout);
                let mut s = Server {
                    keyring_updates: server.keyring_updates.clone(),
                    ..Server::default()
                };
                let _ = poll(&mut agent, &mut s, &mut RecordingNpu::default());
                let f = agent.into_flash();
                if f.power_was_cut() {
                    cuts += 1;
                }
                assert_old_or_new(f, layout, &server, &format!("{cut:?} seed {seed}"));
            }
        }
    }
    assert!(cuts > 0);
}

/// [`power_on`] without restoring the power: the armed cut stays armed.
fn power_on_keeping_cut(flash: Flash, layout: device_agent::Layout) -> device_agent::Agent<Flash> {
    device_agent::Agent::open(flash, layout, device()).unwrap()
}

#[test]
fn survives_a_read_glitch_and_a_rotten_copy_of_the_keyring_record() {
    let layout = layout(2048);
    let (flash, server) = flash_with_one_update(&layout);
    let mut agent = power_on(flash, layout);
    let mut s = Server {
        keyring_updates: server.keyring_updates.clone(),
        ..Server::default()
    };
    poll(&mut agent, &mut s, &mut RecordingNpu::default()).unwrap();
    let flash = agent.into_flash();
    // Update 2 went into the bank update 1 did not use: find it by its content.
    let bank = (0..2)
        .map(|b| layout.keyring_bank(b))
        .find(|&at| {
            let r = &flash.image()[at as usize..at as usize + 512];
            r[8..16] == 2u64.to_le_bytes()
        })
        .expect("the newest record");

    // One glitch on each copy: each is read again.
    let mut f = flash.clone();
    f.glitch_read(bank + 100, 3);
    f.glitch_read(bank + 512 + 100, 3);
    assert_eq!(power_on(f, layout).keyring().update_sequence(), 2);

    // Copy 0 rotted for good: copy 1 holds it, and power-on writes it again in two copies.
    let mut f = flash.clone();
    f.flip_stored_bit(bank + 40, 1);
    let agent = power_on(f, layout);
    assert_eq!(agent.keyring().update_sequence(), 2);
    let mut f = agent.into_flash();
    // The rewrite holds even when copy 1 rots next.
    f.flip_stored_bit(bank + 512 + 40, 1);
    let agent = power_on(f, layout);
    assert_eq!(agent.keyring().update_sequence(), 2);
}

#[test]
fn a_factory_device_writes_no_keyring_until_an_update_arrives() {
    let layout = layout(2048);
    let mut agent = power_on(blank_flash(&layout), layout);
    poll(
        &mut agent,
        &mut Server::default(),
        &mut RecordingNpu::default(),
    )
    .unwrap();
    let flash = agent.into_flash();
    let area = &flash.image()
        [layout.keyring as usize..(layout.keyring + 2 * layout.keyring_bank_bytes) as usize];
    assert!(area.iter().all(|&b| b == 0xFF));
}
