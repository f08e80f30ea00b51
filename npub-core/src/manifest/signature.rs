//! The one place an ed25519 signature is checked, for manifests and keyring updates alike.
//!
//! The message is `domain ‖ signed bytes`, hashed in place by ed25519-dalek's streaming verifier
//! (no copy into a buffer). The checks are those of `verify_strict`, which a test holds this
//! function to: `S` must be canonical (`S < ℓ`), `R` must re-encode to the signature's bytes, and
//! neither the public key nor `R` may have small order — so a signature is not malleable and a
//! weak key verifies nothing.
use ed25519_dalek::{Signature, VerifyingKey};

use super::KeyId;
use crate::Error;

/// The verifying key for `public_key`, refused if it is not a point or has small order.
pub(crate) fn verifying_key(public_key: &[u8; 32]) -> Result<VerifyingKey, Error> {
    let key_id = || KeyId::of(public_key);
    let key =
        VerifyingKey::from_bytes(public_key).map_err(|_| Error::KeyInvalid { key_id: key_id() })?;
    if key.is_weak() {
        return Err(Error::KeyWeak { key_id: key_id() });
    }
    Ok(key)
}

/// `Ok` when `signature` is `public_key`'s signature over `domain ‖ signed`; `bad` otherwise.
///
/// Kept out of line so that its frame (the curve arithmetic's tables) is not merged with the
/// callers' locals: the stack figure in docs/manifest.md depends on it.
#[inline(never)]
pub(crate) fn check(
    public_key: &[u8; 32],
    domain: &[u8],
    signed: &[u8],
    signature: &[u8; 64],
    bad: Error,
) -> Result<(), Error> {
    let key = verifying_key(public_key)?;
    if !r_has_large_order(signature) {
        return Err(bad);
    }
    // verify_stream refuses a non-canonical S; the final comparison is on R's encoding.
    let mut verifier = key
        .verify_stream(&Signature::from_bytes(signature))
        .map_err(|_| bad)?;
    verifier.update(domain);
    verifier.update(signed);
    verifier.finalize_and_verify().map_err(|_| bad)
}

/// verify_strict's second check: `R` decodes to a point that does not have small order (like the
/// key, checked in [`verifying_key`]). Out of line, so its point is not in [`check`]'s frame.
#[inline(never)]
fn r_has_large_order(signature: &[u8; 64]) -> bool {
    let mut r = [0u8; 32];
    r.copy_from_slice(&signature[..32]);
    VerifyingKey::from_bytes(&r).is_ok_and(|r| !r.is_weak())
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signer, SigningKey};

    use super::*;

    const BAD: Error = Error::ManifestSequenceZero;

    /// Our verdict and `verify_strict`'s on the same (key, message, signature).
    fn both(public_key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> (bool, bool) {
        let (domain, signed) = message.split_at(message.len().min(5));
        let ours = check(public_key, domain, signed, signature, BAD).is_ok();
        let strict = VerifyingKey::from_bytes(public_key)
            .map(|k| {
                k.verify_strict(message, &Signature::from_bytes(signature))
                    .is_ok()
            })
            .unwrap_or(false);
        (ours, strict)
    }

    /// `bytes` (little-endian) plus ℓ, the group order: the same scalar, non-canonically encoded.
    fn plus_order(bytes: &mut [u8]) {
        const L: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
            0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut carry = 0u16;
        for (b, l) in bytes.iter_mut().zip(L) {
            let sum = u16::from(*b) + u16::from(l) + carry;
            *b = sum as u8;
            carry = sum >> 8;
        }
    }

    #[test]
    fn agrees_with_verify_strict_on_valid_and_tampered_signatures() {
        for seed in 0..8u8 {
            let key = SigningKey::from_bytes(&[seed; 32]);
            let public = key.verifying_key().to_bytes();
            let message: std::vec::Vec<u8> = (0..(seed as usize * 37)).map(|i| i as u8).collect();
            let good = key.sign(&message).to_bytes();
            assert_eq!(both(&public, &message, &good), (true, true));
            for at in [0, 31, 32, 63] {
                let mut bad = good;
                bad[at] ^= 0x04;
                assert_eq!(
                    both(&public, &message, &bad),
                    (false, false),
                    "seed {seed} byte {at}"
                );
            }
            let mut malleated = good;
            plus_order(&mut malleated[32..]);
            assert_eq!(both(&public, &message, &malleated), (false, false));
        }
    }

    #[test]
    fn agrees_with_verify_strict_on_small_order_keys_and_r() {
        // The identity (order 1) as the key, and as R with S = 0: [0]B − [k]·identity = identity,
        // so the unstrict equation holds for every message. Both must refuse.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&identity);
        assert_eq!(both(&identity, b"any message", &sig), (false, false));
        let key = SigningKey::from_bytes(&[9; 32]);
        let public = key.verifying_key().to_bytes();
        assert_eq!(both(&public, b"any message", &sig), (false, false));
    }
}
