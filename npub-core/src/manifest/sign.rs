//! Signing (feature `std`): the host side of manifests and keyring updates.
use super::constants::{
    MANIFEST_BYTES, MANIFEST_V2_BYTES, ROTATION_BYTES, ROTATION_SIGNED_BYTES, SIGNED_BYTES,
    SIGNED_BYTES_V2,
};
use super::layout::{MANIFEST_DOMAIN, MANIFEST_DOMAIN_V2, ManifestFields};
use super::rotation::{KeyringUpdate, ROTATION_DOMAIN};
use super::sha256;
use crate::keypair::KeyPair;
use crate::{Accel, Blob, Error};

/// What a manifest states about a pack, read off the pack itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackFacts {
    /// Its length.
    pub len: u32,
    /// Its NPU1 header checksum (word 7).
    pub checksum: u32,
    /// SHA-256 of all of it.
    pub sha256: [u8; 32],
    /// The accelerator config its header declares (informational in NPU1).
    pub accel: Accel,
}

impl PackFacts {
    /// Validates `pack` as NPU1 (a signer must not vouch for a pack the device would refuse) and
    /// reads the facts off it.
    pub fn of(pack: &[u8]) -> Result<Self, Error> {
        let blob = Blob::parse(pack)?;
        let header = blob.header();
        Ok(Self {
            len: header.total_bytes,
            checksum: header.checksum,
            sha256: sha256(pack),
            accel: header.accel(),
        })
    }
}

/// Signs `fields` with `key`: a complete 280-byte manifest. Refuses fields a device would refuse
/// on their own ([`ManifestFields::check`], text fields).
pub fn sign_manifest(
    fields: &ManifestFields<'_>,
    key: &KeyPair,
) -> Result<[u8; MANIFEST_BYTES], Error> {
    let body = fields.encode(key.key_id())?;
    let signature = key.sign(MANIFEST_DOMAIN, &body);
    let mut out = [0u8; MANIFEST_BYTES];
    out[..SIGNED_BYTES].copy_from_slice(&body);
    out[SIGNED_BYTES..].copy_from_slice(&signature);
    Ok(out)
}

/// Signs `fields` and the pack's self-test with `key`: a complete 312-byte version-2 manifest.
/// `selftest_digest` is the SHA-256 of the whole self-test record ("NPS1",
/// `release::SelfTest::digest`); all zeros is refused (a pack without a self-test gets a
/// version-1 manifest, [`sign_manifest`]).
pub fn sign_manifest_v2(
    fields: &ManifestFields<'_>,
    selftest_digest: &[u8; 32],
    key: &KeyPair,
) -> Result<[u8; MANIFEST_V2_BYTES], Error> {
    let body = fields.encode_v2(key.key_id(), selftest_digest)?;
    let signature = key.sign(MANIFEST_DOMAIN_V2, &body);
    let mut out = [0u8; MANIFEST_V2_BYTES];
    out[..SIGNED_BYTES_V2].copy_from_slice(&body);
    out[SIGNED_BYTES_V2..].copy_from_slice(&signature);
    Ok(out)
}

/// Signs a keyring update with a root key: a complete 144-byte record.
pub fn sign_keyring_update(update: &KeyringUpdate, root: &KeyPair) -> [u8; ROTATION_BYTES] {
    let body = update.encode(root.key_id());
    let signature = root.sign(ROTATION_DOMAIN, &body);
    let mut out = [0u8; ROTATION_BYTES];
    out[..ROTATION_SIGNED_BYTES].copy_from_slice(&body);
    out[ROTATION_SIGNED_BYTES..].copy_from_slice(&signature);
    out
}
