//! The trust state under a device-unique key (issue 35, point 6): with `Trust::with_device_key`
//! every record in flash (journal, keyring, slot descriptors) carries a MAC in its check word,
//! and a record rewritten by someone without the key, even with a CRC that checks, is read as
//! torn. The same forgeries, on a device without a key, are believed: the tests show both.
mod common;

use common::*;
use device_agent::{Layout, Poll, RecordingNpu};
use npub_core::manifest::KeyringChange;

const KEY: [u8; 32] = [0x4B; 32];

/// CRC-32 (IEEE), as a flash programmer computes it.
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

/// Rewrites the record of `len` bytes at `at` in `image` by `edit`, with a CRC-32 that checks.
fn forge(image: &mut [u8], at: usize, len: usize, edit: impl Fn(&mut [u8])) {
    let r = &mut image[at..at + len];
    edit(r);
    let crc = crc32(&r[..len - 4]);
    r[len - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// A device (keyed or not) that applied keyring update 1 (key 2 replaces key 1, revoked) and
/// installed a pack signed by key 2: its flash.
fn rotated_and_installed(layout: Layout) -> Flash {
    let c = small();
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.publish(
        1,
        KeyringChange::Replace {
            revoke: signing_key().key_id(),
            public_key: signing_key_2().public_key(),
        },
    );
    server.offer_manifest(manifest_signed_by(&c.pack, 1, &signing_key_2()).to_vec(), 1);
    server.serve(&c.pack);
    assert!(matches!(
        poll(&mut agent, &mut server, &mut RecordingNpu::default()),
        Ok(Poll::Installed(_))
    ));
    agent.into_flash()
}

/// Where the keyring record (update 1) is: the bank whose record says update sequence 1.
fn keyring_record(flash: &Flash, layout: &Layout) -> usize {
    (0..2)
        .map(|b| layout.keyring_bank(b) as usize)
        .find(|&at| flash.image()[at + 8..at + 16] == 1u64.to_le_bytes())
        .expect("the keyring record")
}

/// Un-revokes key 1 in a keyring record (its entry is the first: `revoked` at byte 20 + 32).
fn unrevoke(r: &mut [u8]) {
    assert_eq!(r[52], 1, "key 1 is revoked");
    r[52] = 0;
}

#[test]
fn a_keyed_device_keeps_its_state_across_power_on_and_a_keyless_one_cannot_read_it() {
    let layout = layout(2048);
    seal_records_with(Some(KEY));
    let flash = rotated_and_installed(layout);
    let agent = power_on(flash.clone(), layout);
    assert_eq!(agent.keyring().update_sequence(), 1);
    assert_eq!(agent.state().last_sequence(), 1);
    assert!(agent.state().active().is_some());

    // The same flash under another key, or none: every record reads as torn.
    for other in [None, Some([0x4C; 32])] {
        seal_records_with(other);
        let agent = power_on(flash.clone(), layout);
        assert_eq!(agent.keyring().update_sequence(), 0, "{other:?}");
        assert_eq!(agent.state().active(), None, "{other:?}");
        assert_eq!(agent.state().last_sequence(), 0, "{other:?}");
    }
}

#[test]
fn rejects_a_keyring_record_rewritten_with_a_valid_crc_but_no_mac() {
    let layout = layout(2048);
    // Without a key, the forgery works: that is what the key is for.
    seal_records_with(None);
    let flash = rotated_and_installed(layout);
    let at = keyring_record(&flash, &layout);
    let mut image = flash.image().to_vec();
    for copy in 0..2 {
        forge(&mut image, at + copy * 512, 512, unrevoke);
    }
    let agent = power_on(Flash::from_image(image), layout);
    let key1 = agent.keyring().get(signing_key().key_id()).unwrap();
    assert!(
        !key1.is_revoked(),
        "a CRC is no defence against a flash programmer"
    );

    // With a key, the same forgery is a torn record: both copies refused, and the bank skipped
    // (the other bank holds nothing older, so the factory keyring stands, and the server's
    // updates are fetched again before the next manifest is verified).
    seal_records_with(Some(KEY));
    let flash = rotated_and_installed(layout);
    let at = keyring_record(&flash, &layout);
    let mut image = flash.image().to_vec();
    for copy in 0..2 {
        forge(&mut image, at + copy * 512, 512, unrevoke);
    }
    let agent = power_on(Flash::from_image(image.clone()), layout);
    assert_eq!(agent.keyring().update_sequence(), 0);
    let mut agent = agent;
    let mut server = Server::default();
    server.publish(
        1,
        KeyringChange::Replace {
            revoke: signing_key().key_id(),
            public_key: signing_key_2().public_key(),
        },
    );
    poll(&mut agent, &mut server, &mut RecordingNpu::default()).unwrap();
    let key1 = agent.keyring().get(signing_key().key_id()).unwrap();
    assert!(key1.is_revoked(), "revoked again from the server's records");

    // A record with a wrong MAC (made under another key) is refused the same way.
    let mut image = flash.image().to_vec();
    for copy in 0..2 {
        let r = &mut image[at + copy * 512..at + copy * 512 + 512];
        r[508..].copy_from_slice(&[0xA5; 4]);
    }
    let agent = power_on(Flash::from_image(image), layout);
    assert_eq!(agent.keyring().update_sequence(), 0);
}

#[test]
fn rejects_a_journal_record_rewritten_with_a_valid_crc_but_no_mac() {
    let layout = layout(2048);
    // The attack: every journal record's replay floor (`last_sequence`, bytes 8..16) set back
    // to 0, so that an old manifest could be played again.
    let lower_floor = |r: &mut [u8]| r[8..16].copy_from_slice(&0u64.to_le_bytes());
    let forged = |flash: &Flash| {
        let mut image = flash.image().to_vec();
        for bank in 0..2 {
            let start = layout.bank(bank) as usize;
            for at in (start..start + layout.journal_bank_bytes as usize).step_by(128) {
                if image[at..at + 4] == *b"NPJ2" {
                    forge(&mut image, at, 128, lower_floor);
                }
            }
        }
        Flash::from_image(image)
    };
    seal_records_with(None);
    let flash = rotated_and_installed(layout);
    assert_eq!(power_on(forged(&flash), layout).state().last_sequence(), 0);

    seal_records_with(Some(KEY));
    let flash = rotated_and_installed(layout);
    let agent = power_on(forged(&flash), layout);
    // Every record refused: the journal mounts empty, and nothing the forger wrote is believed.
    // (The descriptors, MAC'd as well, give the installed pack back at boot.)
    assert_eq!(agent.state().active(), None);
    let mut agent = agent;
    boot(&mut agent, &mut RecordingNpu::default()).unwrap();
    assert_eq!(agent.state().active().map(|_| ()), Some(()));
    assert_eq!(
        agent.state().last_sequence(),
        1,
        "the floor from the descriptor"
    );
}
