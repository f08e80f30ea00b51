//! Events into the delivery queue: one `webhook_deliveries` row per webhook that wants the event,
//! written in the caller's transaction (an outbox), so a delivery exists exactly when the change
//! that caused it commits, and nothing is sent from the request: the sender
//! (`sender.rs`) picks the rows up after the commit. The request pays for a few small inserts,
//! never for a receiver.
//!
//! Every payload is `{"type": kind, "timestamp": RFC 3339, "data": {...}}` (the Standard
//! Webhooks shape); `docs/webhooks.md` lists each kind's `data`.
//!
//! | Bound                 | Value              | When reached                                     |
//! |-----------------------|--------------------|--------------------------------------------------|
//! | pending per webhook   | [`MAX_PENDING`]    | the event is logged as `dropped` for that webhook |
//! | finished per webhook  | [`KEEP_FINISHED`]  | the oldest finished rows are removed             |
//! | disabled webhook      | —                  | gets no new deliveries until enabled again       |
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::kinds::{EventKind, KEEP_FINISHED, MAX_PENDING};
use super::sign::message_id;
use crate::db::Conn;
use crate::http::error::ApiError;
use crate::time::{now_ms, rfc3339};

/// Wakes the sender of every server in this process: called after a commit that may have
/// queued deliveries, so they go out at once instead of at the sender's next tick.
static WAKE: Notify = Notify::const_new();

/// Wakes the sender (cheap; a commit calls it whether it queued anything or not).
pub fn wake() {
    WAKE.notify_waiters();
}

/// What the sender waits on.
pub(super) fn woken() -> tokio::sync::futures::Notified<'static> {
    WAKE.notified()
}

/// Queues `kind` with `data` for every enabled webhook subscribed to it.
pub async fn emit(conn: &mut Conn, kind: EventKind, data: Value) -> Result<(), ApiError> {
    let hooks: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, events FROM webhooks WHERE disabled_at IS NULL ORDER BY id")
            .fetch_all(&mut *conn)
            .await?;
    let wanted: Vec<i64> = hooks
        .into_iter()
        .filter(|(_, events)| events.split(',').any(|e| e == kind.as_str()))
        .map(|(id, _)| id)
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let (id, body) = message(kind, data)?;
    for webhook in wanted {
        queue(conn, webhook, &id, kind, &body).await?;
    }
    Ok(())
}

/// Queues a `webhook.test` event for `webhook` alone.
pub async fn test(conn: &mut Conn, webhook: i64, actor: &str) -> Result<String, ApiError> {
    let (id, body) = message(
        EventKind::Test,
        json!({"webhook_id": webhook, "requested_by": actor}),
    )?;
    queue(conn, webhook, &id, EventKind::Test, &body).await?;
    Ok(id)
}

/// A new message id and the body every receiver of it is sent.
fn message(kind: EventKind, data: Value) -> Result<(String, String), ApiError> {
    let id = message_id().map_err(ApiError::internal)?;
    let body = json!({"type": kind.as_str(), "timestamp": rfc3339(now_ms()), "data": data});
    Ok((id, body.to_string()))
}

async fn queue(
    conn: &mut Conn,
    webhook: i64,
    id: &str,
    kind: EventKind,
    body: &str,
) -> Result<(), ApiError> {
    let (pending,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = $1 AND state = 'pending'",
    )
    .bind(webhook)
    .fetch_one(&mut *conn)
    .await?;
    let full = pending >= MAX_PENDING;
    let now = now_ms();
    sqlx::query(
        "INSERT INTO webhook_deliveries (webhook_id, message_id, event, payload, created_at, \
         state, next_attempt_at, last_error) VALUES ($1, $2, $3, $4, $5, $6, $5, $7)",
    )
    .bind(webhook)
    .bind(id)
    .bind(kind.as_str())
    .bind(body)
    .bind(now)
    .bind(if full { "dropped" } else { "pending" })
    .bind(full.then(|| format!("{MAX_PENDING} deliveries already pending")))
    .execute(&mut *conn)
    .await?;
    if full {
        prune(conn, webhook).await?;
    }
    Ok(())
}

