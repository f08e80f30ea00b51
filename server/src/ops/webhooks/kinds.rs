//! The event kinds a webhook can subscribe to, and the limits of the whole feature: the names
//! every other file of `ops/webhooks/` uses.
//!
//! | Kind                       | Sent when                                                        |
//! |----------------------------|------------------------------------------------------------------|
//! | `deployment.state_changed` | an operator pauses, resumes or aborts a deployment, or it aborts itself |
//! | `deployment.completed`     | every target of a deployment installed it (sent once; see `docs/webhooks.md`) |
//! | `deployment.batch_opened`  | a staged rollout opens its next batch(es)                         |
//! | `deployment.threshold_hit` | a deployment's failures exceed its `failure_threshold`            |
//! | `device.failed`            | a device reports `failed` or `rolled_back`                        |
//! | `key.rotated`              | the signing key is rotated                                        |
//! | `webhook.test`             | an operator asks for a test delivery (sent to that webhook only, whatever it subscribed to) |
use std::time::Duration;

/// A kind of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A deployment was paused, resumed or aborted.
    DeploymentStateChanged,
    /// Every target of a deployment installed it.
    DeploymentCompleted,
    /// A rollout opened batches.
    BatchOpened,
    /// A rollout's failure threshold was exceeded.
    ThresholdHit,
    /// A device reported a failed install.
    DeviceFailed,
    /// The signing key was rotated.
    KeyRotated,
    /// A test delivery.
    Test,
}

impl EventKind {
    /// The kinds a webhook may subscribe to (not [`EventKind::Test`]).
    pub const SUBSCRIBABLE: [EventKind; 6] = [
        Self::DeploymentStateChanged,
        Self::DeploymentCompleted,
        Self::BatchOpened,
        Self::ThresholdHit,
        Self::DeviceFailed,
        Self::KeyRotated,
    ];

    /// The kind's name, in the API and in every payload's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeploymentStateChanged => "deployment.state_changed",
            Self::DeploymentCompleted => "deployment.completed",
            Self::BatchOpened => "deployment.batch_opened",
            Self::ThresholdHit => "deployment.threshold_hit",
            Self::DeviceFailed => "device.failed",
            Self::KeyRotated => "key.rotated",
            Self::Test => "webhook.test",
        }
    }

    /// A subscribable kind by its name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::SUBSCRIBABLE.into_iter().find(|k| k.as_str() == name)
    }
}

/// Webhooks a server keeps at once: each costs a query per sender pass.
pub const MAX_WEBHOOKS: i64 = 100;
/// Longest URL accepted.
pub const MAX_URL_CHARS: usize = 2048;
/// Longest description accepted.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// Pending deliveries one webhook may have: an event that finds its queue full is logged as
/// `dropped` instead (a dead receiver must not grow the database without bound).
pub const MAX_PENDING: i64 = 1000;
/// Finished deliveries (delivered, failed, dropped) kept per webhook for its log; older ones
/// are removed by the sender.
pub const KEEP_FINISHED: i64 = 1000;
/// Attempts at one delivery before it is given up (`failed`).
pub const MAX_ATTEMPTS: i64 = 8;
/// Bytes of a receiver's answer that are read: the rest is never read (the connection is
/// closed), whatever it sends.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Characters of a failed answer's body kept in the delivery log.
pub const MAX_LOGGED_BODY_CHARS: usize = 200;
/// Longest backoff between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Default for `--webhook-timeout`: seconds one attempt (connect, send, the answer's head and
/// its first [`MAX_RESPONSE_BYTES`]) may take.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// Default for `--webhook-retry-base-ms`: the first backoff; each next one is 4 times longer,
/// up to [`MAX_BACKOFF`] (5 s, 20 s, 80 s, 5 min 20 s, 21 min, 1 h, 1 h: about 2.5 h in all).
pub const DEFAULT_RETRY_BASE_MS: u64 = 5000;
/// Default for `--webhook-disable-after`: consecutive failed attempts (across deliveries) after
/// which an endpoint is disabled until an operator enables it again.
pub const DEFAULT_DISABLE_AFTER: u32 = 20;

/// The webhook settings from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// One attempt's whole budget.
    pub timeout: Duration,
    /// The first backoff.
    pub retry_base: Duration,
    /// Consecutive failed attempts that disable an endpoint.
    pub disable_after: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            retry_base: Duration::from_millis(DEFAULT_RETRY_BASE_MS),
            disable_after: DEFAULT_DISABLE_AFTER,
        }
    }
}

impl Settings {
    /// The wait after the `attempts`-th failed attempt (from 1): base × 4^(attempts − 1), at
    /// most [`MAX_BACKOFF`].
    pub fn backoff(&self, attempts: i64) -> Duration {
        let exp = u32::try_from(attempts.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
        self.retry_base
            .saturating_mul(4u32.saturating_pow(exp))
            .min(MAX_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_fourfold_up_to_the_cap() {
        let s = Settings::default();
        assert_eq!(s.backoff(1), Duration::from_secs(5));
        assert_eq!(s.backoff(2), Duration::from_secs(20));
        assert_eq!(s.backoff(4), Duration::from_secs(320));
        assert_eq!(s.backoff(7), MAX_BACKOFF);
        assert_eq!(s.backoff(1000), MAX_BACKOFF);
    }

    #[test]
    fn every_subscribable_kind_parses_back() {
        for k in EventKind::SUBSCRIBABLE {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::parse("webhook.test"), None);
        assert_eq!(EventKind::parse("deployment"), None);
    }
}
