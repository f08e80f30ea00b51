//! `/api/v1/webhooks`: register (the signing secret answered once), list, get, delete, enable
//! again after a disabling, send a test event, and each webhook's delivery log. Changes are
//! admin only (a webhook makes the server send requests, and its secret signs them) and audited
//! (`webhook.create`, `webhook.delete`, `webhook.enable`, `webhook.test`); reading is any
//! operator's.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::emit::{test, wake};
use super::kinds::{EventKind, MAX_DESCRIPTION_CHARS, MAX_URL_CHARS, MAX_WEBHOOKS};
use super::reach::Reach;
use super::secret;
use super::sign::secret_text;
use crate::auth::{Admin, Operator};
use crate::db::Conn;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::page::{self, Page};
use crate::names;
use crate::ops::audit;
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// `POST /api/v1/webhooks` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where deliveries are POSTed: an `http://` or `https://` URL without user or password.
    pub url: String,
    /// The event kinds to send: `deployment.state_changed`, `deployment.completed`,
    /// `deployment.batch_opened`, `deployment.threshold_hit`, `device.failed`, `key.rotated`.
    pub events: Vec<String>,
    /// For people ("on-call pager").
    #[serde(default)]
    pub description: String,
}

/// A webhook as listed (never its secret).
#[derive(Debug, Serialize, ToSchema)]
pub struct Webhook {
    /// Its id.
    pub id: i64,
    /// Where deliveries go.
    pub url: String,
    /// The event kinds it is sent.
    pub events: Vec<String>,
    /// For people.
    pub description: String,
    /// RFC 3339.
    pub created_at: String,
    /// The name of the token that registered it.
    pub created_by: String,
    /// False once disabled after too many failed attempts (`disabled_reason` says why); it then
    /// gets no deliveries until `POST /api/v1/webhooks/{id}/enable`.
    pub enabled: bool,
    /// RFC 3339, when disabled.
    pub disabled_at: Option<String>,
    /// Why it was disabled.
    pub disabled_reason: Option<String>,
    /// Failed attempts since the last delivered one.
    pub consecutive_failures: i64,
    /// Deliveries waiting to be sent.
    pub pending: i64,
}

/// A newly registered webhook: the only answer that carries its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookCreated {
    /// The webhook.
    #[serde(flatten)]
    pub webhook: Webhook,
    /// The signing secret, `whsec_` + base64 (Standard Webhooks). Shown once; store it now.
    pub secret: String,
}

/// One delivery in a webhook's log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    /// Increasing id.
    pub id: i64,
    /// The `webhook-id` header: the same on every attempt.
    pub message_id: String,
    /// The event kind.
    pub event: String,
    /// RFC 3339: when the event was queued.
    pub created_at: String,
    /// `pending` (waiting, or retried after a failure), `delivered`, `failed` (given up after
    /// its last attempt) or `dropped` (the queue was full).
    pub state: String,
    /// Attempts made.
    pub attempts: i64,
    /// RFC 3339 of the last attempt.
    pub last_attempt_at: Option<String>,
    /// The receiver's HTTP status at the last attempt, when it answered.
    pub last_status: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// RFC 3339: when a pending delivery is tried next.
    pub next_attempt_at: Option<String>,
    /// RFC 3339, once delivered.
    pub delivered_at: Option<String>,
    /// The body that was (or will be) sent, as signed.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

/// `GET /api/v1/webhooks/{id}/deliveries` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    /// Deliveries per page, newest first (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// `/api/v1/webhooks…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook, list_webhooks))
        .routes(routes!(get_webhook, delete_webhook))
        .routes(routes!(enable_webhook))
        .routes(routes!(test_webhook))
        .routes(routes!(list_deliveries))
}

