//! `GET /api/v1/audit`: the audit log, newest first (what [`super::audit`] records).
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Operator;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::Query;
use crate::state::AppState;
use crate::time::rfc3339;

/// Entries per page unless `limit` says otherwise.
const DEFAULT_PAGE: i64 = 100;
/// Most entries per page: bounds the response whatever the query.
const MAX_PAGE: i64 = 1000;

/// One audit entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    /// Increasing id; pass the smallest one seen as `before` for the next page.
    pub id: i64,
    /// RFC 3339.
    pub at: String,
    /// The acting token's id; absent for the server itself.
    pub token_id: Option<i64>,
    /// The acting token's name at the time.
    pub actor: String,
    /// What was done, e.g. `version.upload`.
    pub action: String,
    /// To what, e.g. `models/kws/versions/1.0.0`.
    pub object: String,
    /// Action-specific details.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

#[derive(sqlx::FromRow)]
struct AuditRow {
    id: i64,
    at: i64,
    token_id: Option<i64>,
    actor: String,
    action: String,
    object: String,
    detail: Option<String>,
}

/// `GET /api/v1/audit` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Entries to return, newest first (default 100, at most 1000).
    pub limit: Option<i64>,
    /// Only entries with an id below this (paging).
    pub before: Option<i64>,
}

/// `GET /api/v1/audit`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

/// The audit log, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    params(AuditQuery),
    security(("token" = [])),
    responses((status = 200, body = [AuditEntry]), (status = 401, body = ErrorBody))
)]
async fn list_audit(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit: must be from 1 to {MAX_PAGE}"
        )));
    }
    let rows: Vec<AuditRow> = sqlx::query_as(
        "SELECT id, at, token_id, actor, action, object, detail FROM audit \
         WHERE id < $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(q.before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(&state.db)
    .await?;
    Ok(Json(
        rows.into_iter()
            .map(|r| AuditEntry {
                id: r.id,
                at: rfc3339(r.at),
                token_id: r.token_id,
                actor: r.actor,
                action: r.action,
                object: r.object,
                detail: r
                    .detail
                    .and_then(|d| serde_json::from_str(&d).ok())
                    .unwrap_or(serde_json::Value::Null),
            })
            .collect(),
    ))
}
