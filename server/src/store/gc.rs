//! Removing packs no version names, without a lock held across a store call.
//!
//! An upload puts its pack into the store *before* its version's row commits, outside every
//! lock, so that a store that never answers holds nothing (issue #31). A removal can then race
//! an upload of the same bytes: the upload's put finds the object present, a removal deletes it,
//! the upload's row commits naming a pack that is gone. The database orders the two instead:
//!
//! | step | removal (this module)                                   | upload (`catalog/versions.rs`)                              |
//! |------|---------------------------------------------------------|-----------------------------------------------------|
//! | 1    | write transaction: no version names the pack → insert its row in `pack_removals`; commit | put the pack (outside every lock)     |
//! | 2    | delete the object (bounded by `--store-timeout`)        | write transaction: a fresh `pack_removals` row for the pack? then roll back, wait for it to go ([`wait_until_removed`]), put again, retry |
//! | 3    | delete its `pack_removals` row; on failure leave it to expire | insert the version; commit                     |
//!
//! Write transactions are serialised (SQLite's write lock, PostgreSQL's advisory lock:
//! `db/mod.rs`), so either the removal's step 1 commits first, and the upload's step 2 sees the
//! row and puts the pack again after the removal, or the upload's row commits first, and the
//! removal's step 1 sees a version naming the pack and removes nothing. A removal whose delete
//! failed or timed out leaves its row until it expires ([`Gc::ttl`]: the delete may still land
//! late), so an upload waits for the row or its expiry rather than trust an object that may yet
//! disappear. The staged file stays until the upload commits, so it can always put again.
//!
//! Orphans (a put whose version never committed: a crash, a conflict) are swept by [`run`] in the
//! background: at start (retried with backoff while the store does not answer; the server
//! serves meanwhile) and then every [`SWEEP_INTERVAL`], removing only packs older than the
//! store's grace.
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::db::{self, Conn, Db};
use crate::time::now_ms;

use super::digest::PackDigest;
use super::pack_store::PackStore;

/// Time between background sweeps once the first has succeeded.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);
/// First wait after a failed sweep; doubled each time, up to [`SWEEP_INTERVAL`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// How often an upload looks again at a removal it waits for.
const WAIT_STEP: Duration = Duration::from_millis(100);

/// The removal protocol's timing.
#[derive(Debug, Clone, Copy)]
pub struct Gc {
    /// How long a `pack_removals` row holds: longer than any removal (a bounded delete and two
    /// short transactions) with room for clocks that disagree between replicas.
    pub ttl: Duration,
    /// How long an upload waits for a removal of its pack before it answers 503.
    pub wait: Duration,
}

impl Gc {
    /// The timing for a store whose calls are bounded by `store_timeout`.
    pub fn new(store_timeout: Duration) -> Self {
        Self {
            ttl: store_timeout.saturating_mul(4) + Duration::from_secs(60),
            wait: store_timeout.saturating_mul(2),
        }
    }
}

/// What [`remove_if_unreferenced`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// A version names the pack (or another removal of it is under way): nothing was done.
    Kept,
    /// The object was deleted (or was already gone).
    Removed,
}

/// Removes the pack `digest` if no version names it, by the protocol in the module doc.
pub async fn remove_if_unreferenced(
    db: &Db,
    store: &dyn PackStore,
    gc: Gc,
    digest: PackDigest,
) -> Result<Removal, String> {
    let sha = digest.hex();
    let started = now_ms();
    let mut tx = db::begin_write(db).await.map_err(|e| e.to_string())?;
    if named(&mut tx, &sha).await.map_err(|e| e.to_string())?
        || removal_pending(&mut tx, digest, gc)
            .await
            .map_err(|e| e.to_string())?
    {
        tx.rollback().await.map_err(|e| e.to_string())?;
        return Ok(Removal::Kept);
    }
    sqlx::query(
        "INSERT INTO pack_removals (sha256, started_at) VALUES ($1, $2) \
         ON CONFLICT (sha256) DO UPDATE SET started_at = excluded.started_at",
    )
    .bind(&sha)
    .bind(started)
    .execute(&mut *tx)
    .await
    .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;

    // No lock is held from here: the row above is what keeps an upload of these bytes off.
    if let Err(e) = store.remove(digest).await {
        // Left to expire: the delete may still land after its timeout.
        return Err(format!("removing pack {digest}: {e}"));
    }
    sqlx::query("DELETE FROM pack_removals WHERE sha256 = $1 AND started_at = $2")
        .bind(&sha)
        .bind(started)
        .execute(db)
        .await
        .map_err(|e| format!("pack {digest} removed, its removal row not: {e}"))?;
    Ok(Removal::Removed)
}

