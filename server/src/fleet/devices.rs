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

use super::device_info::{
    DeviceCreated, DeviceInfo, DeviceRow, MAX_FIELD_BYTES, check_field, load_info,
};
use super::history::{self, History, HistoryQuery};
use super::listing::{DeviceFilter, DeviceFilterInput};
use super::ranking::stamp;
use crate::auth::{Operator, token};
use crate::device::auth as device_auth;
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::page::{self, Page};
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// Most devices in one provisioning request: bounds the transaction and the response.
pub const MAX_BATCH: usize = 1000;
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
        deserialize_with = "crate::http::extract::integral"
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
///
/// Read by [`TryFrom<serde_json::Value>`]: an object with `devices` is a batch, any other is one
/// device, so that a mistake is reported at its field (`devices[3].tags[0]: …`) rather than as
/// "matches neither shape".
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged, try_from = "serde_json::Value")]
pub enum Provision {
    /// Several devices, in one transaction.
    Batch {
        /// The devices.
        devices: Vec<NewDevice>,
    },
    /// One device.
    One(NewDevice),
}

/// A batch's body, as [`Provision::Batch`] reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    devices: Vec<NewDevice>,
}

impl TryFrom<serde_json::Value> for Provision {
    type Error = String;

    fn try_from(body: serde_json::Value) -> Result<Self, String> {
        fn read<T: serde::de::DeserializeOwned>(body: &serde_json::Value) -> Result<T, String> {
            serde_path_to_error::deserialize(body).map_err(|e| match e.path().to_string() {
                root if root == "." => e.inner().to_string(),
                path => format!("{path}: {}", e.inner()),
            })
        }
        if body.get("devices").is_some() {
            read::<Batch>(&body).map(|b| Provision::Batch { devices: b.devices })
        } else {
            read::<NewDevice>(&body).map(Provision::One)
        }
    }
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
    /// Only devices that last reported installing a version of this model.
    pub model: Option<String>,
    /// Only devices that last reported installing this version (of `model` when given).
    pub version: Option<String>,
    /// Only this NPU configuration, e.g. `ethos-u55-256`.
    pub accelerator: Option<String>,
    /// Only devices not seen for more than this many minutes (a device that never polled counts
    /// from when it was provisioned; revoked devices are left out).
    pub not_seen_minutes: Option<u32>,
    /// Only devices whose id or name contains this text (any case).
    pub q: Option<String>,
    /// Devices per page (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
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
            "devices: 1 to {MAX_BATCH} devices expected, got {}",
            devices.len()
        )));
    }
    let now = now_ms();
    let mut out = Vec::with_capacity(devices.len());
    let mut added = Vec::with_capacity(devices.len());
    let mut audited = Vec::with_capacity(devices.len());
    let mut tx = FleetChange::begin(&state).await?;
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
        sqlx::query(concat!(
            "INSERT INTO devices (id, name, hw_class, accel, grp, tags, token_hash, created_at, \
             created_by, changed_generation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, ",
            stamp!(),
            ")"
        ))
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
        audited.push((
            format!("devices/{}", d.id),
            serde_json::json!({"group": group, "hw_class": d.hw_class, "accelerator": accel.name()}),
        ));
        added.push(crate::device::snapshot::Added {
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
    let record = Record::Each {
        op: &op,
        action: "device.create",
        entries: audited,
    };
    tx.commit(record, Effect::Provisioned(added))
        .await?
        .finish()
        .await;
    Ok((StatusCode::CREATED, JsonResponse(out)))
}

/// Devices in id order, a page at a time, filtered on the server (each filter uses an index:
/// `fleet/listing.rs`).
#[utoipa::path(
    get,
    path = "/api/v1/devices",
    tag = "devices",
    params(DeviceQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = Page<DeviceInfo>),
        (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a filter, `limit` or `cursor` that is not valid"),
    )
)]
async fn list_devices(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<DeviceQuery>,
) -> Result<JsonResponse<Page<DeviceInfo>>, ApiError> {
    let limit = page::limit(q.limit)?;
    // An empty text filter is no filter (a form's empty field); a group, status or accelerator
    // must be one.
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    let q = DeviceQuery {
        model: given(q.model),
        version: given(q.version),
        q: given(q.q),
        ..q
    };
    if let Some(g) = &q.group {
        check_field("group", g)?;
    }
    let versions = match (&q.model, &q.version) {
        (None, None) => None,
        (model, version) => Some(version_ids(&state, model.as_deref(), version.as_deref()).await?),
    };
    let filter = DeviceFilter::new(
        DeviceFilterInput {
            group: q.group,
            status: q.status,
            versions,
            accelerator: q.accelerator.as_deref(),
            not_seen_minutes: q.not_seen_minutes,
            text: q.q,
            after: page::decode(q.cursor.as_deref())?,
        },
        now_ms(),
    )?;
    let (sql, binds) = filter.sql(limit + 1, crate::db::Backend::of(&state.db));
    let query = crate::db::bind::query_as::<DeviceRow>(sql, binds);
    let rows = query.fetch_all(&state.db).await?;
    let items = rows.into_iter().map(DeviceRow::info).collect();
    Ok(JsonResponse(Page::from_rows(
        items,
        limit,
        |d: &DeviceInfo| d.id.clone(),
    )))
}

/// The row ids of the versions `model` and `version` name (either may be absent).
async fn version_ids(
    state: &AppState,
    model: Option<&str>,
    version: Option<&str>,
) -> Result<Vec<i64>, ApiError> {
    let mut sql =
        String::from("SELECT v.id FROM versions v JOIN models m ON m.id = v.model_id WHERE 1 = 1");
    let mut binds = Vec::new();
    if let Some(m) = model {
        binds.push(crate::db::Bind::Text(m.to_owned()));
        sql.push_str(&format!(" AND m.name = ${}", binds.len()));
    }
    if let Some(v) = version {
        binds.push(crate::db::Bind::Text(v.to_owned()));
        sql.push_str(&format!(" AND v.version = ${}", binds.len()));
    }
    let rows: Vec<(i64,)> = crate::db::bind::query_as(sql, binds)
        .fetch_all(&state.db)
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
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
    let mut tx = FleetChange::begin(state).await?;
    let row: Option<(Option<i64>, String)> =
        sqlx::query_as("SELECT revoked_at, grp FROM devices WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let (revoked_at, group) = row.ok_or_else(|| ApiError::NotFound(format!("device {id:?}")))?;
    if revoked_at.is_some() {
        return Ok(StatusCode::NO_CONTENT);
    }
    sqlx::query(concat!(
        "UPDATE devices SET revoked_at = $1, changed_generation = ",
        stamp!(),
        " WHERE id = $2"
    ))
    .bind(now_ms())
    .bind(id)
    .execute(&mut *tx)
    .await?;
    // It was perhaps the last target some deployment waited for.
    super::deployments::target_left_in(&mut tx, id, &group, &state.rollout_targets).await?;
    tx.commit(
        Record::Audit {
            op,
            action: "device.revoke",
            object: format!("devices/{id}"),
            detail: serde_json::json!({}),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    Ok(StatusCode::NO_CONTENT)
}
