//! TLS 1.3 for an `https://` server: the firmware's [`Link`] over [`Net`], with npub-tls
//! (TLS_AES_128_GCM_SHA256, x25519 or secp256r1 if the server asks, ECDSA-P256-SHA256; `tls13/` in the main workspace) doing
//! the record layer and handshake, its verifier checking the server against the `--ca` anchor.
//!
//! | step of [`Link::connect_tls`]      | what is checked                                         |
//! |------------------------------------|---------------------------------------------------------|
//! | TCP connect                        | as for `http://`                                        |
//! | server `Certificate`               | [`Anchor::check`]: signed by the CA (or pinned), valid now, names the host |
//! | server `CertificateVerify`         | the transcript is signed by that certificate's key      |
//! | server `Finished`                  | the handshake's MAC                                     |
//! | resumed (the server took the ticket) | the PSK, from a session that passed the checks above with the same host and anchor |
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
//! **Session resumption.** The server's NewSessionTicket is kept in RAM (one `npub_tls::Ticket`, the
//! latest) and offered at every next connection to the same host and anchor while it lives (no
//! new ticket is asked for after a resumed handshake: `npub_tls::client` says why): the
//! server then sends no certificate, and the device checks none (psk_dhe_ke: a fresh ECDHE
//! still keys the session). Not across reboots: the PSK lets whoever reads it pose as the server
//! until the ticket expires, and this board's flash is a file anyone can read (the README says
//! when a device could keep it).
use device_agent::http_io::{Clock, HttpError, Link, TlsFailure};
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use npub_tls::{Anchor, CertError, Client, Config, Error as TlsError, Refusal};
use rand_core::{CryptoRng, RngCore};
use sha2::Digest as _;

use crate::clock::SysClock;
use crate::net::Net;

/// The record read buffer: a whole TLS record (2^14 plaintext + 256 and its header), since the
/// server honours no smaller fragment length.
pub const READ_RECORD_BYTES: usize = npub_tls::READ_BUFFER_MIN;
/// The record write buffer: the longest request (`http_io::TX_BYTES`) and the record overhead.
pub const WRITE_RECORD_BYTES: usize = 2048;
/// How long a TLS record that has begun to arrive may take to arrive whole.
const STALL_MS: u64 = 10_000;

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

/// [`Net`] as the TLS client reads it: blocking within a deadline, except that the first read
/// of a fresh `read` of the link may answer `TimedOut` (the client keeps a partial record and
/// goes on at the next call).
pub struct Io {
    net: &'static mut Net<'static>,
    until: u64,
    idle_ok: bool,
    /// A fresh `read` of the link has started.
    fresh: bool,
}

impl ErrorType for Io {
    type Error = ErrorKind;
}