/// Checks a receiver's URL: http or https, a host, no user or password (they would be logged
/// and shown).
fn check_url(text: &str, reach: &Reach) -> Result<(), ApiError> {
    names::free_text("url", text, MAX_URL_CHARS, names::Lines::One)?;
    let url = url::Url::parse(text)
        .map_err(|e| ApiError::invalid(format!("url: {text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::invalid(format!(
            "url: the scheme must be http or https, not {:?}",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("url: names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ApiError::invalid(
            "url: must not hold a user or password (the secret signs each delivery instead)",
        ));
    }
    // A host name is checked at every attempt, on what it then resolves to (`reach.rs`).
    if let Some(refused) = url.host_str().and_then(|h| reach.refuse_literal(h)) {
        return Err(ApiError::invalid(format!("url: {refused}")));
    }
    Ok(())
}

/// Checks the event kinds: at least one, each known, none twice.
fn check_events(events: &[String]) -> Result<(), ApiError> {
    let known = || {
        EventKind::SUBSCRIBABLE
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if events.is_empty() {
        return Err(ApiError::invalid(format!(
            "events: name at least one of {}",
            known()
        )));
    }
    for (i, e) in events.iter().enumerate() {
        if EventKind::parse(e).is_none() {
            return Err(ApiError::invalid(format!(
                "events[{i}]: {e:?} is not an event kind (one of {})",
                known()
            )));
        }
        if events[..i].contains(e) {
            return Err(ApiError::invalid(format!(
                "events[{i}]: {e:?} is named twice"
            )));
        }
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct WebhookRow {
    id: i64,
    url: String,
    events: String,
    description: String,
    created_at: i64,
    created_by: String,
    consecutive_failures: i64,
    disabled_at: Option<i64>,
    disabled_reason: Option<String>,
    pending: i64,
}

impl From<WebhookRow> for Webhook {
    fn from(r: WebhookRow) -> Self {
        Webhook {
            id: r.id,
            url: r.url,
            events: r.events.split(',').map(str::to_owned).collect(),
            description: r.description,
            created_at: rfc3339(r.created_at),
            created_by: r.created_by,
            enabled: r.disabled_at.is_none(),
            disabled_at: r.disabled_at.map(rfc3339),
            disabled_reason: r.disabled_reason,
            consecutive_failures: r.consecutive_failures,
            pending: r.pending,
        }
    }
}

const SELECT_WEBHOOK: &str = "SELECT w.id, w.url, w.events, w.description, w.created_at, \
     w.created_by, w.consecutive_failures, w.disabled_at, w.disabled_reason, \
     (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'pending') \
     AS pending FROM webhooks w";

async fn load(conn: &mut Conn, id: i64) -> Result<Webhook, ApiError> {
    let row: Option<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT_WEBHOOK} WHERE w.id = $1"
    )))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(Webhook::from)
        .ok_or_else(|| ApiError::NotFound(format!("webhook {id}")))
}

/// The id in a path: 404 for anything that is not one.
fn webhook_id(text: &str) -> Result<i64, ApiError> {
    text.parse()
        .ok()
        .filter(|&id: &i64| id > 0)
        .ok_or_else(|| ApiError::NotFound(format!("webhook {text:?}")))
}

