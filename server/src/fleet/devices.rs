//! `/api/v1/devices`: provision (one or a batch; each token shown once), list, show (with its
//! history), revoke; editing and new tokens are in `device_edit`.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use npub_core::Accel;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::device_auth;
use super::history::{self, History, HistoryQuery};
use crate::audit;
use crate::auth::{Operator, token};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Json, Path, Query};
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// Most devices in one provisioning request: bounds the transaction and the response.
pub const MAX_BATCH: usize = 1000;
/// Longest device id, name, group or tag, in bytes.
pub const MAX_FIELD_BYTES: usize = 128;
/// The group a device joins when none is given.
pub const DEFAULT_GROUP: &str = "default";

/// One device to provision.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDevice {
    /// Unique id (e.g. a serial number): letters, digits, `-`, `_`, `.`, `:`.
    pub id: String,
    /// A label for people; defaults to the id.
    #[serde(default)]
    pub name: Option<String>,
    /// Hardware class (manifests are signed per class); default 1 (RA8P1 boards).
    #[serde(
        default = "default_hw_class",
        deserialize_with = "crate::extract::integral"
    )]
    pub hw_class: u32,
    /// The device's NPU configuration, e.g. `ethos-u55-256`.
    pub accelerator: String,
    /// Its group; default `default`.
    #[serde(default)]
    pub group: Option<String>,
    /// Free-form tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

fn default_hw_class() -> u32 {
    npub_core::manifest::HW_CLASS_RA8P1
}

/// `POST /api/v1/devices` body: one device, or `{"devices": [...]}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Provision {
    /// Several devices, in one transaction.
    Batch {
        /// The devices.
        devices: Vec<NewDevice>,
    },
    /// One device.
    One(NewDevice),
}

/// A device, as listed.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceInfo {
    /// Its id.
    pub id: String,
    /// Its label.
    pub name: String,
    /// Hardware class.
    pub hw_class: u32,
    /// NPU configuration, e.g. `ethos-u55-256`.
    pub accelerator: String,
    /// Group.
    pub group: String,
    /// Tags.
    pub tags: Vec<String>,
    /// `revoked`, `new` (never reported), or the state it last reported.
    pub status: String,
    /// RFC 3339; absent until it first polled (written in batches, so up to a flush interval old).
    pub last_seen: Option<String>,
    /// Model of the pack it last reported installed.
    pub current_model: Option<String>,
    /// Version of that pack.
    pub current_version: Option<String>,
    /// Sequence of the deployment it last reported installed (0: none).
    pub current_sequence: i64,
    /// Last reported state.
    pub last_state: Option<String>,
    /// Reason given with the last report.
    pub last_reason: Option<String>,
    /// RFC 3339 of the last report.
    pub last_status_at: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, when revoked.
    pub revoked_at: Option<String>,
}

/// A provisioned device: the only response that carries its token.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceCreated {
    /// The device.
    #[serde(flatten)]
    pub device: DeviceInfo,
    /// Its token, for `Authorization: Bearer` on the device API. Shown once.
    pub token: String,
}

/// `GET /api/v1/devices` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeviceQuery {
    /// Only this group.
    pub group: Option<String>,
    /// Only this status (`revoked`, `new`, or a reported state such as `failed`).
    pub status: Option<String>,
}

/// `/api/v1/devices…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(provision, list_devices))
        .routes(routes!(
            get_device,
            delete_device,
            super::device_edit::patch_device
        ))
        .routes(routes!(revoke_device))
        .routes(routes!(super::device_edit::new_token))
}

pub(crate) fn check_field(field: &str, value: &str) -> Result<(), ApiError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_FIELD_BYTES
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "{field}: 1..={MAX_FIELD_BYTES} characters of letters, digits, '-', '_', '.', ':' \
             expected, got {value:?}"
        )))
    }
}

