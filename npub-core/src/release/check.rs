//! The device's release check: does a bundle of release signatures meet the release policy for
//! the model a verified manifest deploys?
//!
//! [`check`] runs after `manifest::verify` and before anything is erased or downloaded: the
//! facts it checks against are the verified manifest's (pack SHA-256, model name and version,
//! accelerator, IO digest) and the self-test delivered with the pack, and the pack itself is
//! later held to the same SHA-256 by `PackCheck`. So a pack is installed only if the server
//! signed its manifest *and* enough release keys released exactly that pack as exactly that
//! model and version.
use super::bundle::Bundle;
use super::layout::{RELEASE_DOMAIN, ReleaseView};
use super::model_id::ModelId;
use super::policy::ReleasePolicy;
use super::trust::{Applies, ReleaseTrust};
use crate::manifest::{KeyId, Sha256Prefix, VerifiedManifest, signature};
use crate::{Accel, Error, ReleaseError};

/// What the device is about to install, that the release signatures must name. Borrowed, not
/// copied: on a device it points into the verified manifest, and the check's frame stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFacts<'a> {
    /// SHA-256 of the pack (the verified manifest's `pack_sha256`).
    pub pack_sha256: &'a [u8; 32],
    /// The model name (the manifest's).
    pub model_name: &'a str,
    /// The model version (the manifest's).
    pub model_version: &'a str,
    /// The accelerator configuration (the manifest's, which is the device's).
    pub accel: Accel,
    /// The IO-bindings digest (the manifest's; all zeros = none).
    pub io_digest: &'a [u8; 32],
    /// SHA-256 of the self-test delivered with the pack; all zeros when none was.
    pub selftest_digest: &'a [u8; 32],
}

impl<'a> ReleaseFacts<'a> {
    /// The facts of a verified manifest, with the digest of the self-test delivered beside the
    /// pack (all zeros: none).
    pub fn of_manifest(manifest: &'a VerifiedManifest, selftest_digest: &'a [u8; 32]) -> Self {
        Self {
            pack_sha256: manifest.pack_sha256_ref(),
            model_name: manifest.model_name(),
            model_version: manifest.model_version(),
            accel: manifest.accel(),
            io_digest: manifest.io_digest_ref(),
            selftest_digest,
        }
    }

    /// The facts of a verified manifest as it signs them: its own `selftest_digest` (version 2),
    /// all zeros for a version-1 manifest, whose pack carries no self-test.
    pub fn of_signed_manifest(manifest: &'a VerifiedManifest) -> Self {
        Self::of_manifest(manifest, manifest.selftest_digest_or_zeros())
    }
}

/// A release that met its policy (or a device whose release trust is inactive). Its fields are
/// private and [`check`] is the only constructor, so holding one proves the check ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pack_sha256: [u8; 32],
    model: ModelId,
    threshold: u8,
    valid: u8,
}

impl Released {
    /// The pack SHA-256 it was checked for: an install holds the pack to it.
    pub fn pack_sha256(&self) -> [u8; 32] {
        self.pack_sha256
    }

    /// The model's id.
    pub fn model(&self) -> ModelId {
        self.model
    }

    /// False when the device's release trust is inactive and nothing was required.
    pub fn is_required(&self) -> bool {
        self.threshold > 0
    }

    /// *k*, the valid signatures the policy needed (0: none required).
    pub fn threshold(&self) -> u8 {
        self.threshold
    }

    /// Valid signatures counted (the check stops counting at the threshold).
    pub fn valid(&self) -> u8 {
        self.valid
    }
}

