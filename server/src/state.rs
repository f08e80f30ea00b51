//! What every handler can reach.
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::auth::guard::Guard;
use crate::db::Db;
use crate::device::polling::Polling;
use crate::http::body_rate::MinRateRule;
use crate::keys::signing::Keys;
use crate::ops::cpu::CpuPool;
use crate::ops::disk::DataDisk;
use crate::ops::metrics::Metrics;
use crate::store::{PackStore, Staging};

/// Shared state: cheap to clone (pointers only).
#[derive(Clone, Debug)]
pub struct AppState {
    /// The database pool.
    pub db: Db,
    /// Where packs live.
    pub store: Arc<dyn PackStore>,
    /// Where uploads are received before validation.
    pub staging: Staging,
    /// The pack store's latest background probe (`ops/probe.rs`).
    pub store_probe: Arc<crate::ops::probe::StoreProbe>,
    /// The data directory's disk: its free space and the reserve uploads leave.
    pub disk: Arc<DataDisk>,
    /// Request, upload and download counters.
    pub metrics: Arc<Metrics>,
    /// The manifest signing key.
    pub keys: Arc<Keys>,
    /// Limits from the configuration.
    pub limits: Limits,
    /// Serialises "change the pack store + commit the row" sections (an upload's insert + put,
    /// a delete's row removal + file removal), so that one request can never remove a pack file
    /// that another has just decided to share. Held only around the commit, never while a body
    /// is received or validated.
    pub write_lock: Arc<tokio::sync::Mutex<()>>,
    /// The fleet's in-memory side: the poll cache and batched last-seen times.
    pub polling: Arc<Polling>,
    /// Failed authentications: counted, logged and throttled per peer.
    pub auth_guard: Arc<Guard>,
    /// Uploads in flight (receiving, validating, storing), at most `--max-uploads`: one more is
    /// answered 503 before its body is read.
    pub uploads: Arc<Semaphore>,
    /// The threads that validate uploads and import Vela models, one per CPU (`ops/cpu.rs`): how
    /// many uploads are held in memory at once.
    pub cpu: Arc<CpuPool>,
    /// How the listeners carry traffic (TLS or plain, and where plain is exposed).
    pub exposure: Arc<crate::tls::Exposure>,
    /// How uploads are proven against their source model (`catalog/proof.rs`).
    pub proof: Arc<crate::catalog::proof::Settings>,
    /// The webhook sender: its settings and HTTP client (`ops/webhooks/sender.rs`).
    pub webhooks: Arc<crate::ops::webhooks::sender::Sender>,
    /// The ranked targets of the rollouts the dashboard lists, per fleet generation
    /// (`fleet/target_cache.rs`).
    pub rollout_targets: Arc<crate::fleet::target_cache::TargetCache>,
}

impl AppState {
    /// This process's turn to write ([`AppState::write_lock`]), waited for at most
    /// [`Limits::write_wait`]: past it, 503 (the database holds a writer ahead).
    pub async fn write_turn(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, crate::http::error::ApiError> {
        tokio::time::timeout(self.limits.write_wait, self.write_lock.lock())
            .await
            .map_err(|_| {
                tracing::warn!(
                    waited_ms = self.limits.write_wait.as_millis() as u64,
                    "no turn to write: the writer ahead is held by the database"
                );
                crate::http::error::ApiError::DatabaseTimedOut
            })
    }
}

/// Request limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest upload body, in bytes.
    pub max_upload_bytes: u64,
    /// Slowest accepted request body (`body_rate.rs`).
    pub body_rate: MinRateRule,
    /// Uploads in flight at once (`--max-uploads`).
    pub max_uploads: usize,
    /// How pack removals and uploads of the same pack keep out of each other's way.
    pub gc: crate::store::gc::Gc,
    /// How long a writer waits for its turn at [`AppState::write_lock`] (`--database-lock-timeout`,
    /// on both backends): the writers ahead of it each hold it for milliseconds, unless the
    /// database holds one of them; then each waiter answers 503 after this, not after every
    /// writer ahead of it has waited out its own lock timeout in turn.
    pub write_wait: std::time::Duration,
}
