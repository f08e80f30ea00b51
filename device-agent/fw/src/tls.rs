//! TLS 1.3 for an `https://` server: the firmware's [`Link`] over [`Net`], with embedded-tls
//! (TLS_AES_128_GCM_SHA256, secp256r1, ECDSA-P256-SHA256) doing the record layer and handshake
//! and [`crate::x509`] checking the server against the `--ca` anchor.
//!
//! | step of [`Link::connect_tls`]      | what is checked                                         |
//! |------------------------------------|---------------------------------------------------------|
//! | TCP connect                        | as for `http://`                                        |
//! | server `Certificate`               | [`Anchor::check`]: signed by the CA (or pinned), valid now, names the host |
//! | server `CertificateVerify`         | the transcript is signed by that certificate's key      |
//! | server `Finished`                  | embedded-tls: the handshake's MAC                       |
//! | after `open`                       | both checks above ran: a handshake that skipped them (no certificate) is refused |
//!
//! Only then does the link return, and only then does the transport write its first request:
//! the token never leaves for a server that has not proved itself.
//!
//! **Redirects.** An `https://` hop of a redirected download ([`Link::connect_tls_anonymous`],
//! e.g. a presigned URL of the bucket) goes through the same handshake and checks, under the
//! hop's host name and the same anchor: the bucket's certificate must come from the `--ca` CA
//! too (a pinned key pins the server alone, so a pinned device follows no `https://` hop).
//!
//! **Randomness.** A SHA-256 hash DRBG ([`HashDrbg`]) seeded once per boot from the board's TRNG through
//! [`Entropy`]. QEMU's AN547 model has no TRNG: there the seed comes from the host
//! (`--tls-seed`, `run-qemu.sh` draws it from `/dev/urandom`), a demo only, said so on the console.
//!
//! **No session resumption.** embedded-tls 0.19 reads the server's `NewSessionTicket` and drops
//! it; it offers only external PSKs. Every new connection is a full handshake; the transport keeps
//! the connection open between requests of one poll, so a poll costs one handshake.
use core::sync::atomic::{AtomicBool, Ordering};

use device_agent::http_io::{Clock, HttpError, Link, TlsFailure};
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use embedded_tls::blocking::{
    Aes128GcmSha256, CertificateRef, CertificateVerifyRef, CryptoProvider, TlsConfig,
    TlsConnection, TlsContext, TlsError, TlsVerifier,
};
use embedded_tls::{CryptoRngCore, SignatureScheme};
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use rand_core::{CryptoRng, RngCore};
use sha2::Digest as _;

use crate::clock::SysClock;
use crate::net::Net;
use crate::x509::{Anchor, KEY_BYTES};

/// The record read buffer: a whole TLS record (2^14 plaintext + 256), since the server does not
/// negotiate a smaller fragment length.
pub const READ_RECORD_BYTES: usize = 16_384 + 256;
/// The record write buffer: the longest request (`http_io::TX_BYTES`) and the record overhead.
pub const WRITE_RECORD_BYTES: usize = 2048;
/// How long a TLS record that has begun to arrive may take to arrive whole.
const STALL_MS: u64 = 10_000;

/// A fresh `read` of the link has started: the socket may answer "nothing yet" until the first
/// byte of the next record (the record reader then keeps no partial state).
static FRESH_READ: AtomicBool = AtomicBool::new(false);

/// The handshake's random generator: SHA-256 over the seed and a counter (a hash DRBG in the
/// manner of NIST SP 800-90A's Hash_DRBG, without its reseed bookkeeping: one seed per boot),
/// the key replaced by a hash of itself after every request so that a later memory dump does not
/// reveal earlier outputs. SHA-256 is in the image already; ChaCha20's generator was 3.7 KB more.
pub struct HashDrbg {
    key: [u8; 32],
    counter: u64,
}

impl HashDrbg {
    pub fn new(seed: [u8; 32]) -> Self {
        Self {
            key: seed,
            counter: 0,
        }
    }
}