/// Checks `bundle` (empty: the deployment carries none) against the policy `trust` applies to
/// `facts.model_name`.
///
/// While `trust` is inactive (no release key, no policy) nothing is required and the bundle is
/// not read: the device behaves as before release signatures. Otherwise:
///
/// | # | check                                                                 | stops                                   | `ReleaseError` |
/// |---|-----------------------------------------------------------------------|-----------------------------------------|----------------|
/// | 1 | a bundle is there                                                     | an unreleased pack                      | `Missing` |
/// | 2 | the bundle's format ([`Bundle::parse`])                                | garbage, smuggled bytes                 | `Bundle*`, `Signature*` |
/// | 3 | per signature: its key is a release key of the device                 | a key nobody provisioned                | `UnknownKey` |
/// | 4 | … not revoked                                                         | a leaked release key                    | `KeyRevoked` |
/// | 5 | … named by the model's policy (when the model has one)                | team B releasing team A's model         | `KeyNotInPolicy` |
/// | 6 | … ed25519 (strict) over [`RELEASE_DOMAIN`] ‖ bytes 0..224             | forgery, tampering                      | `BadSignature` |
/// | 7 | … it signs this pack's SHA-256                                        | a release of another pack               | `OtherPack` |
/// | 8 | … this model name                                                     | model A released, deployed as model B   | `OtherModel` |
/// | 9 | … this version                                                        | 1.0 released, deployed as 2.0           | `OtherVersion` |
/// | 10 | … this accelerator                                                   | a stream for another NPU configuration  | `OtherAccel` |
/// | 11 | … these IO bindings                                                  | bindings swapped by the server          | `OtherIoDigest` |
/// | 12 | … this self-test                                                     | a self-test swapped by the server       | `OtherSelfTest` |
/// | 13 | at least *k* signatures pass 3–12, each by a different key           | one person releasing alone              | `TooFewSignatures` |
///
/// Signatures are counted in bundle order and counting stops at *k*; a signature refused by
/// 3–12 does not stop the others from counting (a bundle may carry a signature by a key this
/// device does not hold yet). When fewer than *k* pass, the error is the first refused
/// signature's reason, or `TooFewSignatures` when none was refused. Apart from the bundle's format
/// (whose checks compare the signatures' release fields with one another), nothing but a
/// signature's key id is used before its signature verifies.
pub fn check<const K: usize, const P: usize>(
    trust: &ReleaseTrust<K, P>,
    bundle: &[u8],
    facts: &ReleaseFacts<'_>,
) -> Result<Released, Error> {
    let applies = trust.applies_to(facts.model_name);
    let needed = applies.threshold();
    if needed == 0 {
        return Ok(Released::of(facts, 0, 0));
    }
    if bundle.is_empty() {
        return Err(ReleaseError::Missing { needed }.into());
    }
    let bundle = Bundle::parse(bundle)?;
    let policy = match applies {
        Applies::Policy(policy) => Some(policy),
        Applies::Nothing | Applies::AnyKey => None,
    };
    let mut valid = 0;
    let mut refused = None;
    for (index, signature) in bundle.signatures().enumerate() {
        match count(trust, policy, signature, index as u8, facts) {
            Ok(()) => {
                valid += 1;
                if valid >= needed {
                    return Ok(Released::of(facts, needed, valid));
                }
            }
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    Err(
        refused.unwrap_or(Error::Release(ReleaseError::TooFewSignatures {
            needed,
            found: valid,
        })),
    )
}

impl Released {
    /// Out of line: the model id's SHA-256 is not on the stack while signatures are checked.
    #[inline(never)]
    fn of(facts: &ReleaseFacts<'_>, threshold: u8, valid: u8) -> Self {
        Released {
            pack_sha256: *facts.pack_sha256,
            model: ModelId::of(facts.model_name),
            threshold,
            valid,
        }
    }
}

/// `raw` (a fixed-width text field) holds exactly `text`: its bytes, then zeros. The same as
/// comparing with `text`'s one encoding, without making it.
fn holds(raw: &[u8], text: &str) -> bool {
    let text = text.as_bytes();
    raw.len() >= text.len()
        && raw[..text.len()] == *text
        && raw[text.len()..].iter().all(|&b| b == 0)
}

/// Checks 3–12 for one signature. Out of line so that its frame is not the caller's while the
/// signature is checked.
#[inline(never)]
fn count<const K: usize, const P: usize>(
    trust: &ReleaseTrust<K, P>,
    policy: Option<&ReleasePolicy>,
    signature: ReleaseView<'_>,
    index: u8,
    facts: &ReleaseFacts<'_>,
) -> Result<(), Error> {
    let key_id: KeyId = signature.key_id();
    let entry = trust
        .key(key_id)
        .ok_or(ReleaseError::UnknownKey { index, key_id })?;
    if entry.is_revoked() {
        return Err(ReleaseError::KeyRevoked { index, key_id }.into());
    }
    if let Some(policy) = policy
        && !policy.names(key_id)
    {
        return Err(ReleaseError::KeyNotInPolicy { index, key_id }.into());
    }
    signature::check(
        entry.public_key(),
        RELEASE_DOMAIN,
        signature.signed_bytes(),
        signature.signature(),
        ReleaseError::BadSignature { index, key_id }.into(),
    )?;
    if signature.pack_sha256() != *facts.pack_sha256 {
        return Err(ReleaseError::OtherPack {
            index,
            signed: Sha256Prefix::of(&signature.pack_sha256()),
            pack: Sha256Prefix::of(facts.pack_sha256),
        }
        .into());
    }
    if !holds(signature.model_name_raw(), facts.model_name) {
        return Err(ReleaseError::OtherModel { index, key_id }.into());
    }
    if !holds(signature.model_version_raw(), facts.model_version) {
        return Err(ReleaseError::OtherVersion { index, key_id }.into());
    }
    if signature.accel_word() != facts.accel.word() {
        return Err(ReleaseError::OtherAccel {
            index,
            signed: signature.accel_word(),
            manifest: facts.accel.word(),
        }
        .into());
    }
    if signature.io_digest() != *facts.io_digest {
        return Err(ReleaseError::OtherIoDigest { index, key_id }.into());
    }
    if signature.selftest_digest() != *facts.selftest_digest {
        return Err(ReleaseError::OtherSelfTest { index, key_id }.into());
    }
    Ok(())
}
