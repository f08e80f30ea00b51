//! What every handler can reach.
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::auth::guard::Guard;
use crate::body_rate::MinRateRule;
use crate::db::Db;
use crate::fleet::Fleet;
use crate::keys::Keys;
use crate::metrics::Metrics;
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
    pub fleet: Arc<Fleet>,
    /// Failed authentications: counted, logged and throttled per peer.
    pub auth_guard: Arc<Guard>,
    /// Uploads in flight (receiving, validating, storing), at most `--max-uploads`: one more is
    /// answered 503 before its body is read.
    pub uploads: Arc<Semaphore>,
    /// Uploads being validated, at most one per CPU. Validation reads the staged file (and a
    /// Vela import builds the pack) in memory, so this, not the number of uploads in flight,
    /// bounds what uploads cost in memory; a body waits for a permit on disk.
    pub validations: Arc<Semaphore>,
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
}
