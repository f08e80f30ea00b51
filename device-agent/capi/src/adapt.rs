//! The caller's callbacks as the agent's traits: `NorFlash + Mapped`, the HTTP transport's
//! `Link` and `Clock`, a whole-request `Transport`, a `MonotonicCounter`, and an `Npu` that
//! remembers what is bound.
//!
//! Nothing a callback returns is trusted: a length past its buffer, a write of 0 bytes, a code
//! that is not one of the header's, a clock that goes back — each becomes an error (and a
//! [`Fault`] the message reports), never a slice past its end or a panic.
use core::cell::Cell;
use core::ffi::c_char;

use device_agent::http_io::{Clock, HttpError, HttpIo, Link, TlsFailure};
use device_agent::{
    CounterError, Mapped, MonotonicCounter, Npu, NpuRegisters, Report, SELFTEST_SKIPPED, Transport,
    TransportError,
};
use embedded_io::ErrorKind;
use embedded_storage::nor_flash::{
    ErrorType as NorErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

use crate::types::*;

/// A callback that broke its contract: what it was and what it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A flash callback returned a positive value.
    Flash { op: &'static str, returned: i32 },
    /// A stream or request callback returned more than its buffer, or 0 from a write.
    Length {
        op: &'static str,
        returned: i64,
        len: usize,
    },
    /// A callback returned a code the header does not define.
    Code { op: &'static str, returned: i32 },
    /// The counter's read callback returned less than the counter held before.
    CounterBack { was: u64, read: u64 },
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Fault::Flash { op, returned } => write!(
                f,
                "callback flash.{op} returned {returned} (0 or a negative error expected)"
            ),
            Fault::Length { op, returned, len } => write!(
                f,
                "callback {op} returned {returned} for a {len}-byte buffer"
            ),
            Fault::Code { op, returned } => {
                write!(f, "callback {op} returned {returned}, not a defined result")
            }
            Fault::CounterBack { was, read } => write!(
                f,
                "callback counter.read returned {read} after the counter held {was}: a monotonic \
                 counter never goes down"
            ),
        }
    }
}

/// The last failed flash operation, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashFailure {
    pub op: &'static str,
    pub offset: u32,
    pub len: u32,
    pub returned: i32,
}

/// The flash driver's error: its portable kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashError(pub NorFlashErrorKind);

impl NorFlashError for FlashError {
    fn kind(&self) -> NorFlashErrorKind {
        self.0
    }
}

/// The caller's monotonic counter, or none (both callbacks NULL, checked by `npub_agent_open`).
pub struct CCounter {
    pub ops: npub_counter,
    /// The highest value read or raised so far.
    pub held: u64,
    pub fault: Option<Fault>,
    /// The negative code of the last callback that failed.
    pub failed: Option<(&'static str, i32)>,
}

impl CCounter {
    fn outcome(&mut self, op: &'static str, rc: i32) -> Result<(), CounterError> {
        match rc {
            0 => Ok(()),
            rc if rc > 0 => {
                self.fault = Some(Fault::Code {
                    op: if op == "read" {
                        "counter.read"
                    } else {
                        "counter.raise"
                    },
                    returned: rc,
                });
                Err(CounterError::Flash(NorFlashErrorKind::Other))
            }
            rc => {
                self.failed = Some((op, rc));
                Err(CounterError::Flash(NorFlashErrorKind::Other))
            }
        }
    }
}

impl MonotonicCounter for CCounter {
    fn read(&mut self) -> Result<u64, CounterError> {
        let Some(read) = self.ops.read else {
            return Ok(0);
        };
        let mut value = 0u64;
        // SAFETY: `value` is a live u64; the callback writes at most that.
        let rc = unsafe { read(self.ops.ctx, &mut value) };
        self.outcome("read", rc)?;
        if value < self.held {
            self.fault = Some(Fault::CounterBack {
                was: self.held,
                read: value,
            });
            return Err(CounterError::Flash(NorFlashErrorKind::Other));
        }
        self.held = value;
        Ok(value)
    }

