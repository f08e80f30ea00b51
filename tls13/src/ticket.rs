//! A session ticket the caller keeps: what a NewSessionTicket gave, the PSK derived from it
//! (RFC 8446 §4.6.1), and what binds it to the server it came from. It is a fixed-size record
//! ([`Ticket::to_record`]) so a firmware can keep it in RAM or put it in flash.
//!
//! | offset | bytes | field                                                              |
//! |--------|-------|--------------------------------------------------------------------|
//! | 0      | 4     | magic `NTK1`                                                       |
//! | 4      | 32    | PSK: HKDF-Expand-Label(resumption_master_secret, "resumption", nonce) |
//! | 36     | 32    | binding: SHA-256 of the host name and the trust anchor it was checked against |
//! | 68     | 8     | received at, Unix seconds (big-endian): the handshake's time, a few ms early at most, so the age is never underestimated |
//! | 76     | 4     | lifetime, seconds (at most 604,800)                                |
//! | 80     | 4     | ticket_age_add                                                     |
//! | 84     | 2     | identity length (1 to [`MAX_IDENTITY`])                            |
//! | 86     | 512   | identity (the server's opaque ticket), zero-padded                 |
//!
//! The PSK authenticates the server in a resumed handshake, as its certificate did in the
//! full one: whoever reads it can pose as the server to this device until the ticket expires.
//! Store it only where the device's token is as safe.
use sha2::{Digest, Sha256};

use crate::messages::MAX_TICKET_LIFETIME_S;
use crate::schedule::Secret;
use crate::x509::Anchor;

/// The longest server ticket kept; a longer one is dropped (the session stays usable, the
/// next connection is a full handshake). rustls' are about 100 to 200 bytes.
pub const MAX_IDENTITY: usize = 512;
pub const RECORD_LEN: usize = 86 + MAX_IDENTITY;
const MAGIC: &[u8; 4] = b"NTK1";

/// A ticket for resuming a session with one server.
#[derive(Clone, PartialEq, Eq)]
pub struct Ticket {
    psk: Secret,
    binding: [u8; 32],
    received_at: u64,
    lifetime_s: u32,
    age_add: u32,
    identity_len: u16,
    identity: [u8; MAX_IDENTITY],
}

impl core::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the PSK.
        f.debug_struct("Ticket")
            .field("received_at", &self.received_at)
            .field("lifetime_s", &self.lifetime_s)
            .field("identity_len", &self.identity_len)
            .finish_non_exhaustive()
    }
}

/// Why a stored ticket record was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TicketError {
    /// It does not start with `NTK1` (blank flash, or another record).
    Magic,
    /// Its identity length is 0 or over [`MAX_IDENTITY`].
    IdentityLength,
    /// Its lifetime is over seven days.
    Lifetime,
}

/// What ties a ticket to the server it came from: the host name and the anchor checked.
pub fn binding(host: &str, anchor: &Anchor<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"npub-tls ticket binding\0");
    h.update((host.len() as u64).to_be_bytes());
    h.update(host.as_bytes());
    h.update(anchor.identity());
    h.finalize().into()
}

impl Ticket {
    /// A ticket from a NewSessionTicket; `None` when its identity is too long to keep or its
    /// lifetime is zero (the server says: do not use it).
    pub(crate) fn new(
        psk: Secret,
        binding: [u8; 32],
        received_at: u64,
        lifetime_s: u32,
        age_add: u32,
        identity: &[u8],
    ) -> Option<Self> {
        if identity.is_empty() || identity.len() > MAX_IDENTITY || lifetime_s == 0 {
            return None;
        }
        let mut id = [0u8; MAX_IDENTITY];
        id[..identity.len()].copy_from_slice(identity);
        Some(Self {
            psk,
            binding,
            received_at,
            lifetime_s: lifetime_s.min(MAX_TICKET_LIFETIME_S),
            age_add,
            identity_len: identity.len() as u16,
            identity: id,
        })
    }

    pub(crate) fn psk(&self) -> &Secret {
        &self.psk
    }

    pub fn identity(&self) -> &[u8] {
        &self.identity[..usize::from(self.identity_len)]
    }

    /// When it was received, Unix seconds, and how long it lives.
    pub fn received_at(&self) -> u64 {
        self.received_at
    }

    pub fn lifetime_s(&self) -> u32 {
        self.lifetime_s
    }

    /// The obfuscated age to offer it with at `now`, if it may be offered to the server
    /// `binding` names: same server, not expired, and a clock that did not go back.
    pub(crate) fn offer(&self, binding: &[u8; 32], now: u64) -> Option<u32> {
        if &self.binding != binding {
            return None;
        }
        let age_s = now.checked_sub(self.received_at)?;
        if age_s >= u64::from(self.lifetime_s) {
            return None;
        }
        let age_ms = u32::try_from(age_s.checked_mul(1000)?).ok()?;
        // §4.2.11: the age plus ticket_age_add, modulo 2^32.
        Some(age_ms.wrapping_add(self.age_add))
    }

