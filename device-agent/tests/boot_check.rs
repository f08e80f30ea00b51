//! The boot check (`Layout::boot_check`) on a NOR of 1 KiB sectors, where each slot keeps its
//! signed manifest beside its descriptor: a power cut at every program and erase of an install
//! (before it, and torn after its first byte, half-way and before its last) ends, after a
//! reboot, in a slot that passes the check, and the resumed install in the new one; a flipped
//! byte in the stored manifest or in the pack is refused at boot and the other slot bound;
//! a revoked signing key's pack is refused, a rotated one's is not. Without the boot check the
//! stored manifest is not read (a flip there goes unnoticed), and the pack is checked against
//! the journal's SHA-256 only (which a flip in the pack still fails).
mod common;

use common::*;
use device_agent::nor_emu::{Cut, NorEmu, OpKind};
use device_agent::{
    Agent, Booted, Device, Error, JournalOnly, Layout, LayoutError, RecordingNpu, Slot, Trust,
};
use npub_core::manifest::{KeyId, KeyringChange, Policy, VerifiedManifest};
use npub_core::{Accel, ManifestError};

/// 1 KiB sectors: the smallest that keep the stored manifest.
const SECTOR: usize = 1024;
type Big = NorEmu<WRITE, SECTOR>;
const SLOT: u32 = 4 * SECTOR as u32;
const CAPACITY: u32 = SLOT - SECTOR as u32;

fn big_layout(boot_check: bool) -> Layout {
    Layout::contiguous(0, 2 * SECTOR as u32, SLOT, SECTOR as u32, XIP_BASE)
        .with_boot_check(boot_check)
}

/// Two packs of the same model: the one installed first (sequence 1), the upgrade (sequence 2).
fn packs() -> (Vec<u8>, Vec<u8>) {
    (small().pack, case_with_scratch("conv1_u55_256", 16).pack)
}

fn trust_both_keys() -> Trust {
    Trust::new(
        &[signing_key().public_key(), signing_key_2().public_key()],
        &[root_key().public_key()],
    )
    .unwrap()
}

fn device_with(trust: Trust) -> Device {
    Device { trust, ..device() }
}

fn verify_for(manifest: &[u8], trust: &Trust) -> VerifiedManifest {
    let policy = Policy {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        slot_bytes: CAPACITY,
        last_sequence: 0,
        now: None,
    };
    npub_core::manifest::verify(manifest, &trust.factory_keyring().unwrap(), &policy).unwrap()
}

/// Powers `flash` on (a cut armed after the power-on, if any) and boots it.
fn boot_on(
    mut flash: Big,
    layout: Layout,
    dev: Device,
    cut: Option<Cut>,
) -> (Agent<Big, JournalOnly>, Result<Booted, Error>) {
    flash.power_on();
    if let Some(cut) = cut {
        flash.cut(cut);
    }
    let mut mem = ArenaMem::new();
    Agent::power_on(flash, JournalOnly, layout, dev)
        .unwrap()
        .boot(&mut RecordingNpu::default(), &mut mem.arena())
}

fn bound_sequence(booted: &Result<Booted, Error>) -> Option<u64> {
    match booted {
        Ok(b) => Some(b.bound.pack().sequence),
        Err(Error::NoBootableSlot) => None,
        Err(e) => panic!("boot failed with {e}"),
    }
}

/// Installs `manifest`'s pack (served from `pack`) on an agent; its result.
fn install_on(
    agent: &mut Agent<Big, JournalOnly>,
    pack: &[u8],
    manifest: &VerifiedManifest,
) -> Result<(), Error> {
    let mut server = Server::default();
    server.serve(pack);
    let mut mem = ArenaMem::new();
    agent
        .install(
            manifest,
            &mut server,
            &mut RecordingNpu::default(),
            &mut mem.arena(),
        )
        .map(|_| ())
}

/// A 1 KiB-sector device with the boot check on, holding `installs` in order, each confirmed.
fn installed(dev: &Device, installs: &[(&[u8], &VerifiedManifest)]) -> Big {
    let layout = big_layout(true);
    let mut flash = Big::new(layout.end() as usize);
    for (pack, manifest) in installs {
        let (mut agent, _) = boot_on(flash, layout, *dev, None);
        install_on(&mut agent, pack, manifest).unwrap();
        flash = agent.into_flash();
    }
    flash
}