    fn raise(&mut self, value: u64) -> Result<(), CounterError> {
        let Some(raise) = self.ops.raise else {
            return Ok(());
        };
        if value <= self.held {
            return Ok(());
        }
        // SAFETY: a plain call with the caller's context.
        let rc = unsafe { raise(self.ops.ctx, value) };
        self.outcome("raise", rc)?;
        self.held = value;
        Ok(())
    }
}

/// The caller's flash (geometry checked by `npub_agent_open`).
pub struct CFlash {
    pub ops: npub_flash,
    pub fault: Option<Fault>,
    pub failure: Option<FlashFailure>,
    /// The clock's watchdog feed and its context, called before every erase unit and program.
    pub feed: Option<(
        unsafe extern "C" fn(*mut core::ffi::c_void),
        *mut core::ffi::c_void,
    )>,
}

impl CFlash {
    fn outcome(
        &mut self,
        op: &'static str,
        offset: u32,
        len: u32,
        rc: i32,
    ) -> Result<(), FlashError> {
        match rc {
            0 => Ok(()),
            rc if rc > 0 => {
                self.fault = Some(Fault::Flash { op, returned: rc });
                Err(FlashError(NorFlashErrorKind::Other))
            }
            rc => {
                self.failure = Some(FlashFailure {
                    op,
                    offset,
                    len,
                    returned: rc,
                });
                Err(FlashError(NorFlashErrorKind::Other))
            }
        }
    }

    fn bounds(&self, offset: u32, len: usize, unit: u32) -> Result<(), FlashError> {
        let end = u64::from(offset) + len as u64;
        if end > u64::from(self.ops.capacity) {
            return Err(FlashError(NorFlashErrorKind::OutOfBounds));
        }
        if offset % unit != 0 || len as u64 % u64::from(unit) != 0 {
            return Err(FlashError(NorFlashErrorKind::NotAligned));
        }
        Ok(())
    }
}

impl NorErrorType for CFlash {
    type Error = FlashError;
}

impl ReadNorFlash for CFlash {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), FlashError> {
        self.bounds(offset, bytes.len(), 1)?;
        match self.ops.read {
            Some(read) => {
                let len = bytes.len() as u32;
                // SAFETY: `bytes` is a live buffer of `len` bytes; the callback writes at most that.
                let rc = unsafe { read(self.ops.ctx, offset, bytes.as_mut_ptr(), len) };
                self.outcome("read", offset, len, rc)
            }
            None => {
                let at = offset as usize;
                bytes.copy_from_slice(&self.mapped()[at..at + bytes.len()]);
                Ok(())
            }
        }
    }

    fn capacity(&self) -> usize {
        self.ops.capacity as usize
    }
}

impl NorFlash for CFlash {
    const WRITE_SIZE: usize = NPUB_FLASH_WRITE_BYTES as usize;
    const ERASE_SIZE: usize = NPUB_FLASH_ERASE_BYTES as usize;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), FlashError> {
        if to < from {
            return Err(FlashError(NorFlashErrorKind::OutOfBounds));
        }
        self.bounds(from, (to - from) as usize, NPUB_FLASH_ERASE_BYTES)?;
        let erase = self.ops.erase.ok_or(FlashError(NorFlashErrorKind::Other))?;
        if self.ops.busy.is_none() && self.feed.is_none() {
            // SAFETY: the callback was checked non-NULL at open; it gets plain integers.
            let rc = unsafe { erase(self.ops.ctx, from, to - from) };
            return self.outcome("erase", from, to - from, rc);
        }
        // One erase unit per busy window (checked non-zero and dividing the agent's at open).
        let unit = self.ops.erase_unit;
        let mut at = from;
        while at < to {
            self.feed();
            self.busy(NPUB_FLASH_ERASING, at, unit);
            // SAFETY: as above.
            let rc = unsafe { erase(self.ops.ctx, at, unit) };
            self.busy(NPUB_FLASH_IDLE, at, unit);
            self.outcome("erase", at, unit, rc)?;
            at += unit;
        }
        Ok(())
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), FlashError> {
        self.bounds(offset, bytes.len(), NPUB_FLASH_WRITE_BYTES)?;
        let program = self
            .ops
            .program
            .ok_or(FlashError(NorFlashErrorKind::Other))?;
        let len = bytes.len() as u32;
        self.feed();
        self.busy(NPUB_FLASH_PROGRAMMING, offset, len);
        // SAFETY: `bytes` is live for `len` bytes; the callback only reads it.
        let rc = unsafe { program(self.ops.ctx, offset, bytes.as_ptr(), len) };
        self.busy(NPUB_FLASH_IDLE, offset, len);
        self.outcome("program", offset, len, rc)
    }
}

