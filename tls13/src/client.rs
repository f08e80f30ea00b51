//! The client: one connection at a time over the caller's transport, in the caller's two
//! buffers, with the ticket of the last session kept for the next handshake.
//!
//! The handshake is a state machine over the server's messages; anything else than the next
//! expected message is refused, with the alert RFC 8446 names sent back:
//!
//! | state                      | accepted                              | then                                   |
//! |----------------------------|---------------------------------------|----------------------------------------|
//! | `ServerHello`              | ServerHello                           | `EncryptedExtensions` (keys change)    |
//! |                            | HelloRetryRequest (once, cookie only) | the ClientHello again, `ServerHello`   |
//! | `EncryptedExtensions`      | EncryptedExtensions                   | `Finished` if the ticket was accepted, else `CertificateOrRequest` |
//! | `CertificateOrRequest`     | CertificateRequest                    | `Certificate` (an empty one is sent back) |
//! |                            | Certificate, checked by the anchor    | `CertificateVerify`                    |
//! | `Certificate`              | Certificate, checked by the anchor    | `CertificateVerify`                    |
//! | `CertificateVerify`        | its ECDSA P-256 signature of the transcript by the certificate's key | `Finished` |
//! | `Finished`                 | its MAC under the server's handshake secret | the client's Finished; open          |
//!
//! The server is authenticated either by a certificate the anchor accepts and its signature,
//! or by the PSK of a ticket from a session that was itself so authenticated, with the same host
//! and anchor. Only then does [`Client::handshake`] return, so the caller's first request
//! (and its token) never leaves for an unauthenticated server. No 0-RTT: nothing is sent before
//! the server's Finished.
//!
//! Timeouts are the transport's: every `read` and `write` of `T` is bounded by the caller.
use core::net::IpAddr;

use embedded_io::{Read, Write};
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

use crate::codec::Writer;
use crate::error::{ConfigError, Error, Refusal, alert};
use crate::hello::{self, Hello, POINT_LEN, SECP256R1, SERVER_HELLO, ServerHello, X25519};
use crate::kx::Ephemeral;
use crate::messages::{self as msg, parse_new_session_ticket};
use crate::record::{
    ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE, HEADER_LEN, MAX_CIPHERTEXT,
    MAX_PLAINTEXT, Protection, SealError, TAG_LEN,
};
use crate::schedule::{self, Secret, derive, expand_label, finished_mac, next_stage};
use crate::ticket::{self, Ticket};
use crate::x509::Anchor;

/// The read buffer holds one whole record: a server may send records of 2^14 + 256 bytes, and
/// rustls honours neither max_fragment_length nor record_size_limit from a client.
pub const READ_BUFFER_MIN: usize = HEADER_LEN + MAX_CIPHERTEXT;
/// The write buffer holds the ClientHello: about 200 bytes, the ticket's identity (at most
/// [`ticket::MAX_IDENTITY`]) and a HelloRetryRequest's cookie (at most [`MAX_COOKIE`]).
pub const WRITE_BUFFER_MIN: usize = 1280;
/// The longest HelloRetryRequest cookie echoed.
pub const MAX_COOKIE: usize = 256;

/// Who the server must be, and when.
pub struct Config<'a> {
    /// The URL's host: sent as SNI (unless an IP address) and checked in the certificate.
    pub host: &'a str,
    pub anchor: &'a Anchor<'a>,
    /// Unix seconds: the certificate's validity and the ticket's age.
    pub now: u64,
    /// Offer the kept ticket, and keep the tickets this session gives. `false` for a
    /// connection that must carry nothing of another session (a redirect's hop): the kept
    /// ticket is then neither offered nor replaced.
    pub resume: bool,
}

/// How a handshake went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    /// The server accepted the ticket: no certificate was sent or checked.
    pub resumed: bool,
    /// A HelloRetryRequest came first.
    pub retried: bool,
    /// The server asked for a client certificate (and got an empty one).
    pub certificate_requested: bool,
    /// The key exchange's group: [`hello::X25519`], or [`hello::SECP256R1`] after a
    /// HelloRetryRequest for it.
    pub group: u16,
}

