//! The client's ClientHello and the server's ServerHello / HelloRetryRequest (RFC 8446 §4.1).
//!
//! ClientHello, as this client writes it:
//!
//! | bytes       | field                                                         |
//! |-------------|---------------------------------------------------------------|
//! | 1 + 3       | handshake type 1, length                                      |
//! | 2           | legacy_version 0x0303                                         |
//! | 32          | random                                                        |
//! | 1           | legacy_session_id: empty                                      |
//! | 2 + 2       | cipher_suites: TLS_AES_128_GCM_SHA256 (0x1301)                |
//! | 1 + 1       | legacy_compression_methods: null                              |
//! | 2 + n       | extensions, in this order:                                    |
//! |             | server_name (0), a DNS name only (none for an IP address)     |
//! |             | supported_groups (10): x25519, secp256r1                      |
//! |             | signature_algorithms (13): ecdsa_secp256r1_sha256             |
//! |             | application_layer_protocol_negotiation (16): http/1.1         |
//! |             | supported_versions (43): TLS 1.3                              |
//! |             | psk_key_exchange_modes (45): psk_dhe_ke                       |
//! |             | key_share (51): one share, x25519 (32 bytes); secp256r1 (the uncompressed point) after a HelloRetryRequest for it |
//! |             | cookie (44), after a HelloRetryRequest that sent one          |
//! |             | ticket_request (58, RFC 9149): one ticket after a full handshake, none after a resumed one |
//! |             | pre_shared_key (41), last: one identity, its obfuscated age, one 32-byte binder |
//!
//! ServerHello (and HelloRetryRequest, the same structure with a fixed random):
//!
//! | bytes   | field                                                   |
//! |---------|---------------------------------------------------------|
//! | 2       | legacy_version, must be 0x0303                          |
//! | 32      | random ([`HRR_RANDOM`] for a HelloRetryRequest)         |
//! | 1 + n   | legacy_session_id_echo, must be empty (as sent)         |
//! | 2       | cipher_suite, must be 0x1301                            |
//! | 1       | legacy_compression_method, must be 0                    |
//! | 2 + n   | extensions: supported_versions (must be 0x0304); key_share (a full share of x25519 or secp256r1, or in a HelloRetryRequest a group); pre_shared_key (selected identity, must be 0); cookie (HelloRetryRequest only) |
//!
//! **Groups.** The first ClientHello offers an x25519 share only: 33 bytes less than a secp256r1
//! point each way, and the server (rustls) prefers it. secp256r1 stays in supported_groups, so a
//! server that insists on it says so with a HelloRetryRequest and gets a secp256r1 share in the
//! second ClientHello (the certificate and its signature are ECDSA P-256 either way).
//!
//! **Tickets (RFC 9149).** ticket_request asks for one ticket after a full handshake and none
//! after a resumed one: the client keeps offering the ticket it has until it expires (see
//! [`crate::client`] for why), and a resumed poll does not carry a NewSessionTicket it would
//! not use. A server that ignores the extension sends what it sends; the client takes the last.
use crate::codec::{Reader, Writer};
use crate::error::{ConfigError, Refusal};

pub const CLIENT_HELLO: u8 = 1;
pub const SERVER_HELLO: u8 = 2;

pub const TLS_AES_128_GCM_SHA256: u16 = 0x1301;
pub const SECP256R1: u16 = 0x0017;
pub const X25519: u16 = 0x001D;
/// An x25519 public key (RFC 7748).
pub const X25519_LEN: usize = 32;
pub const ECDSA_SECP256R1_SHA256: u16 = 0x0403;
pub const TLS13: u16 = 0x0304;
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
pub const POINT_LEN: usize = 65;

pub mod ext {
    pub const SERVER_NAME: u16 = 0;
    pub const MAX_FRAGMENT_LENGTH: u16 = 1;
    pub const SUPPORTED_GROUPS: u16 = 10;
    pub const SIGNATURE_ALGORITHMS: u16 = 13;
    pub const ALPN: u16 = 16;
    pub const RECORD_SIZE_LIMIT: u16 = 28;
    pub const PRE_SHARED_KEY: u16 = 41;
    pub const EARLY_DATA: u16 = 42;
    pub const SUPPORTED_VERSIONS: u16 = 43;
    pub const COOKIE: u16 = 44;
    pub const PSK_KEY_EXCHANGE_MODES: u16 = 45;
    pub const KEY_SHARE: u16 = 51;
    pub const TICKET_REQUEST: u16 = 58;
}

/// The random of a HelloRetryRequest: SHA-256 of "HelloRetryRequest" (§4.1.3).
pub const HRR_RANDOM: [u8; 32] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
];