impl CFlash {
    /// Feeds the caller's watchdog, if it gave one.
    fn feed(&self) {
        if let Some((feed, ctx)) = self.feed {
            // SAFETY: a plain call with the clock's context.
            unsafe { feed(ctx) }
        }
    }

    /// Tells the caller's `busy` hook, if any.
    fn busy(&self, state: u32, offset: u32, len: u32) {
        if let Some(busy) = self.ops.busy {
            // SAFETY: a plain call with the caller's context and integers.
            unsafe { busy(self.ops.ctx, state, offset, len) }
        }
    }
}

impl Mapped for CFlash {
    fn mapped(&self) -> &[u8] {
        // SAFETY: `npub_agent_open` checked `xip` non-NULL; the caller promises (npub_flash) that
        // `capacity` bytes from it stay readable while the agent lives. The agent never holds
        // this slice across a program or erase (those take `&mut self`).
        unsafe { core::slice::from_raw_parts(self.ops.xip, self.ops.capacity as usize) }
    }

    fn invalidate(&mut self) {
        if let Some(invalidate) = self.ops.invalidate {
            // SAFETY: a plain call with the caller's context.
            unsafe { invalidate(self.ops.ctx) }
        }
    }
}

/// The caller's byte stream as the HTTP transport's link.
pub struct CLink {
    pub ops: npub_stream,
    pub fault: Option<Fault>,
    /// `NPUB_TRANSPORT_TLS_STREAM`: `ops.connect` does the TLS handshake (`https://` only).
    pub tls: bool,
    /// Why the last `https://` redirect hop was refused before any callback ran, for the
    /// message (the HTTP client's own error says only `TLS: unsupported`).
    pub refused_hop: Option<&'static str>,
}

/// [`CLink::refused_hop`]: the link has no `connect_anonymous`.
pub const HOP_NEEDS_ANONYMOUS: &str = "an https:// redirect to another origin (a presigned \
     download) opens only through stream.connect_anonymous, which is NULL";
/// [`CLink::refused_hop`]: the link speaks no TLS.
pub const HOP_NEEDS_TLS: &str = "an https:// redirect needs NPUB_TRANSPORT_TLS_STREAM and \
     stream.connect_anonymous";

/// A stream error: its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkError(pub ErrorKind);

impl core::fmt::Display for LinkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl core::error::Error for LinkError {}

