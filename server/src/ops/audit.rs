//! The audit log: who (token id and name) did what (an action) to which object, and when.
//!
//! Entries are written through the caller's transaction, so a change and its audit entry commit
//! together or not at all. Audited actions: `token.create`, `token.revoke`, `model.create`,
//! `version.upload`, `version.delete`, `key.generate`, `key.import` (and, from the fleet API,
//! deployments and rollbacks). The log is append-only: no route changes or deletes entries.

use crate::auth::Operator;
use crate::db::Conn;
use crate::time::now_ms;

/// Name the log gives the server itself (first-start actions).
const SYSTEM_ACTOR: &str = "npub-server";

/// Appends an entry for an operator's action.
pub async fn record(
    conn: &mut Conn,
    op: &Operator,
    action: &str,
    object: &str,
    detail: serde_json::Value,
) -> Result<(), sqlx::Error> {
    insert(conn, Some(op.token_id), &op.name, action, object, detail).await
}

/// Appends an entry for something the server did on its own (first start).
pub async fn record_system(
    conn: &mut Conn,
    action: &str,
    object: &str,
    detail: serde_json::Value,
) -> Result<(), sqlx::Error> {
    insert(conn, None, SYSTEM_ACTOR, action, object, detail).await
}

async fn insert(
    conn: &mut Conn,
    token_id: Option<i64>,
    actor: &str,
    action: &str,
    object: &str,
    detail: serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO audit (at, token_id, actor, action, object, detail) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(now_ms())
    .bind(token_id)
    .bind(actor)
    .bind(action)
    .bind(object)
    .bind(detail.to_string())
    .execute(conn)
    .await?;
    Ok(())
}
