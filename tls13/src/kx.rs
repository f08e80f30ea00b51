//! The handshake's ephemeral key exchange (RFC 8446 §4.2.8, §7.4): one key pair per
//! ClientHello, in the group the ClientHello offers.
//!
//! | group      | share sent                       | shared secret                  | refused                                  |
//! |------------|----------------------------------|--------------------------------|------------------------------------------|
//! | x25519     | the 32-byte u-coordinate (RFC 7748) | X25519(secret, server's key) | a server key whose result is all zero (a low-order point, §7.4.2) |
//! | secp256r1  | the 65-byte uncompressed point   | ECDH, the x-coordinate         | a point not on the curve, or not uncompressed |
//!
//! x25519 is salty's (the firmware's signature code links it already); secp256r1 is p256's,
//! kept for a server that asks for it with a HelloRetryRequest.
use p256::ecdh::EphemeralSecret;
use p256::elliptic_curve::sec1::ToEncodedPoint as _;
use rand_core::CryptoRngCore;
use subtle::ConstantTimeEq as _;

use crate::error::Refusal;
use crate::hello::{POINT_LEN, SECP256R1, X25519, X25519_LEN};

/// A key pair of one ClientHello.
pub enum Ephemeral {
    X25519(salty::agreement::SecretKey),
    P256(EphemeralSecret),
}

/// A public key share as sent: the group and up to [`POINT_LEN`] bytes.
pub struct Share {
    group: u16,
    bytes: [u8; POINT_LEN],
    len: usize,
}

impl Share {
    pub fn group(&self) -> u16 {
        self.group
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Ephemeral {
    /// A fresh key pair in `group` ([`X25519`] or, for any other value, [`SECP256R1`]).
    pub fn new(group: u16, rng: &mut impl CryptoRngCore) -> Self {
        if group == X25519 {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            let key = salty::agreement::SecretKey::from_seed(&seed);
            seed.fill(0);
            Ephemeral::X25519(key)
        } else {
            Ephemeral::P256(EphemeralSecret::random(rng))
        }
    }

    pub fn group(&self) -> u16 {
        match self {
            Ephemeral::X25519(_) => X25519,
            Ephemeral::P256(_) => SECP256R1,
        }
    }

    /// The public share for the ClientHello.
    pub fn share(&self) -> Share {
        let mut bytes = [0u8; POINT_LEN];
        let len = match self {
            Ephemeral::X25519(key) => {
                bytes[..X25519_LEN].copy_from_slice(&key.public().to_bytes());
                X25519_LEN
            }
            Ephemeral::P256(secret) => {
                bytes.copy_from_slice(secret.public_key().to_encoded_point(false).as_bytes());
                POINT_LEN
            }
        };
        Share {
            group: self.group(),
            bytes,
            len,
        }
    }

    /// The shared secret with the server's share `theirs`.
    pub fn agree(&self, theirs: &[u8]) -> Result<[u8; 32], Refusal> {
        match self {
            Ephemeral::X25519(key) => {
                let theirs: [u8; X25519_LEN] = theirs.try_into().map_err(|_| Refusal::KeyShare)?;
                let shared = key
                    .agree(&salty::agreement::PublicKey::from(theirs))
                    .to_bytes();
                if bool::from(shared.ct_eq(&[0u8; 32])) {
                    return Err(Refusal::KeyShare);
                }
                Ok(shared)
            }
            Ephemeral::P256(secret) => {
                if theirs.len() != POINT_LEN || theirs[0] != 4 {
                    return Err(Refusal::KeyShare);
                }
                let point =
                    p256::PublicKey::from_sec1_bytes(theirs).map_err(|_| Refusal::KeyShare)?;
                let mut out = [0u8; 32];
                out.copy_from_slice(secret.diffie_hellman(&point).raw_secret_bytes());
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(u8);

    impl rand_core::RngCore for Counter {
        fn next_u32(&mut self) -> u32 {
            rand_core::impls::next_u32_via_fill(self)
        }
        fn next_u64(&mut self) -> u64 {
            rand_core::impls::next_u64_via_fill(self)
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            for b in dest {
                self.0 = self.0.wrapping_add(1);
                *b = self.0;
            }
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    impl rand_core::CryptoRng for Counter {}

    #[test]
    fn two_sides_agree_in_either_group() {
        for group in [X25519, SECP256R1] {
            let a = Ephemeral::new(group, &mut Counter(0));
            let b = Ephemeral::new(group, &mut Counter(100));
            assert_eq!(a.group(), group);
            let (sa, sb) = (a.share(), b.share());
            assert_eq!(sa.group(), group);
            assert_eq!(sa.bytes().len(), if group == X25519 { 32 } else { 65 });
            assert_eq!(a.agree(sb.bytes()).unwrap(), b.agree(sa.bytes()).unwrap());
        }
    }

    #[test]
    fn rejects_an_x25519_key_of_low_order() {
        let a = Ephemeral::new(X25519, &mut Counter(0));
        // u = 0 and u = 1: points of small order, whose product with any key is zero.
        assert_eq!(a.agree(&[0u8; 32]), Err(Refusal::KeyShare));
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(a.agree(&one), Err(Refusal::KeyShare));
    }

    #[test]
    fn rejects_a_share_of_the_wrong_length_or_form() {
        let x = Ephemeral::new(X25519, &mut Counter(0));
        assert_eq!(x.agree(&[9u8; 31]), Err(Refusal::KeyShare));
        assert_eq!(x.agree(&[9u8; 65]), Err(Refusal::KeyShare));
        let p = Ephemeral::new(SECP256R1, &mut Counter(0));
        assert_eq!(p.agree(&[9u8; 32]), Err(Refusal::KeyShare));
        let mut compressed = [0u8; 65];
        compressed[0] = 2;
        assert_eq!(p.agree(&compressed), Err(Refusal::KeyShare));
        assert_eq!(p.agree(&[4u8; 65]), Err(Refusal::KeyShare));
    }
}