/// Provisions devices; returns each one's token, once.
#[utoipa::path(
    post,
    path = "/api/v1/devices",
    tag = "devices",
    request_body = Provision,
    security(("token" = [])),
    responses(
        (status = 201, body = [DeviceCreated]),
        (status = 401, body = ErrorBody), (status = 409, body = ErrorBody, description = "an id exists"),
        (status = 422, body = ErrorBody),
    )
)]
async fn provision(
    State(state): State<AppState>,
    op: Operator,
    Json(body): Json<Provision>,
) -> Result<(StatusCode, JsonResponse<Vec<DeviceCreated>>), ApiError> {
    let devices = match body {
        Provision::Batch { devices } => devices,
        Provision::One(d) => vec![d],
    };
    if devices.is_empty() || devices.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "devices: 1..={MAX_BATCH} devices expected, got {}",
            devices.len()
        )));
    }
    let now = now_ms();
    let mut out = Vec::with_capacity(devices.len());
    let mut added = Vec::with_capacity(devices.len());
    let mut tx = crate::db::begin_write(&state.db).await?;
    for d in devices {
        check_field("id", &d.id)?;
        let group = d.group.unwrap_or_else(|| DEFAULT_GROUP.to_owned());
        check_field("group", &group)?;
        for tag in &d.tags {
            check_field("tags", tag)?;
        }
        let name = d.name.unwrap_or_else(|| d.id.clone());
        if name.chars().count() > MAX_FIELD_BYTES || name.chars().any(char::is_control) {
            return Err(ApiError::invalid(format!(
                "name: at most {MAX_FIELD_BYTES} characters, no control characters"
            )));
        }
        if d.hw_class == 0 {
            return Err(ApiError::invalid("hw_class: 0 is reserved"));
        }
        let accel = Accel::from_name(&d.accelerator)
            .filter(|a| *a != Accel::Unspecified)
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "accelerator: {:?} is not a known configuration (e.g. ethos-u55-256)",
                    d.accelerator
                ))
            })?;
        let secret = device_auth::generate()?;
        let tags = serde_json::to_string(&d.tags).map_err(ApiError::internal)?;
        sqlx::query(
            "INSERT INTO devices (id, name, hw_class, accel, grp, tags, token_hash, created_at, created_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&d.id)
        .bind(&name)
        .bind(i64::from(d.hw_class))
        .bind(i64::from(accel.word()))
        .bind(&group)
        .bind(&tags)
        .bind(token::hash(&secret))
        .bind(now)
        .bind(op.token_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| ApiError::on_unique(e, || format!("device {:?} exists", d.id)))?;
        audit::record(
            &mut tx,
            &op,
            "device.create",
            &format!("devices/{}", d.id),
            serde_json::json!({"group": group, "hw_class": d.hw_class, "accelerator": accel.name()}),
        )
        .await?;
        added.push(super::Added {
            digest: Sha256::digest(secret.as_bytes()).into(),
            id: d.id.clone(),
            hw_class: d.hw_class,
            accel: accel.word(),
            group: group.clone(),
        });
        out.push(DeviceCreated {
            device: DeviceInfo {
                id: d.id,
                name,
                hw_class: d.hw_class,
                accelerator: accel.name().to_owned(),
                group,
                tags: d.tags,
                status: "new".into(),
                last_seen: None,
                current_model: None,
                current_version: None,
                current_sequence: 0,
                last_state: None,
                last_reason: None,
                last_status_at: None,
                created_at: rfc3339(now),
                revoked_at: None,
            },
            token: secret,
        });
    }
    let committed = super::bump_generation(&mut tx).await?;
    tx.commit().await?;
    super::refresh_provisioned(&state, committed, added).await;
    Ok((StatusCode::CREATED, JsonResponse(out)))
}

#[derive(sqlx::FromRow)]
struct DeviceRow {
    id: String,
    name: String,
    hw_class: i64,
    accel: i64,
    grp: String,
    tags: String,
    last_seen: Option<i64>,
    current_sequence: i64,
    current_model: Option<String>,
    current_version: Option<String>,
    last_state: Option<String>,
    last_reason: Option<String>,
    last_status_at: Option<i64>,
    created_at: i64,
    revoked_at: Option<i64>,
}

/// The columns of [`DeviceRow`]; a macro so that `concat!` can finish the query.
macro_rules! select_device {
    () => {
        "SELECT d.id, d.name, d.hw_class, d.accel, d.grp, d.tags, d.last_seen, \
     d.current_sequence, m.name AS current_model, v.version AS current_version, d.last_state, \
     d.last_reason, d.last_status_at, d.created_at, d.revoked_at \
     FROM devices d LEFT JOIN versions v ON v.id = d.current_version_id \
     LEFT JOIN models m ON m.id = v.model_id"
    };
}