impl RngCore for HashDrbg {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }

    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(32) {
            self.counter += 1;
            let block = sha2::Sha256::new()
                .chain_update(b"npub-drbg-out")
                .chain_update(self.key)
                .chain_update(self.counter.to_le_bytes())
                .finalize();
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        self.key = sha2::Sha256::new()
            .chain_update(b"npub-drbg-key")
            .chain_update(self.key)
            .finalize()
            .into();
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for HashDrbg {}

/// The board's true random number generator: 32 bytes of seed, once per boot.
pub trait Entropy {
    fn seed(&mut self) -> [u8; 32];
}

/// QEMU's stand-in for a TRNG: the seed the host gave on the command line (`--tls-seed`).
/// A demo: anyone who sees the command line can predict every handshake of this boot.
pub struct HostSeed(pub [u8; 32]);

impl Entropy for HostSeed {
    fn seed(&mut self) -> [u8; 32] {
        self.0
    }
}

/// [`Net`] as embedded-tls reads it: blocking within a deadline, except that the first read of a
/// fresh `read` of the link may answer `TimedOut`.
pub struct Io {
    net: &'static mut Net<'static>,
    until: u64,
    idle_ok: bool,
}

impl ErrorType for Io {
    type Error = ErrorKind;
}

impl Read for Io {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let mut clock = SysClock;
        if FRESH_READ.swap(false, Ordering::Relaxed) {
            self.idle_ok = true;
            self.until = clock.now_ms() + STALL_MS;
        }
        loop {
            match self.net.read(buf) {
                Err(ErrorKind::TimedOut) if !self.idle_ok && clock.now_ms() < self.until => {
                    clock.feed();
                }
                Ok(n) => {
                    self.idle_ok = false;
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for Io {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        self.net.write(buf)
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        self.net.flush()
    }
}

/// Checks the server against the anchor, and then its handshake signature.
struct Checker<'a> {
    anchor: &'a Anchor<'a>,
    host: &'a str,
    now: u64,
    /// The server certificate's key, once the certificate passed.
    key: Option<[u8; KEY_BYTES]>,
    transcript: Option<sha2::Sha256>,
    /// Why the check refused, in the transport's words.
    failure: Option<TlsFailure>,
    /// The server signed the handshake with the key of a certificate that passed.
    authenticated: bool,
    /// Milliseconds in the two checks above (two ECDSA P-256 verifications, the DER walk).
    checks_ms: u64,
}

impl TlsVerifier<Aes128GcmSha256> for Checker<'_> {
    fn set_hostname_verification(&mut self, _hostname: &str) -> Result<(), TlsError> {
        // The host is the checker's own (also for an IP address, which goes without SNI).
        Ok(())
    }

    fn verify_certificate(
        &mut self,
        transcript: &sha2::Sha256,
        cert: CertificateRef,
    ) -> Result<(), TlsError> {
        let started = SysClock.now_ms();
        let checked = self.check_certificate(transcript, &cert);
        self.checks_ms += SysClock.now_ms() - started;
        checked
    }

    fn verify_signature(&mut self, verify: CertificateVerifyRef) -> Result<(), TlsError> {
        let started = SysClock.now_ms();
        let checked = self.check_signature(&verify);
        self.checks_ms += SysClock.now_ms() - started;
        checked
    }
}

impl Checker<'_> {
    fn check_certificate(
        &mut self,
        transcript: &sha2::Sha256,
        cert: &CertificateRef,
    ) -> Result<(), TlsError> {
        let leaf = match cert.entries.first() {
            Some(embedded_tls::blocking::CertificateEntryRef::X509(der)) => *der,
            _ => {
                self.failure = Some(TlsFailure::BadCertificate);
                return Err(TlsError::InvalidCertificate);
            }
        };
        match self.anchor.check(leaf, self.host, self.now) {
            Ok(key) => {
                self.key = Some(key);
                self.transcript = Some(transcript.clone());
                Ok(())
            }
            Err(f) => {
                self.failure = Some(f);
                Err(TlsError::InvalidCertificate)
            }
        }
    }

    fn check_signature(&mut self, verify: &CertificateVerifyRef) -> Result<(), TlsError> {
        let (Some(key), Some(transcript)) = (self.key, self.transcript.take()) else {
            self.failure = Some(TlsFailure::Handshake);
            return Err(TlsError::InvalidSignature);
        };
        // RFC 8446 §4.4.3: 64 spaces, the context string, a zero byte, the transcript hash.
        let mut message = [0x20u8; 64 + 34 + 32];
        message[64..98].copy_from_slice(b"TLS 1.3, server CertificateVerify\x00");
        message[98..].copy_from_slice(&transcript.finalize());
        let good = verify.signature_scheme == SignatureScheme::EcdsaSecp256r1Sha256
            && VerifyingKey::from_sec1_bytes(&key).is_ok_and(|k| {
                Signature::from_der(verify.signature).is_ok_and(|s| k.verify(&message, &s).is_ok())
            });
        if !good {
            self.failure = Some(TlsFailure::BadCertificate);
            return Err(TlsError::InvalidSignature);
        }
        self.authenticated = true;
        Ok(())
    }
}

/// The randomness and the checker, for one handshake.
struct Provider<'a, 'c> {
    rng: &'a mut HashDrbg,
    checker: &'a mut Checker<'c>,
}

impl CryptoProvider for Provider<'_, '_> {
    type CipherSuite = Aes128GcmSha256;
    type Signature = p256::ecdsa::DerSignature;

    fn rng(&mut self) -> impl CryptoRngCore {
        &mut *self.rng
    }

    fn verifier(&mut self) -> Result<&mut impl TlsVerifier<Aes128GcmSha256>, TlsError> {
        Ok(&mut *self.checker)
    }
}

/// The one connection: plain, TLS, or between the two (only inside a call).
// One instance, kept in place (the link lives in the transport for the whole run); boxing the
// TLS state would need a heap the firmware does not have.
#[allow(clippy::large_enum_variant)]
enum State {
    Plain(Io),
    Tls(TlsConnection<'static, Io, Aes128GcmSha256>),
    Moving,
}

/// TLS material, when the firmware was given `--ca`.
pub struct Trust {
    pub anchor: Anchor<'static>,
    rng: HashDrbg,
}

impl Trust {
    pub fn new(anchor: Anchor<'static>, entropy: &mut impl Entropy) -> Self {
        Self {
            anchor,
            rng: HashDrbg::new(entropy.seed()),
        }
    }
}

/// The firmware's link: [`Net`] for `http://`, TLS over it for `https://`.
pub struct TlsNet {
    state: State,
    trust: Option<Trust>,
    read_record: *mut [u8],
    write_record: *mut [u8],
    /// The last read left decrypted bytes in the record buffer.
    leftover: bool,
    /// Handshakes done, and how long the last one took (SysTick ms; under `-icount shift=0`
    /// a millisecond is 10^6 instructions).
    pub handshakes: u32,
    pub last_handshake_ms: u64,
    /// Of which in the certificate and signature checks (pure computation, no waiting).
    pub last_checks_ms: u64,
}

impl TlsNet {
    /// The link over `net`; with `trust`, `https://` too, through the two record buffers.
    pub fn new(
        net: &'static mut Net<'static>,
        trust: Option<Trust>,
        read_record: &'static mut [u8],
        write_record: &'static mut [u8],
    ) -> Self {
        Self {
            state: State::Plain(Io {
                net,
                until: 0,
                idle_ok: false,
            }),
            trust,
            read_record,
            write_record,
            leftover: false,
            handshakes: 0,
            last_handshake_ms: 0,
            last_checks_ms: 0,
        }
    }

    /// The network, the connection closed (a TLS one with `close_notify`) and aborted.
    fn take_io(&mut self) -> Io {
        self.leftover = false;
        let io = match core::mem::replace(&mut self.state, State::Moving) {
            State::Plain(io) => io,
            State::Tls(conn) => match conn.close() {
                Ok(io) | Err((io, _)) => io,
            },
            State::Moving => unreachable!("the link is put back before every return"),
        };
        io.net.close();
        io
    }

    /// TCP to `host:port`, then the handshake, in `self.state`.
    fn handshake(
        &mut self,
        mut io: Io,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        let mut clock = SysClock;
        let Some(trust) = self.trust.as_mut() else {
            self.state = State::Plain(io);
            return Err(HttpError::Tls(TlsFailure::Unsupported));
        };
        if let Err(e) = io.net.connect(host, port, timeout_ms) {
            self.state = State::Plain(io);
            return Err(HttpError::Connect(e));
        }
        io.until = clock.now_ms() + u64::from(timeout_ms);
        io.idle_ok = false;
        // SAFETY: the two buffers are the statics given to `new`, used by no one else; the
        // connection made from them before this one was consumed by `take_io` (`close`), so these
        // are the only references to them while this connection lives.
        let (read_record, write_record) =
            unsafe { (&mut *self.read_record, &mut *self.write_record) };
        self.state = State::Tls(TlsConnection::new(io, read_record, write_record));
        let State::Tls(conn) = &mut self.state else {
            unreachable!("set just above")
        };
        let ip = host.parse::<core::net::Ipv4Addr>().is_ok();
        let alpn: &[&[u8]] = &[b"http/1.1"];
        let mut config = TlsConfig::new().with_alpn(alpn);
        if !ip {
            // SNI carries names only (RFC 6066 §3).
            config = config.with_server_name(host);
        }
        let mut checker = Checker {
            anchor: &trust.anchor,
            host,
            now: crate::semi::unix_time(),
            key: None,
            transcript: None,
            failure: None,
            authenticated: false,
            checks_ms: 0,
        };
        FRESH_READ.store(false, Ordering::Relaxed);
        let started = clock.now_ms();
        let opened = conn.open(TlsContext::new(
            &config,
            Provider {
                rng: &mut trust.rng,
                checker: &mut checker,
            },
        ));
        self.last_handshake_ms = clock.now_ms() - started;
        self.last_checks_ms = checker.checks_ms;
        let failure = match opened {
            Ok(()) if checker.authenticated => {
                self.handshakes += 1;
                return Ok(());
            }
            Ok(()) => HttpError::Tls(TlsFailure::Handshake),
            Err(e) => match checker.failure {
                Some(f) => HttpError::Tls(f),
                None => match e {
                    TlsError::HandshakeAborted(..) => HttpError::Tls(TlsFailure::Refused),
                    TlsError::Io(ErrorKind::TimedOut) => HttpError::Connect(ErrorKind::TimedOut),
                    _ => HttpError::Tls(TlsFailure::Handshake),
                },
            },
        };
        let io = self.take_io();
        self.state = State::Plain(io);
        Err(failure)
    }
}

impl ErrorType for TlsNet {
    type Error = ErrorKind;
}

impl Read for TlsNet {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let leftover = self.leftover;
        match &mut self.state {
            State::Plain(io) => io.net.read(buf),
            State::Tls(conn) => {
                if !leftover {
                    FRESH_READ.store(true, Ordering::Relaxed);
                }
                let read = conn.read_buffered().map(|mut b| {
                    let n = b.pop_into(buf);
                    (n, !b.is_empty())
                });
                FRESH_READ.store(false, Ordering::Relaxed);
                match read {
                    Ok((n, more)) => {
                        self.leftover = more;
                        Ok(n)
                    }
                    Err(TlsError::ConnectionClosed) => Ok(0),
                    Err(TlsError::Io(kind)) => Err(kind),
                    Err(_) => Err(ErrorKind::InvalidData),
                }
            }
            State::Moving => Err(ErrorKind::NotConnected),
        }
    }
}

impl Write for TlsNet {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        match &mut self.state {
            State::Plain(io) => io.net.write(buf),
            State::Tls(conn) => conn.write(buf).map_err(|e| match e {
                TlsError::Io(kind) => kind,
                _ => ErrorKind::Other,
            }),
            State::Moving => Err(ErrorKind::NotConnected),
        }
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        match &mut self.state {
            State::Plain(io) => io.net.flush(),
            State::Tls(conn) => conn.flush().map_err(|e| match e {
                TlsError::Io(kind) => kind,
                _ => ErrorKind::Other,
            }),
            State::Moving => Err(ErrorKind::NotConnected),
        }
    }
}

impl Link for TlsNet {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        let io = self.take_io();
        self.state = State::Plain(io);
        let State::Plain(io) = &mut self.state else {
            unreachable!("set just above")
        };
        io.net.connect(host, port, timeout_ms)
    }

    fn connect_tls(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), HttpError> {
        let io = self.take_io();
        self.handshake(io, host, port, timeout_ms)
    }

    /// A redirect's `https://` hop (a presigned URL of the bucket): the same handshake, checked
    /// against the same `--ca` anchor under the hop's host name. The firmware sends no client
    /// certificate and resumes no session, so it has nothing of the server's to leave out.
    fn connect_tls_anonymous(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        self.connect_tls(host, port, timeout_ms)
    }

    fn close(&mut self) {
        let io = self.take_io();
        self.state = State::Plain(io);
    }
}