impl embedded_io::Error for LinkError {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

impl embedded_io::ErrorType for CLink {
    type Error = LinkError;
}

impl CLink {
    fn code(&mut self, op: &'static str, rc: i32) -> LinkError {
        match rc {
            NPUB_IO_TIMEOUT => LinkError(ErrorKind::TimedOut),
            NPUB_IO_ERROR => LinkError(ErrorKind::ConnectionReset),
            returned => {
                self.fault = Some(Fault::Code { op, returned });
                LinkError(ErrorKind::InvalidData)
            }
        }
    }
}

impl embedded_io::Read for CLink {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, LinkError> {
        let read = self.ops.read.ok_or(LinkError(ErrorKind::NotConnected))?;
        // SAFETY: `buf` is live for `buf.len()` bytes; the callback writes at most that.
        let rc = unsafe { read(self.ops.ctx, buf.as_mut_ptr(), buf.len()) };
        match rc {
            rc if rc >= 0 && rc as usize <= buf.len() => Ok(rc as usize),
            rc if rc > 0 => {
                self.fault = Some(Fault::Length {
                    op: "stream.read",
                    returned: rc.into(),
                    len: buf.len(),
                });
                Err(LinkError(ErrorKind::InvalidData))
            }
            rc => Err(self.code("stream.read", rc)),
        }
    }
}

impl embedded_io::Write for CLink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, LinkError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let write = self.ops.write.ok_or(LinkError(ErrorKind::NotConnected))?;
        // SAFETY: `buf` is live for `buf.len()` bytes; the callback only reads it.
        let rc = unsafe { write(self.ops.ctx, buf.as_ptr(), buf.len()) };
        match rc {
            // 0 would make a write loop spin (embedded-io's `write_all` panics on it).
            rc if rc > 0 && rc as usize <= buf.len() => Ok(rc as usize),
            rc if rc >= 0 => {
                self.fault = Some(Fault::Length {
                    op: "stream.write",
                    returned: rc.into(),
                    len: buf.len(),
                });
                Err(LinkError(ErrorKind::InvalidData))
            }
            rc => Err(self.code("stream.write", rc)),
        }
    }

    fn flush(&mut self) -> Result<(), LinkError> {
        Ok(())
    }
}

/// A C connect callback.
type ConnectFn =
    unsafe extern "C" fn(*mut core::ffi::c_void, *const c_char, usize, u16, u32) -> i32;

impl CLink {
    /// A TLS connection through `connect` (named `name` in errors): its return mapped.
    fn tls_with(
        &mut self,
        connect: Option<ConnectFn>,
        name: &'static str,
        (host, port): (&str, u16),
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        if !self.tls {
            return Err(HttpError::Tls(TlsFailure::Unsupported));
        }
        let connect = connect.ok_or(HttpError::Connect(ErrorKind::NotConnected))?;
        // SAFETY: `host` is live for `host.len()` bytes; the callback only reads it.
        let rc = unsafe {
            connect(
                self.ops.ctx,
                host.as_ptr().cast::<c_char>(),
                host.len(),
                port,
                timeout_ms,
            )
        };
        match rc {
            0 => Ok(()),
            NPUB_IO_ERROR => Err(HttpError::Connect(ErrorKind::ConnectionRefused)),
            NPUB_IO_TLS_CERTIFICATE => Err(HttpError::Tls(TlsFailure::BadCertificate)),
            NPUB_IO_TLS_HANDSHAKE => Err(HttpError::Tls(TlsFailure::Handshake)),
            rc => Err(HttpError::Connect(self.code(name, rc).0)),
        }
    }
}

impl Link for CLink {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        let connect = self.ops.connect.ok_or(ErrorKind::NotConnected)?;
        // SAFETY: `host` is live for `host.len()` bytes; the callback only reads it.
        let rc = unsafe {
            connect(
                self.ops.ctx,
                host.as_ptr().cast::<c_char>(),
                host.len(),
                port,
                timeout_ms,
            )
        };
        match rc {
            0 => Ok(()),
            NPUB_IO_ERROR => Err(ErrorKind::ConnectionRefused),
            rc => Err(self.code("stream.connect", rc).0),
        }
    }

    fn connect_tls(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), HttpError> {
        self.tls_with(self.ops.connect, "stream.connect", (host, port), timeout_ms)
    }

    fn connect_tls_anonymous(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        let refused = if !self.tls {
            HOP_NEEDS_TLS
        } else if self.ops.connect_anonymous.is_none() {
            // Never `connect`: it may present the device's certificate to another origin.
            HOP_NEEDS_ANONYMOUS
        } else {
            return self.tls_with(
                self.ops.connect_anonymous,
                "stream.connect_anonymous",
                (host, port),
                timeout_ms,
            );
        };
        self.refused_hop = Some(refused);
        Err(HttpError::Tls(TlsFailure::Unsupported))
    }

    fn close(&mut self) {
        if let Some(close) = self.ops.close {
            // SAFETY: a plain call with the caller's context.
            unsafe { close(self.ops.ctx) }
        }
    }
}

