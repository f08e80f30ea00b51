//! (std) The host's [`Link`] and [`Clock`]: a `TcpStream` and `Instant`, for the tests and any
//! host tool that wants the device's own transport.
use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use embedded_io::{ErrorKind, ErrorType, Read, Write};

use super::link::{Clock, Link};

/// How long one `read` blocks before it returns `TimedOut` (so the transport checks its clock).
pub const TICK: Duration = Duration::from_millis(20);

/// One TCP connection at a time.
#[derive(Debug, Default)]
pub struct TcpLink {
    stream: Option<TcpStream>,
}

impl TcpLink {
    /// A closed link.
    pub fn new() -> Self {
        Self::default()
    }
}

/// A TCP connection to `host:port` within `timeout_ms`, set up as the transport wants it: reads
/// return within [`TICK`], no Nagle.
pub(super) fn tcp_connect(host: &str, port: u16, timeout_ms: u32) -> Result<TcpStream, ErrorKind> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| kind(&e))?
        .next()
        .ok_or(ErrorKind::AddrNotAvailable)?;
    let timeout = Duration::from_millis(u64::from(timeout_ms.max(1)));
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| kind(&e))?;
    let setup = stream
        .set_read_timeout(Some(TICK))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(10))))
        .and_then(|()| stream.set_nodelay(true));
    setup.map_err(|e| kind(&e))?;
    Ok(stream)
}

pub(super) fn kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorKind::TimedOut,
        k => k.into(),
    }
}

impl ErrorType for TcpLink {
    type Error = ErrorKind;
}

impl Read for TcpLink {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let s = self.stream.as_mut().ok_or(ErrorKind::NotConnected)?;
        s.read(buf).map_err(|e| kind(&e))
    }
}

impl Write for TcpLink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        let s = self.stream.as_mut().ok_or(ErrorKind::NotConnected)?;
        s.write(buf).map_err(|e| kind(&e))
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        let s = self.stream.as_mut().ok_or(ErrorKind::NotConnected)?;
        s.flush().map_err(|e| kind(&e))
    }
}

impl Link for TcpLink {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        self.close();
        self.stream = Some(tcp_connect(host, port, timeout_ms)?);
        Ok(())
    }

    fn close(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Milliseconds since it was made.
#[derive(Debug, Clone, Copy)]
pub struct StdClock(Instant);

impl Default for StdClock {
    fn default() -> Self {
        Self(Instant::now())
    }
}

impl Clock for StdClock {
    fn now_ms(&mut self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    fn sleep_ms(&mut self, ms: u32) {
        std::thread::sleep(Duration::from_millis(u64::from(ms)));
    }
}