/// What goes into one ClientHello.
pub struct Hello<'a> {
    pub random: &'a [u8; 32],
    /// The SNI name; `None` for an IP address.
    pub server_name: Option<&'a str>,
    /// The group of the one key share and the share: an x25519 key or a secp256r1 point.
    pub key_share: (u16, &'a [u8]),
    pub cookie: Option<&'a [u8]>,
    /// The ticket's identity and obfuscated age.
    pub psk: Option<(&'a [u8], u32)>,
}

/// Writes the ClientHello (its handshake header included) into `w`; with a PSK, the binder is
/// left zero and its offset returned: the binder covers the message up to the binders list.
pub fn write_client_hello(w: &mut Writer<'_>, h: &Hello<'_>) -> Result<Option<usize>, ConfigError> {
    let start = w.len();
    w.u8(CLIENT_HELLO)?;
    let msg = w.begin(3)?;
    w.u16(0x0303)?;
    w.bytes(h.random)?;
    w.u8(0)?;
    w.u16(2)?;
    w.u16(TLS_AES_128_GCM_SHA256)?;
    w.bytes(&[1, 0])?;
    let exts = w.begin(2)?;
    if let Some(name) = h.server_name {
        w.u16(ext::SERVER_NAME)?;
        let e = w.begin(2)?;
        let list = w.begin(2)?;
        w.u8(0)?;
        let n = w.begin(2)?;
        w.bytes(name.as_bytes())?;
        w.end(n)?;
        w.end(list)?;
        w.end(e)?;
    }
    for (id, body) in [
        (ext::SUPPORTED_GROUPS, &[0, 4, 0x00, 0x1D, 0x00, 0x17][..]),
        (ext::SIGNATURE_ALGORITHMS, &[0, 2, 0x04, 0x03][..]),
        (ext::ALPN, b"\x00\x09\x08http/1.1"),
        (ext::SUPPORTED_VERSIONS, &[2, 0x03, 0x04][..]),
        (ext::PSK_KEY_EXCHANGE_MODES, &[1, 1][..]),
        // new_session_count 1, resumption_count 0.
        (ext::TICKET_REQUEST, &[1, 0][..]),
    ] {
        w.u16(id)?;
        w.u16(body.len() as u16)?;
        w.bytes(body)?;
    }
    w.u16(ext::KEY_SHARE)?;
    let e = w.begin(2)?;
    let shares = w.begin(2)?;
    w.u16(h.key_share.0)?;
    let k = w.begin(2)?;
    w.bytes(h.key_share.1)?;
    w.end(k)?;
    w.end(shares)?;
    w.end(e)?;
    if let Some(cookie) = h.cookie {
        w.u16(ext::COOKIE)?;
        let e = w.begin(2)?;
        let c = w.begin(2)?;
        w.bytes(cookie)?;
        w.end(c)?;
        w.end(e)?;
    }
    let mut binder_at = None;
    if let Some((identity, age)) = h.psk {
        w.u16(ext::PRE_SHARED_KEY)?;
        let e = w.begin(2)?;
        let ids = w.begin(2)?;
        let id = w.begin(2)?;
        w.bytes(identity)?;
        w.end(id)?;
        w.u32(age)?;
        w.end(ids)?;
        let binders = w.begin(2)?;
        w.u8(32)?;
        binder_at = Some(w.len() - start);
        w.bytes(&[0u8; 32])?;
        w.end(binders)?;
        w.end(e)?;
    }
    w.end(exts)?;
    w.end(msg)?;
    Ok(binder_at)
}

/// A parsed ServerHello or HelloRetryRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerHello<'a> {
    Hello {
        /// The group of the server's share: [`X25519`] or [`SECP256R1`] (the caller checks it
        /// is the one offered).
        group: u16,
        /// The server's x25519 key or secp256r1 point.
        key_share: &'a [u8],
        /// The server accepted the offered ticket.
        psk: bool,
    },
    Retry {
        /// The group the server asks for, if it asks for one.
        group: Option<u16>,
        cookie: Option<&'a [u8]>,
    },
}