impl Read for Io {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let mut clock = SysClock;
        if core::mem::take(&mut self.fresh) {
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

    /// Nothing: the client flushes every record, but its records leave at the next read of
    /// the link (or the transport's flush of its request), together. The handshake's last
    /// flight (Finished) thus shares a TCP segment with the first request instead of taking
    /// one of its own; every handshake flight before it is followed by a read.
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
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
    io: Io,
    /// The client (its record buffers, the kept ticket) and the anchor, with `--ca`.
    tls: Option<(Client<'static>, Trust)>,
    /// Handshakes done, how many of them resumed, and how long the last one took (SysTick ms;
    /// under `-icount shift=0` a millisecond is 10^6 instructions).
    pub handshakes: u32,
    pub resumed: u32,
    pub last_resumed: bool,
    pub last_handshake_ms: u64,
}

impl TlsNet {
    /// The link over `net`; with `trust`, `https://` too, through the two record buffers.
    pub fn new(
        net: &'static mut Net<'static>,
        trust: Option<Trust>,
        read_record: &'static mut [u8],
        write_record: &'static mut [u8],
    ) -> Self {
        let tls = trust.map(|t| {
            let client = Client::new(read_record, write_record)
                .expect("the record buffers are sized by READ_RECORD_BYTES and WRITE_RECORD_BYTES");
            (client, t)
        });
        Self {
            io: Io {
                net,
                until: 0,
                idle_ok: false,
                fresh: false,
            },
            tls,
            handshakes: 0,
            resumed: 0,
            last_resumed: false,
            last_handshake_ms: 0,
        }
    }

    /// Whether a TLS connection is open.
    fn tls_open(&self) -> bool {
        self.tls.as_ref().is_some_and(|(c, _)| c.is_open())
    }

    /// The connection closed and aborted; a TLS one with `close_notify`, then the server's FIN
    /// awaited ([`Net::await_fin`]) before the reset, so that no frame crosses it.
    fn shut(&mut self) {
        if let Some((client, _)) = self.tls.as_mut() {
            if client.is_open() {
                tls_close(client, &mut self.io);
                self.io.net.await_fin(crate::net::FIN_WAIT_MS);
            }
        }
        self.io.net.close();
    }

    /// TCP to `host:port`, then the handshake; `resume` offers (and keeps) session tickets.
    /// Out of line, like the other TLS paths below.
    #[inline(never)]
    fn handshake(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
        resume: bool,
    ) -> Result<(), HttpError> {
        self.shut();
        let mut clock = SysClock;
        let Some((client, trust)) = self.tls.as_mut() else {
            return Err(HttpError::Tls(TlsFailure::Unsupported));
        };
        self.io
            .net
            .connect(host, port, timeout_ms)
            .map_err(HttpError::Connect)?;
        self.io.until = clock.now_ms() + u64::from(timeout_ms);
        self.io.idle_ok = false;
        self.io.fresh = false;
        let config = Config {
            host,
            anchor: &trust.anchor,
            now: crate::semi::unix_time(),
            resume,
        };
        let started = clock.now_ms();
        self.io
            .net
            .set_ack_delay_ms(crate::net::HANDSHAKE_ACK_DELAY_MS);
        let done = client.handshake(&mut self.io, &config, &mut trust.rng);
        self.io.net.set_ack_delay_ms(crate::net::ACK_DELAY_MS);
        self.last_handshake_ms = clock.now_ms() - started;
        match done {
            Ok(h) => {
                self.handshakes += 1;
                self.resumed += u32::from(h.resumed);
                self.last_resumed = h.resumed;
                Ok(())
            }
            Err(e) => {
                self.io.net.close();
                Err(failure(e))
            }
        }
    }
}

/// A refused handshake in the transport's words.
fn failure(e: TlsError) -> HttpError {
    let f = match e {
        TlsError::Certificate(CertError::UnknownCa) => TlsFailure::UnknownCa,
        TlsError::Certificate(CertError::WrongHostName) => TlsFailure::WrongHostName,
        TlsError::Certificate(CertError::Expired) => TlsFailure::Expired,
        TlsError::Certificate(CertError::NotYetValid) => TlsFailure::NotYetValid,
        TlsError::Certificate(_) | TlsError::Refused(Refusal::BadSignature) => {
            TlsFailure::BadCertificate
        }
        TlsError::Alert(_) => TlsFailure::Refused,
        TlsError::Io(ErrorKind::TimedOut) => return HttpError::Connect(ErrorKind::TimedOut),
        _ => TlsFailure::Handshake,
    };
    HttpError::Tls(f)
}

impl ErrorType for TlsNet {
    type Error = ErrorKind;
}

impl Read for TlsNet {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        if !self.tls_open() {
            return self.io.net.read(buf);
        }
        let Some((client, _)) = self.tls.as_mut() else {
            return Err(ErrorKind::NotConnected);
        };
        self.io.fresh = true;
        let read = tls_read(client, &mut self.io, buf);
        self.io.fresh = false;
        read
    }
}

// The TLS paths out of line: inlined, their frames (the record layer's AES state, the key
// schedule) would sit in the plain `http://` path's frames too, which run through the same link
// (`tests/qemu.rs` holds a plain poll to 8 KiB of stack).

#[inline(never)]
fn tls_read(client: &mut Client<'static>, io: &mut Io, buf: &mut [u8]) -> Result<usize, ErrorKind> {
    match client.read(io, buf) {
        Ok(n) => Ok(n),
        Err(TlsError::Closed) => Ok(0),
        Err(TlsError::Io(kind)) => Err(kind),
        Err(_) => Err(ErrorKind::InvalidData),
    }
}

#[inline(never)]
fn tls_write(client: &mut Client<'static>, io: &mut Io, buf: &[u8]) -> Result<usize, ErrorKind> {
    client.write(io, buf).map_err(|e| match e {
        TlsError::Io(kind) => kind,
        _ => ErrorKind::Other,
    })
}

#[inline(never)]
fn tls_close(client: &mut Client<'static>, io: &mut Io) {
    client.close(io);
}

impl Write for TlsNet {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        match self.tls.as_mut() {
            Some((client, _)) if client.is_open() => tls_write(client, &mut self.io, buf),
            _ => self.io.net.write(buf),
        }
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        // The TLS client flushes every record it writes.
        self.io.net.flush()
    }
}

impl Link for TlsNet {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        self.shut();
        self.io.net.connect(host, port, timeout_ms)
    }

    fn connect_tls(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), HttpError> {
        self.handshake(host, port, timeout_ms, true)
    }

    /// A redirect's `https://` hop (a presigned URL of the bucket): the same handshake, checked
    /// against the same `--ca` anchor under the hop's host name, without the server's ticket:
    /// it is neither offered nor replaced by the hop's. The firmware sends no client certificate.
    fn connect_tls_anonymous(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        self.handshake(host, port, timeout_ms, false)
    }

    fn close(&mut self) {
        self.shut();
    }
}
