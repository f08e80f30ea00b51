//! Editing and re-credentialing a device: `PATCH /api/v1/devices/{id}` (name, group, tags,
//! accelerator) and `POST /api/v1/devices/{id}/token` (a new token, shown once; the old one stops
//! working at once). Both are audited with the before and after values, and both bump the fleet
//! generation, so the next poll answers from the edited device: a device moved to another group is
//! offered that group's deployment on its next poll.
use axum::Json as JsonResponse;
use axum::extract::State;
use npub_core::Accel;
use serde::Deserialize;
use utoipa::ToSchema;

use super::device_info::{DeviceCreated, DeviceInfo, MAX_FIELD_BYTES, check_field, load_info};
use super::ranking::stamp;
use crate::auth::{Operator, token};
use crate::device::auth as device_auth;
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::state::AppState;

/// `PATCH /api/v1/devices/{id}` body: the fields to change; absent fields stay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DevicePatch {
    /// A new label.
    #[schema(max_length = 128)]
    pub name: Option<String>,
    /// A new group: what the device is offered changes on its next poll.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub group: Option<String>,
    /// New tags (replacing the old ones).
    pub tags: Option<Vec<String>>,
    /// A corrected NPU configuration (e.g. `ethos-u55-128`), when the device was registered wrong.
    pub accelerator: Option<String>,
}

/// Changes a device's name, group, tags or accelerator.
#[utoipa::path(
    patch,
    path = "/api/v1/devices/{id}",
    tag = "devices",
    params(("id" = String, Path, description = "device id")),
    request_body = DevicePatch,
    security(("token" = [])),
    responses(
        (status = 200, body = DeviceInfo),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody),
    )
)]
pub(super) async fn patch_device(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Json(patch): Json<DevicePatch>,
) -> Result<JsonResponse<DeviceInfo>, ApiError> {
    if let Some(name) = &patch.name
        && (name.is_empty()
            || name.chars().count() > MAX_FIELD_BYTES
            || name.chars().any(char::is_control))
    {
        return Err(ApiError::invalid(format!(
            "name: 1 to {MAX_FIELD_BYTES} characters, no control characters"
        )));
    }
    if let Some(group) = &patch.group {
        check_field("group", group)?;
    }
    for tag in patch.tags.iter().flatten() {
        check_field("tags", tag)?;
    }
    let accel = patch
        .accelerator
        .as_deref()
        .map(|a| {
            Accel::from_name(a)
                .filter(|x| *x != Accel::Unspecified)
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "accelerator: {a:?} is not a known configuration (e.g. ethos-u55-256)"
                    ))
                })
        })
        .transpose()?;
    let mut tx = FleetChange::begin(&state).await?;
    let before = load_info(&mut tx, &id).await?;
    let tags = patch
        .tags
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(ApiError::internal)?;
    sqlx::query(concat!(
        "UPDATE devices SET name = COALESCE($1, name), grp = COALESCE($2, grp), \
             tags = COALESCE($3, tags), accel = COALESCE($4, accel), changed_generation = ",
        stamp!(),
        " WHERE id = $5"
    ))
    .bind(patch.name.as_deref())
    .bind(patch.group.as_deref())
    .bind(tags.as_deref())
    .bind(accel.map(|a| i64::from(a.word())))
    .bind(&id)
    .execute(&mut *tx)
    .await?;
    let after = load_info(&mut tx, &id).await?;
    let mut changes = serde_json::Map::new();
    for (field, old, new) in [
        ("name", json(&before.name), json(&after.name)),
        ("group", json(&before.group), json(&after.group)),
        ("tags", json(&before.tags), json(&after.tags)),
        (
            "accelerator",
            json(&before.accelerator),
            json(&after.accelerator),
        ),
    ] {
        if old != new {
            changes.insert(field.into(), serde_json::json!({"from": old, "to": new}));
        }
    }
    // A patch that changes nothing (`{}`, or the values the device has) is answered like any other,
    // and leaves no audit entry and no new fleet generation behind.
    if changes.is_empty() {
        drop(tx);
        return Ok(JsonResponse(after));
    }
    if changes.contains_key("group") || changes.contains_key("accelerator") {
        // It left the targets of its old group's deployments (or of those for its old
        // accelerator): perhaps the last one some deployment waited for.
        super::deployments::target_left_in(&mut tx, &id, &before.group, &state.rollout_targets)
            .await?;
    }
    tx.commit(
        Record::Audit {
            op: &op,
            action: "device.update",
            object: format!("devices/{id}"),
            detail: serde_json::Value::Object(changes),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    Ok(JsonResponse(after))
}

fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// Issues the device a new token (shown once); the old one is refused from the next request on.
#[utoipa::path(
    post,
    path = "/api/v1/devices/{id}/token",
    tag = "devices",
    params(("id" = String, Path, description = "device id")),
    security(("token" = [])),
    responses(
        (status = 200, body = DeviceCreated),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the device is revoked"),
    )
)]
pub(super) async fn new_token(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<JsonResponse<DeviceCreated>, ApiError> {
    let secret = device_auth::generate()?;
    let mut tx = FleetChange::begin(&state).await?;
    let device = load_info(&mut tx, &id).await?;
    if device.revoked_at.is_some() {
        return Err(ApiError::Conflict(format!(
            "device {id:?} is revoked; a revoked device gets no new token (provision it anew \
             under another id)"
        )));
    }
    sqlx::query("UPDATE devices SET token_hash = $1 WHERE id = $2")
        .bind(token::hash(&secret))
        .bind(&id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        Record::Audit {
            op: &op,
            action: "device.token",
            object: format!("devices/{id}"),
            detail: serde_json::json!({}),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    Ok(JsonResponse(DeviceCreated {
        device,
        token: secret,
    }))
}
