//! The device API (`docs/device-api.md`): what a device calls with its own token.
//!
//! | Route                                   | Answer                                                     |
//! |-----------------------------------------|------------------------------------------------------------|
//! | `GET /api/v1/device/manifest?seq=N`     | 204 nothing newer than N; 200 the 280-byte signed manifest, `ETag`; 304 on a matching `If-None-Match`; `Npub-Poll-Interval` always |
//! | `GET /api/v1/device/packs/{sha256}`     | the assigned pack; `Range` → 206, `If-Range`, 416; `ETag` = `"sha256"`; 404 unless assigned |
//! | `GET /api/v1/device/packs/{sha256}/io`  | the pack's canonical IO bindings (404 when it declares none) |
//! | `POST /api/v1/device/status`            | `{sequence, state, progress?, reason?}` → 204                |
//!
//! Polls and downloads are answered from the poll cache's snapshot (no database access); the
//! only write a poll causes is an in-memory last-seen time, flushed in batches.
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::deployments;
use super::device_auth::Device;
use super::rollout::DeviceState;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Json, Query};
use crate::state::AppState;
use crate::time::now_ms;

/// Suggested seconds until the next manifest poll, on every manifest answer.
pub const POLL_INTERVAL_HEADER: HeaderName = HeaderName::from_static("npub-poll-interval");
/// The sequence of the manifest in a 200 answer (also inside the manifest; for logs and proxies).
pub const SEQUENCE_HEADER: HeaderName = HeaderName::from_static("npub-sequence");
/// Longest `reason` in a status report, in bytes: enough for an npub-core error message.
pub const MAX_REASON_BYTES: usize = 1024;

/// `GET /api/v1/device/manifest` query.
#[derive(Debug, Deserialize, IntoParams)]
pub struct ManifestQuery {
    /// The sequence of the last manifest the device accepted (0 on a fresh device).
    #[serde(default)]
    pub seq: u64,
}

/// `POST /api/v1/device/status` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusReport {
    /// The sequence of the deployment this report is about.
    pub sequence: u64,
    /// `downloading`, `verified`, `installed`, `bound`, `failed` or `rolled_back`.
    pub state: DeviceState,
    /// 0..=1, for `downloading`.
    pub progress: Option<f64>,
    /// Why, for `failed` and `rolled_back`.
    pub reason: Option<String>,
}

/// Device routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(manifest))
        .routes(routes!(pack))
        .routes(routes!(pack_io))
        .routes(routes!(status))
}

/// The device's manifest, if newer than `seq`.
#[utoipa::path(
    get,
    path = "/api/v1/device/manifest",
    tag = "device",
    params(ManifestQuery),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "the signed manifest (280 bytes)", content_type = "application/octet-stream"),
        (status = 204, description = "nothing newer than seq"),
        (status = 304, description = "If-None-Match matched"),
        (status = 401, body = ErrorBody),
    )
)]
async fn manifest(
    State(state): State<AppState>,
    device: Device,
    Query(q): Query<ManifestQuery>,
    headers: HeaderMap,
) -> Response {
    state.fleet.last_seen.touch(&device.entry.id, now_ms());
    let interval = HeaderValue::from(state.fleet.timers.poll_interval_secs);
    let Some(a) = device.snapshot.assignment(&device.entry.id) else {
        return (StatusCode::NO_CONTENT, [(POLL_INTERVAL_HEADER, interval)]).into_response();
    };
    if a.sequence <= q.seq {
        return (StatusCode::NO_CONTENT, [(POLL_INTERVAL_HEADER, interval)]).into_response();
    }
    if etag_matches(&headers, &a.etag) {
        return (
            StatusCode::NOT_MODIFIED,
            [
                (POLL_INTERVAL_HEADER, interval),
                (header::ETAG, a.etag.clone()),
            ],
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [
            (POLL_INTERVAL_HEADER, interval),
            (header::ETAG, a.etag.clone()),
            (SEQUENCE_HEADER, HeaderValue::from(a.sequence)),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
        ],
        Body::from(a.manifest.clone()),
    )
        .into_response()
}

fn etag_matches(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/").as_bytes() == etag.as_bytes())
}

/// The pack the device is assigned, with HTTP Range.
#[utoipa::path(
    get,
    path = "/api/v1/device/packs/{sha256}",
    tag = "device",
    params(("sha256" = String, Path, description = "the pack's SHA-256, as the manifest names it")),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "the whole pack", content_type = "application/octet-stream"),
        (status = 206, description = "the requested range", content_type = "application/octet-stream"),
        (status = 304, description = "If-None-Match matched"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not a pack this device is assigned"),
        (status = 416, description = "the range is past the end"),
    )
)]
async fn pack(
    State(state): State<AppState>,
    device: Device,
    Path(sha256): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bytes = assigned(&device, &sha256)?.bytes.clone();
    let etag = HeaderValue::from_str(&format!("\"{sha256}\"")).map_err(ApiError::internal)?;
    if etag_matches(&headers, &etag) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    let len = bytes.len() as u64;
    let range = headers
        .get(header::RANGE)
        .filter(|_| if_range_holds(&headers, &etag))
        .and_then(|v| v.to_str().ok());
    let (status, body, content_range) = match range {
        None => (StatusCode::OK, bytes, None),
        Some(spec) => match http_range_header::parse_range_header(spec)
            .and_then(|parsed| parsed.validate(len))
        {
            // One range: 206. Several: the whole pack (RFC 9110 lets a server ignore Range), which
            // a device never asks for anyway.
            Ok(ranges) if ranges.len() == 1 => {
                let r = &ranges[0];
                let (start, end) = (*r.start(), *r.end());
                (
                    StatusCode::PARTIAL_CONTENT,
                    bytes.slice(start as usize..=end as usize),
                    Some(format!("bytes {start}-{end}/{len}")),
                )
            }
            Ok(_) => (StatusCode::OK, bytes, None),
            Err(_) => {
                return Ok((
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    [
                        (header::CONTENT_RANGE, format!("bytes */{len}")),
                        (header::ACCEPT_RANGES, "bytes".into()),
                    ],
                )
                    .into_response());
            }
        },
    };
    state.metrics.add_pack_bytes_served(body.len() as u64);
    let mut response = (
        status,
        [
            (header::ETAG, etag),
            (header::ACCEPT_RANGES, HeaderValue::from_static("bytes")),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
        ],
        Body::from(body),
    )
        .into_response();
    if let Some(cr) = content_range {
        response.headers_mut().insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&cr).map_err(ApiError::internal)?,
        );
    }
    Ok(response)
}