/// Bytes on the wire, both ways, since the client was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub received: u64,
    pub sent: u64,
}

/// The keys of an open connection.
struct Open {
    read: Protection,
    write: Protection,
    read_secret: Secret,
    write_secret: Secret,
    res_master: Secret,
    binding: [u8; 32],
    since: u64,
    keep_tickets: bool,
}

/// The TLS client: its buffers, the open connection if any, and the last ticket.
pub struct Client<'b> {
    rbuf: &'b mut [u8],
    wbuf: &'b mut [u8],
    /// Bytes of the record being read (reads resume after a transport timeout).
    filled: usize,
    /// Application data decrypted and not yet read: `rbuf[unread_at..unread_end]`.
    unread_at: usize,
    unread_end: usize,
    open: Option<Open>,
    ticket: Option<Ticket>,
    traffic: Traffic,
}

/// What the handshake is waiting for.
#[derive(Clone, Copy)]
enum Expect {
    EncryptedExtensions,
    CertificateOrRequest,
    Certificate,
    CertificateVerify([u8; POINT_LEN]),
    Finished,
}

impl<'b> Client<'b> {
    /// A client over the two buffers (see [`READ_BUFFER_MIN`], [`WRITE_BUFFER_MIN`]).
    pub fn new(rbuf: &'b mut [u8], wbuf: &'b mut [u8]) -> Result<Self, ConfigError> {
        if rbuf.len() < READ_BUFFER_MIN {
            return Err(ConfigError::ReadBufferTooSmall);
        }
        if wbuf.len() < WRITE_BUFFER_MIN {
            return Err(ConfigError::WriteBufferTooSmall);
        }
        Ok(Self {
            rbuf,
            wbuf,
            filled: 0,
            unread_at: 0,
            unread_end: 0,
            open: None,
            ticket: None,
            traffic: Traffic::default(),
        })
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    pub fn traffic(&self) -> Traffic {
        self.traffic
    }

    /// The ticket the next handshake will offer.
    pub fn ticket(&self) -> Option<&Ticket> {
        self.ticket.as_ref()
    }

    /// Gives the client a ticket kept from before (e.g. read back from flash).
    pub fn set_ticket(&mut self, ticket: Option<Ticket>) {
        self.ticket = ticket;
    }

    /// The handshake over `io`, a fresh TCP connection to `config.host`: returns once the
    /// server is authenticated and the connection open. Offers the kept ticket if it is for
    /// this host and anchor and still alive.
    ///
    /// **A ticket is offered again and again** until it expires, the server refuses it (a full
    /// handshake) or gives a newer one, and the ClientHello asks for no ticket after a resumed
    /// handshake (RFC 9149). RFC 8446 §C.4 advises against reuse because the ticket's identity,
    /// sent in clear, lets an observer tell that two connections are the same client's. For
    /// this device the observer learns that anyway: the same address polls the same server
    /// every interval, and a resumed poll is its whole traffic. A fresh ticket each time costs
    /// the NewSessionTicket (about 180 bytes, an eighth of a resumed poll) and, on the server,
    /// a seal per poll; every poll still has its own ECDHE (psk_dhe_ke), so reuse costs no
    /// forward secrecy. A device that roams between networks and must not be linked across
    /// them would want single use; the server's ticket lifetime bounds the linking.
    pub fn handshake<T: Read + Write>(
        &mut self,
        io: &mut T,
        config: &Config<'_>,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Handshake, Error> {
        self.open = None;
        self.filled = 0;
        self.unread_at = 0;
        self.unread_end = 0;
        if config.host.is_empty() || config.host.len() > 255 {
            return Err(ConfigError::HostName.into());
        }
        let binding = ticket::binding(config.host, config.anchor);
        // A ticket for another server (or of a connection that must not resume) stays kept;
        // one for this server is used once.
        let offer = match &self.ticket {
            Some(t) if config.resume => t.offer(&binding, config.now).map(|age| (t.clone(), age)),
            _ => None,
        };
        let mut alert_keys = None;
        let mut run = Run {
            io,
            rbuf: &mut *self.rbuf,
            wbuf: &mut *self.wbuf,
            filled: &mut self.filled,
            traffic: &mut self.traffic,
        };
        let done = run.handshake(config, rng, offer.as_ref(), &mut alert_keys);
        if offer.is_some() && !matches!(done, Ok((_, Handshake { resumed: true, .. }))) {
            // Refused (or the handshake failed with it): not offered again.
            self.ticket = None;
        }
        match done {
            Ok((mut open, done)) => {
                open.binding = binding;
                open.keep_tickets = config.resume;
                self.open = Some(open);
                Ok(done)
            }
            Err(e) => {
                run.send_alert(alert_keys.as_mut(), &e);
                self.filled = 0;
                Err(e)
            }
        }
    }

    /// Reads application data into `buf`; `Ok(0)` once the server sent `close_notify`.
    /// Tickets and key updates the server sends after the handshake are taken on the way.
    pub fn read<T: Read + Write>(&mut self, io: &mut T, buf: &mut [u8]) -> Result<usize, Error> {
        loop {
            if self.unread_at < self.unread_end {
                let n = buf.len().min(self.unread_end - self.unread_at);
                buf[..n].copy_from_slice(&self.rbuf[self.unread_at..self.unread_at + n]);
                self.unread_at += n;
                return Ok(n);
            }
            if buf.is_empty() {
                return Ok(0);
            }
            match self.read_record(io) {
                Ok(true) => {}
                Ok(false) => return Ok(0),
                Err(e @ Error::Io(_)) => return Err(e),
                Err(e) => {
                    let mut open = self.open.take();
                    self.filled = 0;
                    let mut run = Run {
                        io,
                        rbuf: &mut *self.rbuf,
                        wbuf: &mut *self.wbuf,
                        filled: &mut self.filled,
                        traffic: &mut self.traffic,
                    };
                    run.send_alert(open.as_mut().map(|o| &mut o.write), &e);
                    return Err(e);
                }
            }
        }
    }

    /// One record of the open connection: `Ok(false)` at `close_notify`.
    fn read_record<T: Read + Write>(&mut self, io: &mut T) -> Result<bool, Error> {
        let Some(open) = self.open.as_mut() else {
            return Err(ConfigError::NotConnected.into());
        };
        let mut run = Run {
            io,
            rbuf: &mut *self.rbuf,
            wbuf: &mut *self.wbuf,
            filled: &mut self.filled,
            traffic: &mut self.traffic,
        };
        let (ty, len) = run.record()?;
        *run.filled = 0;
        if ty != APPLICATION_DATA {
            return Err(Refusal::UnexpectedRecord.into());
        }
        let (inner, n) = open.read.open(&mut run.rbuf[..HEADER_LEN + len])?;
        let content = HEADER_LEN..HEADER_LEN + n;
        match inner {
            APPLICATION_DATA => {
                self.unread_at = content.start;
                self.unread_end = content.end;
                Ok(true)
            }
            ALERT => match alert_error(&run.rbuf[content])? {
                Error::Closed => {
                    self.open = None;
                    Ok(false)
                }
                e => Err(e),
            },
            HANDSHAKE => {
                let mut at = content.start;
                let mut update_ours = false;
                while at < content.end {
                    let (ty, body) = handshake_message(&run.rbuf[at..content.end])?;
                    match ty {
                        msg::NEW_SESSION_TICKET => {
                            let nst = parse_new_session_ticket(body)?;
                            let psk = expand_label(&open.res_master, b"resumption", nst.nonce);
                            let t = Ticket::new(
                                psk,
                                open.binding,
                                open.since,
                                nst.lifetime_s,
                                nst.age_add,
                                nst.identity,
                            );
                            if t.is_some() && open.keep_tickets {
                                self.ticket = t;
                            }
                        }
                        msg::KEY_UPDATE => {
                            let requested = msg::parse_key_update(body)?;
                            open.read_secret = expand_label(&open.read_secret, b"traffic upd", &[]);
                            open.read = Protection::new(&open.read_secret);
                            update_ours |= requested;
                        }
                        _ => return Err(Refusal::UnexpectedMessage.into()),
                    }
                    at += 4 + body.len();
                }
                if update_ours {
                    // KeyUpdate(update_not_requested) under the old keys, then the new ones.
                    run.send_protected(&mut open.write, HANDSHAKE, &[msg::KEY_UPDATE, 0, 0, 1, 0])?;
                    open.write_secret = expand_label(&open.write_secret, b"traffic upd", &[]);
                    open.write = Protection::new(&open.write_secret);
                }
                Ok(true)
            }
            _ => Err(Refusal::UnexpectedRecord.into()),
        }
    }

    /// Writes at most one record of `data`; how much of it.
    pub fn write<T: Read + Write>(&mut self, io: &mut T, data: &[u8]) -> Result<usize, Error> {
        let Some(open) = self.open.as_mut() else {
            return Err(ConfigError::NotConnected.into());
        };
        let room = (self.wbuf.len() - HEADER_LEN - 1 - TAG_LEN).min(MAX_PLAINTEXT);
        let n = data.len().min(room);
        let mut run = Run {
            io,
            rbuf: &mut *self.rbuf,
            wbuf: &mut *self.wbuf,
            filled: &mut self.filled,
            traffic: &mut self.traffic,
        };
        run.send_protected(&mut open.write, APPLICATION_DATA, &data[..n])?;
        Ok(n)
    }

    /// Sends `close_notify` (if open) and forgets the connection; the ticket stays.
    pub fn close<T: Read + Write>(&mut self, io: &mut T) {
        if let Some(mut open) = self.open.take() {
            let mut run = Run {
                io,
                rbuf: &mut *self.rbuf,
                wbuf: &mut *self.wbuf,
                filled: &mut self.filled,
                traffic: &mut self.traffic,
            };
            let _ = run.send_protected(&mut open.write, ALERT, &[1, alert::CLOSE_NOTIFY]);
        }
        self.filled = 0;
        self.unread_at = 0;
        self.unread_end = 0;
    }
}

/// The pieces of a client one operation borrows.
struct Run<'r, T> {
    io: &'r mut T,
    rbuf: &'r mut [u8],
    wbuf: &'r mut [u8],
    filled: &'r mut usize,
    traffic: &'r mut Traffic,
}