/// Parses a ServerHello body (after the handshake header); `offered_psk` says whether the
/// ClientHello carried a ticket.
pub fn parse_server_hello(body: &[u8], offered_psk: bool) -> Result<ServerHello<'_>, Refusal> {
    let mut r = Reader::new(body);
    if r.u16()? != 0x0303 {
        return Err(Refusal::LegacyField);
    }
    let retry = r.array::<32>()? == HRR_RANDOM;
    if !r.vec8()?.is_empty() {
        return Err(Refusal::LegacyField);
    }
    if r.u16()? != TLS_AES_128_GCM_SHA256 {
        return Err(Refusal::CipherSuite);
    }
    if r.u8()? != 0 {
        return Err(Refusal::LegacyField);
    }
    let mut exts = Reader::new(r.vec16()?);
    r.finish()?;
    let mut seen = Seen::default();
    let mut version = None;
    let mut key_share = None;
    let mut group = None;
    let mut cookie = None;
    let mut psk = false;
    while !exts.is_empty() {
        let id = exts.u16()?;
        let mut data = Reader::new(exts.vec16()?);
        seen.add(id)?;
        match id {
            ext::SUPPORTED_VERSIONS => version = Some(data.u16()?),
            ext::KEY_SHARE if retry => group = Some(data.u16()?),
            ext::KEY_SHARE => {
                let g = data.u16()?;
                if g != X25519 && g != SECP256R1 {
                    return Err(Refusal::KeyShare);
                }
                key_share = Some((g, data.vec16()?));
            }
            ext::COOKIE if retry => {
                let c = data.vec16()?;
                if c.is_empty() {
                    return Err(Refusal::Truncated);
                }
                cookie = Some(c);
            }
            ext::PRE_SHARED_KEY if !retry => {
                if !offered_psk || data.u16()? != 0 {
                    return Err(Refusal::PskNotOffered);
                }
                psk = true;
            }
            _ => return Err(Refusal::UnofferedExtension),
        }
        data.finish()?;
    }
    if version != Some(TLS13) {
        return Err(Refusal::NotTls13);
    }
    if retry {
        return Ok(ServerHello::Retry { group, cookie });
    }
    let (group, key_share) = key_share.ok_or(Refusal::MissingKeyShare)?;
    Ok(ServerHello::Hello {
        group,
        key_share,
        psk,
    })
}

/// The extensions seen in one message, to refuse a second of any.
#[derive(Default)]
pub struct Seen(u64);

impl Seen {
    pub fn add(&mut self, id: u16) -> Result<(), Refusal> {
        // Every extension this client accepts has an id below 64; the others are refused by
        // the caller's match, so folding them onto bit 63 changes nothing.
        let bit = 1u64 << id.min(63);
        if id < 63 && self.0 & bit != 0 {
            return Err(Refusal::DuplicateExtension);
        }
        self.0 |= bit;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ServerHello body with `exts` (id, data) and the given random.
    pub(crate) fn server_hello(random: [u8; 32], exts: &[(u16, &[u8])]) -> std::vec::Vec<u8> {
        let mut out = std::vec![3, 3];
        out.extend_from_slice(&random);
        out.push(0);
        out.extend_from_slice(&[0x13, 0x01, 0]);
        let mut e = std::vec::Vec::new();
        for (id, data) in exts {
            e.extend_from_slice(&id.to_be_bytes());
            e.extend_from_slice(&(data.len() as u16).to_be_bytes());
            e.extend_from_slice(data);
        }
        out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        out.extend_from_slice(&e);
        out
    }

    fn share() -> std::vec::Vec<u8> {
        let mut s = std::vec![0x00, 0x17, 0, 65];
        s.extend_from_slice(&[4u8; 65]);
        s
    }

    const V13: &[u8] = &[3, 4];

    #[test]
    fn parses_a_full_server_hello() {
        let sh = server_hello([1; 32], &[(43, V13), (51, &share())]);
        match parse_server_hello(&sh, false).unwrap() {
            ServerHello::Hello {
                group,
                key_share,
                psk,
            } => {
                assert_eq!(group, SECP256R1);
                assert_eq!(key_share.len(), 65);
                assert!(!psk);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_an_x25519_server_hello() {
        let mut s = std::vec![0x00, 0x1D, 0, 32];
        s.extend_from_slice(&[9u8; 32]);
        let sh = server_hello([1; 32], &[(43, V13), (51, &s)]);
        assert_eq!(
            parse_server_hello(&sh, false),
            Ok(ServerHello::Hello {
                group: X25519,
                key_share: &[9u8; 32][..],
                psk: false
            })
        );
    }

    #[test]
    fn a_client_hello_offers_x25519_then_secp256r1_and_asks_for_one_ticket() {
        let mut buf = [0u8; 600];
        let mut w = Writer::new(&mut buf);
        write_client_hello(
            &mut w,
            &Hello {
                random: &[9; 32],
                server_name: None,
                key_share: (X25519, &[7; 32]),
                cookie: None,
                psk: None,
            },
        )
        .unwrap();
        let len = w.len();
        let ch = &buf[..len];
        let has = |bytes: &[u8]| ch.windows(bytes.len()).any(|w| w == bytes);
        assert!(
            has(&[0, 10, 0, 6, 0, 4, 0, 0x1D, 0, 0x17]),
            "supported_groups"
        );
        assert!(
            has(&[0, 58, 0, 2, 1, 0]),
            "ticket_request: 1 new, 0 resumed"
        );
        assert!(
            has(&[0, 51, 0, 38, 0, 36, 0, 0x1D, 0, 32, 7]),
            "one x25519 share"
        );
    }

    #[test]
    fn rejects_tls12() {
        let sh = server_hello([1; 32], &[(43, &[3, 3]), (51, &share())]);
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::NotTls13));
        let sh = server_hello([1; 32], &[(51, &share())]);
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::NotTls13));
    }

