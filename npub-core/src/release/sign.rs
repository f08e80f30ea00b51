//! Signing (feature `std`): release signatures and keyring updates of any action, with a key
//! pair in memory or with anything else that can make an ed25519 signature (an HSM, a token, a
//! cloud KMS, driven by `npub --signer-cmd`).
//!
//! Every signature made here is verified under the signer's public key before it is returned,
//! so an external signer that used another key, or signed other bytes, is caught at the signer's
//! desk (`KeyError::ExternalSignatureInvalid`) rather than on a device.
use super::constants::{RELEASE_BYTES, RELEASE_SIGNED_BYTES};
use super::layout::{RELEASE_DOMAIN, ReleaseFields};
use super::update::TrustUpdate;
use crate::keypair::KeyPair;
use crate::manifest::{KeyId, ROTATION_BYTES, ROTATION_DOMAIN, ROTATION_SIGNED_BYTES, signature};
use crate::{Error, KeyError};

/// Makes ed25519 signatures with one key.
pub trait Signer {
    /// What can go wrong; npub-core's own refusals convert into it.
    type Error: From<Error>;

    /// The public key the signatures verify under.
    fn public_key(&self) -> [u8; 32];

    /// The ed25519 signature of `message` (pure ed25519: the message itself, not a hash of it).
    fn sign(&self, message: &[u8]) -> Result<[u8; 64], Self::Error>;
}

impl Signer for KeyPair {
    type Error = Error;

    fn public_key(&self) -> [u8; 32] {
        KeyPair::public_key(self)
    }

    fn sign(&self, message: &[u8]) -> Result<[u8; 64], Error> {
        Ok(KeyPair::sign(self, &[], message))
    }
}

/// The bytes a signer signs: `domain ‖ body`.
pub fn signing_message(domain: &[u8], body: &[u8]) -> Vec<u8> {
    [domain, body].concat()
}

/// A release signature by `signer` over `fields`: 288 bytes, ready for a bundle. Refuses fields
/// a device would never match (`ReleaseFields::check`, the text rules) and a signature that
/// does not verify.
pub fn sign_release<S: Signer>(
    fields: &ReleaseFields<'_>,
    signer: &S,
) -> Result<[u8; RELEASE_BYTES], S::Error> {
    let public_key = signer.public_key();
    let body = fields.encode(KeyId::of(&public_key))?;
    let signature = signed(signer, &public_key, RELEASE_DOMAIN, &body)?;
    let mut out = [0u8; RELEASE_BYTES];
    out[..RELEASE_SIGNED_BYTES].copy_from_slice(&body);
    out[RELEASE_SIGNED_BYTES..].copy_from_slice(&signature);
    Ok(out)
}

/// A keyring update of any action signed by the root `signer`: a complete 144-byte record.
pub fn sign_trust_update<S: Signer>(
    update: &TrustUpdate,
    signer: &S,
) -> Result<[u8; ROTATION_BYTES], S::Error> {
    let public_key = signer.public_key();
    let body = update.encode(KeyId::of(&public_key));
    // Refuse to sign what no device would decode (a policy built by hand, say).
    let mut whole = [0u8; ROTATION_BYTES];
    whole[..ROTATION_SIGNED_BYTES].copy_from_slice(&body);
    TrustUpdate::decode(&whole)?;
    let signature = signed(signer, &public_key, ROTATION_DOMAIN, &body)?;
    whole[ROTATION_SIGNED_BYTES..].copy_from_slice(&signature);
    Ok(whole)
}

/// `signer`'s signature over `domain ‖ body`, verified.
fn signed<S: Signer>(
    signer: &S,
    public_key: &[u8; 32],
    domain: &[u8],
    body: &[u8],
) -> Result<[u8; 64], S::Error> {
    let signature = signer.sign(&signing_message(domain, body))?;
    signature::check(
        public_key,
        domain,
        body,
        &signature,
        Error::Key(KeyError::ExternalSignatureInvalid {
            key_id: KeyId::of(public_key),
        }),
    )?;
    Ok(signature)
}