impl<T: Read + Write> Run<'_, T> {
    fn write_all(&mut self, len: usize) -> Result<(), Error> {
        let mut at = 0;
        while at < len {
            let n = self
                .io
                .write(&self.wbuf[at..len])
                .map_err(|e| Error::Io(embedded_io::Error::kind(&e)))?;
            if n == 0 {
                return Err(Error::Closed);
            }
            at += n;
        }
        self.io
            .flush()
            .map_err(|e| Error::Io(embedded_io::Error::kind(&e)))?;
        self.traffic.sent = self.traffic.sent.saturating_add(len as u64);
        Ok(())
    }

    /// Reads one whole record into `rbuf`: its type and body length. A transport error leaves
    /// what was read in place, so the next call goes on where this one stopped.
    fn record(&mut self) -> Result<(u8, usize), Error> {
        loop {
            let need = if *self.filled < HEADER_LEN {
                HEADER_LEN
            } else {
                let h = &self.rbuf[..HEADER_LEN];
                if !(CHANGE_CIPHER_SPEC..=APPLICATION_DATA).contains(&h[0]) {
                    return Err(Refusal::UnexpectedRecord.into());
                }
                if h[1] != 3 || !(h[2] == 1 || h[2] == 3) {
                    return Err(Refusal::UnexpectedRecord.into());
                }
                let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
                if len > MAX_CIPHERTEXT || (h[0] != APPLICATION_DATA && len > MAX_PLAINTEXT) {
                    return Err(Refusal::RecordTooLong.into());
                }
                if *self.filled == HEADER_LEN + len {
                    return Ok((h[0], len));
                }
                HEADER_LEN + len
            };
            let n = self
                .io
                .read(&mut self.rbuf[*self.filled..need])
                .map_err(|e| Error::Io(embedded_io::Error::kind(&e)))?;
            if n == 0 {
                return Err(Error::Closed);
            }
            *self.filled += n;
            self.traffic.received = self.traffic.received.saturating_add(n as u64);
        }
    }

    /// Sends `payload` as one protected record of `content_type`.
    fn send_protected(
        &mut self,
        keys: &mut Protection,
        content_type: u8,
        payload: &[u8],
    ) -> Result<(), Error> {
        let end = HEADER_LEN
            .checked_add(payload.len())
            .filter(|&e| e <= self.wbuf.len())
            .ok_or(ConfigError::WriteBufferTooSmall)?;
        self.wbuf[HEADER_LEN..end].copy_from_slice(payload);
        let total = keys
            .seal(self.wbuf, payload.len(), content_type)
            .map_err(|e| match e {
                SealError::TooLong => Error::Config(ConfigError::WriteBufferTooSmall),
                SealError::Exhausted => Error::Refused(Refusal::SequenceExhausted),
            })?;
        self.write_all(total)
    }

    /// Tells the server why this side gives up, when the reason is the server's; best effort.
    fn send_alert(&mut self, keys: Option<&mut Protection>, e: &Error) {
        let code = match e {
            Error::Refused(r) => r.alert(),
            Error::Certificate(c) => c.alert(),
            _ => return,
        };
        let body = [2, code];
        let _ = match keys {
            Some(keys) => self.send_protected(keys, ALERT, &body),
            None => {
                self.wbuf[..7].copy_from_slice(&[ALERT, 3, 3, 0, 2, 2, code]);
                self.write_all(7)
            }
        };
    }

    /// Sends the ClientHello in a plaintext record, its binder filled in; adds it to `transcript`.
    fn send_client_hello(
        &mut self,
        h: &Hello<'_>,
        early: &Secret,
        transcript: &mut Sha256,
    ) -> Result<(), Error> {
        let mut w = Writer::new(&mut self.wbuf[HEADER_LEN..]);
        let binder_at = hello::write_client_hello(&mut w, h)?;
        let len = w.len();
        let ch = &mut self.wbuf[HEADER_LEN..HEADER_LEN + len];
        if let Some(at) = binder_at {
            // The binder covers the transcript so far and this ClientHello up to its binders
            // list (2 bytes of list length, 1 of binder length before the binder).
            let mut partial = transcript.clone();
            partial.update(&ch[..at - 3]);
            let binder_key = derive(early, b"res binder", &schedule::empty_hash());
            let binder = finished_mac(&binder_key, &partial.finalize().into());
            ch[at..at + 32].copy_from_slice(&binder);
        }
        transcript.update(&*ch);
        let [hi, lo] = (len as u16).to_be_bytes();
        self.wbuf[..HEADER_LEN].copy_from_slice(&[HANDSHAKE, 3, 1, hi, lo]);
        self.write_all(HEADER_LEN + len)
    }

    /// The full handshake; `alert_keys` holds the client's handshake keys once there are some,
    /// for the alert of a refusal.
    fn handshake(
        &mut self,
        config: &Config<'_>,
        rng: &mut impl CryptoRngCore,
        offer: Option<&(Ticket, u32)>,
        alert_keys: &mut Option<Protection>,
    ) -> Result<(Open, Handshake), Error> {
        let mut ephemeral = Ephemeral::new(X25519, rng);
        let share = ephemeral.share();
        let mut random = [0u8; 32];
        rng.fill_bytes(&mut random);
        let server_name = match config.host.parse::<IpAddr>() {
            // SNI carries names only (RFC 6066 §3).
            Ok(_) => None,
            Err(_) => Some(config.host),
        };
        let early = schedule::early_secret(offer.map(|(t, _)| t.psk()));
        let hello = Hello {
            random: &random,
            server_name,
            key_share: (share.group(), share.bytes()),
            cookie: None,
            psk: offer.map(|(t, age)| (t.identity(), *age)),
        };
        let mut transcript = Sha256::new();
        self.send_client_hello(&hello, &early, &mut transcript)?;

        let mut cookie = [0u8; MAX_COOKIE];
        let mut retried = false;
        let (shared, resumed) = loop {
            let (ty, len) = self.record()?;
            *self.filled = 0;
            let record = &self.rbuf[HEADER_LEN..HEADER_LEN + len];
            match ty {
                HANDSHAKE => {}
                ALERT => return Err(alert_error(record)?),
                // Middlebox compatibility (RFC 8446 §5): one byte, 1, ignored.
                CHANGE_CIPHER_SPEC if record == [1] => continue,
                _ => return Err(Refusal::UnexpectedRecord.into()),
            }
            let (mt, body) = handshake_message(record)?;
            if mt != SERVER_HELLO {
                return Err(Refusal::UnexpectedMessage.into());
            }
            if 4 + body.len() != record.len() {
                // Nothing may follow the ServerHello in its plaintext record: the keys change.
                return Err(Refusal::UnexpectedMessage.into());
            }
            match hello::parse_server_hello(body, offer.is_some())? {
                ServerHello::Hello {
                    group,
                    key_share,
                    psk,
                } => {
                    if group != ephemeral.group() {
                        return Err(Refusal::KeyShare.into());
                    }
                    let shared = ephemeral.agree(key_share)?;
                    transcript.update(record);
                    break (shared, psk);
                }
                ServerHello::Retry { group, cookie: c } => {
                    if retried {
                        return Err(Refusal::SecondHelloRetry.into());
                    }
                    retried = true;
                    match group {
                        Some(g) if g == ephemeral.group() => {
                            return Err(Refusal::HelloRetrySameGroup.into());
                        }
                        // The one other group offered: a new key pair in it.
                        Some(SECP256R1) => ephemeral = Ephemeral::new(SECP256R1, rng),
                        Some(_) => return Err(Refusal::HelloRetryGroup.into()),
                        None if c.is_none() => return Err(Refusal::HelloRetryNoChange.into()),
                        None => {}
                    }
                    let c_len = c.map_or(0, <[u8]>::len);
                    if let Some(c) = c {
                        cookie
                            .get_mut(..c_len)
                            .ok_or(Refusal::CookieTooLong)?
                            .copy_from_slice(c);
                    }
                    // §4.4.1: the first ClientHello is replaced by its hash.
                    let ch1 = transcript.finalize_reset();
                    transcript.update([254, 0, 0, 32]);
                    transcript.update(ch1);
                    transcript.update(record);
                    let share = ephemeral.share();
                    let again = Hello {
                        key_share: (share.group(), share.bytes()),
                        cookie: c.map(|_| &cookie[..c_len]),
                        ..hello
                    };
                    self.send_client_hello(&again, &early, &mut transcript)?;
                }
            }
        };

        // A ticket the server did not take leaves the schedule as in a full handshake.
        let early = if resumed {
            early
        } else {
            schedule::early_secret(None)
        };
        let hs = next_stage(&early, &shared);
        let th: [u8; 32] = transcript.clone().finalize().into();
        let c_hs = derive(&hs, b"c hs traffic", &th);
        let s_hs = derive(&hs, b"s hs traffic", &th);
        let mut read = Protection::new(&s_hs);
        let write = alert_keys.insert(Protection::new(&c_hs));
        let master = next_stage(&hs, &[0u8; 32]);

        let mut expect = Expect::EncryptedExtensions;
        let mut certificate_requested = false;
        let mut authenticated = resumed;
        'records: loop {
            let (ty, len) = self.record()?;
            *self.filled = 0;
            match ty {
                APPLICATION_DATA => {}
                ALERT => return Err(alert_error(&self.rbuf[HEADER_LEN..HEADER_LEN + len])?),
                CHANGE_CIPHER_SPEC if self.rbuf[HEADER_LEN..HEADER_LEN + len] == [1] => continue,
                _ => return Err(Refusal::UnexpectedRecord.into()),
            }
            let (inner, n) = read.open(&mut self.rbuf[..HEADER_LEN + len])?;
            let content = &self.rbuf[HEADER_LEN..HEADER_LEN + n];
            match inner {
                HANDSHAKE => {}
                ALERT => return Err(alert_error(content)?),
                APPLICATION_DATA => return Err(Refusal::EarlyApplicationData.into()),
                _ => return Err(Refusal::UnexpectedRecord.into()),
            }
            let mut at = 0;
            while at < content.len() {
                let (mt, body) = handshake_message(&content[at..])?;
                let message = &content[at..at + 4 + body.len()];
                at += message.len();
                expect = match (expect, mt) {
                    (Expect::EncryptedExtensions, msg::ENCRYPTED_EXTENSIONS) => {
                        msg::parse_encrypted_extensions(body)?;
                        if resumed {
                            Expect::Finished
                        } else {
                            Expect::CertificateOrRequest
                        }
                    }
                    (Expect::CertificateOrRequest, msg::CERTIFICATE_REQUEST) => {
                        msg::parse_certificate_request(body)?;
                        certificate_requested = true;
                        Expect::Certificate
                    }
                    (Expect::CertificateOrRequest | Expect::Certificate, msg::CERTIFICATE) => {
                        let (leaf, intermediate) = msg::parse_certificate(body)?;
                        let key =
                            config
                                .anchor
                                .check(leaf, intermediate, config.host, config.now)?;
                        Expect::CertificateVerify(key)
                    }
                    (Expect::CertificateVerify(key), msg::CERTIFICATE_VERIFY) => {
                        let signature = msg::parse_certificate_verify(body)?;
                        let th: [u8; 32] = transcript.clone().finalize().into();
                        if !signed_by(&key, &th, signature) {
                            return Err(Refusal::BadSignature.into());
                        }
                        authenticated = true;
                        Expect::Finished
                    }
                    (Expect::Finished, msg::FINISHED) => {
                        let mac = msg::parse_finished(body)?;
                        let th: [u8; 32] = transcript.clone().finalize().into();
                        let want = finished_mac(&s_hs, &th);
                        if !bool::from(want.ct_eq(&mac)) {
                            return Err(Refusal::BadFinished.into());
                        }
                        if at != content.len() {
                            // The keys change after the server's Finished.
                            return Err(Refusal::UnexpectedMessage.into());
                        }
                        transcript.update(message);
                        break 'records;
                    }
                    _ => return Err(Refusal::UnexpectedMessage.into()),
                };
                transcript.update(message);
            }
        }
        if !authenticated {
            return Err(Refusal::UnexpectedMessage.into());
        }

        let th: [u8; 32] = transcript.clone().finalize().into();
        let c_ap = derive(&master, b"c ap traffic", &th);
        let s_ap = derive(&master, b"s ap traffic", &th);
        if certificate_requested {
            // No client certificate: an empty Certificate (context and list both empty).
            let empty = [msg::CERTIFICATE, 0, 0, 4, 0, 0, 0, 0];
            self.send_protected(write, HANDSHAKE, &empty)?;
            transcript.update(empty);
        }
        let th: [u8; 32] = transcript.clone().finalize().into();
        let mut finished = [0u8; 36];
        finished[..4].copy_from_slice(&[msg::FINISHED, 0, 0, 32]);
        finished[4..].copy_from_slice(&finished_mac(&c_hs, &th));
        self.send_protected(write, HANDSHAKE, &finished)?;
        transcript.update(finished);
        let res_master = derive(&master, b"res master", &transcript.finalize().into());
        Ok((
            Open {
                read: Protection::new(&s_ap),
                write: Protection::new(&c_ap),
                read_secret: s_ap,
                write_secret: c_ap,
                res_master,
                binding: [0; 32],
                since: config.now,
                keep_tickets: false,
            },
            Handshake {
                resumed,
                retried,
                certificate_requested,
                group: ephemeral.group(),
            },
        ))
    }
}