/// Whether a version names `sha`.
async fn named(conn: &mut Conn, sha: &str) -> Result<bool, sqlx::Error> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM versions WHERE sha256 = $1")
        .bind(sha)
        .fetch_one(conn)
        .await?;
    Ok(n > 0)
}

/// Whether a removal of `digest` is under way (a `pack_removals` row younger than `gc.ttl`):
/// asked inside an upload's write transaction, before its row commits.
pub async fn removal_pending(
    conn: &mut Conn,
    digest: PackDigest,
    gc: Gc,
) -> Result<bool, sqlx::Error> {
    let fresh_after = now_ms() - i64::try_from(gc.ttl.as_millis()).unwrap_or(i64::MAX);
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM pack_removals WHERE sha256 = $1 AND started_at > $2")
            .bind(digest.hex())
            .bind(fresh_after)
            .fetch_one(conn)
            .await?;
    Ok(n > 0)
}

/// Waits, up to `gc.wait`, until no removal of `digest` is under way; `false` if one still is.
pub async fn wait_until_removed(db: &Db, digest: PackDigest, gc: Gc) -> Result<bool, sqlx::Error> {
    let deadline = tokio::time::Instant::now() + gc.wait;
    loop {
        if !removal_pending(&mut *db.acquire().await?, digest, gc).await? {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Orphans removed.
    pub removed: usize,
    /// Orphans younger than the store's grace, left for a later sweep.
    pub young: usize,
    /// Versions whose pack is not in the store (logged as errors).
    pub missing: usize,
}

/// Restores "every pack has a version and every version has its pack" as far as removing goes:
/// removes packs no version names once they are older than the store's grace, and logs
/// versions whose pack is missing.
pub async fn sweep(db: &Db, store: &dyn PackStore, gc: Gc) -> Result<Swept, String> {
    let stored = store
        .list()
        .await
        .map_err(|e| format!("listing the pack store: {e}"))?;
    let referenced: HashSet<String> =
        sqlx::query_as::<_, (String,)>("SELECT DISTINCT sha256 FROM versions")
            .fetch_all(db)
            .await
            .map_err(|e| format!("reading versions: {e}"))?
            .into_iter()
            .map(|(s,)| s)
            .collect();
    let grace = store.orphan_grace();
    let now = SystemTime::now();
    let mut swept = Swept::default();
    for listed in &stored {
        let digest = listed.digest;
        if referenced.contains(&digest.hex()) {
            continue;
        }
        // Without a time the orphan counts as old (the sweep must still work); a time in the
        // future (the bucket's clock ahead of this host's) as young.
        let young = grace > Duration::ZERO
            && listed
                .modified
                .is_some_and(|m| now.duration_since(m).map_or(true, |age| age < grace));
        if young {
            tracing::info!(%digest, "a pack no version refers to is recent; left for now");
            swept.young += 1;
            continue;
        }
        if remove_if_unreferenced(db, store, gc, digest).await? == Removal::Removed {
            tracing::info!(%digest, "removed a pack no version refers to");
            swept.removed += 1;
        }
    }
    let stored: HashSet<String> = stored.iter().map(|l| l.digest.hex()).collect();
    for missing in referenced.difference(&stored) {
        tracing::error!(sha256 = %missing, "a version's pack is missing from the store");
        swept.missing += 1;
    }
    Ok(swept)
}

/// Sweeps at once, again after a failure (backing off from one second), and every
/// [`SWEEP_INTERVAL`] after a success, until `stop` resolves. The server serves meanwhile: a
/// store that cannot be reached at start delays nothing but this.
pub async fn run(
    db: Db,
    store: std::sync::Arc<dyn PackStore>,
    gc: Gc,
    metrics: std::sync::Arc<crate::ops::metrics::Metrics>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut retry = RETRY_FIRST;
    loop {
        let wait = match sweep(&db, store.as_ref(), gc).await {
            Ok(swept) => {
                tracing::debug!(?swept, "pack store swept");
                metrics.observe_store_sweep(true, swept.removed);
                retry = RETRY_FIRST;
                SWEEP_INTERVAL
            }
            Err(e) => {
                metrics.observe_store_sweep(false, 0);
                tracing::warn!(error = %e, retry_in_s = retry.as_secs(), "pack store sweep failed");
                let wait = retry;
                retry = (retry * 2).min(SWEEP_INTERVAL);
                wait
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = &mut stop => return,
        }
    }
}
