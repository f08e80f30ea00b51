//! A connection's deadline that costs one atomic load when the task wakes for something else.
//!
//! A connection task wakes for every read, and each wake polls every branch of its `select!`:
//! a tokio `Sleep` polled again re-registers its waker and spends coop budget each time (a
//! quarter of a microsecond a poll), though its deadline is tens of seconds away. A [`Deadline`]
//! polls its `Sleep` once after each reset, which registers the task's waker with the timer;
//! after that it only asks whether the timer fired ([`Sleep::is_elapsed`]), and the timer wakes
//! the same task when it does.
//!
//! | State         | `fired()` polled                         |
//! |---------------|------------------------------------------|
//! | just reset    | polls the `Sleep`: registers the waker (or is ready) |
//! | registered    | `Sleep::is_elapsed`: ready once the timer fired      |
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

/// A `Sleep` polled once per reset (see the module).
pub(crate) struct Deadline<'s> {
    sleep: Pin<&'s mut Sleep>,
    /// The `Sleep` was polled since its last reset and said pending: its waker is registered.
    registered: bool,
}

impl<'s> Deadline<'s> {
    pub(crate) fn new(sleep: Pin<&'s mut Sleep>) -> Self {
        Self {
            sleep,
            registered: false,
        }
    }

    /// Moves the deadline to `at`.
    pub(crate) fn reset(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
        self.registered = false;
    }

    /// Ready once the deadline has passed.
    pub(crate) fn fired(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| self.poll_fired(cx))
    }

    fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered {
            return if self.sleep.is_elapsed() {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                self.registered = true;
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn fires_at_its_deadline_and_again_after_a_reset() {
        let start = Instant::now();
        let sleep = tokio::time::sleep_until(start + Duration::from_secs(5));
        let sleep = std::pin::pin!(sleep);
        let mut deadline = Deadline::new(sleep);
        // Polled while pending, many times: registered once, not ready.
        for _ in 0..3 {
            tokio::select! {
                biased;
                () = deadline.fired() => panic!("fired early"),
                () = tokio::task::yield_now() => {}
            }
        }
        deadline.fired().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(5));
        deadline.reset(start + Duration::from_secs(8));
        deadline.fired().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(8));
        // A deadline already past is ready at once.
        deadline.reset(start);
        deadline.fired().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(8));
    }

    #[tokio::test(start_paused = true)]
    async fn wakes_its_task_without_being_polled_in_between() {
        let start = Instant::now();
        let task = tokio::spawn(async move {
            let sleep = tokio::time::sleep_until(start + Duration::from_secs(30));
            let sleep = std::pin::pin!(sleep);
            let mut deadline = Deadline::new(sleep);
            deadline.fired().await;
            Instant::now() - start
        });
        assert_eq!(task.await.unwrap(), Duration::from_secs(30));
    }
}
