//! Session tickets sealed with keys the replicas share (`--tls-ticket-key FILE`), so that a
//! device resumes its session on whichever replica a load balancer sends its next poll to.
//!
//! The file holds one key a line, 64 hex digits (`openssl rand -hex 32`), blank lines and `#`
//! comments ignored. The **first** key seals new tickets; every key listed opens them.
//!
//! | Ticket bytes | What                                                   |
//! |--------------|--------------------------------------------------------|
//! | 0..4         | key id: the first 4 bytes of SHA-256("npub ticket key" ‖ key) |
//! | 4..16        | nonce, random                                          |
//! | 16..         | the session state, AES-256-GCM, with its 16-byte tag   |
//!
//! Rotation, on every replica in turn, each step once all replicas have done the one before it
//! (a reload is `SIGHUP`): add the new key as the *second* line (it opens tickets, seals none);
//! move it to the top (it seals); after [`LIFETIME_SECS`] remove the old key. A replica a step
//! behind still opens every ticket another seals, so no device loses its session to a rotation.
use std::path::Path;

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use sha2::{Digest as _, Sha256};

use super::error::TlsError;
use super::files;

/// How long a ticket is good for, as told to the client (RFC 8446 allows up to 7 days). Keys
/// should be rotated at least this often.
pub const LIFETIME_SECS: u32 = 12 * 60 * 60;

/// Bytes of the key id in front of a ticket.
const ID_LEN: usize = 4;
/// The least a ticket can be: id, nonce, tag.
const MIN_TICKET: usize = ID_LEN + NONCE_LEN + 16;
/// A ticket longer than this is not one of ours (rustls's own state is a few hundred bytes).
const MAX_TICKET: usize = 4096;

/// Tickets sealed under the keys of a `--tls-ticket-key` file.
pub struct SharedTicketer {
    /// The first seals; all open.
    keys: Vec<([u8; ID_LEN], LessSafeKey)>,
    random: SystemRandom,
}

impl std::fmt::Debug for SharedTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTicketer")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SharedTicketer {
    /// Reads the keys of `path`.
    pub fn load(path: &Path) -> Result<Self, TlsError> {
        let lines = files::key_lines("--tls-ticket-key", path)?;
        let mut keys = Vec::with_capacity(lines.len());
        for (line, text) in lines {
            let bad = || TlsError::TicketKey {
                path: path.to_owned(),
                line,
            };
            let raw: [u8; 32] = crate::store::from_hex(&text)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(bad)?;
            keys.push(Self::key(&raw).ok_or_else(bad)?);
        }
        if keys.is_empty() {
            return Err(TlsError::Missing {
                flag: "--tls-ticket-key",
                path: path.to_owned(),
                what: "key (a line of 64 hex digits)",
            });
        }
        Ok(Self {
            keys,
            random: SystemRandom::new(),
        })
    }

    fn key(raw: &[u8; 32]) -> Option<([u8; ID_LEN], LessSafeKey)> {
        let digest = Sha256::new()
            .chain_update(b"npub ticket key")
            .chain_update(raw)
            .finalize();
        let mut id = [0u8; ID_LEN];
        id.copy_from_slice(&digest[..ID_LEN]);
        let key = UnboundKey::new(&AES_256_GCM, raw).ok()?;
        Some((id, LessSafeKey::new(key)))
    }
}

impl rustls::server::ProducesTickets for SharedTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let (id, key) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(MIN_TICKET + plain.len());
        out.extend_from_slice(id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(id),
                &mut out[ID_LEN + NONCE_LEN..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if !(MIN_TICKET..=MAX_TICKET).contains(&cipher.len()) {
            return None;
        }
        let (id, rest) = cipher.split_at(ID_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let (_, key) = self.keys.iter().find(|(k, _)| k == id)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key.open_in_place(nonce, Aad::from(id), &mut buf).ok()?;
        let len = plain.len();
        buf.truncate(len);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets as _;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn opens_a_ticket_sealed_by_a_replica_with_the_same_keys_after_a_rotation() {
        let (old, new) = ("11".repeat(32), "22".repeat(32));
        let before = SharedTicketer::load(file(&old).path()).unwrap();
        let ticket = before.encrypt(b"session state").unwrap();
        // The new key on top: old tickets still open, new ones are sealed with the new key.
        let after =
            SharedTicketer::load(file(&format!("# rotated\n{new}\n\n{old}\n")).path()).unwrap();
        assert_eq!(after.decrypt(&ticket).unwrap(), b"session state");
        let fresh = after.encrypt(b"again").unwrap();
        assert_ne!(fresh[..ID_LEN], ticket[..ID_LEN]);
        assert_eq!(before.decrypt(&fresh), None);
    }

    #[test]
    fn rejects_a_tampered_or_foreign_ticket() {
        let t = SharedTicketer::load(file(&"33".repeat(32)).path()).unwrap();
        let mut ticket = t.encrypt(b"state").unwrap();
        let last = ticket.len() - 1;
        ticket[last] ^= 1;
        assert_eq!(t.decrypt(&ticket), None);
        assert_eq!(t.decrypt(&[0u8; 8]), None);
        let other = SharedTicketer::load(file(&"44".repeat(32)).path()).unwrap();
        assert_eq!(other.decrypt(&t.encrypt(b"state").unwrap()), None);
    }

    #[test]
    fn rejects_a_key_file_line_that_is_not_a_key() {
        let f = file(&format!("{}\nnot-hex\n", "55".repeat(32)));
        let e = SharedTicketer::load(f.path()).unwrap_err();
        assert!(matches!(e, TlsError::TicketKey { line: 2, .. }), "{e}");
        let e = SharedTicketer::load(file("# nothing\n").path()).unwrap_err();
        assert!(matches!(e, TlsError::Missing { .. }), "{e}");
    }
}
