//! The device API over HTTP/1.1 on any `embedded-io` byte stream (feature `http-io`): `no_std`,
//! no allocation, the firmware's [`Transport`].
//!
//! | call             | request                                                                       | answers understood |
//! |------------------|-------------------------------------------------------------------------------|--------------------|
//! | `fetch_manifest` | `GET /api/v1/device/manifest?seq=N`, `If-None-Match` with the cached manifest's `ETag` while that manifest is newer than `N` | 200 body = manifest (kept with its `ETag`); 304 = the cached one; 204 nothing newer |
//! | `fetch_pack`     | `GET /api/v1/device/packs/{sha256 hex}`, `Range: bytes=O-E` for a whole window (default [`DEFAULT_WINDOW_BYTES`], or the rest of the pack) | 206 whose `Content-Range` is exactly `O-E/pack_len`; the window is then handed to the agent piece by piece from the open body |
//! | `report`         | `POST /api/v1/device/status` `{"sequence","state","progress"?,"reason"?,"events"?,"attempts"?}` (`events`: the event log, with a failure report) | any 2xx |
//! | `fetch_release`  | `GET /api/v1/device/packs/{sha256 hex}/release` (only while the device's release trust is active) | 200 body = the release bundle; 404 = none |
//! | `fetch_selftest` | `GET /api/v1/device/packs/{sha256 hex}/selftest`, `Range: bytes=O-` (the rest of the record) | 206 whose `Content-Range` starts at `O` (then read on piece by piece, as a pack's window); 200 = the whole record (the bytes before `O` dropped); 416 = it ends before `O`; 404 = none |
//! | `fetch_keyring_updates` | `GET /api/v1/device/keys?after=N`                                      | 200 body = whole 144-byte records; 204 none |
//!
//! **One request per window, not per piece.** The agent asks for at most
//! [`crate::CHUNK_BYTES`] at a time (the piece it validates and then programs); the first ask
//! at an offset opens a range request for the whole window and the following asks read on in the
//! same response body. A `Downloading` report that comes while a window is open is held (the
//! newest wins) and sent before the next request, so a 1 MB pack costs 16 range requests and 16
//! reports with 64 KiB windows, instead of 2,080 round trips. `progress` goes out as the fraction
//! of the manifest's `pack_len`, as the server wants it.
//!
//! **Nothing unchecked is handed out.** Before the first body byte of a window reaches the agent
//! the head must say 206, `Content-Range` must name exactly the bytes asked for and the
//! manifest's length as the total, and `Content-Length` must agree; a 200 to a range request, a
//! range that lies, a total that is longer than the manifest's, a head that is not HTTP, a body
//! that stops short or runs past its end abandon the attempt with an [`HttpError`] (kept in
//! [`HttpIo::last_error`]) and the connection is closed. The agent then feeds every byte it got to
//! npub-core's `StreamValidator` before it programs it, and keeps what is durable for the resume.
//!
//! **Time.** Every wait is bounded through the caller's [`Clock`]: connect, each read (a stalled
//! server), each poll or report, and each download attempt as a whole. A connection that fails or
//! an answer of 5xx / 429 is retried with exponential backoff and jitter ([`Backoff`]) within the
//! request's deadline; a body that breaks off is not retried here (the agent resumes from its
//! journal on the next poll). Connections are kept alive between requests, and a kept connection
//! that the server closed meanwhile is reopened once, at once.
mod backoff;
mod error;
mod link;
#[cfg(feature = "std")]
pub mod std_link;
#[cfg(feature = "std")]
pub mod std_tls;
mod wire;

use core::fmt::Write as _;

use embedded_io::{Error as _, ErrorKind};
use npub_core::manifest::{MANIFEST_MAX_BYTES, ManifestView, ROTATION_BYTES};

pub use backoff::Backoff;
pub use error::{Call, HttpError, TlsFailure};
pub use link::{Clock, Link, Retry, Timeouts};
pub use wire::{ContentRange, Server};

use crate::error::TransportError;
use crate::transport::{Report, ReportState, SELFTEST_SKIPPED, Transport};
use wire::{Cursor, ETAG_MAX, EVENTS_BYTES, Head, JsonText, Redirect, parse_head};

/// Bytes of one range request, unless configured otherwise: 64 KiB, so a request costs far less
/// than the bytes it brings, and a dropped connection costs at most one window.
pub const DEFAULT_WINDOW_BYTES: u32 = 64 * 1024;
/// The longest the transport waits between two calls of [`Clock::feed`], unless configured
/// otherwise: half a second, so a watchdog of 1 s or more is fed in time. A link's `read` must
/// return (data or `TimedOut`) well within it, and the firmware's `Link::connect` is called
/// with at most this timeout (a connect that takes longer is tried again until
/// `Timeouts::connect_ms`).
pub const DEFAULT_BUDGET_MS: u32 = 500;
/// The receive buffer: the whole response head must fit (the server's are about 300 bytes).
pub const RX_BYTES: usize = 1024;
/// The transmit buffer: the longest request is a failure report with its reason and its event
/// log (768 bytes for the head and a report without events, [`EVENTS_BYTES`] for the events).
pub const TX_BYTES: usize = 768 + EVENTS_BYTES;

/// A report's JSON body up to its `events`: `{"sequence":` and 20 digits, `,"state":"rolled_back"`,
/// `,"progress":0.nnnn`, `,"reason":"` and [`REASON_BYTES`] and `"`, 12 + 20 + 22 + 18 + 11 +
/// 300 + 1 bytes. The events and `attempts` go straight into the transmit buffer.
const REPORT_BYTES: usize = 384;
/// The key of a report's `attempts`.
const ATTEMPTS_KEY: &str = ",\"attempts\":";
/// The longest `reason` sent (the server takes up to 1024 bytes; the agent's are one line).
const REASON_BYTES: usize = 300;
/// An unwanted body up to this size is read and dropped to keep the connection; a longer one
/// costs the connection instead.
const DRAIN_MAX: u64 = 4096;

/// How the transport reaches its server. Built only by [`Config::new`], which checks the URL and
/// the token (no CR, LF or other byte that would let the token end a header line); the tunables,
/// which cannot break a request, are set after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config<'a> {
    server: Server<'a>,
    token: &'a str,
    window_bytes: u32,
    timeouts: Timeouts,
    retry: Retry,
    seed: u32,
    budget_ms: u32,
}

