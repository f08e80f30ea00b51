//! The TLS 1.3 key schedule for SHA-256 (RFC 8446 §7.1), and the traffic keys of
//! TLS_AES_128_GCM_SHA256 (§7.3).
//!
//! ```text
//!          PSK (or 0) -> HKDF-Extract(0) = early ---> "res binder" -> binder key
//!                                            |
//!                                      "derived"
//!                                            v
//!   (EC)DHE -> HKDF-Extract = handshake ---> "c hs traffic", "s hs traffic" (CH..SH)
//!                                            |
//!                                      "derived"
//!                                            v
//!          0 -> HKDF-Extract = master -----> "c ap traffic", "s ap traffic" (CH..server Finished)
//!                                        +-> "res master" (CH..client Finished)
//! ```
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const HASH_LEN: usize = 32;
pub const KEY_LEN: usize = 16;
pub const IV_LEN: usize = 12;

pub type Secret = [u8; HASH_LEN];

/// HKDF-Expand-Label(secret, label, context, N).
///
/// | bytes | field                                   |
/// |-------|-----------------------------------------|
/// | 2     | length N                                |
/// | 1 + n | "tls13 " + label, one-byte length       |
/// | 1 + m | context, one-byte length                |
pub fn expand_label<const N: usize>(secret: &Secret, label: &[u8], context: &[u8]) -> [u8; N] {
    let hk = Hkdf::<Sha256>::from_prk(secret).expect("a SHA-256 PRK is 32 bytes");
    let length = (N as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let context_len = [context.len() as u8];
    let mut out = [0u8; N];
    hk.expand_multi_info(
        &[&length, &label_len, b"tls13 ", label, &context_len, context],
        &mut out,
    )
    .expect("N is at most 32 bytes, far below 255 hash lengths");
    out
}

/// Derive-Secret(secret, label, messages): the context is the transcript hash given.
pub fn derive(secret: &Secret, label: &[u8], transcript: &[u8; HASH_LEN]) -> Secret {
    expand_label(secret, label, transcript)
}

/// The hash of no messages, Derive-Secret's context for "derived" and "res binder".
pub fn empty_hash() -> [u8; HASH_LEN] {
    Sha256::digest([]).into()
}

pub fn extract(salt: &Secret, ikm: &[u8]) -> Secret {
    let (prk, _) = Hkdf::<Sha256>::extract(Some(salt), ikm);
    prk.into()
}

/// The early secret: from the ticket's PSK, or from zeros in a full handshake.
pub fn early_secret(psk: Option<&Secret>) -> Secret {
    extract(&[0u8; HASH_LEN], psk.unwrap_or(&[0u8; HASH_LEN]))
}

/// The secret after `secret` in the schedule, with `ikm` (the ECDHE secret, or zeros).
pub fn next_stage(secret: &Secret, ikm: &[u8]) -> Secret {
    let derived = derive(secret, b"derived", &empty_hash());
    extract(&derived, ikm)
}

/// The MAC of a Finished message (and of a PSK binder) under `base`.
pub fn finished_mac(base: &Secret, transcript: &[u8; HASH_LEN]) -> [u8; HASH_LEN] {
    let key: Secret = expand_label(base, b"finished", &[]);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes any key");
    mac.update(transcript);
    mac.finalize().into_bytes().into()
}

/// The AES-128-GCM key and IV of one direction.
pub fn traffic_keys(secret: &Secret) -> ([u8; KEY_LEN], [u8; IV_LEN]) {
    (
        expand_label(secret, b"key", &[]),
        expand_label(secret, b"iv", &[]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex<const N: usize>(s: &str) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// RFC 8448 §3 (a simple 1-RTT handshake): the early secret, the derived secret and the
    /// handshake secret from its ECDHE secret, and the server's handshake traffic key and IV.
    #[test]
    fn matches_the_rfc_8448_trace() {
        let early = early_secret(None);
        assert_eq!(
            early,
            hex::<32>("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")
        );
        let ecdhe = hex::<32>("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d");
        let hs = next_stage(&early, &ecdhe);
        assert_eq!(
            hs,
            hex::<32>("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")
        );
        let ch_sh = hex::<32>("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8");
        let s_hs = derive(&hs, b"s hs traffic", &ch_sh);
        assert_eq!(
            s_hs,
            hex::<32>("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
        );
        let (key, iv) = traffic_keys(&s_hs);
        assert_eq!(key, hex::<16>("3fce516009c21727d0f2e4e86ee403bc"));
        assert_eq!(iv, hex::<12>("5d313eb2671276ee13000b30"));
    }
}
