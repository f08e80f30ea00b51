//! The fleet: devices, deployments with staged rollouts, rollback by version, and the device API.
//!
//! | Module          | Routes / role                                                              |
//! |-----------------|----------------------------------------------------------------------------|
//! | [`devices`]     | `POST/GET /api/v1/devices`, `GET/DELETE /api/v1/devices/{id}`, `…/revoke`   |
//! | [`device_edit`] | `PATCH /api/v1/devices/{id}`, `POST /api/v1/devices/{id}/token`             |
//! | [`deployments`] | `POST/GET /api/v1/deployments`, `GET …/{id}`, `POST …/{id}/pause|resume|abort` |
//! | [`groups`]      | `GET /api/v1/groups`, `POST /api/v1/groups/{group}/rollback`               |
//! | [`device_api`]  | `GET /api/v1/device/manifest`, `GET /api/v1/device/packs/{sha256}[/io]`, `POST /api/v1/device/status` |
//! | [`targeting`]   | who a deployment reaches, device by device (previews, per-device lists)    |
//! | [`rollout`]     | batch membership, progress counts, batch opening and auto-abort             |
//! | [`poll_cache`]  | the in-memory snapshot the device API answers from                          |
//! | [`last_seen`]   | batched `devices.last_seen` updates (and first offers)                      |
//! | [`notify`]      | PostgreSQL `LISTEN/NOTIFY`: other replicas' changes, at once               |
//! | [`history`]     | each device's timeline: offers and reports                                  |
//!
//! Operator routes take the operator extractor ([`crate::auth::Operator`]); device routes take
//! [`device_auth::Device`], which only knows device tokens: neither kind of token opens the
//! other's routes.
use std::sync::Arc;
use std::time::Duration;

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::db::{Conn, Db};
use crate::state::AppState;
use crate::store::PackStore;

pub mod deployments;
pub mod device_api;
pub mod device_auth;
pub mod device_edit;
pub mod devices;
pub mod groups;
pub mod history;
pub mod last_seen;
pub mod notify;
pub mod poll_cache;
pub mod rollout;
pub mod targeting;
pub mod token_index;

pub use poll_cache::{Added, Generation, PollCache, Snapshot};

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
pub struct Fleet {
    /// What devices are offered, answered from memory.
    pub cache: PollCache,
    /// Last-seen times not yet written.
    pub last_seen: last_seen::LastSeen,
    /// Timers.
    pub timers: FleetTimers,
    /// `Npub-Poll-Interval`'s value, built once (a poll clones it without allocating).
    pub poll_interval: axum::http::HeaderValue,
}

impl Fleet {
    /// Builds the first snapshot from the database.
    pub async fn load(
        db: &Db,
        store: &Arc<dyn PackStore>,
        timers: FleetTimers,
    ) -> Result<Self, String> {
        let cache = PollCache::load(db, store)
            .await
            .map_err(|e| format!("loading the fleet: {e}"))?;
        Ok(Self {
            cache,
            last_seen: last_seen::LastSeen::default(),
            timers,
            poll_interval: axum::http::HeaderValue::from(timers.poll_interval_secs),
        })
    }

    /// Writes the pending last-seen times (called by the background task, at shutdown, and by
    /// tests).
    pub async fn flush_last_seen(&self, db: &Db) -> Result<usize, sqlx::Error> {
        self.last_seen.flush(db).await
    }

    /// Rebuilds the snapshot if the database's generation moved (another replica's change).
    pub async fn refresh_if_stale(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
    ) -> Result<bool, poll_cache::LoadError> {
        self.cache.refresh_if_stale(db, store).await
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
        let listener = tokio::spawn(notify::listen(
            Arc::clone(&self),
            db.clone(),
            Arc::clone(&store),
        ));
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

/// Marks a change to what devices are offered, in the caller's transaction; after the commit,
/// the caller rebuilds its own cache ([`PollCache::rebuild`]) and other replicas notice the new
/// generation at once on PostgreSQL (the commit delivers [`notify::notify_in`]'s notification),
/// or within [`FleetTimers::cache_check`] when a notification was missed.
pub async fn bump_generation(conn: &mut Conn) -> Result<Generation, sqlx::Error> {
    let (value,): (i64,) = sqlx::query_as(
        "UPDATE fleet_generation SET value = value + 1 WHERE id = 1 RETURNING value",
    )
    .fetch_one(&mut *conn)
    .await?;
    notify::notify_in(conn).await?;
    Ok(Generation(value))
}

/// Brings this replica's cache up to a committed change ([`PollCache::catch_up`]); a failure is
/// logged (the periodic generation check retries) rather than failing a request whose change is
/// already committed.
pub async fn refresh(state: &AppState, committed: Generation) {
    if let Err(e) = state
        .fleet
        .cache
        .catch_up(&state.db, &state.store, committed)
        .await
    {
        tracing::error!(error = %e, "rebuilding the fleet cache");
    }
}

/// [`refresh`] after a change that only provisioned `added` ([`PollCache::add_devices`]).
pub async fn refresh_provisioned(state: &AppState, committed: Generation, added: Vec<Added>) {
    if let Err(e) = state
        .fleet
        .cache
        .add_devices(&state.db, &state.store, committed, added)
        .await
    {
        tracing::error!(error = %e, "rebuilding the fleet cache");
    }
}

/// Adds the device-token security scheme and the fleet's tags to the OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    modifiers(&DeviceToken),
    tags(
        (name = "devices", description = "Provisioned devices and their tokens"),
        (name = "deployments", description = "Deployments, staged rollouts, rollback by version"),
        (name = "device", description = "The API devices call, with a device token"),
    )
)]
struct FleetDoc;

struct DeviceToken;

impl Modify for DeviceToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "device_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A device token (`npub_dev_…`), from POST /api/v1/devices",
                    ))
                    .build(),
            ),
        );
    }
}

/// Every fleet route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(FleetDoc::openapi())
        .merge(devices::router())
        .merge(deployments::router())
        .merge(groups::router())
        .merge(device_api::router())
}