/// The caller's clock, made monotonic.
pub struct CClock {
    pub ops: npub_clock,
    pub last: Cell<u64>,
}

impl CClock {
    pub fn now(&self) -> u64 {
        let now = match self.ops.now_ms {
            // SAFETY: checked non-NULL at open; a plain call.
            Some(now) => unsafe { now(self.ops.ctx) },
            None => 0,
        };
        let now = now.max(self.last.get());
        self.last.set(now);
        now
    }

    /// Seconds since 1970, when the caller gave a wall clock.
    pub fn unix_time_s(&self) -> Option<u64> {
        // SAFETY: a plain call with the caller's context.
        let t = self.ops.unix_time_s.map(|f| unsafe { f(self.ops.ctx) });
        t.filter(|&t| t > 0)
    }
}

impl Clock for CClock {
    fn now_ms(&mut self) -> u64 {
        self.now()
    }

    fn sleep_ms(&mut self, ms: u32) {
        if let Some(sleep) = self.ops.sleep_ms {
            // SAFETY: a plain call with the caller's context.
            unsafe { sleep(self.ops.ctx, ms) }
        }
    }

    fn feed(&mut self) {
        if let Some(feed) = self.ops.feed {
            // SAFETY: a plain call with the caller's context.
            unsafe { feed(self.ops.ctx) }
        }
    }
}

/// `fetch_pack` and `fetch_selftest`: `(ctx, sha256, offset, buf, len)`.
type ChunkFn = unsafe extern "C" fn(*mut core::ffi::c_void, *const u8, u32, *mut u8, usize) -> i32;

/// Whole-request callbacks as the agent's transport.
pub struct CRequests {
    pub ops: npub_requests,
    pub fault: Option<Fault>,
    /// The last `fetch_manifest`'s announced keyring sequence.
    pub keyring_sequence: Option<u64>,
}

impl CRequests {
    fn error(&mut self, op: &'static str, rc: i32) -> TransportError {
        match rc {
            NPUB_IO_ERROR | NPUB_IO_TIMEOUT => TransportError::Unreachable,
            rc if (-599..=-100).contains(&rc) => TransportError::Status(rc.unsigned_abs() as u16),
            returned => {
                self.fault = Some(Fault::Code { op, returned });
                TransportError::Protocol("a request callback returned an undefined code")
            }
        }
    }

    /// One ranged read of a pack or self-test record: `f(ctx, sha256, offset, buf, len)`.
    fn call_chunk(&self, f: ChunkFn, sha256: &[u8; 32], offset: u32, buf: &mut [u8]) -> i32 {
        // SAFETY: `sha256` is 32 live bytes, `buf` live for its length.
        unsafe {
            f(
                self.ops.ctx,
                sha256.as_ptr(),
                offset,
                buf.as_mut_ptr(),
                buf.len(),
            )
        }
    }

    /// A ranged read's return code as the bytes it wrote: a count past `len` is a broken
    /// contract (`overrun`, and a [`Fault::Length`]), a negative one an error.
    fn chunk_len(
        &mut self,
        op: &'static str,
        overrun: &'static str,
        rc: i32,
        len: usize,
    ) -> Result<usize, TransportError> {
        match rc {
            rc if rc >= 0 && rc as usize <= len => Ok(rc as usize),
            rc if rc > 0 => {
                self.fault = Some(Fault::Length {
                    op,
                    returned: rc.into(),
                    len,
                });
                Err(TransportError::Protocol(overrun))
            }
            rc => Err(self.error(op, rc)),
        }
    }
}

