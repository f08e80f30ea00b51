//! The code measured: what a device runs to accept a deployment, and nothing else.
#![no_std]

use npub_core::manifest::{self, Keyring, PackCheck, Policy, VerifiedManifest};
use npub_core::release::{self, DeviceReleaseTrust, ReleaseFacts};
use npub_core::{Accel, Error};

/// The signed fixtures from build.rs.
pub static MANIFEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/manifest.bin"));
/// The pack the manifest describes.
pub static PACK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pack.bin"));
/// The signing key's public half.
pub static PUBKEY: &[u8; 32] = include_bytes!(concat!(env!("OUT_DIR"), "/pubkey.bin"));

/// A keyring update (add a key, sequence 1) signed by the root key.
pub static UPDATE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/update.bin"));
/// The root key's public half.
pub static ROOT: &[u8; 32] = include_bytes!(concat!(env!("OUT_DIR"), "/root.bin"));

/// The device: an RA8P1 with a 1 MiB slot, having accepted sequence 1.
pub fn policy() -> Policy {
    Policy {
        hw_class: manifest::HW_CLASS_RA8P1,
        accel: Accel::EthosU55_256,
        slot_bytes: 1 << 20,
        last_sequence: 1,
        now: Some(1_800_000_000),
    }
}

/// Manifest verification only: keyring lookup, ed25519 (SHA-512 inside), field checks.
#[inline(never)]
pub fn verify_manifest(manifest: &[u8], pubkey: &[u8; 32], policy: &Policy) -> Result<u64, Error> {
    let mut ring = Keyring::<4>::new();
    ring.add(pubkey)?;
    manifest::verify(manifest, &ring, policy).map(|m| m.sequence())
}

/// The whole path: verify the manifest, then stream the pack through `PackCheck` in 256-byte
/// chunks (SHA-256, NPU1 structure, FNV-1a, the length and checksum cross-checks).
#[inline(never)]
pub fn verify_deployment(
    manifest: &[u8],
    pack: &[u8],
    pubkey: &[u8; 32],
    policy: &Policy,
) -> Result<u32, Error> {
    let mut ring = Keyring::<4>::new();
    ring.add(pubkey)?;
    let verified = manifest::verify(manifest, &ring, policy)?;
    let mut check = PackCheck::new(verified);
    for chunk in pack.chunks(256) {
        check.feed(chunk)?;
    }
    check.finish().map(|p| p.header().total_bytes)
}

/// Phase 1 alone, for the stack figure: the keyring is the caller's (it lives in the device's
/// state, not on this call's stack).
#[inline(never)]
pub fn verify_only(
    manifest: &[u8],
    ring: &Keyring<4>,
    policy: &Policy,
) -> Result<VerifiedManifest, Error> {
    manifest::verify(manifest, ring, policy)
}

/// Phase 2 alone, for the stack figure: the pack streamed against a verified manifest.
#[inline(never)]
pub fn check_pack(verified: VerifiedManifest, pack: &[u8]) -> Result<u32, Error> {
    let mut check = PackCheck::new(verified);
    for chunk in pack.chunks(256) {
        check.feed(chunk)?;
    }
    check.finish().map(|p| p.header().total_bytes)
}

/// Provisioning, for the stack figure: adding a key checks it is a point of large order.
#[inline(never)]
pub fn provision(ring: &mut Keyring<4>, pubkey: &[u8; 32]) -> bool {
    ring.add(pubkey).is_ok()
}

/// Key rotation, for the stack figure: a root-signed update applied to the keyring.
#[inline(never)]
pub fn rotate(ring: &mut Keyring<4>, update: &[u8], root: &[u8; 32]) -> bool {
    ring.apply_update(update, core::slice::from_ref(root))
        .is_ok()
}

/// A bundle of two release signatures of the pack (model "measure" 1.0.0).
pub static BUNDLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bundle.bin"));
/// The two release public keys, one after the other.
pub static RELEASE_KEYS: &[u8; 64] = include_bytes!(concat!(env!("OUT_DIR"), "/release_keys.bin"));
/// The release root's public half.
pub static RELEASE_ROOT: &[u8; 32] = include_bytes!(concat!(env!("OUT_DIR"), "/release_root.bin"));
/// A release-root record (sequence 2) setting a 2-of-2 policy for "measure".
pub static POLICY_UPDATE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/policy_update.bin"));

/// Provisioning the release trust with the two release keys (the factory's release trust file).
#[inline(never)]
pub fn provision_release(trust: &mut DeviceReleaseTrust, keys: &[u8; 64]) -> bool {
    keys.chunks_exact(32)
        .filter_map(|k| k.try_into().ok())
        .all(|k: &[u8; 32]| trust.add_key(k).is_ok())
}

/// The release policy arriving: a release-root record applied beside the keyring.
#[inline(never)]
pub fn release_update(
    ring: &mut Keyring<4>,
    trust: &mut DeviceReleaseTrust,
    update: &[u8],
    release_root: &[u8; 32],
) -> bool {
    release::apply_update(
        ring,
        trust,
        update,
        &[],
        core::slice::from_ref(release_root),
    )
    .is_ok()
}

/// The release check of a verified manifest: the bundle against the trust's policy (2 of 2
/// here, so both signatures are verified).
#[inline(never)]
pub fn release_check(
    trust: &DeviceReleaseTrust,
    bundle: &[u8],
    verified: &VerifiedManifest,
) -> Result<u8, Error> {
    release::check(
        trust,
        bundle,
        &ReleaseFacts::of_manifest(verified, &[0; 32]),
    )
    .map(|r| r.valid())
}

/// Manifest verification and the release check, as a device with release keys runs them.
#[inline(never)]
pub fn verify_release(
    manifest: &[u8],
    pubkey: &[u8; 32],
    bundle: &[u8],
    release_keys: &[u8; 64],
    policy: &Policy,
) -> Result<u8, Error> {
    let mut ring = Keyring::<4>::new();
    ring.add(pubkey)?;
    let verified = manifest::verify(manifest, &ring, policy)?;
    let mut trust = DeviceReleaseTrust::new();
    for key in release_keys.chunks_exact(32) {
        if let Ok(key) = key.try_into() {
            trust.add_key(key)?;
        }
    }
    release_check(&trust, bundle, &verified)
}

/// A panic handler that adds nothing: the figures are the library's code, not a formatter's.
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
