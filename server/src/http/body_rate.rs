//! A minimum rate for request bodies (`--body-min-rate`), so that a body trickled in (one byte
//! every 5 s) cannot hold a connection, a handler and, for an upload, a staged file forever.
//!
//! After a grace period (`--body-grace`, default [`DEFAULT_GRACE`]), a body must have delivered
//! at least `min_rate` bytes for every second past the grace: by `t` seconds,
//! `min_rate × (t − grace)` bytes. A body that falls
//! behind ends with [`TooSlow`], which every extractor answers 408. The rate is an average from
//! the start, so a pause is forgiven by bytes that came early: an upload over a 2G link (a few
//! kB/s) passes the default 512 B/s with room to spare. `--body-min-rate 0` turns it off.
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::Stream;
use tokio::time::{Instant, Sleep};

/// Default for `--body-grace`: the time a body may take before the rate is measured, which
/// covers a slow start (TCP slow start, a modem waking up).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The rule: `min_rate` bytes per second once `grace` is over (`min_rate` 0: no rule).
#[derive(Debug, Clone, Copy)]
pub struct MinRateRule {
    /// Bytes per second.
    pub min_rate: u64,
    /// Time before the rate is measured.
    pub grace: Duration,
}

/// Default for `--body-min-rate`, in bytes per second.
pub const DEFAULT_MIN_RATE: u64 = 512;

/// Why a request body ended early: it fell below the minimum rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooSlow {
    /// The rule it broke.
    pub min_rate: u64,
    /// Its grace, in seconds.
    pub grace_secs: u64,
    /// Bytes received when it was cut off.
    pub received: u64,
}

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request body: {} bytes arrived, slower than the minimum of {} bytes/s after the \
             first {} s",
            self.received, self.min_rate, self.grace_secs
        )
    }
}

impl std::error::Error for TooSlow {}

/// `TooSlow` if `err` is one or was caused by one (extractors wrap body errors).
pub fn too_slow(err: &(dyn std::error::Error + 'static)) -> Option<TooSlow> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(slow) = e.downcast_ref::<TooSlow>() {
            return Some(*slow);
        }
        current = e.source();
    }
    None
}

/// Middleware: every request body with bytes to come is read through [`MinRate`].
pub async fn enforce(State(rule): State<MinRateRule>, request: Request, next: Next) -> Response {
    if rule.min_rate == 0 || request.body().is_end_stream() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = Body::from_stream(MinRate::new(body.into_data_stream(), rule));
    next.run(Request::from_parts(parts, body)).await
}

/// A body stream that fails with [`TooSlow`] once it falls behind `min_rate`.
pub struct MinRate<S> {
    inner: S,
    rule: MinRateRule,
    start: Instant,
    received: u64,
    /// When `received` stops being enough.
    deadline: Pin<Box<Sleep>>,
    failed: bool,
}

impl<S> MinRate<S> {
    fn new(inner: S, rule: MinRateRule) -> Self {
        let start = Instant::now();
        Self {
            inner,
            rule,
            start,
            received: 0,
            deadline: Box::pin(tokio::time::sleep_until(start + rule.grace)),
            failed: false,
        }
    }

    /// `received` bytes are enough until `grace + received / min_rate` after the start.
    fn next_deadline(&self) -> Instant {
        let secs = self.received as f64 / self.rule.min_rate.max(1) as f64;
        // A year is "never" for a request body; it keeps the sum far from overflowing.
        let earned = Duration::try_from_secs_f64(secs)
            .unwrap_or(Duration::MAX)
            .min(Duration::from_secs(365 * 24 * 3600));
        self.start + self.rule.grace + earned
    }
}

impl<S, E> Stream for MinRate<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<axum::BoxError>,
{
    type Item = Result<Bytes, axum::BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.received = self.received.saturating_add(chunk.len() as u64);
                let deadline = self.next_deadline();
                self.deadline.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.failed = true;
                    Poll::Ready(Some(Err(Box::new(TooSlow {
                        min_rate: self.rule.min_rate,
                        grace_secs: self.rule.grace.as_secs(),
                        received: self.received,
                    }))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
