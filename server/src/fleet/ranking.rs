//! Where a deployment's ranked targets (`ranked.rs`) come from: kept, moved forward from an
//! older generation's by the devices changed since, or ranked from the rows of its scope.
//!
//! | Caller                                              | Transaction                 | Base                              | Kept                          |
//! |-----------------------------------------------------|-----------------------------|-----------------------------------|-------------------------------|
//! | a page, the list, the summary ([`ranked_at`])       | read, the generation first  | the entry of an older generation  | at the generation it read     |
//! | a write: a report's evaluation, a resume, a completion, an answer after a write ([`ranked_now`]) | a write, or none | the newest entry | no: what a write reads is not committed |
//!
//! **Moving forward.** Every write that changes what ranking reads of a device (it is
//! provisioned, renamed, moved, given another accelerator, revoked) stamps its row with
//! [`stamp!`]: the generation the change commits as (`devices.changed_generation`, index
//! `devices_by_change`, migration 0016). A ranking of generation `g` is brought to now by the
//! rows stamped above `g`, at most [`MOVED_MAX`] of them (more, as after a bulk provisioning: the
//! scope is ranked from its rows instead).
//!
//! **Why no change is missed.** Writers are serialised (this process's write lock, and on
//! PostgreSQL the advisory lock every replica's writer takes: `crate::db::begin_write`), and a
//! writer's commit bumps `fleet_generation` by one (`fleet::change`), so the value + 1 a writer
//! stamps is the generation its change commits as (or, for a change that bumps nothing, one not
//! reached yet). A ranking that did not see a change read its generation before the change
//! committed: below the stamp. Applying a row is idempotent (it places the device as the row
//! says now), so a ranking that did see a change made after its generation is moved right too.
use std::collections::HashSet;
use std::sync::Arc;

use super::ranked::{Changed, Ranked, Scope};
use super::rollout::DeviceState;
use super::target_cache::{Made, TargetCache};
use super::targeting;
use crate::db::Conn;
use crate::http::error::ApiError;

/// What a write that changes a device's ranking sets `devices.changed_generation` to: the
/// generation its change commits as (see the module's "why no change is missed"). A macro, so
/// that `concat!` can put it into a statement.
macro_rules! stamp {
    () => {
        "(SELECT value + 1 FROM fleet_generation WHERE id = 1)"
    };
}
pub(crate) use stamp;

/// Most changed rows a ranking is moved forward by; past it the scope is ranked from its rows.
/// Measured (docs/performance.md, issue 36): a page after a one-device change at 100,000 targets
/// 18–24 ms end to end, the same page ranking the group from its rows 297–404 ms. 10,000 rows
/// read and placed is not measured; it reads a tenth of what a ranking from the rows reads.
pub const MOVED_MAX: usize = 10_000;

/// The devices stamped above generation `$1`, at most `$2` (through `devices_by_change`).
pub const CHANGED_SQL: &str = "SELECT id, name, grp, accel, revoked_at FROM devices \
     WHERE changed_generation > $1 LIMIT $2";

/// Which deployment, reaching whom.
#[derive(Debug, Clone, Copy)]
pub struct Of<'a> {
    /// `deployments.id`.
    pub id: i64,
    /// Its target group.
    pub group: Option<&'a str>,
    /// Its target device.
    pub device: Option<&'a str>,
    /// Its pack's accel word.
    pub accel: i64,
}

/// The devices a retry deployment targets (`None`: not a retry, its whole group or device).
pub async fn members(conn: &mut Conn, id: i64) -> Result<Option<HashSet<String>>, ApiError> {
    let rows: Vec<(Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT d.retry_of, m.device_id FROM deployments d \
         LEFT JOIN deployment_members m ON m.deployment_id = d.id WHERE d.id = $1",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    if rows.first().is_none_or(|(retry_of, _)| retry_of.is_none()) {
        return Ok(None);
    }
    Ok(Some(rows.into_iter().filter_map(|(_, d)| d).collect()))
}

/// `of`'s ranking from the rows of its scope.
async fn rank(conn: &mut Conn, of: Of<'_>) -> Result<Ranked, ApiError> {
    let candidates = targeting::candidates(conn, of.group, of.device).await?;
    let scope = Scope::new(of.group, of.device, of.accel, members(conn, of.id).await?);
    Ok(Ranked::rank(Arc::new(scope), candidates))
}

/// The devices stamped above `generation`, or `None` when more than [`MOVED_MAX`] are.
async fn changed_since(conn: &mut Conn, generation: i64) -> Result<Option<Vec<Changed>>, ApiError> {
    let rows: Vec<Changed> = sqlx::query_as(CHANGED_SQL)
        .bind(generation)
        .bind(MOVED_MAX as i64 + 1)
        .fetch_all(&mut *conn)
        .await?;
    Ok((rows.len() <= MOVED_MAX).then_some(rows))
}

/// `of`'s ranking now: `base` moved forward when given and not too far behind, else ranked.
async fn forward(
    conn: &mut Conn,
    of: Of<'_>,
    base: Option<(i64, Arc<Ranked>)>,
    cache: &TargetCache,
) -> Result<Arc<Ranked>, ApiError> {
    if let Some((generation, base)) = base
        && let Some(changed) = changed_since(conn, generation).await?
    {
        cache.note(Made::Moved);
        return Ok(if changed.is_empty() {
            base
        } else {
            Arc::new(base.apply(&changed))
        });
    }
    cache.note(Made::Ranked);
    Ok(Arc::new(rank(conn, of).await?))
}

/// `of`'s ranked targets at `generation` (the fleet generation read first in this read
/// transaction): kept in `cache`, or made now and kept there.
pub async fn ranked_at(
    conn: &mut Conn,
    of: Of<'_>,
    cache: &TargetCache,
    generation: i64,
) -> Result<Arc<Ranked>, ApiError> {
    cache
        .get_or_rank(
            of.id,
            generation,
            |base| forward(conn, of, base, cache),
            || ApiError::Unavailable,
        )
        .await
}

/// `of`'s ranked targets as `conn` sees them now (in a write transaction: with its own
/// changes), moved forward from the newest entry kept; not kept.
pub async fn ranked_now(
    conn: &mut Conn,
    of: Of<'_>,
    cache: &TargetCache,
) -> Result<Arc<Ranked>, ApiError> {
    forward(conn, of, cache.latest(of.id), cache).await
}

/// Each of `ranked`'s targets' state on deployment `id`: what it reported, else pending.
pub async fn states(
    conn: &mut Conn,
    id: i64,
    ranked: &Ranked,
) -> Result<Vec<DeviceState>, ApiError> {
    let reports: Vec<(String, String)> =
        sqlx::query_as("SELECT device_id, state FROM device_deployments WHERE deployment_id = $1")
            .bind(id)
            .fetch_all(&mut *conn)
            .await?;
    let mut states = vec![DeviceState::Pending; ranked.len()];
    for (device, state) in reports {
        if let Some(i) = ranked.position(&device) {
            states[i] = DeviceState::from_db(&state);
        }
    }
    Ok(states)
}