    /// The fixed-size record (layout above).
    pub fn to_record(&self) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        r[0..4].copy_from_slice(MAGIC);
        r[4..36].copy_from_slice(&self.psk);
        r[36..68].copy_from_slice(&self.binding);
        r[68..76].copy_from_slice(&self.received_at.to_be_bytes());
        r[76..80].copy_from_slice(&self.lifetime_s.to_be_bytes());
        r[80..84].copy_from_slice(&self.age_add.to_be_bytes());
        r[84..86].copy_from_slice(&self.identity_len.to_be_bytes());
        r[86..].copy_from_slice(&self.identity);
        r
    }

    /// A ticket from its record.
    pub fn from_record(r: &[u8; RECORD_LEN]) -> Result<Self, TicketError> {
        if &r[0..4] != MAGIC {
            return Err(TicketError::Magic);
        }
        let field = |at: usize| -> [u8; 4] { [r[at], r[at + 1], r[at + 2], r[at + 3]] };
        let identity_len = u16::from_be_bytes([r[84], r[85]]);
        if identity_len == 0 || usize::from(identity_len) > MAX_IDENTITY {
            return Err(TicketError::IdentityLength);
        }
        let lifetime_s = u32::from_be_bytes(field(76));
        if lifetime_s > MAX_TICKET_LIFETIME_S {
            return Err(TicketError::Lifetime);
        }
        let mut psk = [0u8; 32];
        psk.copy_from_slice(&r[4..36]);
        let mut binding = [0u8; 32];
        binding.copy_from_slice(&r[36..68]);
        let mut received = [0u8; 8];
        received.copy_from_slice(&r[68..76]);
        let mut identity = [0u8; MAX_IDENTITY];
        identity.copy_from_slice(&r[86..]);
        Ok(Self {
            psk,
            binding,
            received_at: u64::from_be_bytes(received),
            lifetime_s,
            age_add: u32::from_be_bytes(field(80)),
            identity_len,
            identity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> Ticket {
        Ticket::new([5; 32], [6; 32], 1_000, 3_600, 0xFFFF_FF00, b"opaque").unwrap()
    }

    #[test]
    fn a_record_reads_back_as_the_same_ticket() {
        let t = ticket();
        assert_eq!(Ticket::from_record(&t.to_record()), Ok(t));
    }

    #[test]
    fn rejects_blank_flash() {
        assert_eq!(
            Ticket::from_record(&[0xFF; RECORD_LEN]),
            Err(TicketError::Magic)
        );
    }

    #[test]
    fn rejects_an_identity_length_past_the_record() {
        let mut r = ticket().to_record();
        r[84..86].copy_from_slice(&600u16.to_be_bytes());
        assert_eq!(Ticket::from_record(&r), Err(TicketError::IdentityLength));
        r[84..86].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(Ticket::from_record(&r), Err(TicketError::IdentityLength));
    }

    #[test]
    fn rejects_a_lifetime_over_seven_days() {
        let mut r = ticket().to_record();
        r[76..80].copy_from_slice(&(MAX_TICKET_LIFETIME_S + 1).to_be_bytes());
        assert_eq!(Ticket::from_record(&r), Err(TicketError::Lifetime));
    }

    #[test]
    fn the_age_is_obfuscated_modulo_2_32() {
        let t = ticket();
        assert_eq!(
            t.offer(&[6; 32], 1_001),
            Some(1000u32.wrapping_add(0xFFFF_FF00))
        );
    }

    #[test]
    fn an_expired_ticket_is_not_offered() {
        let t = ticket();
        assert_eq!(t.offer(&[6; 32], 1_000 + 3_600), None);
        assert!(t.offer(&[6; 32], 1_000 + 3_599).is_some());
    }

    #[test]
    fn a_ticket_is_not_offered_when_the_clock_went_back() {
        assert_eq!(ticket().offer(&[6; 32], 999), None);
    }

    #[test]
    fn a_ticket_is_offered_to_its_own_server_only() {
        assert_eq!(ticket().offer(&[7; 32], 1_001), None);
    }

    #[test]
    fn a_ticket_with_zero_lifetime_or_an_overlong_identity_is_not_kept() {
        assert!(Ticket::new([0; 32], [0; 32], 0, 0, 0, b"x").is_none());
        assert!(Ticket::new([0; 32], [0; 32], 0, 60, 0, &[1; MAX_IDENTITY + 1]).is_none());
    }
}
