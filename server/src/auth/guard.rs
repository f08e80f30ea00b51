//! Failed authentication: counted, logged with the peer's address (rate-limited), and throttled
//! per peer. 6,000 wrong tokens in 9 s once went by without a trace.
//!
//! Every failure (no token, a malformed header, an unknown or revoked token, on operator and
//! device routes alike) costs its peer one unit of an allowance that refills at a steady rate
//! (a token bucket):
//!
//! | Setting                  | Default | Meaning                                              |
//! |--------------------------|---------|------------------------------------------------------|
//! | `--auth-failure-burst`   | 30      | failures a peer may make in a row before throttling  |
//! | `--auth-failure-refill`  | 1       | failures per second the allowance regains            |
//!
//! A failure that finds the allowance empty is answered 429 with `Retry-After` (the seconds until
//! one unit is back) instead of 401. The token is always checked first, so a valid token is never
//! slowed or refused, whatever its peer did before: throttling only changes which error a failure
//! gets. Peers are keyed by IPv4 address or IPv6 /64 (one host's privacy addresses are one
//! peer); behind a reverse proxy every client is the proxy, which only makes failing clients
//! share one allowance.
//!
//! The log gets one line per peer at most every [`LOG_EVERY`], carrying the failures since its
//! last line, so a flood costs a line per peer per interval, not one per request. At most
//! [`MAX_PEERS`] peers are tracked; when that many are failing at once, a new peer is answered
//! 401 without being tracked (and logged through one shared, equally rate-limited line).
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::http::error::ApiError;
use crate::ops::metrics::Metrics;

/// Default for `--auth-failure-burst`.
pub const DEFAULT_BURST: u32 = 30;
/// Default for `--auth-failure-refill`, per second.
pub const DEFAULT_REFILL_PER_SEC: u32 = 1;
/// Shortest interval between two log lines about one peer.
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// Most peers tracked at once: bounds the map (an entry is a few dozen bytes).
pub const MAX_PEERS: usize = 4096;

/// Which extractor refused the request (the metric's `kind` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An operator route (`crate::auth::Operator`).
    Operator,
    /// A device route (`crate::device::auth::Device`).
    Device,
}

impl Kind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Operator => "operator",
            Kind::Device => "device",
        }
    }
}

/// The throttle's settings.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Failures in a row before throttling (at least 1).
    pub burst: u32,
    /// Allowance regained per second (at least 1).
    pub refill_per_sec: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            burst: DEFAULT_BURST,
            refill_per_sec: DEFAULT_REFILL_PER_SEC,
        }
    }
}

#[derive(Debug)]
struct Peer {
    /// Failures still allowed, as of `at`.
    allowance: f64,
    at: Instant,
    /// Failures since the last log line.
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Peer {
    fn refill(&mut self, now: Instant, limits: Limits) {
        let regained = now.duration_since(self.at).as_secs_f64() * f64::from(limits.refill_per_sec);
        self.allowance = (self.allowance + regained).min(f64::from(limits.burst));
        self.at = now;
    }

    /// Whether the entry holds nothing worth keeping: a full allowance and no pending log line.
    fn idle(&self, now: Instant, limits: Limits) -> bool {
        let regained = now.duration_since(self.at).as_secs_f64() * f64::from(limits.refill_per_sec);
        self.allowance + regained >= f64::from(limits.burst)
            && self
                .logged_at
                .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
    }
}

/// The per-peer failure book.
#[derive(Debug)]
pub struct Guard {
    limits: Limits,
    metrics: Arc<Metrics>,
    peers: Mutex<HashMap<IpAddr, Peer>>,
    /// Failures of untracked (or unknown) peers since their last shared log line.
    untracked: Mutex<Peer>,
}

impl Guard {
    /// A guard with `limits`, counting into `metrics`.
    pub fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        let limits = Limits {
            burst: limits.burst.max(1),
            refill_per_sec: limits.refill_per_sec.max(1),
        };
        Self {
            limits,
            metrics,
            peers: Mutex::new(HashMap::new()),
            untracked: Mutex::new(Peer {
                allowance: 0.0,
                at: Instant::now(),
                unlogged: 0,
                logged_at: None,
            }),
        }
    }