impl DeviceRow {
    fn info(self) -> DeviceInfo {
        let status = if self.revoked_at.is_some() {
            "revoked".to_owned()
        } else {
            self.last_state.clone().unwrap_or_else(|| "new".into())
        };
        DeviceInfo {
            id: self.id,
            name: self.name,
            hw_class: self.hw_class as u32,
            accelerator: Accel::from_word(self.accel as u32).name().to_owned(),
            group: self.grp,
            tags: serde_json::from_str(&self.tags).unwrap_or_default(),
            status,
            last_seen: self.last_seen.map(rfc3339),
            current_model: self.current_model,
            current_version: self.current_version,
            current_sequence: self.current_sequence,
            last_state: self.last_state,
            last_reason: self.last_reason,
            last_status_at: self.last_status_at.map(rfc3339),
            created_at: rfc3339(self.created_at),
            revoked_at: self.revoked_at.map(rfc3339),
        }
    }
}

/// Devices, by id, optionally filtered by group and status.
#[utoipa::path(
    get,
    path = "/api/v1/devices",
    tag = "devices",
    params(DeviceQuery),
    security(("token" = [])),
    responses((status = 200, body = [DeviceInfo]), (status = 401, body = ErrorBody))
)]
async fn list_devices(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<DeviceQuery>,
) -> Result<JsonResponse<Vec<DeviceInfo>>, ApiError> {
    let rows: Vec<DeviceRow> = sqlx::query_as(concat!(
        select_device!(),
        " WHERE ($1 IS NULL OR d.grp = $1) ORDER BY d.id"
    ))
    .bind(q.group.as_deref())
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(
        rows.into_iter()
            .map(DeviceRow::info)
            .filter(|d| q.status.as_deref().is_none_or(|s| d.status == s))
            .collect(),
    ))
}

/// Device `id` as listed, 404 when unknown.
pub(crate) async fn load_info(
    conn: &mut crate::db::Conn,
    id: &str,
) -> Result<DeviceInfo, ApiError> {
    let row: Option<DeviceRow> = sqlx::query_as(concat!(select_device!(), " WHERE d.id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(DeviceRow::info)
        .ok_or_else(|| ApiError::NotFound(format!("device {id:?}")))
}

/// A device with a page of its history.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceDetail {
    /// The device.
    #[serde(flatten)]
    pub device: DeviceInfo,
    /// What it was offered and what it reported, newest first.
    pub history: History,
}

/// One device: identity, group, tags, accelerator, status, what it runs, and its history
/// (every deployment it was offered, every report it sent), newest first, paged.
#[utoipa::path(
    get,
    path = "/api/v1/devices/{id}",
    tag = "devices",
    params(("id" = String, Path, description = "device id"), HistoryQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = DeviceDetail),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a bad `limit`"),
    )
)]
async fn get_device(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Result<JsonResponse<DeviceDetail>, ApiError> {
    let mut conn = state.db.acquire().await?;
    let device = load_info(&mut conn, &id).await?;
    let history = history::page(&mut conn, &id, &q).await?;
    Ok(JsonResponse(DeviceDetail { device, history }))
}

/// Revokes a device (same as `POST …/revoke`): its token gets 401 from the next request on. The
/// row stays, for the audit log and deployment history.
#[utoipa::path(
    delete,
    path = "/api/v1/devices/{id}",
    tag = "devices",
    params(("id" = String, Path, description = "device id")),
    security(("token" = [])),
    responses((status = 204, description = "revoked"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn delete_device(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    revoke(&state, &op, &id).await
}

/// Revokes a device: its token gets 401 from the next request on.
#[utoipa::path(
    post,
    path = "/api/v1/devices/{id}/revoke",
    tag = "devices",
    params(("id" = String, Path, description = "device id")),
    security(("token" = [])),
    responses((status = 204, description = "revoked"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn revoke_device(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    revoke(&state, &op, &id).await
}

async fn revoke(state: &AppState, op: &Operator, id: &str) -> Result<StatusCode, ApiError> {
    let serial = state.write_lock.lock().await;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let row: Option<(Option<i64>,)> =
        sqlx::query_as("SELECT revoked_at FROM devices WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let (revoked_at,) = row.ok_or_else(|| ApiError::NotFound(format!("device {id:?}")))?;
    if revoked_at.is_some() {
        return Ok(StatusCode::NO_CONTENT);
    }
    sqlx::query("UPDATE devices SET revoked_at = $1 WHERE id = $2")
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        op,
        "device.revoke",
        &format!("devices/{id}"),
        serde_json::json!({}),
    )
    .await?;
    let committed = super::bump_generation(&mut tx).await?;
    tx.commit().await?;
    drop(serial);
    super::refresh(state, committed).await;
    Ok(StatusCode::NO_CONTENT)
}
