//! The trust state's integrity: a device-unique key, and the check word every flash record
//! (journal, keyring, release trust, slot descriptor) carries under it.
//!
//! | the firmware supplies                          | a record's check word (its last 4 bytes, little-endian) |
//! |-------------------------------------------------|---------------------------------------------------------|
//! | no key (today's default)                        | CRC-32 (IEEE) of the bytes before it                    |
//! | a [`DeviceKey`] ([`crate::Trust::with_device_key`]) | the first 4 bytes of HMAC-SHA256(key, the bytes before it) |
//!
//! Both detect a torn or rotted record alike (a 2⁻³² chance of taking one for whole). Only the
//! MAC stops a **flash programmer**: with a CRC anyone who can write the chip can write a
//! keyring record that trusts their own signing key, forget a revocation, lower the replay
//! floor in the journal or describe a slot as holding a pack it does not; with the key, a record
//! made without it fails its check and is treated as torn (the other copy, the other bank or the
//! previous state stands, or nothing). What the MAC does not stop: putting back a record the
//! device itself wrote earlier, word for word (an older keyring, an older journal state: keep
//! the floor in a [`crate::MonotonicCounter`] outside the flash for that), nor anything by
//! someone who can read the key (on the RA8P1 it is derived from the hardware unique key inside
//! the secure element and never leaves it unwrapped; the QEMU firmware's demo key is public).
//! 32 bits of MAC, not more: the check word is the CRC's place, so no record layout changes;
//! a forger without the key needs on average 2³¹ attempts, each a flash rewrite and a reboot
//! of the device under attack, since the records cannot be checked anywhere else.
//!
//! Turning the key on for a device in the field makes every record it wrote without it read as
//! torn: the journal then mounts empty (boot finds the packs from their descriptors, which are
//! records too, so it finds none, and the next poll installs again), the keyring area as empty
//! (the factory keyring, then the keyring updates again from the server). Supply it from the
//! first boot.
use sha2::{Digest, Sha256};

/// A device-unique 32-byte secret the trust state is authenticated under (see the module).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeviceKey([u8; 32]);

impl DeviceKey {
    /// The key `bytes`: on the RA8P1, derived from the hardware unique key (e.g. HMAC of a
    /// fixed label under the HUK in the secure crypto engine); never a constant of the firmware
    /// image, which is the same on every device.
    pub const fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The first 4 bytes of HMAC-SHA256 under this key of `bytes`, little-endian.
    pub(crate) fn check_word(&self, bytes: &[u8]) -> u32 {
        let mac = hmac_sha256(&self.0, bytes);
        u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]])
    }
}

impl core::fmt::Debug for DeviceKey {
    /// Never the key.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DeviceKey(..)")
    }
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key. One hasher in a loop of two rounds (inner, then
/// outer), so that its code is in the image once.
#[inline(never)]
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    // Built byte by byte: a filled array would link a `memset` the core has no other use for.
    let mut pad: [u8; 64] = core::array::from_fn(|i| key.get(i).copied().unwrap_or(0) ^ 0x36);
    let mut digest = [0u8; 32];
    for round in 0..2 {
        let mut h = Sha256::new();
        h.update(pad);
        if round == 0 {
            h.update(message);
        } else {
            h.update(digest);
        }
        digest = h.finalize().into();
        // 0x36 ^ 0x5C turns the inner pad into the outer one.
        for p in &mut pad {
            *p ^= 0x36 ^ 0x5C;
        }
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc_4231_test_case_1() {
        // A key shorter than the block is zero-padded, so a 20-byte key is this 32-byte one.
        let mut key = [0u8; 32];
        key[..20].fill(0x0B);
        let mac = hmac_sha256(&key, b"Hi There");
        let want = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
        let got: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", DeviceKey::new([0xAB; 32])), "DeviceKey(..)");
    }
}
