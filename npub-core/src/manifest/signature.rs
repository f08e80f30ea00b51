//! The one place an ed25519 signature is checked, for manifests and keyring updates alike.
//!
//! The verifier is `salty`'s curve arithmetic, driven here so that the message `domain ‖ signed`
//! is hashed in place (no copy into a buffer). On Cortex-M with the DSP extension (thumbv7em,
//! thumbv8m.main) salty multiplies and squares field elements with its own assembly (eight 32-bit
//! limbs, shipped in the package as a static library built from its asm sources); elsewhere, the
//! host tests among them, with its TweetNaCl field code. The curve code and the rules below are
//! the same on both. It replaced ed25519-dalek's `verify_stream` for size (size probe, rustc
//! 1.95): the agent core's `.text` 50,748 -> 44,492 B, and `check`'s frame 1,252 B instead of
//! dalek's 5,176 B plus its 1,960 B NAF table. salty's TweetNaCl field on the device too (feature
//! `slow-motion`) is 1 KB smaller still but its 128-byte field elements make the poll 12,260 B
//! deep. Signing stays on ed25519-dalek (host only).
//!
//! The acceptance rules are those of dalek's `verify_strict`, which the tests hold this function
//! to:
//!
//! | check | refused when |
//! |-------|--------------|
//! | `S` | not canonical: `S ≥ ℓ` (a malleated signature) |
//! | public key `A` | not a curve point, or of small order (`[8]A` is the identity) |
//! | `R` | not a curve point, or of small order |
//! | equation | `[S]B − [k]A`, re-encoded, differs from the signature's `R` bytes (`k = SHA-512(R ‖ A ‖ M) mod ℓ`): so a non-canonical `R` encoding never verifies |
use salty::{CompressedY, EdwardsPoint, Scalar, Sha512};

use super::KeyId;
use crate::{Error, KeyError};

/// ℓ, the order of the prime-order subgroup, little-endian.
const ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

/// The point `public_key` encodes, refused if it is not a point or has small order.
pub(crate) fn verifying_key(public_key: &[u8; 32]) -> Result<EdwardsPoint, Error> {
    let key_id = || KeyId::of(public_key);
    let key = CompressedY(*public_key)
        .decompressed()
        .map_err(|_| Error::Key(KeyError::Invalid { key_id: key_id() }))?;
    if has_small_order(&key) {
        return Err(Error::Key(KeyError::Weak { key_id: key_id() }));
    }
    Ok(key)
}

/// `Ok` when `signature` is `public_key`'s signature over `domain ‖ signed`; `bad` otherwise.
///
/// Kept out of line so that its frame (the curve arithmetic's points) is not merged with the
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
    let (r, s) = signature.split_at(32);
    let (Ok(r), Ok(s)) = (<[u8; 32]>::try_from(r), <[u8; 32]>::try_from(s)) else {
        return Err(bad);
    };
    if !is_canonical(&s) || !r_has_large_order(&r) {
        return Err(bad);
    }
    let mut hash = Sha512::new();
    hash.update(&r);
    hash.update(public_key);
    hash.update(domain);
    hash.update(signed);
    let k = Scalar::from_u512_le(&hash.finalize());
    // R' = [S]B + [k](−A), compared by its encoding with the signature's R.
    let s_b = &Scalar(s) * &EdwardsPoint::basepoint();
    let k_minus_a = &k * &-&key;
    if (&s_b + &k_minus_a).compressed().0 == r {
        Ok(())
    } else {
        Err(bad)
    }
}

/// `S < ℓ`, compared from the most significant byte (variable time: `S` is public).
fn is_canonical(s: &[u8; 32]) -> bool {
    for (byte, order) in s.iter().rev().zip(ORDER.iter().rev()) {
        if byte != order {
            return byte < order;
        }
    }
    false
}

/// `R` decodes to a point that does not have small order (like the key, checked in
/// [`verifying_key`]). Out of line, so its point is not in [`check`]'s frame.
#[inline(never)]
fn r_has_large_order(r: &[u8; 32]) -> bool {
    CompressedY(*r)
        .decompressed()
        .is_ok_and(|r| !has_small_order(&r))
}

/// `[8]P` is the identity: `P` lies in the torsion subgroup (order 1, 2, 4 or 8).
#[inline(never)]
fn has_small_order(point: &EdwardsPoint) -> bool {
    let p2 = point + point;
    let p4 = &p2 + &p2;
    let p8 = &p4 + &p4;
    p8 == EdwardsPoint::neutral_element()
}