/// Flash offset of `slot`'s stored manifest part.
fn stored_at(layout: &Layout, slot: Slot) -> u32 {
    layout.slot(slot) + CAPACITY + 512
}

#[test]
fn a_power_cut_at_every_step_of_an_install_with_boot_check_ends_in_a_good_slot() {
    let (old, new) = packs();
    let dev = device();
    let old_m = verified(&old, 1, CAPACITY);
    let new_m = verified(&new, 2, CAPACITY);
    let layout = big_layout(true);
    for (name, before, allowed) in [
        ("first install", installed(&dev, &[]), vec![None, Some(2)]),
        (
            "upgrade",
            installed(&dev, &[(&old, &old_m)]),
            vec![Some(1), Some(2)],
        ),
    ] {
        // The install as it runs without a cut, to learn its operations.
        let (mut agent, _) = boot_on(before.clone(), layout, dev, None);
        let base = agent.flash().ops();
        install_on(&mut agent, &new, &new_m).unwrap();
        let ops = agent.flash().log()[base as usize..].to_vec();
        let parts = [stored_at(&layout, Slot::A), stored_at(&layout, Slot::B)];
        let stored = ops
            .iter()
            .filter(|o| o.kind == OpKind::Program && parts.contains(&o.offset))
            .count();
        assert!(
            stored >= 1,
            "{name}: the stored manifest was never programmed"
        );
        let mut cuts = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let n = base + i as u64;
            cuts.push(Cut::BeforeOp(n));
            for after_bytes in [1, op.len / 2, op.len - 1] {
                cuts.push(Cut::During { op: n, after_bytes });
            }
        }
        for (i, &cut) in cuts.iter().enumerate() {
            let mut flash = before.clone();
            flash.seed(i as u64);
            // Boot (nothing written to a slot), then the install with the cut armed.
            let (mut agent, _) = boot_on(flash, layout, dev, None);
            agent.flash_mut().cut(cut);
            let _ = install_on(&mut agent, &new, &new_m);
            assert!(
                agent.flash().power_was_cut(),
                "{name}: {cut:?} never happened"
            );
            let (mut agent, booted) = boot_on(agent.into_flash(), layout, dev, None);
            let seq = bound_sequence(&booted);
            assert!(
                allowed.contains(&seq),
                "{name}: after {cut:?} boot bound {seq:?} ({booted:?}), allowed {allowed:?}"
            );
            // The interrupted install runs to its end (refused as a replay when the cut came
            // after it consumed the sequence and boot confirmed it); the next boot passes the
            // check on the new pack.
            let _ = install_on(&mut agent, &new, &new_m);
            let (agent, booted) = boot_on(agent.into_flash(), layout, dev, None);
            assert_eq!(
                bound_sequence(&booted),
                Some(2),
                "{name}: after {cut:?} and recovery: {booted:?}"
            );
            assert_eq!(booted.unwrap().skipped, None, "{name}: after {cut:?}");
            assert_eq!(agent.flash().violations(), 0, "{name}: after {cut:?}");
        }
        println!(
            "{name}: {} cut points over {} operations",
            cuts.len(),
            ops.len()
        );
    }
}