/// A handshake message at the start of `bytes`: its type and body. One that runs past the
/// record is refused: this client does not join messages across records.
fn handshake_message(bytes: &[u8]) -> Result<(u8, &[u8]), Refusal> {
    let [ty, a, b, c] = *bytes
        .first_chunk::<4>()
        .ok_or(Refusal::FragmentedHandshake)?;
    let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
    let body = bytes.get(4..4 + len).ok_or(Refusal::FragmentedHandshake)?;
    Ok((ty, body))
}

/// An alert's body as the error it means.
fn alert_error(body: &[u8]) -> Result<Error, Refusal> {
    match body {
        [_, alert::CLOSE_NOTIFY] => Ok(Error::Closed),
        [_, code] => Ok(Error::Alert(*code)),
        [] | [_] => Err(Refusal::Truncated),
        _ => Err(Refusal::TrailingData),
    }
}

/// Whether `signature` (DER) is the server's CertificateVerify signature of `transcript` by `key`.
fn signed_by(key: &[u8; POINT_LEN], transcript: &[u8; 32], signature: &[u8]) -> bool {
    // RFC 8446 §4.4.3: 64 spaces, the context string, a zero byte, the transcript hash.
    let mut message = [0x20u8; 64 + 34 + 32];
    message[64..98].copy_from_slice(b"TLS 1.3, server CertificateVerify\x00");
    message[98..].copy_from_slice(transcript);
    let Ok(key) = VerifyingKey::from_sec1_bytes(key) else {
        return false;
    };
    let Ok(signature) = Signature::from_der(signature) else {
        return false;
    };
    key.verify(&message, &signature).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_handshake_message_running_past_its_record() {
        assert_eq!(
            handshake_message(&[8, 0, 0, 5, 1, 2]),
            Err(Refusal::FragmentedHandshake)
        );
        assert_eq!(
            handshake_message(&[8, 0]),
            Err(Refusal::FragmentedHandshake)
        );
    }

    #[test]
    fn rejects_a_malformed_alert() {
        assert_eq!(alert_error(&[2]), Err(Refusal::Truncated));
        assert_eq!(alert_error(&[2, 40, 0]), Err(Refusal::TrailingData));
        assert_eq!(alert_error(&[2, 40]), Ok(Error::Alert(40)));
        assert_eq!(alert_error(&[1, 0]), Ok(Error::Closed));
    }

    #[test]
    fn rejects_buffers_that_cannot_hold_a_record() {
        let mut r = [0u8; READ_BUFFER_MIN - 1];
        let mut w = [0u8; WRITE_BUFFER_MIN];
        assert_eq!(
            Client::new(&mut r, &mut w).err(),
            Some(ConfigError::ReadBufferTooSmall)
        );
        let mut r = [0u8; READ_BUFFER_MIN];
        let mut w = [0u8; WRITE_BUFFER_MIN - 1];
        assert_eq!(
            Client::new(&mut r, &mut w).err(),
            Some(ConfigError::WriteBufferTooSmall)
        );
    }
}
