//! Signed manifests: the authenticity NPU1 deliberately lacks ("FNV-1a stops accidents, it stops
//! no attacker").
//!
//! A deployment is a small, fixed-width manifest signed with ed25519 that names one pack (length,
//! SHA-256, NPU1 checksum), the hardware and NPU it is for, and a **sequence** that only grows;
//! version 2 also names the pack's self-test record (its SHA-256), so the golden input and the
//! digest a device's self-test must reproduce are as signed as the pack. A device decides from
//! the 280-byte (312-byte, version 2) manifest alone whether to download, then checks the pack
//! against it as the bytes arrive. Rolling back to an older model is a *new* manifest with a
//! higher sequence that points at the older pack; replaying an old manifest is refused.
//!
//! ```text
//!  host (std)                                  device (no_std, no alloc)
//!  KeyPair ─ sign_manifest ─► 280 bytes ─────► verify(bytes, &keyring, &policy)
//!                                                    │ VerifiedManifest (only constructor: verify)
//!                                                    ▼
//!  pack bytes ──────────────────────────────► PackCheck::new(verified).feed(chunk)… .finish()
//!                                                    │ VerifiedPack: the only thing to mark bootable
//!  root KeyPair ─ sign_keyring_update ─► 144 bytes ─► keyring.apply_update(bytes, &ROOTS)
//! ```
//!
//! The layout is on [`ManifestView`] (and in `docs/manifest.md`, with the threat model and
//! the size and stack figures); the checks and the attack each stops are listed on [`verify`],
//! [`PackCheck`] and [`Keyring::apply_update`].
//!
//! Cryptography: ed25519 verified with salty's curve arithmetic under `verify_strict`'s rules
//! (`signature.rs`; signing on the host with ed25519-dalek) and SHA-256 (`sha2`), both `no_std`; the `compact-sha` feature selects sha2's small software implementation for firmware.
//! Every signature is over a domain-separation prefix ‖ the signed bytes, so a signature made for
//! one kind of record is never valid for another.

mod constants;
mod digest;
pub(crate) mod hex;
mod key_id;
mod keyring;
mod layout;
mod pack_check;
pub(crate) mod rotation;
#[cfg(feature = "std")]
mod sign;
pub(crate) mod signature;
pub(crate) mod text;
mod verify;

pub use constants::{
    MANIFEST_BYTES, MANIFEST_MAGIC, MANIFEST_MAX_BYTES, MANIFEST_V2_BYTES, MANIFEST_VERSION,
    MANIFEST_VERSION_2, ROTATION_BYTES, ROTATION_MAGIC, ROTATION_SIGNED_BYTES, ROTATION_VERSION,
    SELFTEST_DIGEST_BYTES, SIGNATURE_BYTES, SIGNED_BYTES, SIGNED_BYTES_V2,
};
pub use digest::{SHA256_PREFIX_BYTES, Sha256Prefix, sha256};
pub use key_id::{KEY_ID_BYTES, KEY_ID_DOMAIN, KeyId};
pub use keyring::{KeyEntry, Keyring};
pub use layout::{
    MANIFEST_DOMAIN, MANIFEST_DOMAIN_V2, MODEL_NAME_BYTES, MODEL_VERSION_BYTES, ManifestFields,
    ManifestView,
};
pub use pack_check::{PackCheck, VerifiedPack};
pub use rotation::{KeyringChange, KeyringUpdate, ROTATION_DOMAIN};
#[cfg(feature = "std")]
pub use sign::{PackFacts, sign_keyring_update, sign_manifest, sign_manifest_v2};
pub use signature::check_public_key;
pub use verify::{Policy, VerifiedManifest, verify};

/// Hardware class of the RA8P1 boards this project targets (EK-RA8P1 and boards wired like it);
/// the default of `npub sign --hw`. Hardware classes are the fleet operator's numbering: any
/// non-zero `u32`, one per board design whose slot layout and peripherals a pack may rely on.
/// 0 is reserved: it names no hardware, so there is no "runs anywhere" manifest.
pub const HW_CLASS_RA8P1: u32 = 1;