impl<'a> Config<'a> {
    /// The defaults for the server at `url` (`http[s]://HOST[:PORT][/PATH]`) with `token`.
    pub fn new(url: &'a str, token: &'a str) -> Result<Self, HttpError> {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(HttpError::BadToken);
        }
        Ok(Self {
            server: Server::parse(url)?,
            token,
            window_bytes: DEFAULT_WINDOW_BYTES,
            timeouts: Timeouts::DEFAULT,
            retry: Retry::DEFAULT,
            budget_ms: DEFAULT_BUDGET_MS,
            seed: token.bytes().fold(0x811C_9DC5, |h: u32, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            }),
        })
    }

    /// Bytes per range request; 0 asks for the rest of the pack in one response.
    pub const fn with_window_bytes(mut self, window_bytes: u32) -> Self {
        self.window_bytes = window_bytes;
        self
    }

    /// Deadlines.
    pub const fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The longest wait between two [`Clock::feed`] calls (at least 1 ms; default
    /// [`DEFAULT_BUDGET_MS`]).
    pub const fn with_budget_ms(mut self, budget_ms: u32) -> Self {
        self.budget_ms = if budget_ms == 0 { 1 } else { budget_ms };
        self
    }

    /// Retries of a failed connection or a 5xx / 429.
    pub const fn with_retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Seeds the backoff's jitter: anything that differs between devices (by default, a hash of
    /// the token).
    pub const fn with_seed(mut self, seed: u32) -> Self {
        self.seed = seed;
        self
    }

    /// The server.
    pub const fn server(&self) -> &Server<'a> {
        &self.server
    }

    /// The device token (`Authorization: Bearer …`).
    pub const fn token(&self) -> &'a str {
        self.token
    }

    /// Bytes per range request (0: the rest of the pack).
    pub const fn window_bytes(&self) -> u32 {
        self.window_bytes
    }

    /// Deadlines.
    pub const fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Retries.
    pub const fn retry(&self) -> Retry {
        self.retry
    }
}

/// What the transport did, for the figures and the tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// HTTP requests sent, of every kind.
    pub requests: u32,
    /// Manifest polls sent.
    pub manifest_requests: u32,
    /// Range requests sent.
    pub pack_requests: u32,
    /// Reports sent.
    pub report_requests: u32,
    /// Keyring-update requests sent.
    pub keys_requests: u32,
    /// Release-bundle requests sent.
    pub release_requests: u32,
    /// Self-test record requests sent (one per record, unless a connection breaks).
    pub selftest_requests: u32,
    /// TCP connections opened.
    pub connects: u32,
    /// Manifest polls answered 304 (the kept manifest handed out again).
    pub not_modified: u32,
    /// Redirect hops followed (a range request redirected twice counts 2; each hop is also
    /// counted in `pack_requests`).
    pub redirects: u32,
    /// Pack bytes handed to the agent.
    pub pack_bytes: u64,
}

pub use error::MAX_REDIRECTS;

/// Whether `status` redirects a `GET` (the download's only method, so 301, 302 and 303 mean
/// what 307 and 308 do).
const fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// How a connection is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Security {
    Plain,
    /// TLS, presenting the device's identity if the link has one: the npub server only.
    Tls,
    /// TLS without the device's identity: a redirect's target on another origin.
    TlsAnonymous,
}

/// Where one redirect hop went: its authority at `tx[at..at + len]` (the request's `Host`),
/// the host its first `host_len` bytes.
#[derive(Debug, Clone, Copy)]
struct Hop {
    at: usize,
    len: usize,
    host_len: usize,
    port: u16,
    security: Security,
}

/// The origin a `Location` that is a path is relative to.
#[derive(Debug, Clone, Copy)]
enum Origin {
    /// The npub server (the first redirect).
    Server,
    /// The previous hop's target.
    Hop(Hop),
}

/// The state of the one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Closed,
    /// Open, between two exchanges.
    Idle,
    /// A response body is being read.
    Body {
        call: Call,
        /// Body bytes not read yet.
        left: u64,
        /// `Content-Length`.
        total: u64,
        /// Close, rather than keep, when it is read.
        close: bool,
    },
}

/// The window being read: pack `sha256` (or, with `record`, its self-test record), from `next`
/// up to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    sha256: [u8; 32],
    next: u32,
    end: u32,
    record: bool,
}

/// The last manifest received, with its `ETag`: a 304 hands it out again.
#[derive(Debug, Clone, Copy)]
struct Cached {
    /// Either version's bytes: `len` of them.
    bytes: [u8; MANIFEST_MAX_BYTES],
    len: usize,
    etag: Option<([u8; ETAG_MAX], usize)>,
    sequence: u64,
    sha256: [u8; 32],
    pack_len: u32,
}

/// The device API over a [`Link`], timed by a [`Clock`].
#[derive(Debug)]
pub struct HttpIo<'a, L, C> {
    link: L,
    clock: C,
    config: Config<'a>,
    backoff: Backoff,
    conn: Conn,
    /// The open connection is to a redirect's target, not to the server.
    foreign: bool,
    rx: [u8; RX_BYTES],
    rx_pos: usize,
    rx_len: usize,
    tx: [u8; TX_BYTES],
    cached: Option<Cached>,
    window: Option<Window>,
    /// The pack being downloaded in this attempt and when its first request went out.
    download: Option<([u8; 32], u64)>,
    /// A pack's length as the server last gave it (when no manifest names the pack).
    learned: Option<([u8; 32], u32)>,
    pending: Option<Report<'static>>,
    poll_interval_s: Option<u32>,
    /// `Npub-Keyring-Sequence` of the last manifest answer.
    keyring_sequence: Option<u64>,
    last_error: Option<HttpError>,
    report_error: Option<HttpError>,
    stats: Stats,
}

impl<'a, L: Link, C: Clock> HttpIo<'a, L, C> {
    /// A transport over `link`; nothing is connected until the first call.
    pub fn new(link: L, clock: C, config: Config<'a>) -> Self {
        let r = config.retry;
        Self {
            link,
            clock,
            config,
            backoff: Backoff::new(r.base_ms, r.cap_ms, config.seed),
            conn: Conn::Closed,
            foreign: false,
            rx: [0; RX_BYTES],
            rx_pos: 0,
            rx_len: 0,
            tx: [0; TX_BYTES],
            cached: None,
            window: None,
            download: None,
            learned: None,
            pending: None,
            poll_interval_s: None,
            keyring_sequence: None,
            last_error: None,
            report_error: None,
            stats: Stats::default(),
        }
    }