impl Transport for CRequests {
    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        // NULL: "none", and the agent refuses a version-2 manifest's pack.
        let Some(f) = self.ops.fetch_selftest else {
            return Ok(None);
        };
        match self.call_chunk(f, sha256, offset, buf) {
            -404 => Ok(None),
            rc => self
                .chunk_len(
                    "requests.fetch_selftest",
                    "fetch_selftest claims more bytes than its buffer",
                    rc,
                    buf.len(),
                )
                .map(Some),
        }
    }

    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let f = self.ops.fetch_manifest.ok_or(TransportError::Unreachable)?;
        let mut len = 0usize;
        let mut announced = 0u64;
        self.keyring_sequence = None;
        // SAFETY: `buf` is live for its length, `len` for one usize, `announced` for one u64;
        // the callback writes those.
        let rc = unsafe {
            f(
                self.ops.ctx,
                after,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut announced,
            )
        };
        let answer = match rc {
            NPUB_NO_MANIFEST => Ok(None),
            // A longer length is the manifest's own: the agent refuses it by its length.
            NPUB_MANIFEST => Ok(Some(len)),
            rc => return Err(self.error("requests.fetch_manifest", rc)),
        };
        // 0 is "no header": no update has sequence 0.
        self.keyring_sequence = (announced != 0).then_some(announced);
        answer
    }

    fn keyring_sequence(&self) -> Option<u64> {
        self.keyring_sequence
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let Some(f) = self.ops.fetch_keyring_updates else {
            return Ok(0);
        };
        // SAFETY: `buf` is live for its length; the callback writes at most that.
        let rc = unsafe { f(self.ops.ctx, after, buf.as_mut_ptr(), buf.len()) };
        match rc {
            rc if rc >= 0
                && rc as usize <= buf.len()
                && rc as usize % NPUB_KEYRING_UPDATE_BYTES == 0 =>
            {
                Ok(rc as usize)
            }
            rc if rc > 0 => {
                self.fault = Some(Fault::Length {
                    op: "requests.fetch_keyring_updates",
                    returned: rc.into(),
                    len: buf.len(),
                });
                Err(TransportError::Protocol(
                    "fetch_keyring_updates returned more than its buffer or not whole 144-byte records",
                ))
            }
            rc => Err(self.error("requests.fetch_keyring_updates", rc)),
        }
    }

    fn fetch_release(
        &mut self,
        sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let Some(f) = self.ops.fetch_release else {
            return Ok(None);
        };
        // SAFETY: `sha256` is 32 live bytes, `buf` live for its length; the callback writes at
        // most that.
        let rc = unsafe { f(self.ops.ctx, sha256.as_ptr(), buf.as_mut_ptr(), buf.len()) };
        match rc {
            0 => Ok(None),
            // A longer length is the bundle's own: the agent refuses it by its length.
            rc if rc > 0 => Ok(Some(rc as usize)),
            rc => Err(self.error("requests.fetch_release", rc)),
        }
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let f = self.ops.fetch_pack.ok_or(TransportError::Unreachable)?;
        let rc = self.call_chunk(f, sha256, offset, buf);
        self.chunk_len(
            "requests.fetch_pack",
            "fetch_pack claims more bytes than its buffer",
            rc,
            buf.len(),
        )
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        let Some(f) = self.ops.report else {
            return Ok(());
        };
        let mut state = [0u8; 16];
        let name = report.state.name().as_bytes();
        state[..name.len()].copy_from_slice(name);
        let mut reason = [0u8; 320];
        let has_reason = match report.reason {
            Some(r) => {
                crate::cstr::write_c(&mut reason, format_args!("{r}"));
                true
            }
            // An `installed` pack whose golden run did not happen says so, never a silent pass.
            None if report.selftest_skipped => {
                crate::cstr::write_c(&mut reason, format_args!("{SELFTEST_SKIPPED}"));
                true
            }
            None => false,
        };
        let c = npub_report {
            sequence: report.sequence,
            state: state.as_ptr().cast(),
            progress: report.progress.map_or(-1, i64::from),
            reason: if has_reason {
                reason.as_ptr().cast()
            } else {
                core::ptr::null()
            },
            attempts: report.attempts.map_or(0, u32::from),
            events: core::ptr::null(),
            event_count: 0,
        };
        // Each line's length byte in the ring becomes its '\n' here: the ring's size is enough.
        let mut events = [0u8; NPUB_EVENT_LOG_BYTES + 1];
        let c = match report.events.filter(|log| !log.is_empty()) {
            Some(log) => {
                let mut at = 0;
                for line in log.lines() {
                    events[at..at + line.len()].copy_from_slice(line.as_bytes());
                    events[at + line.len()] = b'\n';
                    at += line.len() + 1;
                }
                npub_report {
                    events: events.as_ptr().cast(),
                    event_count: log.len() as u32,
                    ..c
                }
            }
            None => c,
        };
        // SAFETY: `c` and the strings it points at live across the call.
        match unsafe { f(self.ops.ctx, &c) } {
            0 => Ok(()),
            rc => Err(self.error("requests.report", rc)),
        }
    }
}

