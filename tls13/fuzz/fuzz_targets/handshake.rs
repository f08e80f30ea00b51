//! Any bytes as the server's side of a connection: the client writes its ClientHello, then
//! reads records (framing, ServerHello, HelloRetryRequest, alerts, decryption of what follows)
//! from the input until it ends; the handshake ends in `Ok` or `Err`, never a panic.
#![no_main]
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use libfuzzer_sys::fuzz_target;
use npub_tls::{Anchor, Client, Config, READ_BUFFER_MIN, WRITE_BUFFER_MIN};
use rand_core::{CryptoRng, RngCore};

/// The server: the input, read in pieces of up to 7 bytes (records split across reads).
struct Peer<'a>(&'a [u8]);

impl ErrorType for Peer<'_> {
    type Error = ErrorKind;
}

impl Read for Peer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let n = buf.len().min(self.0.len()).min(7);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// A fixed generator: the same ClientHello at every run, so the input alone decides the path.
struct Fixed(u8);

impl RngCore for Fixed {
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

impl CryptoRng for Fixed {}

fuzz_target!(|data: &[u8]| {
    let mut rbuf = vec![0u8; READ_BUFFER_MIN];
    let mut wbuf = vec![0u8; WRITE_BUFFER_MIN];
    let mut client = Client::new(&mut rbuf, &mut wbuf).expect("buffers of the minimum sizes");
    let anchor = Anchor::Key([4; 65]);
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: 1_800_000_000,
        resume: true,
    };
    let mut peer = Peer(data);
    if client.handshake(&mut peer, &config, &mut Fixed(1)).is_ok() {
        let mut buf = [0u8; 64];
        while matches!(client.read(&mut peer, &mut buf), Ok(n) if n > 0) {}
    }
});
