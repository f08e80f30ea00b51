//! A device's history: every deployment it was offered and every report it sent, newest first.
//!
//! | Event     | Written by                                   | When                                     |
//! |-----------|----------------------------------------------|------------------------------------------|
//! | `offered` | the batched last-seen flush (`last_seen.rs`) | first manifest 200 of a deployment for it |
//! | `report`  | `POST /api/v1/device/status`                 | every report; consecutive `downloading` reports of one deployment update one row |
//!
//! Rows live in `device_events` (migration 0003); the oldest are pruned beyond
//! [`MAX_EVENTS_PER_DEVICE`] per device, in the transaction that adds one, so a device that
//! reports in a loop cannot grow the database without bound. Pages are cut by event id
//! (`before`), which is unique and only grows: no event is skipped or repeated between pages.
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::db::Conn;
use crate::http::error::ApiError;
use crate::time::rfc3339;

/// Events kept per device; older ones are dropped.
pub const MAX_EVENTS_PER_DEVICE: i64 = 1000;
/// Events per page when `limit` is absent.
pub const DEFAULT_PAGE: u32 = 50;
/// Most events per page.
pub const MAX_PAGE: u32 = 500;

/// `GET /api/v1/devices/{id}` query: a page of the history.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Events per page, 1..=500; default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// Only events older than this one (the previous page's `next_before`).
    #[param(minimum = 1)]
    pub before: Option<i64>,
}

/// One event of a device's history.
#[derive(Debug, Serialize, ToSchema, sqlx::FromRow)]
pub struct HistoryEvent {
    /// Its id (the paging cursor).
    pub id: i64,
    /// `offered` (the device was handed the deployment's manifest) or `report`.
    pub kind: String,
    /// The deployment.
    pub deployment_id: i64,
    /// The deployment's sequence.
    pub sequence: i64,
    /// `deploy` or `rollback`.
    pub deployment_kind: String,
    /// Model of the deployed pack.
    pub model: String,
    /// Version of the deployed pack.
    pub version: String,
    /// The reported state (reports only).
    pub state: Option<String>,
    /// The reported progress, 0..=1 (`downloading` reports).
    pub progress: Option<f64>,
    /// The reported reason (`failed`, `rolled_back`).
    pub reason: Option<String>,
    /// The device's own last events, sent with the report (oldest first).
    #[sqlx(skip)]
    pub events: Option<Vec<String>>,
    #[serde(skip)]
    agent_log: Option<String>,
    /// RFC 3339.
    #[sqlx(skip)]
    pub at: String,
    #[serde(skip)]
    at_ms: i64,
}

/// A page of a device's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct History {
    /// Newest first.
    pub events: Vec<HistoryEvent>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_before: Option<i64>,
}

/// Records that `device` was first offered `deployment` at `at` (no-op when it was before).
pub(crate) async fn record_offer(
    conn: &mut Conn,
    device: &str,
    deployment: i64,
    at: i64,
) -> Result<(), sqlx::Error> {
    let new = sqlx::query(
        "INSERT INTO device_offers (device_id, deployment_id, first_at) VALUES ($1, $2, $3) \
         ON CONFLICT (device_id, deployment_id) DO NOTHING",
    )
    .bind(device)
    .bind(deployment)
    .bind(at)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if new == 1 {
        insert(conn, device, deployment, "offered", None, None, None, at).await?;
    }
    Ok(())
}

/// Records a status report in the device's history.
pub(crate) async fn record_report(
    conn: &mut Conn,
    device: &str,
    deployment: i64,
    state: &str,
    progress: Option<f64>,
    reason: Option<&str>,
    at: i64,
) -> Result<(), sqlx::Error> {
    if state == "downloading" {
        let last: Option<(i64, i64, String, Option<String>)> = sqlx::query_as(
            "SELECT id, deployment_id, kind, state FROM device_events WHERE device_id = $1 \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(device)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((id, d, kind, Some(s))) = last
            && d == deployment
            && kind == "report"
            && s == "downloading"
        {
            sqlx::query("UPDATE device_events SET progress = $1, at = $2 WHERE id = $3")
                .bind(progress)
                .bind(at)
                .bind(id)
                .persistent(false) // an optional float (db.rs, "Where the SQL differs")
                .execute(&mut *conn)
                .await?;
            return Ok(());
        }
    }
    insert(
        conn,
        device,
        deployment,
        "report",
        Some(state),
        progress,
        reason,
        at,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn insert(
    conn: &mut Conn,
    device: &str,
    deployment: i64,
    kind: &str,
    state: Option<&str>,
    progress: Option<f64>,
    reason: Option<&str>,
    at: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO device_events (device_id, deployment_id, kind, state, progress, reason, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(device)
    .bind(deployment)
    .bind(kind)
    .bind(state)
    .bind(progress)
    .bind(reason)
    .bind(at)
    .persistent(false) // an optional float (db.rs, "Where the SQL differs")
    .execute(&mut *conn)
    .await?;
    // Keep the newest MAX_EVENTS_PER_DEVICE: everything at or below the id just past them goes.
    sqlx::query(
        "DELETE FROM device_events WHERE device_id = $1 AND id <= (SELECT id FROM device_events \
         WHERE device_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
    )
    .bind(device)
    .bind(MAX_EVENTS_PER_DEVICE)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A page of `device`'s history.
pub(crate) async fn page(
    conn: &mut Conn,
    device: &str,
    q: &HistoryQuery,
) -> Result<History, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit: must be from 1 to {MAX_PAGE}, got {limit}"
        )));
    }
    if let Some(before) = q.before.filter(|&b| b < 1) {
        return Err(ApiError::invalid(format!(
            "before: an event id (1 or more, a page's next_before), got {before}"
        )));
    }
    let mut events: Vec<HistoryEvent> = sqlx::query_as(
        "SELECT e.id, e.kind, e.deployment_id, d.sequence, d.kind AS deployment_kind, \
         m.name AS model, v.version, e.state, e.progress, e.reason, e.agent_log, e.at AS at_ms \
         FROM device_events e JOIN deployments d ON d.id = e.deployment_id \
         JOIN versions v ON v.id = d.version_id JOIN models m ON m.id = v.model_id \
         WHERE e.device_id = $1 AND ($2 IS NULL OR e.id < $2) ORDER BY e.id DESC LIMIT $3",
    )
    .bind(device)
    .bind(q.before)
    .bind(i64::from(limit) + 1)
    .fetch_all(&mut *conn)
    .await?;
    let more = events.len() > limit as usize;
    events.truncate(limit as usize);
    for e in &mut events {
        e.at = rfc3339(e.at_ms);
        e.events = e
            .agent_log
            .take()
            .and_then(|l| serde_json::from_str(&l).ok());
    }
    Ok(History {
        next_before: if more {
            events.last().map(|e| e.id)
        } else {
            None
        },
        events,
    })
}