/// Registers a webhook and answers its signing secret, once.
#[utoipa::path(
    post,
    path = "/api/v1/webhooks",
    tag = "webhooks",
    request_body = NewWebhook,
    security(("token" = [])),
    responses(
        (status = 201, body = WebhookCreated),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the server already has the most webhooks it keeps"),
        (status = 422, body = ErrorBody),
    )
)]
async fn create_webhook(
    State(state): State<AppState>,
    Admin(op): Admin,
    Json(new): Json<NewWebhook>,
) -> Result<(StatusCode, JsonResponse<WebhookCreated>), ApiError> {
    check_url(&new.url, state.webhooks.reach())?;
    check_events(&new.events)?;
    names::free_text(
        "description",
        &new.description,
        MAX_DESCRIPTION_CHARS,
        names::Lines::One,
    )?;
    let secret = secret::generate().map_err(ApiError::internal)?;
    let now = now_ms();
    let mut tx = crate::db::begin_write(&state.db).await?;
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM webhooks")
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_WEBHOOKS {
        return Err(ApiError::Conflict(format!(
            "the server keeps at most {MAX_WEBHOOKS} webhooks: delete one first"
        )));
    }
    // The row first, for its id: the secret is sealed under it.
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO webhooks (url, events, description, secret_sealed, created_at, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(&new.url)
    .bind(new.events.join(","))
    .bind(&new.description)
    .bind(Vec::<u8>::new())
    .bind(now)
    .bind(&op.name)
    .fetch_one(&mut *tx)
    .await?;
    let sealed = secret::seal(&state.keys.store, id, &secret)
        .await
        .map_err(ApiError::internal)?;
    sqlx::query("UPDATE webhooks SET secret_sealed = $1 WHERE id = $2")
        .bind(sealed)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        &op,
        "webhook.create",
        &format!("webhooks/{id}"),
        serde_json::json!({"url": new.url, "events": new.events}),
    )
    .await?;
    let webhook = load(&mut tx, id).await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        JsonResponse(WebhookCreated {
            webhook,
            secret: secret_text(&secret),
        }),
    ))
}

/// Every webhook, oldest first (never their secrets).
#[utoipa::path(
    get,
    path = "/api/v1/webhooks",
    tag = "webhooks",
    security(("token" = [])),
    responses((status = 200, body = [Webhook]), (status = 401, body = ErrorBody))
)]
async fn list_webhooks(
    State(state): State<AppState>,
    _op: Operator,
) -> Result<JsonResponse<Vec<Webhook>>, ApiError> {
    let rows: Vec<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT_WEBHOOK} ORDER BY w.id"
    )))
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(rows.into_iter().map(Webhook::from).collect()))
}

