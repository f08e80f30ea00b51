//! The server's handshake messages after its ServerHello (RFC 8446 §4.2–4.6), each parsed from
//! its body (after the 4-byte handshake header) and consumed exactly.
//!
//! | message (type)             | layout                                                                 |
//! |----------------------------|------------------------------------------------------------------------|
//! | EncryptedExtensions (8)    | 2 + n extensions: server_name (empty), ALPN (exactly `http/1.1`), supported_groups, ticket_request (a count); any other is refused |
//! | CertificateRequest (13)    | 1 + 0 request context (must be empty in the handshake), 2 + n extensions (not read) |
//! | Certificate (11)           | 1 + 0 request context, 3 + n entries of (3 + n DER, 2 + n extensions); the first is the server's |
//! | CertificateVerify (15)     | 2 scheme (must be 0x0403), 2 + n DER ECDSA signature                   |
//! | Finished (20)              | 32 verify_data                                                         |
//! | NewSessionTicket (4)       | 4 lifetime s, 4 age_add, 1 + n nonce, 2 + n ticket (1 or more bytes), 2 + n extensions (early_data only) |
//! | KeyUpdate (24)             | 1 request_update (0 or 1)                                              |
use crate::codec::Reader;
use crate::error::{CertError, Refusal};
use crate::hello::{ALPN_HTTP11, ECDSA_SECP256R1_SHA256, Seen, ext};

pub const NEW_SESSION_TICKET: u8 = 4;
pub const ENCRYPTED_EXTENSIONS: u8 = 8;
pub const CERTIFICATE: u8 = 11;
pub const CERTIFICATE_REQUEST: u8 = 13;
pub const CERTIFICATE_VERIFY: u8 = 15;
pub const FINISHED: u8 = 20;
pub const KEY_UPDATE: u8 = 24;

/// The longest a ticket may live (§4.6.1: seven days).
pub const MAX_TICKET_LIFETIME_S: u32 = 604_800;

pub fn parse_encrypted_extensions(body: &[u8]) -> Result<(), Refusal> {
    let mut r = Reader::new(body);
    let mut exts = Reader::new(r.vec16()?);
    r.finish()?;
    let mut seen = Seen::default();
    while !exts.is_empty() {
        let id = exts.u16()?;
        let mut data = Reader::new(exts.vec16()?);
        seen.add(id)?;
        match id {
            // The server used the name sent; the extension is empty.
            ext::SERVER_NAME => {}
            ext::ALPN => {
                let mut list = Reader::new(data.vec16()?);
                if list.vec8()? != ALPN_HTTP11 {
                    return Err(Refusal::Alpn);
                }
                list.finish()?;
            }
            // The server's own preference, for next time: read past it.
            ext::SUPPORTED_GROUPS => {
                data.vec16()?;
            }
            // RFC 9149: how many tickets the server will send; the client takes what comes.
            ext::TICKET_REQUEST => {
                data.u8()?;
            }
            _ => return Err(Refusal::UnofferedExtension),
        }
        data.finish()?;
    }
    Ok(())
}

/// A CertificateRequest: this client has no certificate and answers with an empty one.
pub fn parse_certificate_request(body: &[u8]) -> Result<(), Refusal> {
    let mut r = Reader::new(body);
    if !r.vec8()?.is_empty() {
        return Err(Refusal::CertificateContext);
    }
    r.vec16()?;
    r.finish()
}

/// The server's certificate (the first entry) and the next one, an intermediate, if any, from a
/// Certificate message; further entries are decoded and ignored (a chain of one intermediate is
/// the longest the verifier follows).
pub fn parse_certificate(body: &[u8]) -> Result<(&[u8], Option<&[u8]>), crate::Error> {
    let mut r = Reader::new(body);
    if !r.vec8()?.is_empty() {
        return Err(Refusal::CertificateContext.into());
    }
    let mut list = Reader::new(r.vec24()?);
    r.finish()?;
    let (mut leaf, mut next) = (None, None);
    while !list.is_empty() {
        let der = list.vec24()?;
        list.vec16()?;
        if leaf.is_none() {
            leaf = Some(der);
        } else if next.is_none() {
            next = Some(der);
        }
    }
    let leaf = leaf.ok_or(crate::Error::Certificate(CertError::Empty))?;
    Ok((leaf, next))
}

/// A CertificateVerify's DER signature.
pub fn parse_certificate_verify(body: &[u8]) -> Result<&[u8], Refusal> {
    let mut r = Reader::new(body);
    if r.u16()? != ECDSA_SECP256R1_SHA256 {
        return Err(Refusal::SignatureScheme);
    }
    let signature = r.vec16()?;
    r.finish()?;
    Ok(signature)
}

pub fn parse_finished(body: &[u8]) -> Result<[u8; 32], Refusal> {
    let mut r = Reader::new(body);
    let mac = r.array::<32>()?;
    r.finish()?;
    Ok(mac)
}

/// A NewSessionTicket's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewTicket<'a> {
    pub lifetime_s: u32,
    pub age_add: u32,
    pub nonce: &'a [u8],
    pub identity: &'a [u8],
}