/// The transport `npub_config.transport` chose.
#[allow(clippy::large_enum_variant)]
pub enum CTransport {
    Stream(HttpIo<'static, CLink, CClock>),
    Requests(CRequests, CClock),
}

impl CTransport {
    pub fn clock(&mut self) -> &CClock {
        match self {
            CTransport::Stream(h) => h.clock(),
            CTransport::Requests(_, c) => c,
        }
    }

    /// Takes the fault a callback left, if any.
    pub fn take_fault(&mut self) -> Option<Fault> {
        match self {
            CTransport::Stream(h) => h.link().fault.take(),
            CTransport::Requests(r, _) => r.fault.take(),
        }
    }

    /// Why the last redirect hop was refused before any callback ran ([`CLink::refused_hop`]).
    pub fn take_refused_hop(&mut self) -> Option<&'static str> {
        match self {
            CTransport::Stream(h) => h.link().refused_hop.take(),
            CTransport::Requests(..) => None,
        }
    }
}

impl Transport for CTransport {
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        match self {
            CTransport::Stream(h) => h.fetch_manifest(after, buf),
            CTransport::Requests(r, _) => r.fetch_manifest(after, buf),
        }
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        match self {
            CTransport::Stream(h) => h.fetch_pack(sha256, offset, buf),
            CTransport::Requests(r, _) => r.fetch_pack(sha256, offset, buf),
        }
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        match self {
            CTransport::Stream(h) => h.report(report),
            CTransport::Requests(r, _) => r.report(report),
        }
    }

    fn fetch_release(
        &mut self,
        sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        match self {
            CTransport::Stream(h) => h.fetch_release(sha256, buf),
            CTransport::Requests(r, _) => r.fetch_release(sha256, buf),
        }
    }

    fn keyring_sequence(&self) -> Option<u64> {
        match self {
            CTransport::Stream(h) => h.keyring_sequence(),
            CTransport::Requests(r, _) => r.keyring_sequence(),
        }
    }

    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        match self {
            CTransport::Stream(h) => h.fetch_selftest(sha256, offset, buf),
            CTransport::Requests(r, _) => r.fetch_selftest(sha256, offset, buf),
        }
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        match self {
            CTransport::Stream(h) => h.fetch_keyring_updates(after, buf),
            CTransport::Requests(r, _) => r.fetch_keyring_updates(after, buf),
        }
    }
}

/// The NPU as the C application drives it: the agent says what is bound, the application reads
/// it as an `npub_job` and runs its own self-test (`npub_agent_confirm`).
#[derive(Default)]
pub struct CNpu {
    pub bound: Option<NpuRegisters>,
}

impl Npu for CNpu {
    fn program(&mut self, regs: &NpuRegisters) {
        self.bound = Some(*regs);
    }

    fn unbind(&mut self) {
        self.bound = None;
    }