/// Refuses a public key that is not a valid ed25519 point or that has small order.
pub fn check_public_key(public_key: &[u8; 32]) -> Result<(), Error> {
    verifying_key(public_key).map(|_| ())
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

    use super::*;
    use crate::ManifestError;

    const BAD: Error = Error::Manifest(ManifestError::SequenceZero);

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

    /// A canonical S with the same value plus ℓ is the classic malleation: refused, by the S
    /// check, before any curve arithmetic.
    #[test]
    fn rejects_a_non_canonical_s() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let public = key.verifying_key().to_bytes();
        let good = key.sign(b"firmware").to_bytes();
        assert!(check(&public, b"firm", b"ware", &good, BAD).is_ok());
        let mut high = good;
        plus_order(&mut high[32..]);
        assert_eq!(check(&public, b"firm", b"ware", &high, BAD), Err(BAD));
        // S = ℓ exactly (the smallest non-canonical value) and S with the top bit set.
        let mut order = good;
        order[32..].fill(0);
        plus_order(&mut order[32..]);
        assert_eq!(check(&public, b"firm", b"ware", &order, BAD), Err(BAD));
        let mut top = good;
        top[63] |= 0x80;
        assert_eq!(check(&public, b"firm", b"ware", &top, BAD), Err(BAD));
        assert!(is_canonical(&[0; 32]));
        let mut below = ORDER;
        below[0] -= 1;
        assert!(is_canonical(&below));
        assert!(!is_canonical(&ORDER));
    }

    /// Every point of order 1, 2, 4 or 8 (their canonical encodings) is refused as a key with
    /// `KeyError::Weak`, and as `R`.
    #[test]
    fn rejects_a_small_order_key() {
        let mut neg_one = [0xffu8; 32]; // y = −1 (p − 1): order 2
        neg_one[0] = 0xec;
        neg_one[31] = 0x7f;
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let order4 = [0u8; 32]; // y = 0: x = ±sqrt(−1), order 4
        let mut order4_neg = order4;
        order4_neg[31] = 0x80;
        // y of the order-8 points (and the same with x's sign bit).
        let order8: [u8; 32] = [
            0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef,
            0x98, 0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88,
            0x6d, 0x53, 0xfc, 0x05,
        ];
        let mut order8_neg = order8;
        order8_neg[31] |= 0x80;
        let signer = SigningKey::from_bytes(&[4; 32]);
        let public = signer.verifying_key().to_bytes();
        for weak in [identity, neg_one, order4, order4_neg, order8, order8_neg] {
            assert!(
                matches!(verifying_key(&weak), Err(Error::Key(KeyError::Weak { .. }))),
                "{weak:02x?}"
            );
            // [0]B − [k]W is a small-order point for these keys: the unstrict equation can
            // hold, this verifier must refuse anyway.
            let mut sig = [0u8; 64];
            sig[..32].copy_from_slice(&weak);
            assert_eq!(
                check(&weak, b"", b"any message", &sig, BAD),
                Err(Error::Key(KeyError::Weak {
                    key_id: KeyId::of(&weak)
                }))
            );
            assert_eq!(both(&public, b"any message", &sig), (false, false));
        }
        // Not on the curve at all (y = 2 has no x): `KeyError::Invalid`, not `KeyError::Weak`.
        let mut two = [0u8; 32];
        two[0] = 2;
        assert!(matches!(
            verifying_key(&two),
            Err(Error::Key(KeyError::Invalid { .. }))
        ));
    }

    /// A valid signature changed in ways that keep the equation's shape: R with a torsion point
    /// added (a different encoding of "the same" commitment under cofactored checks), R with
    /// its sign bit flipped, and the message changed after signing.
    #[test]
    fn rejects_a_malleated_signature() {
        let key = SigningKey::from_bytes(&[5; 32]);
        let public = key.verifying_key().to_bytes();
        let message = b"a manifest's signed bytes";
        let good = key.sign(message).to_bytes();
        assert_eq!(both(&public, message, &good), (true, true));
        let r = CompressedY(good[..32].try_into().unwrap())
            .decompressed()
            .unwrap();
        let order2 = {
            let mut neg_one = [0xffu8; 32];
            neg_one[0] = 0xec;
            neg_one[31] = 0x7f;
            CompressedY(neg_one).decompressed().unwrap()
        };
        let mut torsioned = good;
        torsioned[..32].copy_from_slice(&(&r + &order2).compressed().0);
        assert_ne!(torsioned, good);
        assert_eq!(both(&public, message, &torsioned), (false, false));
        let mut flipped = good;
        flipped[31] ^= 0x80;
        assert_eq!(both(&public, message, &flipped), (false, false));
        assert_eq!(
            both(&public, b"a manifest's signed byteS", &good),
            (false, false)
        );
    }

    /// Thousands of ed25519-dalek signatures (the host's signer) over messages of every length
    /// up to a few blocks verify, each with a byte flipped (R, S or the message) does not, and
    /// verify_strict agrees every time.
    #[test]
    fn survives_thousands_of_dalek_signatures() {
        for n in 0..2_000u32 {
            let mut seed = [0u8; 32];
            seed[..4].copy_from_slice(&n.to_le_bytes());
            seed[4] = 0x5a;
            let key = SigningKey::from_bytes(&seed);
            let public = key.verifying_key().to_bytes();
            let message: std::vec::Vec<u8> = (0..(n as usize % 300))
                .map(|i| (i as u32 ^ n) as u8)
                .collect();
            let good = key.sign(&message).to_bytes();
            assert_eq!(
                both(&public, &message, &good),
                (true, true),
                "signature {n}"
            );
            let mut bad = good;
            bad[(n as usize * 7) % 64] ^= 1 << (n % 8);
            assert_eq!(
                both(&public, &message, &bad),
                (false, false),
                "signature {n}"
            );
            if !message.is_empty() {
                let mut other = message.clone();
                let at = n as usize % other.len();
                other[at] ^= 0x10;
                assert_eq!(both(&public, &other, &good), (false, false), "message {n}");
            }
        }
    }
}