/// Removes `webhook`'s finished deliveries beyond the newest [`KEEP_FINISHED`].
pub(super) async fn prune(conn: &mut Conn, webhook: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND state <> 'pending' AND id <= \
         (SELECT id FROM webhook_deliveries WHERE webhook_id = $1 AND state <> 'pending' \
          ORDER BY id DESC LIMIT 1 OFFSET $2)",
    )
    .bind(webhook)
    .bind(KEEP_FINISHED)
    .execute(conn)
    .await?;
    Ok(())
}

/// A deployment went to `state` (`paused`, `active` on a resume, `aborted`): by `actor`, or
/// by itself when `actor` is `None` (`reason` says why).
pub async fn deployment_state(
    conn: &mut Conn,
    deployment: i64,
    sequence: i64,
    state: &str,
    actor: Option<&str>,
    reason: Option<&str>,
) -> Result<(), ApiError> {
    let data = json!({"deployment_id": deployment, "sequence": sequence, "state": state,
        "actor": actor, "reason": reason});
    emit(conn, EventKind::DeploymentStateChanged, data).await
}

/// A deployment completed: every one of its `targets` reported `installed` or `bound`
/// (`[installed, bound]`) with every batch open. `state` is `active`, or `paused` when the last
/// devices finished after a pause. Sent once per deployment.
pub async fn deployment_completed(
    conn: &mut Conn,
    deployment: i64,
    sequence: i64,
    state: &str,
    targets: u64,
    [installed, bound]: [u64; 2],
) -> Result<(), ApiError> {
    let data = json!({"deployment_id": deployment, "sequence": sequence, "state": state,
        "targets": targets, "installed": installed, "bound": bound});
    emit(conn, EventKind::DeploymentCompleted, data).await
}

/// A rollout opened batches: `open_batches` of them are open now, `from` were before.
pub async fn batch_opened(
    conn: &mut Conn,
    deployment: i64,
    sequence: i64,
    from: usize,
    open_batches: usize,
) -> Result<(), ApiError> {
    let data = json!({"deployment_id": deployment, "sequence": sequence, "from": from,
        "open_batches": open_batches});
    emit(conn, EventKind::BatchOpened, data).await
}

/// A rollout's failures exceeded its threshold and it stopped (`then`: `aborted`, or
/// `paused`): the threshold event, and the state change it made.
pub async fn threshold_hit(
    conn: &mut Conn,
    deployment: i64,
    sequence: i64,
    then: &str,
    reason: &str,
) -> Result<(), ApiError> {
    let data = json!({"deployment_id": deployment, "sequence": sequence, "state": then,
        "reason": reason});
    emit(conn, EventKind::ThresholdHit, data).await?;
    deployment_state(conn, deployment, sequence, then, None, Some(reason)).await
}

/// Device `device` reported `state` (`failed` or `rolled_back`) for deployment `deployment`,
/// with its own last `events`; any other state sends nothing.
pub async fn device_report(
    conn: &mut Conn,
    device: &str,
    deployment: i64,
    sequence: i64,
    state: &str,
    reason: Option<&str>,
    events: &[String],
) -> Result<(), ApiError> {
    if !matches!(state, "failed" | "rolled_back") {
        return Ok(());
    }
    let data = json!({"device_id": device, "deployment_id": deployment, "sequence": sequence,
        "state": state, "reason": reason, "events": events});
    emit(conn, EventKind::DeviceFailed, data).await
}

/// The signing key was rotated from `previous` to `key_id`.
pub async fn key_rotated(
    conn: &mut Conn,
    key_id: &str,
    previous: &str,
    revoke_previous: bool,
    keyring_update_sequence: i64,
) -> Result<(), ApiError> {
    let data = json!({"key_id": key_id, "previous": previous,
        "revoke_previous": revoke_previous, "keyring_update_sequence": keyring_update_sequence});
    emit(conn, EventKind::KeyRotated, data).await
}