/// One webhook.
#[utoipa::path(
    get,
    path = "/api/v1/webhooks/{id}",
    tag = "webhooks",
    params(("id" = i64, Path, description = "webhook id")),
    security(("token" = [])),
    responses((status = 200, body = Webhook), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_webhook(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<JsonResponse<Webhook>, ApiError> {
    let id = webhook_id(&id)?;
    Ok(JsonResponse(
        load(&mut *state.db.acquire().await?, id).await?,
    ))
}

/// Deletes a webhook with its queue and log; an attempt in flight still ends.
#[utoipa::path(
    delete,
    path = "/api/v1/webhooks/{id}",
    tag = "webhooks",
    params(("id" = i64, Path, description = "webhook id")),
    security(("token" = [])),
    responses(
        (status = 204, description = "deleted"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
async fn delete_webhook(
    State(state): State<AppState>,
    Admin(op): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = webhook_id(&id)?;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let url: Option<(String,)> = sqlx::query_as("DELETE FROM webhooks WHERE id = $1 RETURNING url")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let (url,) = url.ok_or_else(|| ApiError::NotFound(format!("webhook {id}")))?;
    audit::record(
        &mut tx,
        &op,
        "webhook.delete",
        &format!("webhooks/{id}"),
        serde_json::json!({"url": url}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Enables a disabled webhook again: its run of failures starts over and its pending
/// deliveries go out at once. Enabling an enabled webhook changes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/webhooks/{id}/enable",
    tag = "webhooks",
    params(("id" = i64, Path, description = "webhook id")),
    security(("token" = [])),
    responses(
        (status = 200, body = Webhook),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
async fn enable_webhook(
    State(state): State<AppState>,
    Admin(op): Admin,
    Path(id): Path<String>,
) -> Result<JsonResponse<Webhook>, ApiError> {
    let id = webhook_id(&id)?;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let was = load(&mut tx, id).await?;
    if was.enabled {
        tx.rollback().await?;
        return Ok(JsonResponse(was));
    }
    sqlx::query(
        "UPDATE webhooks SET disabled_at = NULL, disabled_reason = NULL, \
         consecutive_failures = 0, next_attempt_at = 0 WHERE id = $1",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    audit::record(
        &mut tx,
        &op,
        "webhook.enable",
        &format!("webhooks/{id}"),
        serde_json::json!({"url": was.url, "disabled_reason": was.disabled_reason}),
    )
    .await?;
    let webhook = load(&mut tx, id).await?;
    tx.commit().await?;
    wake();
    Ok(JsonResponse(webhook))
}

/// The answer to a test request.
#[derive(Debug, Serialize, ToSchema)]
pub struct TestQueued {
    /// The `webhook-id` of the queued test delivery (look for it in the delivery log).
    pub message_id: String,
}

/// Queues a `webhook.test` event for this webhook alone; it is sent like any other delivery.
#[utoipa::path(
    post,
    path = "/api/v1/webhooks/{id}/test",
    tag = "webhooks",
    params(("id" = i64, Path, description = "webhook id")),
    security(("token" = [])),
    responses(
        (status = 202, body = TestQueued),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
async fn test_webhook(
    State(state): State<AppState>,
    Admin(op): Admin,
    Path(id): Path<String>,
) -> Result<(StatusCode, JsonResponse<TestQueued>), ApiError> {
    let id = webhook_id(&id)?;
    let mut tx = crate::db::begin_write(&state.db).await?;
    load(&mut tx, id).await?;
    let message_id = test(&mut tx, id, &op.name).await?;
    audit::record(
        &mut tx,
        &op,
        "webhook.test",
        &format!("webhooks/{id}"),
        serde_json::json!({"message_id": message_id}),
    )
    .await?;
    tx.commit().await?;
    wake();
    Ok((
        StatusCode::ACCEPTED,
        JsonResponse(TestQueued { message_id }),
    ))
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    message_id: String,
    event: String,
    payload: String,
    created_at: i64,
    state: String,
    attempts: i64,
    next_attempt_at: i64,
    last_attempt_at: Option<i64>,
    last_status: Option<i64>,
    last_error: Option<String>,
    delivered_at: Option<i64>,
}

/// A webhook's deliveries, newest first, a page at a time: what was sent, how often, what the
/// receiver answered.
#[utoipa::path(
    get,
    path = "/api/v1/webhooks/{id}/deliveries",
    tag = "webhooks",
    params(("id" = i64, Path, description = "webhook id"), DeliveryQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = Page<Delivery>),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a `limit` or `cursor` that is not valid"),
    )
)]
async fn list_deliveries(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
    Query(q): Query<DeliveryQuery>,
) -> Result<JsonResponse<Page<Delivery>>, ApiError> {
    let id = webhook_id(&id)?;
    let limit = page::limit(q.limit)?;
    let before = page::decode_int(q.cursor.as_deref())?.unwrap_or(i64::MAX);
    let mut conn = state.db.acquire().await?;
    load(&mut conn, id).await?;
    let rows: Vec<DeliveryRow> = sqlx::query_as(
        "SELECT id, message_id, event, payload, created_at, state, attempts, next_attempt_at, \
         last_attempt_at, last_status, last_error, delivered_at FROM webhook_deliveries \
         WHERE webhook_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
    )
    .bind(id)
    .bind(before)
    .bind(i64::from(limit) + 1)
    .fetch_all(&mut *conn)
    .await?;
    let items = rows
        .into_iter()
        .map(|r| Delivery {
            id: r.id,
            message_id: r.message_id,
            event: r.event,
            created_at: rfc3339(r.created_at),
            next_attempt_at: (r.state == "pending").then(|| rfc3339(r.next_attempt_at)),
            state: r.state,
            attempts: r.attempts,
            last_attempt_at: r.last_attempt_at.map(rfc3339),
            last_status: r.last_status,
            last_error: r.last_error,
            delivered_at: r.delivered_at.map(rfc3339),
            payload: serde_json::from_str(&r.payload).unwrap_or(serde_json::Value::Null),
        })
        .collect();
    Ok(JsonResponse(Page::from_rows(
        items,
        limit,
        |d: &Delivery| d.id.to_string(),
    )))
}
