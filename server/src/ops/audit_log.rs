//! `GET /api/v1/audit`: the audit log, newest first (what [`super::audit`] records), a page at a
//! time, filtered on the server by action, actor, object and time range, each filter on its index
//! (`migrations/0009_listing_indexes.sql`).
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Operator;
use crate::db::Bind;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::Query;
use crate::http::page::{self, Page};
use crate::state::AppState;
use crate::time::{parse_rfc3339, rfc3339};

/// One audit entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    /// Increasing id.
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
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Entries per page, newest first (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
    /// Only this action, e.g. `deployment.create`, or every action under a prefix ending in
    /// `.`, e.g. `deployment.`.
    pub action: Option<String>,
    /// Only entries by this actor (the token's name at the time).
    pub actor: Option<String>,
    /// Only entries about this object, e.g. `deployments/2` or `devices/cam-1`.
    pub object: Option<String>,
    /// Only entries at or after this instant (RFC 3339).
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// Only entries before this instant (RFC 3339).
    #[param(format = DateTime)]
    pub until: Option<String>,
}

/// `GET /api/v1/audit`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

/// The audit log, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    params(AuditQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = Page<AuditEntry>),
        (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a filter, `limit` or `cursor` that is not valid"),
    )
)]
async fn list_audit(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Page<AuditEntry>>, ApiError> {
    let limit = page::limit(q.limit)?;
    // An empty text filter is no filter (a form's empty field); an instant must be one.
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    let q = AuditQuery {
        action: given(q.action),
        actor: given(q.actor),
        object: given(q.object),
        ..q
    };
    let rows = match q.action.as_deref().and_then(|a| a.strip_suffix('.')) {
        None => {
            let (sql, binds) = audit_sql(&q, limit)?;
            crate::db::bind::query_as::<AuditRow>(sql, binds)
                .fetch_all(&state.db)
                .await?
        }
        Some(prefix) => prefix_page(&state, &q, prefix, limit).await?,
    };
    let items = rows
        .into_iter()
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
        .collect();
    Ok(Json(Page::from_rows(items, limit, |e: &AuditEntry| {
        e.id.to_string()
    })))
}

/// A page of every action under `prefix`, without sorting every matching entry: the prefix's
/// few distinct actions are found by skipping through the `(action, id)` index (one seek each),
/// then each action's newest `limit + 1` entries are read in id order from the same index and the
/// lists merged. Memory and reads are bounded by the actions times the page, not by how many
/// entries the prefix matches (sorting them all took 132 ms at 100,000 entries).
async fn prefix_page(
    state: &AppState,
    q: &AuditQuery,
    prefix: &str,
    limit: u32,
) -> Result<Vec<AuditRow>, ApiError> {
    let actions: Vec<(String,)> = sqlx::query_as(
        "WITH RECURSIVE a(action) AS ( \
           SELECT MIN(action) FROM audit WHERE action >= $1 AND action < $2 \
           UNION ALL \
           SELECT (SELECT MIN(x.action) FROM audit x WHERE x.action > a.action AND x.action < $2) \
           FROM a WHERE a.action IS NOT NULL) \
         SELECT action FROM a WHERE action IS NOT NULL",
    )
    .bind(format!("{prefix}."))
    .bind(format!("{prefix}/"))
    .fetch_all(&state.db)
    .await?;
    let mut rows = Vec::new();
    for (action,) in actions {
        let one = AuditQuery {
            action: Some(action),
            ..q.clone()
        };
        let (sql, binds) = audit_sql(&one, limit)?;
        rows.extend(
            crate::db::bind::query_as::<AuditRow>(sql, binds)
                .fetch_all(&state.db)
                .await?,
        );
    }
    rows.sort_unstable_by_key(|r| std::cmp::Reverse(r.id));
    rows.truncate(limit as usize + 1);
    Ok(rows)
}

/// The statement `GET /api/v1/audit` runs for `q`, and its binds (public for the plan test).
pub fn audit_sql(q: &AuditQuery, limit: u32) -> Result<(String, Vec<Bind>), ApiError> {
    let mut sql = String::from(
        "SELECT id, at, token_id, actor, action, object, detail FROM audit WHERE 1 = 1",
    );
    let mut binds = Vec::new();
    let mut push = |sql: &mut String, clause: &str, b: Bind| {
        binds.push(b);
        sql.push_str(&clause.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(a) = &q.action {
        if a.is_empty() {
            return Err(ApiError::invalid(
                "action: give an action, e.g. deployment.create",
            ));
        }
        match a.strip_suffix('.') {
            // A prefix as a range, so that the (action, id) index serves it on both backends.
            Some(prefix) => {
                push(
                    &mut sql,
                    " AND action >= $?",
                    Bind::Text(format!("{prefix}.")),
                );
                push(
                    &mut sql,
                    " AND action < $?",
                    Bind::Text(format!("{prefix}/")),
                );
            }
            None => push(&mut sql, " AND action = $?", Bind::Text(a.clone())),
        }
    }
    if let Some(actor) = &q.actor {
        push(&mut sql, " AND actor = $?", Bind::Text(actor.clone()));
    }
    if let Some(object) = &q.object {
        push(&mut sql, " AND object = $?", Bind::Text(object.clone()));
    }
    for (name, value, op) in [("since", &q.since, ">="), ("until", &q.until, "<")] {
        if let Some(v) = value {
            let ms = parse_rfc3339(v).ok_or_else(|| {
                ApiError::invalid(format!(
                    "{name}: {v:?} is not an RFC 3339 instant (e.g. 2026-12-01T00:00:00Z)"
                ))
            })?;
            push(&mut sql, &format!(" AND at {op} $?"), Bind::Int(ms));
        }
    }
    if let Some(before) = page::decode_int(q.cursor.as_deref())? {
        push(&mut sql, " AND id < $?", Bind::Int(before));
    }
    push(
        &mut sql,
        " ORDER BY id DESC LIMIT $?",
        Bind::Int(i64::from(limit) + 1),
    );
    Ok((sql, binds))
}