    fn self_test(
        &mut self,
        _regs: &NpuRegisters,
        _golden: Option<&[u8]>,
    ) -> device_agent::SelfTestResult {
        // Never called: the C path confirms through `finish_install` / `settle_trial`.
        Err(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use core::ffi::c_void;
    use core::ptr;

    use super::*;

    /// Which callback opened the connection, and for which host.
    #[derive(Default)]
    struct Calls {
        identified: usize,
        anonymous: usize,
        host: String,
    }

    /// What both connect callbacks do first: the test's `Calls` behind `ctx`, with `host`
    /// noted.
    ///
    /// # Safety
    /// `ctx` is the test's `Calls`, `host` points at `len` bytes.
    unsafe fn note_host<'a>(ctx: *mut c_void, host: *const c_char, len: usize) -> &'a mut Calls {
        // SAFETY: as documented.
        let (calls, host) = unsafe {
            (
                &mut *ctx.cast::<Calls>(),
                core::slice::from_raw_parts(host.cast::<u8>(), len),
            )
        };
        calls.host = String::from_utf8_lossy(host).into_owned();
        calls
    }

    /// `connect`: succeeds.
    unsafe extern "C" fn identified(
        ctx: *mut c_void,
        host: *const c_char,
        len: usize,
        _: u16,
        _: u32,
    ) -> i32 {
        // SAFETY: the link's ctx is the test's `Calls`; the agent passes `len` bytes of host.
        unsafe { note_host(ctx, host, len) }.identified += 1;
        0
    }

    /// `connect_anonymous`: the bucket's certificate refused.
    unsafe extern "C" fn anonymous(
        ctx: *mut c_void,
        host: *const c_char,
        len: usize,
        _: u16,
        _: u32,
    ) -> i32 {
        // SAFETY: as `identified`.
        unsafe { note_host(ctx, host, len) }.anonymous += 1;
        NPUB_IO_TLS_CERTIFICATE
    }

    fn link(calls: &mut Calls, anon: Option<ConnectFn>, tls: bool) -> CLink {
        CLink {
            ops: npub_stream {
                ctx: (calls as *mut Calls).cast(),
                server_url: ptr::null(),
                token: ptr::null(),
                connect: Some(identified),
                read: None,
                write: None,
                close: None,
                window_bytes: 0,
                connect_anonymous: anon,
            },
            fault: None,
            tls,
            refused_hop: None,
        }
    }

    #[test]
    fn an_https_redirect_hop_opens_through_connect_anonymous_never_connect() {
        let mut calls = Calls::default();
        let mut l = link(&mut calls, Some(anonymous), true);
        assert_eq!(
            l.connect_tls_anonymous("bucket.example", 443, 1000),
            Err(HttpError::Tls(TlsFailure::BadCertificate)),
            "its return mapped as connect's"
        );
        assert_eq!(l.connect_tls("fleet.example", 443, 1000), Ok(()));
        assert_eq!((calls.identified, calls.anonymous), (1, 1));
        assert_eq!(calls.host, "fleet.example");
    }

    #[test]
    fn rejects_an_https_redirect_hop_without_connect_anonymous_or_tls() {
        let mut calls = Calls::default();
        let mut l = link(&mut calls, None, true);
        assert_eq!(
            l.connect_tls_anonymous("bucket.example", 443, 1000),
            Err(HttpError::Tls(TlsFailure::Unsupported))
        );
        assert_eq!(
            l.refused_hop,
            Some(HOP_NEEDS_ANONYMOUS),
            "the message says why"
        );
        let mut plain = link(&mut calls, Some(anonymous), false);
        assert_eq!(
            plain.connect_tls_anonymous("bucket.example", 443, 1000),
            Err(HttpError::Tls(TlsFailure::Unsupported))
        );
        assert_eq!(plain.refused_hop, Some(HOP_NEEDS_TLS));
        assert_eq!(
            (calls.identified, calls.anonymous),
            (0, 0),
            "the identity never left"
        );
    }
}