#[test]
fn rejects_a_flipped_byte_in_the_stored_manifest_at_boot_with_boot_check_only() {
    let (old, new) = packs();
    let dev = device();
    let old_m = verified(&old, 1, CAPACITY);
    let new_m = verified(&new, 2, CAPACITY);
    let flash = installed(&dev, &[(&old, &old_m), (&new, &new_m)]);
    let on = big_layout(true);
    let (_, booted) = boot_on(flash.clone(), on, dev, None);
    assert_eq!(bound_sequence(&booted), Some(2), "whole: the check passes");
    let at = stored_at(&on, Slot::B);

    // A flipped bit anywhere in the part (here: in the signature): its check word fails.
    let mut torn = flash.clone();
    torn.flip_stored_bit(at + 8 + 250, 3);
    let (_, booted) = boot_on(torn.clone(), on, dev, None);
    let booted = booted.unwrap();
    assert_eq!(booted.bound.pack().sequence, 1, "the other slot is bound");
    let skipped = booted.skipped.expect("the refusal is reported");
    assert_eq!((skipped.slot, skipped.sequence), (Slot::B, 2));
    assert_eq!(
        skipped.reason,
        Error::StoredManifestMissing { slot: Slot::B }
    );
    // Without the check the stored manifest is not read: the pack still matches the journal.
    let (_, booted) = boot_on(torn, big_layout(false), dev, None);
    assert_eq!(
        bound_sequence(&booted),
        Some(2),
        "not caught without the check"
    );

    // A flipped byte with the check word made again (anyone can compute a CRC): the signature
    // no longer verifies.
    let mut forged = flash.clone();
    let mut part = flash.image()[at as usize..at as usize + 512].to_vec();
    part[8 + 24] ^= 0x01; // the model name's first byte
    let crc = crc32(&part[..508]);
    part[508..].copy_from_slice(&crc.to_le_bytes());
    rewrite(&mut forged, at, &part);
    let (_, booted) = boot_on(forged.clone(), on, dev, None);
    let booted = booted.unwrap();
    assert_eq!(booted.bound.pack().sequence, 1);
    assert!(
        matches!(
            booted.skipped.unwrap().reason,
            Error::StoredManifestRefused {
                slot: Slot::B,
                error: npub_core::Error::Manifest(ManifestError::BadSignature { .. })
            }
        ),
        "{booted:?}"
    );
    let (_, booted) = boot_on(forged, big_layout(false), dev, None);
    assert_eq!(
        bound_sequence(&booted),
        Some(2),
        "not caught without the check"
    );

    // The valid manifest of the *other* slot copied in: it verifies, but names another pack.
    let mut swapped = flash.clone();
    let other = stored_at(&on, Slot::A) as usize;
    let part = flash.image()[other..other + 512].to_vec();
    rewrite(&mut swapped, at, &part);
    let (_, booted) = boot_on(swapped, on, dev, None);
    assert_eq!(
        booted.unwrap().skipped.unwrap().reason,
        Error::StoredManifestMismatch { slot: Slot::B }
    );
}

#[test]
fn rejects_a_stored_manifest_rewritten_without_the_device_key() {
    // Under a device key the part carries a MAC: a rewrite with a CRC reads as torn.
    seal_records_with(Some([0x5A; 32]));
    let (old, new) = packs();
    let dev = device();
    let old_m = verified(&old, 1, CAPACITY);
    let new_m = verified(&new, 2, CAPACITY);
    let flash = installed(&dev, &[(&old, &old_m), (&new, &new_m)]);
    let on = big_layout(true);
    let (_, booted) = boot_on(flash.clone(), on, dev, None);
    assert_eq!(bound_sequence(&booted), Some(2), "sealed and whole");
    let at = stored_at(&on, Slot::B);
    let mut forged = flash.clone();
    let mut part = flash.image()[at as usize..at as usize + 512].to_vec();
    part[8 + 24] ^= 0x01;
    let crc = crc32(&part[..508]);
    part[508..].copy_from_slice(&crc.to_le_bytes());
    rewrite(&mut forged, at, &part);
    let (_, booted) = boot_on(forged, on, dev, None);
    let booted = booted.unwrap();
    assert_eq!(booted.bound.pack().sequence, 1);
    assert_eq!(
        booted.skipped.unwrap().reason,
        Error::StoredManifestMissing { slot: Slot::B }
    );
    seal_records_with(None);
}

