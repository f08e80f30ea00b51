//! What the transport needs from the platform: one TCP connection at a time, and a clock.
//!
//! | trait     | the firmware's                                  | the host's (tests)                   |
//! |-----------|-------------------------------------------------|--------------------------------------|
//! | [`Link`]  | a smoltcp TCP socket over the LAN9118 (`fw/`)    | [`super::std_link::TcpLink`]; with `https://`, [`super::std_tls::TlsLink`] |
//! | [`Clock`] | SysTick milliseconds, `wfi` to wait             | [`super::std_link::StdClock`]        |
use embedded_io::{ErrorKind, Read, Write};

use super::error::{HttpError, TlsFailure};

/// One TCP connection at a time, as an `embedded-io` byte stream.
///
/// `read` must return within a bounded time: `Err` of kind [`ErrorKind::TimedOut`] when nothing
/// arrived for a while (the link chooses how long; tens of milliseconds is right), so that the
/// transport can apply its own read, request and download deadlines. `Ok(0)` is the peer's FIN.
/// Any other error is a broken connection.
pub trait Link: Read + Write {
    /// Opens a connection to `host:port`, closing any previous one first; gives up after
    /// `timeout_ms`.
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind>;

    /// Opens a TLS connection to `host:port` (an `https://` server), the server authenticated
    /// under the name `host` before it returns, so nothing (the token least of all) is sent to a
    /// server that is not the one trusted. A TCP failure is [`HttpError::Connect`], a refused
    /// certificate or handshake [`HttpError::Tls`]. A link without TLS refuses (the default).
    fn connect_tls(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), HttpError> {
        let _ = (host, port, timeout_ms);
        Err(HttpError::Tls(TlsFailure::Unsupported))
    }

    /// Opens a TLS connection to a redirect's `https://` target (`host:port`, another origin
    /// than the server's): authenticated under the name `host` as for [`Link::connect_tls`], but
    /// **without** the device's client certificate, which is for the npub server alone, and
    /// without resuming a session made with it. A link without TLS refuses (the default), so a
    /// link that has a client identity must implement this to follow `https://` redirects.
    fn connect_tls_anonymous(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        let _ = (host, port, timeout_ms);
        Err(HttpError::Tls(TlsFailure::Unsupported))
    }

    /// Closes the connection; nothing more is read from it. Closing a closed link does nothing.
    fn close(&mut self);
}

/// Milliseconds, from any origin, never going back; and the firmware's watchdog.
pub trait Clock {
    /// Now.
    fn now_ms(&mut self) -> u64;
    /// Waits `ms` milliseconds (a retry's backoff): never more than the transport's budget at
    /// once (`Config::with_budget_ms`).
    fn sleep_ms(&mut self, ms: u32);
    /// Feeds the firmware's watchdog. The transport calls it at least once per budget
    /// (`Config::with_budget_ms`, default [`super::DEFAULT_BUDGET_MS`]) while it waits: between
    /// two reads of the link, between two pieces of a backoff, between two connect attempts.
    /// The default does nothing.
    fn feed(&mut self) {}
}

/// How long the transport waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening one TCP connection.
    pub connect_ms: u32,
    /// Between two received bytes of one answer (a stalled server).
    pub read_ms: u32,
    /// One manifest poll or report, from the request to the end of the answer.
    pub request_ms: u32,
    /// One attempt at a pack download, from its first range request (resumed downloads start
    /// again).
    pub download_ms: u32,
}

impl Timeouts {
    /// Generous for a 1 MB pack on a slow link, short enough that a dead server is noticed.
    pub const DEFAULT: Timeouts = Timeouts {
        connect_ms: 5_000,
        read_ms: 10_000,
        request_ms: 20_000,
        download_ms: 600_000,
    };
}

/// Retries of one request whose connection failed or whose server answered 5xx / 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all (1 = no retry).
    pub attempts: u8,
    /// The first backoff; each further one doubles, up to `cap_ms`.
    pub base_ms: u32,
    /// The longest backoff.
    pub cap_ms: u32,
}

impl Retry {
    /// Three attempts, 250 ms then 500 ms (each with jitter).
    pub const DEFAULT: Retry = Retry {
        attempts: 3,
        base_ms: 250,
        cap_ms: 8_000,
    };
}