    #[test]
    fn rejects_another_cipher_suite() {
        let mut sh = server_hello([1; 32], &[(43, V13), (51, &share())]);
        sh[36] = 0x02;
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::CipherSuite));
    }

    #[test]
    fn rejects_a_session_id_not_sent() {
        let mut sh = server_hello([1; 32], &[(43, V13), (51, &share())]);
        sh.insert(35, 0xAA);
        sh[34] = 1;
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::LegacyField));
    }

    #[test]
    fn rejects_another_group() {
        let mut s = share();
        // secp384r1: neither group this client offers.
        s[1] = 0x18;
        let sh = server_hello([1; 32], &[(43, V13), (51, &s)]);
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::KeyShare));
    }

    #[test]
    fn rejects_a_missing_key_share() {
        let sh = server_hello([1; 32], &[(43, V13), (41, &[0, 0])]);
        assert_eq!(parse_server_hello(&sh, true), Err(Refusal::MissingKeyShare));
    }

    #[test]
    fn rejects_a_psk_not_offered() {
        let sh = server_hello([1; 32], &[(43, V13), (51, &share()), (41, &[0, 0])]);
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::PskNotOffered));
        let sh = server_hello([1; 32], &[(43, V13), (51, &share()), (41, &[0, 1])]);
        assert_eq!(parse_server_hello(&sh, true), Err(Refusal::PskNotOffered));
    }

    #[test]
    fn rejects_an_unoffered_extension() {
        let sh = server_hello([1; 32], &[(43, V13), (51, &share()), (42, &[])]);
        assert_eq!(
            parse_server_hello(&sh, false),
            Err(Refusal::UnofferedExtension)
        );
        // A cookie belongs to a HelloRetryRequest only.
        let sh = server_hello([1; 32], &[(43, V13), (51, &share()), (44, &[0, 1, 9])]);
        assert_eq!(
            parse_server_hello(&sh, false),
            Err(Refusal::UnofferedExtension)
        );
    }

    #[test]
    fn rejects_a_duplicate_extension() {
        let sh = server_hello([1; 32], &[(43, V13), (43, V13), (51, &share())]);
        assert_eq!(
            parse_server_hello(&sh, false),
            Err(Refusal::DuplicateExtension)
        );
    }

    #[test]
    fn rejects_trailing_bytes_in_an_extension() {
        let sh = server_hello([1; 32], &[(43, &[3, 4, 0]), (51, &share())]);
        assert_eq!(parse_server_hello(&sh, false), Err(Refusal::TrailingData));
    }

    #[test]
    fn parses_a_hello_retry_request() {
        let sh = server_hello(
            HRR_RANDOM,
            &[(43, V13), (51, &[0, 0x18]), (44, &[0, 2, 7, 7])],
        );
        assert_eq!(
            parse_server_hello(&sh, false),
            Ok(ServerHello::Retry {
                group: Some(0x18),
                cookie: Some(&[7, 7][..])
            })
        );
    }

    #[test]
    fn rejects_every_truncation_of_a_server_hello() {
        let sh = server_hello([1; 32], &[(43, V13), (51, &share())]);
        for n in 0..sh.len() {
            assert!(parse_server_hello(&sh[..n], false).is_err(), "{n} bytes");
        }
    }

    #[test]
    fn a_client_hello_with_a_psk_ends_with_its_binder() {
        let mut buf = [0u8; 600];
        let mut w = Writer::new(&mut buf);
        let at = write_client_hello(
            &mut w,
            &Hello {
                random: &[9; 32],
                server_name: Some("localhost"),
                key_share: (X25519, &[9; 32]),
                cookie: None,
                psk: Some((b"ticket", 77)),
            },
        )
        .unwrap()
        .unwrap();
        let len = w.len();
        assert_eq!(at + 32, len, "the binder is the last field");
        let mut r = Reader::new(&buf[..len]);
        assert_eq!(r.u8().unwrap(), CLIENT_HELLO);
        assert_eq!(r.vec24().unwrap().len(), len - 4);
    }
}