#[test]
fn rejects_a_flipped_byte_in_the_pack_at_boot_with_or_without_boot_check() {
    let (old, new) = packs();
    let dev = device();
    let old_m = verified(&old, 1, CAPACITY);
    let new_m = verified(&new, 2, CAPACITY);
    let mut flash = installed(&dev, &[(&old, &old_m), (&new, &new_m)]);
    let on = big_layout(true);
    // A weight byte, past the header: only the digest can see it.
    flash.flip_stored_bit(on.slot(Slot::B) + new.len() as u32 - 1, 0);
    for boot_check in [true, false] {
        let (_, booted) = boot_on(flash.clone(), big_layout(boot_check), dev, None);
        let booted = booted.unwrap();
        assert_eq!(booted.bound.pack().sequence, 1, "boot_check {boot_check}");
        let skipped = booted.skipped.unwrap();
        assert_eq!(skipped.slot, Slot::B);
        assert_eq!(
            skipped.reason,
            Error::DigestMismatch { slot: Slot::B },
            "boot_check {boot_check}"
        );
    }
}

#[test]
fn a_rotated_key_still_boots_and_a_revoked_one_is_refused_with_boot_check() {
    let (old, new) = packs();
    let trust = trust_both_keys();
    let dev = device_with(trust);
    // The old pack signed with key 2, the new one with key 1.
    let old_m = verify_for(&manifest_signed_by(&old, 1, &signing_key_2()), &trust);
    let new_m = verify_for(&manifest_signed_by(&new, 2, &signing_key()), &trust);
    let flash = installed(&dev, &[(&old, &old_m), (&new, &new_m)]);
    let on = big_layout(true);

    // Rotation: a third key added, key 1 kept.
    let third = npub_core::keypair::KeyPair::from_seed([9; 32]).public_key();
    let flash = apply_keyring_update(flash, &dev, 1, KeyringChange::Add { public_key: third });
    let (_, booted) = boot_on(flash.clone(), on, dev, None);
    assert_eq!(
        bound_sequence(&booted),
        Some(2),
        "a rotated key still verifies"
    );

    // Revocation of key 1: its pack no longer boots with the check, the other one does.
    let key_id = KeyId::of(&signing_key().public_key());
    let flash = apply_keyring_update(flash, &dev, 2, KeyringChange::Revoke { key_id });
    let (_, booted) = boot_on(flash.clone(), on, dev, None);
    let booted = booted.unwrap();
    assert_eq!(booted.bound.pack().sequence, 1);
    assert_eq!(
        booted.skipped.unwrap().reason,
        Error::StoredManifestRefused {
            slot: Slot::B,
            error: npub_core::Error::Manifest(ManifestError::KeyRevoked { key_id }),
        }
    );
    let (_, booted) = boot_on(flash, big_layout(false), dev, None);
    assert_eq!(bound_sequence(&booted), Some(2), "without the check");
}

#[test]
fn rejects_boot_check_on_sectors_below_1_kib() {
    let small_sectors = layout(4096).with_boot_check(true);
    assert_eq!(
        small_sectors.validate::<Flash>(1 << 20),
        Err(LayoutError::BootCheckSectorTooSmall {
            erase: ERASE as u64,
            min: 1024
        })
    );
    assert!(
        small_sectors
            .validate::<Flash>(1 << 20)
            .unwrap_err()
            .to_string()
            .contains("boot_check needs erase sectors of at least 1024 bytes")
    );
    assert_eq!(
        layout(4096)
            .with_boot_check(false)
            .validate::<Flash>(1 << 20),
        Ok(())
    );
    assert_eq!(big_layout(true).validate::<Big>(1 << 20), Ok(()));
}

/// Polls with a server that offers no manifest, only the keyring update `change` at `sequence`:
/// the keyring is updated and stored.
fn apply_keyring_update(flash: Big, dev: &Device, sequence: u64, change: KeyringChange) -> Big {
    let (mut agent, _) = boot_on(flash, big_layout(true), *dev, None);
    // Only this update: the device asks for those after its own sequence.
    let mut server = Server::default();
    server.publish(sequence, change);
    let mut mem = ArenaMem::new();
    agent
        .poll(
            &mut server,
            &mut RecordingNpu::default(),
            &mut mem.arena(),
            None,
        )
        .unwrap();
    assert_eq!(agent.keyring().update_sequence(), sequence);
    agent.into_flash()
}

/// Rewrites `bytes` at `at` as a flash programmer would (erase-free: the emulator's image).
fn rewrite(flash: &mut Big, at: u32, bytes: &[u8]) {
    let mut image = flash.image().to_vec();
    image[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    *flash = Big::from_image(image);
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