    /// Why the last failed call failed, in full.
    pub fn last_error(&self) -> Option<HttpError> {
        self.last_error
    }

    /// Why the last failed report failed (reports are best effort: they never replace
    /// [`HttpIo::last_error`]).
    pub fn last_report_error(&self) -> Option<HttpError> {
        self.report_error
    }

    /// The server's `Npub-Poll-Interval` from its last manifest answer, in seconds.
    pub fn poll_interval_s(&self) -> Option<u32> {
        self.poll_interval_s
    }

    /// Counters since [`HttpIo::new`].
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The clock (the caller's poll loop waits on it).
    pub fn clock(&mut self) -> &mut C {
        &mut self.clock
    }

    /// The link.
    pub fn link(&mut self) -> &mut L {
        &mut self.link
    }

    /// Bytes per range request from now on (0: the rest of the pack in one response).
    pub fn set_window_bytes(&mut self, window: u32) {
        self.config.window_bytes = window;
    }

    /// Sends a `Downloading` report that is still held, and closes the connection.
    pub fn finish(&mut self) {
        self.flush_pending();
        self.close();
    }

    fn fail(&mut self, e: HttpError) -> TransportError {
        self.last_error = Some(e);
        self.close();
        e.to_transport()
    }

    fn close(&mut self) {
        if self.conn != Conn::Closed {
            self.link.close();
        }
        self.conn = Conn::Closed;
        self.foreign = false;
        self.window = None;
        self.rx_pos = 0;
        self.rx_len = 0;
    }

    /// Writes `METHOD PATH` (the server's prefix, then `route`).
    fn request_line(
        c: &mut Cursor<'_>,
        method: &str,
        server: &Server<'_>,
        route: &str,
    ) -> core::fmt::Result {
        write!(c, "{method} {}{route}", server.path())
    }

    /// Writes the rest of the request line and the headers every request carries.
    fn common_headers(c: &mut Cursor<'_>, config: &Config<'_>) -> core::fmt::Result {
        write!(
            c,
            " HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer {}\r\n",
            config.server.host(),
            config.server.port(),
            config.token
        )
    }

    /// Sends `tx[..len]` and reads the response head, connecting, reconnecting and backing off
    /// as needed, until `deadline`.
    fn exchange(&mut self, call: Call, len: usize, deadline: u64) -> Result<Head, HttpError> {
        if self.foreign {
            // Kept open to a redirect's target: the server is elsewhere.
            self.close();
        }
        let mut attempt = 0u8;
        let mut stale_retried = false;
        loop {
            attempt = attempt.saturating_add(1);
            let reused = self.conn == Conn::Idle;
            match self.send_and_read_head(call, len, deadline) {
                Ok(head)
                    if (head.status >= 500 || head.status == 429)
                        && attempt < self.config.retry.attempts =>
                {
                    self.skip_body(call, &head, deadline)?;
                    self.wait_backoff(
                        deadline,
                        HttpError::Status {
                            call,
                            status: head.status,
                        },
                    )?;
                }
                Ok(head) => {
                    self.backoff.reset();
                    return Ok(head);
                }
                Err(e) => {
                    self.close();
                    let broken = matches!(
                        e,
                        HttpError::Send(_)
                            | HttpError::Receive(_)
                            | HttpError::ClosedBeforeHead { received: 0, .. }
                    );
                    if reused && broken && !stale_retried {
                        // The server closed the kept connection meanwhile: reopen at once.
                        stale_retried = true;
                        attempt -= 1;
                        continue;
                    }
                    if (broken || matches!(e, HttpError::Connect(_)))
                        && attempt < self.config.retry.attempts
                    {
                        self.wait_backoff(deadline, e)?;
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Sleeps the next backoff delay, unless it would pass `deadline` (then `e` stands).
    fn wait_backoff(&mut self, deadline: u64, e: HttpError) -> Result<(), HttpError> {
        let delay = self.backoff.next_delay_ms();
        if self.clock.now_ms().saturating_add(u64::from(delay)) >= deadline {
            return Err(e);
        }
        let mut left = delay;
        while left > 0 {
            let piece = left.min(self.config.budget_ms);
            self.clock.feed();
            self.clock.sleep_ms(piece);
            left -= piece;
        }
        self.clock.feed();
        Ok(())
    }

    fn send_and_read_head(
        &mut self,
        call: Call,
        len: usize,
        deadline: u64,
    ) -> Result<Head, HttpError> {
        if self.conn == Conn::Closed {
            let left = deadline.saturating_sub(self.clock.now_ms());
            let timeout = u64::from(self.config.timeouts.connect_ms).min(left) as u32;
            let server = self.config.server;
            connect_fed(
                &mut self.link,
                &mut self.clock,
                self.config.budget_ms,
                (server.host(), server.port()),
                timeout,
                if server.is_tls() {
                    Security::Tls
                } else {
                    Security::Plain
                },
            )?;
            self.stats.connects += 1;
            self.conn = Conn::Idle;
        }
        self.rx_pos = 0;
        self.rx_len = 0;
        self.stats.requests += 1;
        match call {
            Call::Manifest => self.stats.manifest_requests += 1,
            Call::Pack => self.stats.pack_requests += 1,
            Call::Report => self.stats.report_requests += 1,
            Call::Keys => self.stats.keys_requests += 1,
            Call::Release => self.stats.release_requests += 1,
            Call::SelfTest => self.stats.selftest_requests += 1,
        }
        self.link
            .write_all(&self.tx[..len])
            .and_then(|()| self.link.flush())
            .map_err(|e| HttpError::Send(e.kind()))?;
        loop {
            if let Some((head, n)) = parse_head(&self.rx[..self.rx_len])? {
                self.rx_pos = n;
                return Ok(head);
            }
            if self.rx_len == RX_BYTES {
                return Err(HttpError::HeadTooLong { limit: RX_BYTES });
            }
            let n = self.read_timed(call, None, deadline)?;
            if n == 0 {
                return Err(HttpError::ClosedBeforeHead {
                    call,
                    received: self.rx_len,
                });
            }
            self.rx_len += n;
        }
    }

    /// One read, into `out` or (with `None`) onto the end of the receive buffer, within the read
    /// timeout and `deadline`.
    fn read_timed(
        &mut self,
        call: Call,
        out: Option<&mut [u8]>,
        deadline: u64,
    ) -> Result<usize, HttpError> {
        let start = self.clock.now_ms();
        let read_ms = u64::from(self.config.timeouts.read_ms);
        let out = match out {
            Some(out) => out,
            None => &mut self.rx[self.rx_len..],
        };
        loop {
            self.clock.feed();
            let result = self.link.read(out);
            let now = self.clock.now_ms();
            if now >= deadline {
                return Err(match (call, self.download) {
                    (Call::Pack, Some((_, started))) => HttpError::DownloadTimeout {
                        elapsed_ms: now - started,
                    },
                    _ => HttpError::RequestTimeout { call },
                });
            }
            match result {
                Ok(n) => return Ok(n),
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    if now.saturating_sub(start) >= read_ms {
                        return Err(HttpError::ReadTimeout {
                            call,
                            waited_ms: now - start,
                        });
                    }
                }
                Err(e) => return Err(HttpError::Receive(e.kind())),
            }
        }
    }

    /// Marks the body of `head` as the one to read next (`Conn::Body`), or the exchange as done.
    fn begin_body(&mut self, call: Call, head: &Head, total: u64) {
        self.conn = Conn::Body {
            call,
            left: total,
            total,
            close: head.close,
        };
        if total == 0 {
            self.end_body();
        }
    }

    /// The body is read: keep the connection, unless the answer said otherwise or bytes follow.
    fn end_body(&mut self) {
        let close = matches!(self.conn, Conn::Body { close: true, .. });
        if close || self.rx_pos < self.rx_len {
            self.close();
        } else {
            self.conn = Conn::Idle;
        }
    }

    /// Reads on in the current body into `out`; `Ok(0)` once it is whole.
    fn read_body(&mut self, out: &mut [u8], deadline: u64) -> Result<usize, HttpError> {
        let Conn::Body {
            call, left, total, ..
        } = self.conn
        else {
            return Ok(0);
        };
        let want = (out.len() as u64).min(left) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = if self.rx_pos < self.rx_len {
            let n = want.min(self.rx_len - self.rx_pos);
            out[..n].copy_from_slice(&self.rx[self.rx_pos..self.rx_pos + n]);
            self.rx_pos += n;
            n
        } else {
            let n = self.read_timed(call, Some(&mut out[..want]), deadline)?;
            if n == 0 {
                return Err(HttpError::BodyTruncated {
                    call,
                    received: total - left,
                    expected: total,
                });
            }
            n
        };
        let left = left - n as u64;
        if let Conn::Body { left: l, .. } = &mut self.conn {
            *l = left;
        }
        if left == 0 {
            if call == Call::Pack && self.rx_pos < self.rx_len {
                return Err(HttpError::TrailingBytes {
                    extra: self.rx_len - self.rx_pos,
                });
            }
            self.end_body();
        }
        Ok(n)
    }

    /// Reads and drops the body of an answer the caller does not use, or closes the connection
    /// when that would cost more than the connection.
    fn skip_body(&mut self, call: Call, head: &Head, deadline: u64) -> Result<(), HttpError> {
        let bodiless = head.status < 200 || head.status == 204 || head.status == 304;
        match head.content_length {
            _ if bodiless => self.begin_body(call, head, 0),
            Some(n) if n <= DRAIN_MAX && !head.transfer_coding => {
                self.begin_body(call, head, n);
                let mut sink = [0u8; 64];
                while self.read_body(&mut sink, deadline)? > 0 {}
            }
            _ => self.close(),
        }
        Ok(())
    }

    /// Abandons an open window (the agent asked elsewhere, or moved on).
    fn abandon_window(&mut self) {
        if self.window.is_some() {
            self.close();
        }
    }

    fn flush_pending(&mut self) {
        if let Some(r) = self.pending.take() {
            // Best effort, as every report: the server learns the state from the next one.
            let _ = self.send_report(&r);
        }
    }

    fn manifest(&mut self, after: u64, buf: &mut [u8]) -> Result<Option<usize>, HttpError> {
        self.abandon_window();
        self.flush_pending();
        self.download = None;
        let send_tag = self
            .cached
            .filter(|c| c.sequence > after)
            .and_then(|c| c.etag);
        let mut c = Cursor::new(&mut self.tx);
        let len = Self::request_line(
            &mut c,
            "GET",
            &self.config.server,
            "/api/v1/device/manifest",
        )
        .and_then(|()| write!(c, "?seq={after}"))
        .and_then(|()| Self::common_headers(&mut c, &self.config))
        .and_then(|()| match send_tag {
            Some((tag, n)) => c
                .put(b"If-None-Match: ")
                .and_then(|()| c.put(&tag[..n]))
                .and_then(|()| c.put(b"\r\n")),
            None => Ok(()),
        })
        .and_then(|()| c.put(b"\r\n"))
        .map(|()| c.len())
        .map_err(|_| HttpError::RequestTooLong {
            call: Call::Manifest,
        })?;
        let deadline = self.deadline(self.config.timeouts.request_ms);
        self.keyring_sequence = None;
        let head = self.exchange(Call::Manifest, len, deadline)?;
        if head.poll_interval_s.is_some() {
            self.poll_interval_s = head.poll_interval_s;
        }
        self.keyring_sequence = head.keyring_sequence;
        match head.status {
            200 => {
                let n = self.body_length(Call::Manifest, &head)?;
                self.begin_body(Call::Manifest, &head, n);
                let take = (n.min(buf.len() as u64)) as usize;
                let mut got = 0;
                while got < take {
                    got += self.read_body(&mut buf[got..take], deadline)?;
                }
                if got as u64 != n {
                    // Longer than the agent's buffer: it refuses it by its length.
                    self.close();
                }
                self.remember(&buf[..got], head.etag);
                Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
            }
            204 => {
                self.skip_body(Call::Manifest, &head, deadline)?;
                Ok(None)
            }
            304 => {
                self.skip_body(Call::Manifest, &head, deadline)?;
                let cached = self
                    .cached
                    .filter(|c| send_tag.is_some() && c.sequence > after)
                    .ok_or(HttpError::UnaskedNotModified)?;
                let n = cached.len.min(buf.len());
                buf[..n].copy_from_slice(&cached.bytes[..n]);
                self.stats.not_modified += 1;
                Ok(Some(cached.len))
            }
            status => {
                self.skip_body(Call::Manifest, &head, deadline)?;
                Err(HttpError::Status {
                    call: Call::Manifest,
                    status,
                })
            }
        }
    }

    /// `GET /api/v1/device/keys?after=N`: as many whole 144-byte records as `buf` holds (the
    /// rest of a longer body is dropped with the connection); 0 on a 204.
    fn keys(&mut self, after: u64, buf: &mut [u8]) -> Result<usize, HttpError> {
        self.abandon_window();
        self.flush_pending();
        let mut c = Cursor::new(&mut self.tx);
        let len = Self::request_line(&mut c, "GET", &self.config.server, "/api/v1/device/keys")
            .and_then(|()| write!(c, "?after={after}"))
            .and_then(|()| Self::common_headers(&mut c, &self.config))
            .and_then(|()| c.put(b"\r\n"))
            .map(|()| c.len())
            .map_err(|_| HttpError::RequestTooLong { call: Call::Keys })?;
        let deadline = self.deadline(self.config.timeouts.request_ms);
        let head = self.exchange(Call::Keys, len, deadline)?;
        match head.status {
            200 => {
                let n = self.body_length(Call::Keys, &head)?;
                self.begin_body(Call::Keys, &head, n);
                let whole = buf.len() - buf.len() % ROTATION_BYTES;
                let take = (n.min(whole as u64)) as usize;
                let mut got = 0;
                while got < take {
                    got += self.read_body(&mut buf[got..take], deadline)?;
                }
                if (got as u64) < n {
                    self.close();
                }
                Ok(got)
            }
            204 => {
                self.skip_body(Call::Keys, &head, deadline)?;
                Ok(0)
            }
            status => {
                self.skip_body(Call::Keys, &head, deadline)?;
                Err(HttpError::Status {
                    call: Call::Keys,
                    status,
                })
            }
        }
    }

    /// `GET /api/v1/device/packs/{sha256}/release`: the bundle into `buf` (a longer body is cut
    /// and its length returned, for the agent to refuse; the rest goes with the connection);
    /// `None` on a 404.
    fn release(&mut self, sha256: &[u8; 32], buf: &mut [u8]) -> Result<Option<usize>, HttpError> {
        self.abandon_window();
        self.flush_pending();
        let mut c = Cursor::new(&mut self.tx);
        let len = Self::request_line(&mut c, "GET", &self.config.server, "/api/v1/device/packs/")
            .and_then(|()| c.hex(sha256))
            .and_then(|()| c.put(b"/release"))
            .and_then(|()| Self::common_headers(&mut c, &self.config))
            .and_then(|()| c.put(b"\r\n"))
            .map(|()| c.len())
            .map_err(|_| HttpError::RequestTooLong {
                call: Call::Release,
            })?;
        let deadline = self.deadline(self.config.timeouts.request_ms);
        let head = self.exchange(Call::Release, len, deadline)?;
        match head.status {
            200 => {
                let n = self.body_length(Call::Release, &head)?;
                self.begin_body(Call::Release, &head, n);
                let take = (n.min(buf.len() as u64)) as usize;
                let mut got = 0;
                while got < take {
                    got += self.read_body(&mut buf[got..take], deadline)?;
                }
                if (got as u64) < n {
                    self.close();
                }
                Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
            }
            404 => {
                self.skip_body(Call::Release, &head, deadline)?;
                Ok(None)
            }
            status => {
                self.skip_body(Call::Release, &head, deadline)?;
                Err(HttpError::Status {
                    call: Call::Release,
                    status,
                })
            }
        }
    }

    /// `GET /api/v1/device/packs/{sha256}/selftest`: the record's bytes from `offset`, at most
    /// `buf.len()` of them (`Some(0)`: it ends before `offset`, a 416); `None` on a 404. As the
    /// pack: the first ask at an offset sends `Range: bytes=O-` (the rest of the record, a few
    /// KiB) and the following asks read on in the same body, so the record costs one request
    /// on the kept connection, not one per piece. A server that ignores the `Range` (200) is
    /// read from its start, the bytes before `offset` dropped.
    fn selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, HttpError> {
        if buf.is_empty() {
            return Ok(Some(0));
        }
        let deadline = self.deadline(self.config.timeouts.request_ms);
        match self.window {
            Some(w) if w.record && w.sha256 == *sha256 && w.next == offset => {
                return self.read_window(buf, deadline).map(Some);
            }
            _ => self.abandon_window(),
        }
        self.flush_pending();
        let mut c = Cursor::new(&mut self.tx);
        let len = Self::request_line(&mut c, "GET", &self.config.server, "/api/v1/device/packs/")
            .and_then(|()| c.hex(sha256))
            .and_then(|()| c.put(b"/selftest"))
            .and_then(|()| Self::common_headers(&mut c, &self.config))
            .and_then(|()| write!(c, "Range: bytes={offset}-\r\n\r\n"))
            .map(|()| c.len())
            .map_err(|_| HttpError::RequestTooLong {
                call: Call::SelfTest,
            })?;
        let head = self.exchange(Call::SelfTest, len, deadline)?;
        let (first, end) = match head.status {
            206 => {
                let range = head
                    .content_range
                    .ok_or(HttpError::NoContentRange {
                        call: Call::SelfTest,
                    })?
                    .ok_or(HttpError::MalformedContentRange {
                        call: Call::SelfTest,
                    })?;
                if range.first != u64::from(offset) {
                    return Err(HttpError::WrongRange {
                        call: Call::SelfTest,
                        asked_first: offset,
                        asked_last: u32::MAX,
                        first: range.first,
                        last: range.last,
                    });
                }
                let n = self.range_body_length(Call::SelfTest, &head, range)?;
                (offset, u64::from(offset) + n)
            }
            200 => (0, self.body_length(Call::SelfTest, &head)?),
            416 => {
                self.skip_body(Call::SelfTest, &head, deadline)?;
                return Ok(Some(0));
            }
            404 => {
                self.skip_body(Call::SelfTest, &head, deadline)?;
                return Ok(None);
            }
            status => {
                self.skip_body(Call::SelfTest, &head, deadline)?;
                return Err(HttpError::Status {
                    call: Call::SelfTest,
                    status,
                });
            }
        };
        self.begin_body(Call::SelfTest, &head, end - u64::from(first));
        // A record beyond a slot's 4 GiB is refused by the agent long before its end.
        let end = u32::try_from(end).unwrap_or(u32::MAX);
        if first >= end {
            return Ok(Some(0));
        }
        self.window = Some(Window {
            sha256: *sha256,
            next: first,
            end,
            record: true,
        });
        // A 200 from the record's start: drop what comes before `offset`.
        while let Some(w) = self.window.filter(|w| w.next < offset) {
            let piece = ((offset - w.next) as usize).min(buf.len());
            if self.read_window(&mut buf[..piece], deadline)? == 0 {
                break;
            }
        }
        if self.window.is_none() {
            return Ok(Some(0));
        }
        self.read_window(buf, deadline).map(Some)
    }

    /// Keeps a manifest-sized body with its `ETag`, and what it says about its pack (unverified:
    /// only to check the server's `Content-Range` against; the agent verifies the manifest).
    fn remember(&mut self, bytes: &[u8], etag: Option<([u8; ETAG_MAX], usize)>) {
        let Ok(view) = ManifestView::new(bytes) else {
            return;
        };
        let mut kept = [0u8; MANIFEST_MAX_BYTES];
        let len = view.as_bytes().len();
        kept[..len].copy_from_slice(view.as_bytes());
        self.cached = Some(Cached {
            bytes: kept,
            len,
            etag,
            sequence: view.sequence(),
            sha256: view.pack_sha256(),
            pack_len: view.pack_len(),
        });
    }

    /// The length of the body the caller must read: `Content-Length`, without transfer coding.
    fn body_length(&self, call: Call, head: &Head) -> Result<u64, HttpError> {
        match head.content_length {
            Some(n) if !head.transfer_coding => Ok(n),
            _ => Err(HttpError::NoContentLength {
                call,
                status: head.status,
            }),
        }
    }

    /// A 206's body length, which must be the bytes its `Content-Range` names (`first` ≤
    /// `last`, as parsed).
    fn range_body_length(
        &self,
        call: Call,
        head: &Head,
        range: ContentRange,
    ) -> Result<u64, HttpError> {
        let span = range.last - range.first + 1;
        let n = self.body_length(call, head)?;
        if n != span {
            return Err(HttpError::BodyLength {
                call,
                content_length: n,
                range: span,
            });
        }
        Ok(n)
    }

    fn deadline(&mut self, ms: u32) -> u64 {
        self.clock.now_ms().saturating_add(u64::from(ms))
    }

    /// The pack's length, as the manifest (or, failing one, the server) said.
    fn pack_len(&self, sha256: &[u8; 32]) -> Option<u32> {
        match (self.cached, self.learned) {
            (Some(c), _) if c.sha256 == *sha256 => Some(c.pack_len),
            (_, Some((s, len))) if s == *sha256 => Some(len),
            _ => None,
        }
    }

    fn pack(&mut self, sha256: &[u8; 32], offset: u32, buf: &mut [u8]) -> Result<usize, HttpError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let started = match self.download {
            Some((s, t)) if s == *sha256 => t,
            _ => {
                let now = self.clock.now_ms();
                self.download = Some((*sha256, now));
                now
            }
        };
        let deadline = started.saturating_add(u64::from(self.config.timeouts.download_ms));
        match self.window {
            Some(w) if !w.record && w.sha256 == *sha256 && w.next == offset => {
                return self.read_window(buf, deadline);
            }
            Some(_) => self.close(),
            None => {}
        }
        let expected = self.pack_len(sha256);
        if expected.is_some_and(|len| offset >= len) {
            return Ok(0);
        }
        self.flush_pending();
        let window = match self.config.window_bytes {
            0 => u32::MAX,
            w => w,
        };
        let mut last = offset.saturating_add(window - 1);
        if let Some(len) = expected {
            last = last.min(len - 1);
        }
        let len = self.pack_request(sha256, offset, last)?;
        let mut head = self.exchange(Call::Pack, len, deadline)?;
        if is_redirect(head.status) {
            head = self.follow_redirect(&head, offset, last, deadline)?;
        }
        match head.status {
            206 => {}
            200 => {
                return Err(HttpError::RangeIgnored { offset });
            }
            416 if expected.is_none() => {
                self.skip_body(Call::Pack, &head, deadline)?;
                return Ok(0);
            }
            416 => return Err(HttpError::Unsatisfiable { offset }),
            status => {
                self.skip_body(Call::Pack, &head, deadline)?;
                return Err(HttpError::Status {
                    call: Call::Pack,
                    status,
                });
            }
        }
        let range = head
            .content_range
            .ok_or(HttpError::NoContentRange { call: Call::Pack })?
            .ok_or(HttpError::MalformedContentRange { call: Call::Pack })?;
        // The server may clamp the last byte to the pack's end only when the length is unknown.
        let last_ok = match expected {
            Some(_) => range.last == u64::from(last),
            None => range.last <= u64::from(last),
        };
        if range.first != u64::from(offset) || !last_ok {
            return Err(HttpError::WrongRange {
                call: Call::Pack,
                asked_first: offset,
                asked_last: last,
                first: range.first,
                last: range.last,
            });
        }
        let total = u32::try_from(range.total);
        match (expected, total) {
            (Some(len), Ok(t)) if t == len => {}
            (None, Ok(t)) => self.learned = Some((*sha256, t)),
            (Some(len), _) => {
                return Err(HttpError::PackLength {
                    manifest: len,
                    server: range.total,
                });
            }
            (None, Err(_)) => {
                return Err(HttpError::PackLength {
                    manifest: u32::MAX,
                    server: range.total,
                });
            }
        }
        let n = self.range_body_length(Call::Pack, &head, range)?;
        self.begin_body(Call::Pack, &head, n);
        // `range.last` < `total`, a u32.
        self.window = Some(Window {
            sha256: *sha256,
            next: offset,
            end: range.last as u32 + 1,
            record: false,
        });
        self.read_window(buf, deadline)
    }

    /// The same range from where the server's `head` redirects it (a presigned URL of a
    /// bucket: `--presign-downloads`), following at most [`MAX_REDIRECTS`] hops: each a plain
    /// `GET` with the `Range`, without the token (the URL is its own authorisation, and a bucket
    /// must never see a device's token), over TLS without the device's client certificate when
    /// the hop leaves the server (`https://`), and without retries (the next poll asks the
    /// server again, for a fresh URL). The answer is checked like the server's. (Out of line:
    /// `pack`'s frame is on the download's deep path.)
    #[inline(never)]
    fn follow_redirect(
        &mut self,
        first: &Head,
        offset: u32,
        last: u32,
        deadline: u64,
    ) -> Result<Head, HttpError> {
        let mut head = *first;
        let mut from = Origin::Server;
        for _ in 0..MAX_REDIRECTS {
            let status = head.status;
            let location = head
                .location
                .ok_or(HttpError::RedirectWithoutLocation { status })?;
            // Built while the Location is still in the receive buffer.
            let (len, hop) = self.hop_request(status, location, from, (offset, last))?;
            // The redirect's own body, then its connection: the range comes from elsewhere.
            self.skip_body(Call::Pack, &head, deadline)?;
            self.close();
            let left = deadline.saturating_sub(self.clock.now_ms());
            let timeout = u64::from(self.config.timeouts.connect_ms).min(left) as u32;
            // Printable ASCII, checked by `Redirect::parse` (or the server's own host).
            let host = core::str::from_utf8(&self.tx[hop.at..hop.at + hop.host_len])
                .map_err(|_| HttpError::RedirectWithoutLocation { status })?;
            connect_fed(
                &mut self.link,
                &mut self.clock,
                self.config.budget_ms,
                (host, hop.port),
                timeout,
                hop.security,
            )?;
            self.stats.connects += 1;
            self.stats.redirects += 1;
            self.conn = Conn::Idle;
            self.foreign = true;
            head = self.send_and_read_head(Call::Pack, len, deadline)?;
            if !is_redirect(head.status) {
                return Ok(head);
            }
            from = Origin::Hop(hop);
        }
        Err(HttpError::TooManyRedirects {
            status: head.status,
        })
    }

    /// Writes the request of one hop into the transmit buffer: `GET` the `Location` at
    /// `rx[location]` (absolute, or a path on the origin `from`), with `Range: bytes=O-L`.
    /// Returns its length and where it goes (its authority is the request's `Host`, in `tx`).
    fn hop_request(
        &mut self,
        status: u16,
        (a, b): (u16, u16),
        from: Origin,
        (offset, last): (u32, u32),
    ) -> Result<(usize, Hop), HttpError> {
        const GET: &[u8] = b"GET ";
        const HOST: &[u8] = b" HTTP/1.1\r\nHost: ";
        let too_long = HttpError::RequestTooLong { call: Call::Pack };
        let location = &self.rx[usize::from(a)..usize::from(b)];
        let to = Redirect::parse(location).map_err(|e| match e {
            HttpError::RedirectWithoutLocation { .. } => {
                HttpError::RedirectWithoutLocation { status }
            }
            e => e,
        })?;
        let part = |(x, y): (usize, usize)| &location[x..y];
        let target = match part(to.target) {
            b"" => &b"/"[..],
            t => t,
        };
        // The authority first, where it goes: a path keeps the previous hop's, which is in
        // `tx` already (its `Host`) and moves to its new place before the prefix is written.
        let at = GET.len() + target.len() + HOST.len();
        let hop = match (to.authority, to.host, from) {
            (Some(authority), Some(host), _) => {
                let authority = part(authority);
                self.tx
                    .get_mut(at..at + authority.len())
                    .ok_or(too_long)?
                    .copy_from_slice(authority);
                Hop {
                    at,
                    len: authority.len(),
                    host_len: host.1 - host.0,
                    port: to.port,
                    security: if to.tls {
                        Security::TlsAnonymous
                    } else {
                        Security::Plain
                    },
                }
            }
            (_, _, Origin::Server) => {
                let server = self.config.server;
                let mut c = Cursor::new(self.tx.get_mut(at..).ok_or(too_long)?);
                write!(c, "{}:{}", server.host(), server.port()).map_err(|_| too_long)?;
                Hop {
                    at,
                    len: c.len(),
                    host_len: server.host().len(),
                    port: server.port(),
                    // A path on an `https://` server stays on its TLS: the same origin.
                    security: if server.is_tls() {
                        Security::Tls
                    } else {
                        Security::Plain
                    },
                }
            }
            (_, _, Origin::Hop(prev)) => {
                if at + prev.len > TX_BYTES {
                    return Err(too_long);
                }
                self.tx.copy_within(prev.at..prev.at + prev.len, at);
                Hop { at, ..prev }
            }
        };
        let mut c = Cursor::new(&mut self.tx[..at]);
        c.put(GET)
            .and_then(|()| c.put(target))
            .and_then(|()| c.put(HOST))
            .map_err(|_| too_long)?;
        let rest = at + hop.len;
        let mut c = Cursor::new(&mut self.tx[rest..]);
        write!(c, "\r\nRange: bytes={offset}-{last}\r\n\r\n").map_err(|_| too_long)?;
        Ok((rest + c.len(), hop))
    }

    fn pack_request(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        last: u32,
    ) -> Result<usize, HttpError> {
        let mut c = Cursor::new(&mut self.tx);
        Self::request_line(&mut c, "GET", &self.config.server, "/api/v1/device/packs/")
            .and_then(|()| c.hex(sha256))
            .and_then(|()| Self::common_headers(&mut c, &self.config))
            .and_then(|()| write!(c, "Range: bytes={offset}-{last}\r\n\r\n"))
            .map(|()| c.len())
            .map_err(|_| HttpError::RequestTooLong { call: Call::Pack })
    }

    /// Hands the agent the next bytes of the open window.
    fn read_window(&mut self, buf: &mut [u8], deadline: u64) -> Result<usize, HttpError> {
        let Some(mut w) = self.window else {
            return Ok(0);
        };
        let want = buf.len().min((w.end - w.next) as usize);
        let n = self.read_body(&mut buf[..want], deadline)?;
        w.next += n as u32;
        if !w.record {
            self.stats.pack_bytes += n as u64;
        }
        self.window = (w.next < w.end).then_some(w);
        Ok(n)
    }

    fn report_now(&mut self, report: &Report) -> Result<(), HttpError> {
        let mut report = *report;
        let report = &mut report;
        if report.state == ReportState::Failed && report.reason.is_some_and(resumable) {
            // The agent keeps this download for a resume: to the rollout it is still
            // downloading, not a failed install that counts towards the auto-abort.
            report.state = ReportState::Downloading;
            report.progress = None;
            self.pending = None;
            self.abandon_window();
            return self.send_report(report);
        }
        if report.state == ReportState::Downloading && self.window.is_some() {
            // Sent before the next request; a newer one replaces it. (A progress report carries
            // no events.)
            self.pending = Some(Report {
                events: None,
                ..*report
            });
            return Ok(());
        }
        self.pending = None;
        self.abandon_window();
        self.send_report(report)
    }

    fn send_report(&mut self, r: &Report) -> Result<(), HttpError> {
        let mut body = [0u8; REPORT_BYTES];
        let mut b = Cursor::new(&mut body);
        let too_long = |_| HttpError::RequestTooLong { call: Call::Report };
        write!(
            b,
            "{{\"sequence\":{},\"state\":\"{}\"",
            r.sequence,
            r.state.name()
        )
        .map_err(too_long)?;
        let len = self
            .cached
            .filter(|c| c.sequence == r.sequence && c.pack_len > 0)
            .map(|c| c.pack_len);
        if let (Some(p), Some(len)) = (r.progress, len) {
            // The server wants a fraction; four decimals, without float formatting.
            let per10k = (u64::from(p) * 10_000 / u64::from(len)).min(10_000);
            let written = if per10k == 10_000 {
                b.put(b",\"progress\":1")
            } else {
                write!(b, ",\"progress\":0.{per10k:04}")
            };
            written.map_err(too_long)?;
        }
        if let Some(reason) = r.reason {
            b.put(b",\"reason\":\"").map_err(too_long)?;
            let mut text = JsonText {
                out: &mut b,
                room: REASON_BYTES,
            };
            write!(text, "{reason}").map_err(too_long)?;
            b.put(b"\"").map_err(too_long)?;
        } else if r.selftest_skipped {
            const { assert!(SELFTEST_SKIPPED.len() <= REASON_BYTES) };
            // Plain ASCII without quotes: no escaping needed.
            write!(b, ",\"reason\":\"{SELFTEST_SKIPPED}\"").map_err(too_long)?;
        }
        let prefix_len = b.len();
        // The event log and what follows it go straight into the transmit buffer: no second
        // buffer on this frame, which is on a download's deepest stack path.
        let (skip, events_len) = r.events.map_or((0, 0), wire::events_json_fitting);
        let tail_len = r
            .attempts
            .map_or(0, |n| ATTEMPTS_KEY.len() + decimal_len(n))
            + 1;
        let body_len = prefix_len + events_len + tail_len;
        let mut c = Cursor::new(&mut self.tx);
        let len = Self::request_line(&mut c, "POST", &self.config.server, "/api/v1/device/status")
            .and_then(|()| Self::common_headers(&mut c, &self.config))
            .and_then(|()| {
                write!(
                    c,
                    "Content-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
                )
            })
            .and_then(|()| c.put(&body[..prefix_len]))
            .and_then(|()| match r.events {
                Some(log) => wire::events_json(&mut c, log, skip),
                None => Ok(()),
            })
            .and_then(|()| match r.attempts {
                Some(n) => write!(c, "{ATTEMPTS_KEY}{n}"),
                None => Ok(()),
            })
            .and_then(|()| c.put(b"}"))
            .map(|()| c.len())
            .map_err(too_long)?;
        let deadline = self.deadline(self.config.timeouts.request_ms);
        let head = self.exchange(Call::Report, len, deadline)?;
        self.skip_body(Call::Report, &head, deadline)?;
        if (200..300).contains(&head.status) {
            Ok(())
        } else {
            Err(HttpError::Status {
                call: Call::Report,
                status: head.status,
            })
        }
    }
}

/// The decimal digits of `n`.
fn decimal_len(n: u8) -> usize {
    1 + usize::from(n >= 10) + usize::from(n >= 100)
}

/// Connects `link` to `host:port` within `timeout_ms`, in attempts of at most `budget_ms`,
/// feeding the watchdog before each; with `tls`, one `connect_tls` (TCP and the handshake).
fn connect_fed<L: Link, C: Clock>(
    link: &mut L,
    clock: &mut C,
    budget_ms: u32,
    (host, port): (&str, u16),
    timeout_ms: u32,
    security: Security,
) -> Result<(), HttpError> {
    // Both TLS links (the host's, the firmware's) connect and shake hands in one call,
    // within the connect timeout: fed before it, not during it.
    match security {
        Security::Plain => {}
        Security::Tls => {
            clock.feed();
            return link.connect_tls(host, port, timeout_ms);
        }
        Security::TlsAnonymous => {
            clock.feed();
            return link.connect_tls_anonymous(host, port, timeout_ms);
        }
    }
    let until = clock.now_ms().saturating_add(u64::from(timeout_ms));
    loop {
        clock.feed();
        let left = until.saturating_sub(clock.now_ms());
        let piece = left.min(u64::from(budget_ms)) as u32;
        match link.connect(host, port, piece) {
            Ok(()) => return Ok(()),
            Err(ErrorKind::TimedOut) if clock.now_ms() < until => {}
            Err(e) => return Err(HttpError::Connect(e)),
        }
    }
}

/// The errors after which the agent keeps the download journalled and resumes it (install.rs:
/// the transport broke, the pack ended early, the flash failed).
fn resumable(e: crate::Error) -> bool {
    matches!(
        e,
        crate::Error::Transport(_) | crate::Error::Flash(_) | crate::Error::PackTruncated { .. }
    )
}

impl<L: Link, C: Clock> Transport for HttpIo<'_, L, C> {
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        self.manifest(after, buf).map_err(|e| self.fail(e))
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        self.pack(sha256, offset, buf).map_err(|e| self.fail(e))
    }

    fn keyring_sequence(&self) -> Option<u64> {
        self.keyring_sequence
    }

    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        self.selftest(sha256, offset, buf).map_err(|e| self.fail(e))
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        self.keys(after, buf).map_err(|e| self.fail(e))
    }

    fn fetch_release(
        &mut self,
        sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        self.release(sha256, buf).map_err(|e| self.fail(e))
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        self.report_now(report).map_err(|e| {
            self.report_error = Some(e);
            self.close();
            e.to_transport()
        })
    }
}
