//! What a connection is doing: when a byte last moved, and how many of its requests are being
//! handled or answered. The accept loop's idle timer, the connection table's choice of which
//! connection makes room, and the device lane all read it.
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::hold::Hold;
use super::timer;

/// When a connection last moved a byte, and how many of its requests are being handled.
#[derive(Debug)]
pub(crate) struct Activity {
    pub(crate) start: Instant,
    /// Milliseconds since `start` of the last byte read or written.
    pub(crate) last_ms: AtomicU64,
    /// Requests whose handler has not produced a response head yet.
    pub(crate) handling: AtomicUsize,
    /// Requests not completely answered yet (their response's last byte not written): a
    /// connection with one is never closed to make room for another ([`table`]).
    pub(crate) responding: AtomicUsize,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            handling: AtomicUsize::new(0),
            responding: AtomicUsize::new(0),
        }
    }

    /// When a byte last moved.
    pub(crate) fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn touch(&self) {
        self.touch_at(Instant::now());
    }

    /// [`Self::touch`] with a time the caller read already (the device lane reads the clock
    /// once a request). A touch in the millisecond already recorded is one load.
    pub(crate) fn touch_at(&self, at: Instant) {
        let ms =
            u64::try_from(at.saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX);
        if ms > self.last_ms.load(Ordering::Relaxed) {
            self.last_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// Resolves once no byte has moved for `idle` while no request was being handled. A handler
    /// that takes long (waiting for the write lock, validating a large upload) is never cut off:
    /// its client is waiting for an answer, not idling.
    pub(crate) async fn idle_for(&self, idle: Duration) {
        let sleep = tokio::time::sleep_until(self.start + idle);
        let sleep = std::pin::pin!(sleep);
        let mut timer = timer::Deadline::new(sleep);
        loop {
            timer.fired().await;
            let now = Instant::now();
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + idle;
            if now < deadline {
                timer.reset(deadline);
                continue;
            }
            if self.handling.load(Ordering::Relaxed) == 0 {
                return;
            }
            timer.reset(now + idle);
        }
    }
}

/// The connection's socket, noting every byte that moves; under TLS, holding the handshake's
/// writes back ([`Hold`]).
pub(crate) struct Watched {
    pub(crate) inner: tokio::net::TcpStream,
    pub(crate) activity: Arc<Activity>,
    pub(crate) hold: Hold,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.hold.on_drop(&self.inner);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.hold.before_read(&mut this.inner, cx))?;
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(held) =
            this.hold
                .write(&mut this.inner, cx, &[io::IoSlice::new(buf)], buf.len())
        {
            return held;
        }
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let len = bufs.iter().map(|b| b.len()).sum();
        if let Some(held) = this.hold.write(&mut this.inner, cx, bufs, len) {
            return held;
        }
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.hold.flush(&mut this.inner, cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.hold.handshake_done();
        std::task::ready!(this.hold.flush(&mut this.inner, cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Counts a request in [`Activity::responding`] until dropped.
pub(crate) struct Answering(Arc<Activity>);

impl Answering {
    pub(crate) fn new(activity: &Arc<Activity>) -> Self {
        activity.responding.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(activity))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.responding.fetch_sub(1, Ordering::Relaxed);
    }
}