    /// Records a failed authentication from `peer` (unknown in in-process tests) and returns the
    /// answer: 401, or 429 once the peer's allowance is spent.
    pub fn failed(&self, peer: Option<SocketAddr>, kind: Kind) -> ApiError {
        let now = Instant::now();
        let verdict = match peer {
            Some(addr) => self.charge(key(addr.ip()), now, kind, addr),
            None => None,
        };
        let answer = match verdict {
            Some(Some(retry_after_secs)) => ApiError::TooManyRequests { retry_after_secs },
            Some(None) => ApiError::Unauthorized,
            None => {
                self.log_untracked(now, kind, peer);
                ApiError::Unauthorized
            }
        };
        self.metrics.observe_auth_failure(
            kind.as_str(),
            matches!(answer, ApiError::TooManyRequests { .. }),
        );
        answer
    }

    /// Charges one failure to `ip`. `None`: not tracked; `Some(None)`: 401; `Some(Some(s))`:
    /// 429, retry after `s` seconds.
    fn charge(
        &self,
        ip: IpAddr,
        now: Instant,
        kind: Kind,
        addr: SocketAddr,
    ) -> Option<Option<u64>> {
        let limits = self.limits;
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if !peers.contains_key(&ip) && peers.len() >= MAX_PEERS {
            peers.retain(|_, p| !p.idle(now, limits));
            if peers.len() >= MAX_PEERS {
                return None;
            }
        }
        let peer = peers.entry(ip).or_insert_with(|| Peer {
            allowance: f64::from(limits.burst),
            at: now,
            unlogged: 0,
            logged_at: None,
        });
        peer.refill(now, limits);
        let throttled = if peer.allowance >= 1.0 {
            peer.allowance -= 1.0;
            None
        } else {
            let wait = (1.0 - peer.allowance) / f64::from(limits.refill_per_sec);
            Some((wait.ceil() as u64).max(1))
        };
        peer.unlogged += 1;
        if peer
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
        {
            tracing::warn!(
                peer = %addr,
                kind = kind.as_str(),
                failures = peer.unlogged,
                throttled = throttled.is_some(),
                "authentication failed (one line per peer every {}s at most)",
                LOG_EVERY.as_secs()
            );
            peer.unlogged = 0;
            peer.logged_at = Some(now);
        }
        Some(throttled)
    }

    fn log_untracked(&self, now: Instant, kind: Kind, peer: Option<SocketAddr>) {
        let mut shared = self
            .untracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shared.unlogged += 1;
        if shared
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
        {
            let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
            tracing::warn!(
                %peer,
                kind = kind.as_str(),
                failures = shared.unlogged,
                "authentication failed from untracked peers (one line every {}s at most)",
                LOG_EVERY.as_secs()
            );
            shared.unlogged = 0;
            shared.logged_at = Some(now);
        }
    }
}

/// The throttle's key for `ip`: the address itself for IPv4, its /64 for IPv6.
fn key(ip: IpAddr) -> IpAddr {
    crate::peer::key(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(burst: u32) -> Guard {
        Guard::new(
            Limits {
                burst,
                refill_per_sec: 1,
            },
            Arc::new(Metrics::default()),
        )
    }

    #[test]
    fn rejects_failures_past_the_burst_with_429_and_a_retry_after() {
        let g = guard(3);
        let peer: SocketAddr = "192.0.2.1:5000".parse().unwrap();
        for _ in 0..3 {
            assert!(matches!(
                g.failed(Some(peer), Kind::Operator),
                ApiError::Unauthorized
            ));
        }
        let ApiError::TooManyRequests { retry_after_secs } = g.failed(Some(peer), Kind::Device)
        else {
            panic!("not throttled");
        };
        assert_eq!(retry_after_secs, 1);
        // Another peer has its own allowance; the same host on another port does not.
        let other: SocketAddr = "192.0.2.2:5000".parse().unwrap();
        assert!(matches!(
            g.failed(Some(other), Kind::Operator),
            ApiError::Unauthorized
        ));
        let same: SocketAddr = "192.0.2.1:6000".parse().unwrap();
        assert!(matches!(
            g.failed(Some(same), Kind::Operator),
            ApiError::TooManyRequests { .. }
        ));
        let text = g.metrics.render();
        assert!(
            text.contains(r#"npub_auth_failures_total{kind="operator",outcome="throttled"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"npub_auth_failures_total{kind="operator",outcome="unauthorized"} 4"#),
            "{text}"
        );
    }

    #[test]
    fn survives_more_failing_peers_than_it_tracks() {
        let g = guard(1);
        for i in 0..(MAX_PEERS as u32 + 10) {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            let _ = g.failed(Some(SocketAddr::new(ip.into(), 1)), Kind::Operator);
        }
        assert!(g.peers.lock().unwrap().len() <= MAX_PEERS);
    }

    #[test]
    fn keys_ipv6_peers_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(key(a), key(b));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(key(mapped), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