/// `If-Range` absent, or naming this pack's `ETag` (a date never matches: packs are named by
/// content, and a strong validator is what RFC 9110 asks for here).
fn if_range_holds(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    headers
        .get(header::IF_RANGE)
        .is_none_or(|v| v.as_bytes() == etag.as_bytes())
}

fn assigned<'a>(
    device: &'a Device,
    sha256: &str,
) -> Result<&'a super::poll_cache::PackEntry, ApiError> {
    let not_found = || ApiError::NotFound(format!("pack {sha256:?} for this device"));
    let a = device
        .snapshot
        .assignment(&device.entry.id)
        .ok_or_else(not_found)?;
    if a.sha256 != sha256 {
        return Err(not_found());
    }
    device.snapshot.pack(sha256).ok_or_else(not_found)
}

/// The assigned pack's canonical IO bindings, to check against the manifest's `io_digest`.
#[utoipa::path(
    get,
    path = "/api/v1/device/packs/{sha256}/io",
    tag = "device",
    params(("sha256" = String, Path, description = "the pack's SHA-256")),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "canonical IO bindings (docs/io-bindings.md)", content_type = "application/octet-stream"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not assigned, or no IO bindings declared"),
    )
)]
async fn pack_io(device: Device, Path(sha256): Path<String>) -> Result<Response, ApiError> {
    let io = assigned(&device, &sha256)?
        .io
        .clone()
        .ok_or_else(|| ApiError::NotFound(format!("IO bindings of pack {sha256:?}")))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        )],
        Body::from(io),
    )
        .into_response())
}

/// Reports the device's progress on a deployment; feeds the rollout (batches, auto-abort).
#[utoipa::path(
    post,
    path = "/api/v1/device/status",
    tag = "device",
    request_body = StatusReport,
    security(("device_token" = [])),
    responses(
        (status = 204, description = "recorded"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no deployment with this sequence targets the device"),
        (status = 422, body = ErrorBody),
    )
)]
async fn status(
    State(state): State<AppState>,
    device: Device,
    Json(report): Json<StatusReport>,
) -> Result<StatusCode, ApiError> {
    state.fleet.last_seen.touch(&device.entry.id, now_ms());
    if report.state == DeviceState::Pending {
        return Err(ApiError::invalid(
            "state: `pending` is not something a device reports",
        ));
    }
    if report.progress.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(ApiError::invalid("progress: must be within 0..=1"));
    }
    if report
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > MAX_REASON_BYTES)
    {
        return Err(ApiError::invalid(format!(
            "reason: at most {MAX_REASON_BYTES} bytes"
        )));
    }
    let sequence =
        i64::try_from(report.sequence).map_err(|_| ApiError::invalid("sequence: out of range"))?;
    let id: &str = &device.entry.id;
    let now = now_ms();
    let serial = state.write_lock.lock().await;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let found: Option<(i64, i64)> = sqlx::query_as(
        "SELECT d.id, d.version_id FROM deployments d WHERE d.sequence = $1 \
         AND (d.target_device = $2 OR d.target_group = $3)",
    )
    .bind(sequence)
    .bind(id)
    .bind(&device.entry.group)
    .fetch_optional(&mut *tx)
    .await?;
    let (deployment_id, version_id) = found.ok_or_else(|| {
        ApiError::NotFound(format!(
            "deployment with sequence {sequence} for this device"
        ))
    })?;
    sqlx::query(
        "INSERT INTO device_deployments (deployment_id, device_id, state, progress, reason, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (deployment_id, device_id) DO UPDATE SET \
         state = excluded.state, progress = excluded.progress, reason = excluded.reason, \
         updated_at = excluded.updated_at",
    )
    .bind(deployment_id)
    .bind(id)
    .bind(report.state.as_str())
    .bind(report.progress)
    .bind(report.reason.as_deref())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE devices SET last_state = $1, last_reason = $2, last_status_at = $3 WHERE id = $4",
    )
    .bind(report.state.as_str())
    .bind(report.reason.as_deref())
    .bind(now)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    if report.state.is_success() {
        sqlx::query(
            "UPDATE devices SET current_sequence = $1, current_version_id = $2 \
             WHERE id = $3 AND current_sequence <= $1",
        )
        .bind(sequence)
        .bind(version_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    let changed = deployments::evaluate_in(&mut tx, deployment_id).await?;
    if changed {
        super::bump_generation(&mut tx).await?;
    }
    tx.commit().await?;
    drop(serial);
    if changed {
        super::refresh(&state).await;
    }
    Ok(StatusCode::NO_CONTENT)
}