pub fn parse_new_session_ticket(body: &[u8]) -> Result<NewTicket<'_>, Refusal> {
    let mut r = Reader::new(body);
    let lifetime_s = r.u32()?;
    let age_add = r.u32()?;
    let nonce = r.vec8()?;
    let identity = r.vec16()?;
    let mut exts = Reader::new(r.vec16()?);
    r.finish()?;
    if identity.is_empty() {
        return Err(Refusal::Truncated);
    }
    if lifetime_s > MAX_TICKET_LIFETIME_S {
        return Err(Refusal::TicketLifetime);
    }
    let mut seen = Seen::default();
    while !exts.is_empty() {
        let id = exts.u16()?;
        let data = exts.vec16()?;
        seen.add(id)?;
        // early_data says how much 0-RTT data the ticket allows; this client sends none.
        if id != ext::EARLY_DATA || data.len() != 4 {
            return Err(Refusal::UnofferedExtension);
        }
    }
    Ok(NewTicket {
        lifetime_s,
        age_add,
        nonce,
        identity,
    })
}

/// A KeyUpdate: whether the server asks for this side's keys to be updated too.
pub fn parse_key_update(body: &[u8]) -> Result<bool, Refusal> {
    let mut r = Reader::new(body);
    let requested = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(Refusal::KeyUpdate),
    };
    r.finish()?;
    Ok(requested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_encrypted_extensions_with_alpn() {
        let body = [
            0, 15, 0, 16, 0, 11, 0, 9, 8, b'h', b't', b't', b'p', b'/', b'1', b'.', b'1',
        ];
        assert_eq!(parse_encrypted_extensions(&body[..]), Ok(()));
    }

    #[test]
    fn rejects_another_application_protocol() {
        let body = [0, 9, 0, 16, 0, 5, 0, 3, 2, b'h', b'2'];
        assert_eq!(parse_encrypted_extensions(&body), Err(Refusal::Alpn));
    }

    #[test]
    fn rejects_early_data_in_encrypted_extensions() {
        let body = [0, 4, 0, 42, 0, 0];
        assert_eq!(
            parse_encrypted_extensions(&body),
            Err(Refusal::UnofferedExtension)
        );
    }

    #[test]
    fn rejects_a_certificate_request_context_in_the_handshake() {
        assert_eq!(
            parse_certificate_request(&[1, 9, 0, 0]),
            Err(Refusal::CertificateContext)
        );
        assert_eq!(parse_certificate_request(&[0, 0, 0]), Ok(()));
    }

    #[test]
    fn rejects_an_empty_certificate_list() {
        assert_eq!(
            parse_certificate(&[0, 0, 0, 0]),
            Err(crate::Error::Certificate(CertError::Empty))
        );
    }

    #[test]
    fn the_first_certificate_is_the_servers() {
        let body = [0, 0, 0, 13, 0, 0, 2, 0xA, 0xB, 0, 0, 0, 0, 1, 0xC, 0, 0];
        assert_eq!(
            parse_certificate(&body[..]),
            Ok((&[0xA, 0xB][..], Some(&[0xC][..])))
        );
    }

    #[test]
    fn rejects_a_certificate_entry_running_past_the_list() {
        let body = [0, 0, 0, 5, 0, 0, 9, 1, 2];
        assert_eq!(
            parse_certificate(&body),
            Err(crate::Error::Refused(Refusal::Truncated))
        );
    }

    #[test]
    fn rejects_a_signature_scheme_not_offered() {
        assert_eq!(
            parse_certificate_verify(&[0x08, 0x04, 0, 1, 0]),
            Err(Refusal::SignatureScheme)
        );
    }

    #[test]
    fn rejects_a_short_finished() {
        assert_eq!(parse_finished(&[0; 31]), Err(Refusal::Truncated));
        assert_eq!(parse_finished(&[0; 33]), Err(Refusal::TrailingData));
    }

    fn ticket(lifetime: u32, exts: &[u8]) -> std::vec::Vec<u8> {
        let mut b = std::vec::Vec::new();
        b.extend_from_slice(&lifetime.to_be_bytes());
        b.extend_from_slice(&7u32.to_be_bytes());
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&[0, 3, 1, 2, 3]);
        b.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        b.extend_from_slice(exts);
        b
    }

    #[test]
    fn parses_a_new_session_ticket() {
        let t = ticket(3600, &[0, 42, 0, 4, 0, 0, 0, 0]);
        let nst = parse_new_session_ticket(&t).unwrap();
        assert_eq!((nst.lifetime_s, nst.age_add), (3600, 7));
        assert_eq!((nst.nonce, nst.identity), (&[0][..], &[1, 2, 3][..]));
    }

    #[test]
    fn rejects_a_ticket_living_over_seven_days() {
        let t = ticket(MAX_TICKET_LIFETIME_S + 1, &[]);
        assert_eq!(parse_new_session_ticket(&t), Err(Refusal::TicketLifetime));
    }

    #[test]
    fn rejects_an_unknown_ticket_extension() {
        let t = ticket(60, &[0, 9, 0, 0]);
        assert_eq!(
            parse_new_session_ticket(&t),
            Err(Refusal::UnofferedExtension)
        );
    }

    #[test]
    fn rejects_a_key_update_flag_other_than_0_or_1() {
        assert_eq!(parse_key_update(&[2]), Err(Refusal::KeyUpdate));
        assert_eq!(parse_key_update(&[1]), Ok(true));
    }
}
