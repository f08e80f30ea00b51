//! The device side's in-memory state: the poll snapshot ([`PollCache`]), the pending
//! last-seen times, and the timers of the work that keeps them current.
use std::sync::Arc;
use std::time::Duration;

use crate::db::Db;
use crate::device::last_seen;
use crate::device::notify;
use crate::device::poll_cache::PollCache;
use crate::store::PackStore;

/// Default suggested interval between two manifest polls (`Npub-Poll-Interval`), in seconds.
pub const DEFAULT_POLL_INTERVAL_SECS: u32 = 60;
/// Default interval between two flushes of batched last-seen times, in seconds.
pub const DEFAULT_LAST_SEEN_FLUSH_SECS: u64 = 10;
/// Default interval between two checks of `fleet_generation` (another replica's change), in
/// seconds.
pub const DEFAULT_CACHE_CHECK_SECS: u64 = 1;

/// Timers of the fleet. Tests set them and drive the work explicitly ([`Fleet::flush_last_seen`],
/// [`Fleet::refresh_if_stale`]) instead of waiting.
#[derive(Debug, Clone, Copy)]
pub struct FleetTimers {
    /// What `Npub-Poll-Interval` tells devices, in seconds.
    pub poll_interval_secs: u32,
    /// How often last-seen times are written to the database.
    pub last_seen_flush: Duration,
    /// How often the generation row is compared with the cache's.
    pub cache_check: Duration,
}

impl Default for FleetTimers {
    fn default() -> Self {
        Self {
            poll_interval_secs: DEFAULT_POLL_INTERVAL_SECS,
            last_seen_flush: Duration::from_secs(DEFAULT_LAST_SEEN_FLUSH_SECS),
            cache_check: Duration::from_secs(DEFAULT_CACHE_CHECK_SECS),
        }
    }
}

/// The fleet's in-memory side: the poll cache and the pending last-seen times.
#[derive(Debug)]
pub struct Polling {
    /// What devices are offered, answered from memory.
    pub cache: PollCache,
    /// Last-seen times not yet written.
    pub last_seen: last_seen::LastSeen,
    /// Timers.
    pub timers: FleetTimers,
    /// `Npub-Poll-Interval`'s value, built once (a poll clones it without allocating).
    pub poll_interval: axum::http::HeaderValue,
    /// When the snapshot was last confirmed current against the database (loaded, or a
    /// generation check that succeeded): milliseconds since `born`.
    confirmed_ms: std::sync::atomic::AtomicU64,
    born: std::time::Instant,
}

impl Polling {
    /// Builds the first snapshot from the database; `by_certificate`: the server takes client
    /// certificates, which find a device by its id.
    pub async fn load(
        db: &Db,
        store: &Arc<dyn PackStore>,
        timers: FleetTimers,
        by_certificate: bool,
    ) -> Result<Self, String> {
        let cache = PollCache::load(db, store, by_certificate)
            .await
            .map_err(|e| format!("loading the fleet: {e}"))?;
        Ok(Self {
            cache,
            last_seen: last_seen::LastSeen::default(),
            timers,
            poll_interval: axum::http::HeaderValue::from(timers.poll_interval_secs),
            confirmed_ms: std::sync::atomic::AtomicU64::new(0),
            born: std::time::Instant::now(),
        })
    }

    /// How long ago the snapshot was last confirmed current against the database.
    pub fn confirmed_ago(&self) -> Duration {
        let at = self.confirmed_ms.load(std::sync::atomic::Ordering::Relaxed);
        self.born
            .elapsed()
            .saturating_sub(Duration::from_millis(at))
    }

    fn confirm_current(&self) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.confirmed_ms
            .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// Writes the pending last-seen times (called by the background task, at shutdown, and by
    /// tests).
    pub async fn flush_last_seen(&self, db: &Db) -> Result<usize, sqlx::Error> {
        self.last_seen.flush(db).await
    }

    /// Rebuilds the snapshot if the database's generation moved (another replica's change, or
    /// a restore from an older backup).
    pub async fn refresh_if_stale(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
    ) -> Result<bool, crate::device::snapshot::LoadError> {
        let refreshed = self.cache.refresh_if_stale(db, store).await?;
        self.confirm_current();
        Ok(refreshed)
    }

    /// Runs the periodic work until `stop` resolves: last-seen flushes, generation checks, and
    /// on PostgreSQL the listener for other replicas' changes ([`notify`]).
    pub async fn run_background(
        self: Arc<Self>,
        db: Db,
        store: Arc<dyn PackStore>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let mut flush = tokio::time::interval(self.timers.last_seen_flush);
        let mut check = tokio::time::interval(self.timers.cache_check);
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A task of its own, not a branch of the `select!` below: while a branch's body runs,
        // the other branches are not polled, and a listener suspended mid-rebuild (holding the
        // cache's rebuild lock and a read transaction) would then deadlock the generation
        // check's rebuild, and with it every request that changes the fleet.
        let listener = {
            let (fleet, db, store) = (Arc::clone(&self), db.clone(), Arc::clone(&store));
            tokio::spawn(notify::listen(db.clone(), move || {
                let (fleet, db, store) = (Arc::clone(&fleet), db.clone(), Arc::clone(&store));
                async move {
                    if let Err(e) = fleet.refresh_if_stale(&db, &store).await {
                        // The periodic check retries.
                        tracing::warn!(error = %e, "refreshing the fleet cache after a notification");
                    }
                }
            }))
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                _ = flush.tick() => {
                    if let Err(e) = self.flush_last_seen(&db).await {
                        tracing::warn!(error = %e, "flushing last-seen times");
                    }
                }
                _ = check.tick() => {
                    if let Err(e) = self.refresh_if_stale(&db, &store).await {
                        tracing::warn!(error = %e, "refreshing the fleet cache");
                    }
                }
            }
        }
        // Awaited, so that a rebuild it was in the middle of has given its connection back
        // before the caller closes the pool.
        listener.abort();
        let _ = listener.await;
    }
}
