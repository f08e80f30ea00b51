//! The device API (`docs/device-api.md`): what a device calls with its own token.
//!
//! | Route                                   | Answer                                                     |
//! |-----------------------------------------|------------------------------------------------------------|
//! | `GET /api/v1/device`                    | what the server registered for this device: id, group, hardware class, accelerator |
//! | `GET /api/v1/device/manifest?seq=N`     | 204 nothing newer than N; 200 the 280-byte signed manifest, `ETag`; 304 on a matching `If-None-Match`; `Npub-Poll-Interval` and `Npub-Keyring-Sequence` always |
//! | `GET /api/v1/device/keys?after=N`       | 200 the keyring updates with sequence > N (144 bytes each, in order), `ETag`; 304 on a matching `If-None-Match`; 204 none |
//! | `GET /api/v1/device/packs/{sha256}`     | the assigned pack; `Range` → 206, `If-Range`, 416 (RFC 9110, [`crate::http::ranges`]); `ETag` = `"sha256"`; 404 unless assigned; 307 to a presigned URL with `--presign-downloads` |
//! | `GET /api/v1/device/packs/{sha256}/io`  | the pack's canonical IO bindings (404 when it declares none) |
//! | `GET /api/v1/device/packs/{sha256}/selftest` | the deployed version's self-test record ("NPS1"), whose SHA-256 its version-2 manifest signs; `Range` → 206, 416, `If-Range` as for the pack; 404 unless assigned, or when the version has none |
//! | `GET /api/v1/device/packs/{sha256}/release` | the deployed version's release signatures (the NPRB bundle), `ETag` = `"r-<its SHA-256>"`; 404 unless assigned, or when none are stored |
//! | `POST /api/v1/device/status`            | `{sequence, state, progress?, reason?}` → 204                |
//!
//! Polls and downloads are answered from the poll cache's snapshot (no database access); the
//! only write a poll causes is an in-memory last-seen time, flushed in batches. A pack's bytes
//! come from the snapshot's memory with the local store, and are streamed from the bucket (a
//! ranged GET) or handed off with a `307` to a presigned URL with an S3 store.
use axum::Json as JsonResponse;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt as _;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::device::auth::Device;
use crate::device::decide::{self, Poll};
use crate::device::polling::Polling;
use crate::device::snapshot::{DeviceEntry, PackEntry, Snapshot};
use crate::device::targets::{target_rows, targets};
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::fleet::deployments;
use crate::fleet::rollout::{self, DeviceState};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::ranges;
use crate::state::AppState;
use crate::store::PackDigest;
use crate::time::now_ms;

/// Suggested seconds until the next manifest poll, on every manifest answer.
pub const POLL_INTERVAL_HEADER: HeaderName = HeaderName::from_static("npub-poll-interval");
/// The sequence of the manifest in a 200 answer (also inside the manifest; for logs and proxies).
pub const SEQUENCE_HEADER: HeaderName = HeaderName::from_static("npub-sequence");
/// The newest keyring update's sequence (0: none), on every manifest answer: a device whose
/// keyring has applied less fetches `GET /api/v1/device/keys?after=<its sequence>` before it
/// verifies a manifest.
pub const KEYRING_SEQUENCE_HEADER: HeaderName = HeaderName::from_static("npub-keyring-sequence");
/// Longest `reason` in a status report, in characters: enough for an npub-core error message.
pub const MAX_REASON_CHARS: usize = 1024;

/// `GET /api/v1/device/manifest` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ManifestQuery {
    /// The sequence of the last manifest the device accepted (0 on a fresh device).
    #[serde(default)]
    pub seq: u64,
}

/// `GET /api/v1/device/keys` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KeysQuery {
    /// The sequence of the last keyring update the device applied (0: none).
    #[serde(default)]
    pub after: u64,
}

/// `POST /api/v1/device/status` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusReport {
    /// The sequence of the deployment this report is about.
    #[serde(deserialize_with = "crate::http::extract::integral")]
    pub sequence: u64,
    /// `downloading`, `verified`, `installed`, `bound`, `failed` or `rolled_back`.
    pub state: DeviceState,
    /// 0..=1, for `downloading`.
    pub progress: Option<f64>,
    /// Why, for `failed` and `rolled_back`; for `installed`, what the confirm did not check (the
    /// agent's "self-test skipped: …" when no golden inference ran). One line of at most 1024
    /// characters, no control characters.
    pub reason: Option<String>,
    /// For a report that ends a download attempt: the attempts the device made at this install,
    /// from 1 (at most [`MAX_ATTEMPTS`]). A device retries a corrupted download afresh and
    /// reports each retry as `downloading` with its `reason` and `attempts`: only the state a
    /// device reported last counts towards the auto-abort, so retries never do, and the
    /// attempt that fails for good (`failed`) does. Kept in front of the stored reason
    /// (`attempt N: …`).
    #[serde(default)]
    pub attempts: Option<u32>,
    /// The device's own last events, oldest first (the agent's event log, sent with a failure
    /// report): at most [`MAX_AGENT_EVENTS`] lines of printable ASCII, each at most
    /// [`MAX_AGENT_EVENT_CHARS`] characters. Kept with the report in the device's history.
    #[serde(default)]
    pub events: Option<Vec<String>>,
}

/// The most attempts a report may claim (the device agent makes 3).
pub const MAX_ATTEMPTS: u32 = 100;
/// Lines of a report's event log: a device keeps a few hundred bytes of them.
pub const MAX_AGENT_EVENTS: usize = 16;
/// Characters of one event-log line.
pub const MAX_AGENT_EVENT_CHARS: usize = 64;

/// Checks a report's event log (see [`StatusReport::events`]).
fn check_events(events: &[String]) -> Result<(), ApiError> {
    if events.len() > MAX_AGENT_EVENTS {
        return Err(ApiError::invalid(format!(
            "events: {} lines, at most {MAX_AGENT_EVENTS}",
            events.len()
        )));
    }
    for (i, e) in events.iter().enumerate() {
        if let Some(c) = e.chars().find(|c| !(' '..='~').contains(c)) {
            return Err(ApiError::invalid(format!(
                "events[{i}]: holds {c:?}: only printable ASCII (space to ~)"
            )));
        }
        if e.len() > MAX_AGENT_EVENT_CHARS {
            return Err(ApiError::invalid(format!(
                "events[{i}]: {} characters, at most {MAX_AGENT_EVENT_CHARS}",
                e.len()
            )));
        }
    }
    Ok(())
}

/// Device routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(whoami))
        .routes(routes!(manifest))
        .routes(routes!(keys))
        .routes(routes!(pack))
        .routes(routes!(pack_io))
        .routes(routes!(pack_release))
        .routes(routes!(pack_selftest))
        .routes(routes!(status))
}

/// `GET /api/v1/device`: the device as the server registered it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceIdentity {
    /// The device id.
    pub id: String,
    /// Its group.
    pub group: String,
    /// The hardware class its manifests are signed for.
    pub hw_class: u32,
    /// Its NPU configuration, by Vela's name (e.g. `ethos-u55-256`): the packs it is offered are
    /// compiled for this one.
    pub accelerator: String,
}

/// What the server registered for the calling device, so that an agent can configure itself (or
/// refuse to run) before it is offered a pack for another accelerator.
#[utoipa::path(
    get,
    path = "/api/v1/device",
    tag = "device",
    security(("device_token" = [])),
    responses((status = 200, body = DeviceIdentity), (status = 401, body = ErrorBody))
)]
async fn whoami(device: Device) -> JsonResponse<DeviceIdentity> {
    let e = &device.entry;
    JsonResponse(DeviceIdentity {
        id: e.id.to_string(),
        group: e.group.clone(),
        hw_class: e.hw_class,
        accelerator: npub_core::Accel::from_word(e.accel).name().to_owned(),
    })
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
    // The request itself rather than a `HeaderMap`, which would be a copy of every header.
    request: Request,
) -> Response {
    answer_manifest(&state, &device, &q, request.headers())
}

/// The manifest route: the device lane (`device/lane.rs`) answers the plain polls on it.
pub const MANIFEST_PATH: &str = "/api/v1/device/manifest";
/// What a pack download's path starts with, before the SHA-256.
pub const PACKS_PREFIX: &str = "/api/v1/device/packs/";
/// The pack route's template, the label its requests are counted under.
pub const PACK_ROUTE: &str = "/api/v1/device/packs/{sha256}";

/// The answer to a device's manifest poll, once it is authenticated and its query parsed.
fn answer_manifest(
    state: &AppState,
    device: &Device,
    q: &ManifestQuery,
    headers: &HeaderMap,
) -> Response {
    if i64::try_from(q.seq).is_err() {
        state.polling.last_seen.touch(&device.entry.id, now_ms());
        // Sequences are i64 in the database; a larger one was never issued.
        return ApiError::invalid(format!("seq: at most {}", i64::MAX)).into_response();
    }
    let headers_always = always_headers(&state.polling, &device.snapshot);
    match decide::poll(
        &state.polling.last_seen,
        &device.entry,
        device.snapshot.assignment(&device.entry.id),
        device.snapshot.window(&device.entry.group),
        q.seq,
        now_ms(),
        |etag| ranges::none_match(headers, etag),
    ) {
        Poll::Nothing => (StatusCode::NO_CONTENT, headers_always).into_response(),
        Poll::NotModified(a) => (
            StatusCode::NOT_MODIFIED,
            headers_always,
            [(header::ETAG, a.etag.clone())],
        )
            .into_response(),
        Poll::Offer(a) => (
            StatusCode::OK,
            headers_always,
            [
                (header::ETAG, a.etag.clone()),
                (SEQUENCE_HEADER, HeaderValue::from(a.sequence)),
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
            ],
            Body::from(a.manifest.clone()),
        )
            .into_response(),
    }
}

/// `Npub-Poll-Interval` and `Npub-Keyring-Sequence`, on every manifest answer: clones of values
/// built once (reference counts, no allocation).
pub fn always_headers(polling: &Polling, snapshot: &Snapshot) -> [(HeaderName, HeaderValue); 2] {
    [
        (POLL_INTERVAL_HEADER, polling.poll_interval.clone()),
        (
            KEYRING_SEQUENCE_HEADER,
            snapshot.keyring().newest_header().clone(),
        ),
    ]
}

/// The keyring updates after `after`: what a device applies, in order, before it verifies a
/// manifest when `Npub-Keyring-Sequence` is above its keyring's sequence. Answered from the
/// poll snapshot.
#[utoipa::path(
    get,
    path = "/api/v1/device/keys",
    tag = "device",
    params(KeysQuery),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "the NPK1 records with sequence > after, 144 bytes each, by sequence", content_type = "application/octet-stream"),
        (status = 204, description = "none after `after`"),
        (status = 304, description = "If-None-Match matched"),
        (status = 400, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`after` above the largest sequence (2^63 - 1)"),
        (status = 401, body = ErrorBody),
    )
)]
async fn keys(device: Device, Query(q): Query<KeysQuery>, headers: HeaderMap) -> Response {
    if i64::try_from(q.after).is_err() {
        // Sequences are i64 in the database; a larger one was never issued.
        return ApiError::invalid(format!("after: at most {}", i64::MAX)).into_response();
    }
    let keyring = device.snapshot.keyring();
    let newest = keyring.newest();
    let records = keyring.after(q.after);
    if records.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    // Records are never changed once stored: (after, newest) names the answer's bytes.
    let Ok(etag) = HeaderValue::from_str(&format!("\"k{}-{newest}\"", q.after)) else {
        return ApiError::internal("an etag is a header").into_response();
    };
    if ranges::none_match(&headers, &etag) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    (
        StatusCode::OK,
        [
            (header::ETAG, etag),
            (KEYRING_SEQUENCE_HEADER, HeaderValue::from(newest)),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
        ],
        Body::from(records),
    )
        .into_response()
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
        (status = 307, description = "with `--presign-downloads`: fetch the pack (with the same `Range`, without the token) from the presigned URL in `Location`"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not a pack this device is assigned"),
        (status = 416, body = ErrorBody, description = "the range starts at or past the end"),
        (status = 503, body = ErrorBody, description = "the pack store failed or did not answer within `--store-timeout`: retry after `Retry-After` seconds"),
    )
)]
async fn pack(
    State(state): State<AppState>,
    device: Device,
    Path(sha256): Path<String>,
    // The request itself rather than a `HeaderMap`, which would be a copy of every header.
    request: Request,
) -> Result<Response, ApiError> {
    let headers = request.headers();
    let if_none_match: Vec<&[u8]> = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    let conditions = decide::Conditions {
        if_none_match: &if_none_match,
        if_range: headers.get(header::IF_RANGE).map(HeaderValue::as_bytes),
        range: headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
    };
    let (entry, answer) = match decide::pack(&device.snapshot, &device.entry, &sha256, &conditions)
    {
        decide::Pack::NotAssigned => {
            return Err(ApiError::NotFound(format!(
                "pack {sha256:?} for this device"
            )));
        }
        decide::Pack::Send { entry, range } => (entry, range),
    };
    let etag = entry.etag.clone();
    let len = entry.len;
    let in_memory = match decide::source(entry) {
        decide::Source::File(_, bytes) => bytes,
        decide::Source::Memory(bytes) => Some(bytes),
        decide::Source::Store => None,
    };
    if let Some(bytes) = in_memory.cloned() {
        let body = |offset: u64, count: u64| {
            state.metrics.add_pack_bytes_served(count);
            // Both within `len`, which is a `usize` (`ranges::answer_of` checked them against it).
            Body::from(bytes.slice(offset as usize..(offset + count) as usize))
        };
        return ranges::respond(answer, etag, len, body, &[]);
    }
    let digest: PackDigest = sha256.parse().map_err(ApiError::internal)?;
    if matches!(
        answer,
        ranges::Answer::Full | ranges::Answer::Partial { .. }
    ) && let Some(url) = state
        .store
        .download_url(digest)
        .await
        .map_err(ApiError::store)?
    {
        // The device sends its `Range` again to the bucket, without its token (a client drops
        // `Authorization` on a redirect to another origin); the URL authorises this one object.
        let location = HeaderValue::from_str(&url).map_err(ApiError::internal)?;
        return Ok((
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, location), (header::ETAG, etag)],
        )
            .into_response());
    }
    let (offset, count) = answer.span(len);
    let reader = match answer {
        ranges::Answer::Full | ranges::Answer::Partial { .. } => {
            Some(open_at(&state, digest, offset, len).await?)
        }
        ranges::Answer::NotModified | ranges::Answer::Unsatisfiable => None,
    };
    let metrics = state.metrics.clone();
    let body = move |_, _| match reader {
        None => Body::empty(),
        Some(reader) => Body::from_stream(
            tokio_util::io::ReaderStream::new(reader.take(count)).map(move |chunk| {
                if let Ok(bytes) = &chunk {
                    metrics.add_pack_bytes_served(bytes.len() as u64);
                }
                chunk
            }),
        ),
    };
    ranges::respond(answer, etag, len, body, &[])
}

/// The pack from the store, from `offset` on, checked to be the length the snapshot knows. Any
/// failure of the store's (an error, no answer within `--store-timeout`, the object missing or
/// of another length) is a 503 with `Retry-After` for the device, never a 500: the device
/// retries, and the cause is logged here.
async fn open_at(
    state: &AppState,
    digest: PackDigest,
    offset: u64,
    len: u64,
) -> Result<std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>, ApiError> {
    let pack = state
        .store
        .open_from(digest, offset)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| {
            ApiError::store(std::io::Error::other(format!(
                "assigned pack {digest} is missing from the store"
            )))
        })?;
    if pack.len != len {
        return Err(ApiError::store(std::io::Error::other(format!(
            "pack {digest} is {} bytes in the store but {len} when it was assigned",
            pack.len
        ))));
    }
    Ok(pack.reader)
}

fn assigned<'a>(device: &'a Device, sha256: &str) -> Result<&'a PackEntry, ApiError> {
    decide::assigned_pack(&device.snapshot, &device.entry, sha256)
        .ok_or_else(|| ApiError::NotFound(format!("pack {sha256:?} for this device")))
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

/// The release signatures of the version the device's assignment deploys, exactly as uploaded:
/// the device checks them after the manifest and before it downloads (`docs/release.md`).
#[utoipa::path(
    get,
    path = "/api/v1/device/packs/{sha256}/release",
    tag = "device",
    params(("sha256" = String, Path, description = "the pack's SHA-256, as the manifest names it")),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "the NPRB bundle (docs/release.md); `ETag: \"r-<SHA-256 of the bundle>\"`", content_type = "application/octet-stream"),
        (status = 304, description = "If-None-Match matched"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not the pack this device is assigned, or `no release signatures for this pack`"),
    )
)]
async fn pack_release(
    device: Device,
    Path(sha256): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let none_match = |etag: &HeaderValue| {
        request
            .headers()
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .any(|v| ranges::none_match_values([v.as_bytes()], etag))
    };
    match decide::release(&device.snapshot, &device.entry, &sha256, none_match) {
        decide::Release::NotAssigned => Err(ApiError::NotFound(format!(
            "pack {sha256:?} for this device"
        ))),
        // The contract's words exactly (not "… not found").
        decide::Release::None => Err(ApiError::Absent("no release signatures for this pack")),
        decide::Release::NotModified(entry) => Ok((
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, entry.etag.clone())],
        )
            .into_response()),
        decide::Release::Send(entry) => Ok((
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (header::ETAG, entry.etag.clone()),
            ],
            Body::from(entry.bundle.clone()),
        )
            .into_response()),
    }
}

/// The self-test record of the version the device's assignment deploys ("NPS1",
/// `docs/release.md`): the golden input the device runs on its NPU after an install and the
/// SHA-256 its outputs must hash to. Its SHA-256 is the version-2 manifest's `selftest_digest`,
/// which the device checks before it stores the record; the same authentication and assignment
/// rule as the pack's download.
#[utoipa::path(
    get,
    path = "/api/v1/device/packs/{sha256}/selftest",
    tag = "device",
    params(("sha256" = String, Path, description = "the pack's SHA-256, as the manifest names it")),
    security(("device_token" = [])),
    responses(
        (status = 200, description = "the NPS1 record; `ETag: \"s-<its SHA-256>\"`", content_type = "application/octet-stream", body = crate::catalog::proof::SelfTestRecord),
        (status = 206, description = "the requested range of the record (`Range`, as for the pack)", content_type = "application/octet-stream"),
        (status = 304, description = "`If-None-Match` names the record's `ETag`"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not the pack this device is assigned, or `no self-test for this pack`"),
        (status = 416, body = ErrorBody, description = "the range starts at or past the end"),
    )
)]
async fn pack_selftest(
    device: Device,
    Path(sha256): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    assigned(&device, &sha256)?;
    let entry = device
        .snapshot
        .assignment(&device.entry.id)
        .and_then(|a| a.selftest.clone())
        .ok_or(ApiError::Absent("no self-test for this pack"))?;
    let (record, etag) = (entry.record, entry.etag);
    // The pack's own rules (`Range`, `If-Range`, `If-None-Match`, 416): a device fetches the
    // record in ranges over its kept connection, as it fetches the pack.
    let len = record.len() as u64;
    let answer = ranges::answer(&headers, &etag, len);
    // Both within `len` (`ranges::answer` checked them against it).
    let body = |offset: u64, count: u64| {
        Body::from(record.slice(offset as usize..(offset + count) as usize))
    };
    ranges::respond(answer, etag, len, body, &[])
}

/// The deployment a status report names.
#[derive(sqlx::FromRow)]
struct Reported {
    id: i64,
    version_id: i64,
    target_group: Option<String>,
    target_device: Option<String>,
    batches: String,
    open_batches: i64,
    accel: i64,
}

/// Whether `device` is among the targets the open batches of `d` offer (the same rule the poll
/// cache applies). Once every batch is open (the last is 100 %: every target), the device's own
/// entry answers (and a retry's members); before, its rank among the deployment's targets (their
/// rows, read by group).
async fn offered(
    conn: &mut crate::db::Conn,
    d: &Reported,
    batches: &[u8],
    device: &DeviceEntry,
) -> Result<bool, ApiError> {
    let open = usize::try_from(d.open_batches).unwrap_or(0);
    let members = crate::fleet::ranking::members(conn, d.id).await?;
    if open >= batches.len() && batches.last() == Some(&100) {
        let member = match (d.target_group.as_deref(), d.target_device.as_deref()) {
            (Some(group), _) => device.group == group,
            (None, Some(id)) => *device.id == *id,
            (None, None) => false,
        } && members.as_ref().is_none_or(|m| m.contains(&*device.id));
        return Ok(member && i64::from(device.accel) == d.accel);
    }
    let devices = target_rows(conn, d.target_group.as_deref(), d.target_device.as_deref()).await?;
    let (ranked, _) = targets(
        &devices,
        d.target_group.as_deref(),
        d.target_device.as_deref(),
        members.as_ref(),
        d.accel,
    );
    let n = rollout::offered_count(batches, open, ranked.len());
    Ok(ranked[..n].contains(&&*device.id))
}

/// Whether a report in `state` can change what the rollout rules decide for `d`: a failure can
/// abort it; a success can open a batch while one is still closed. Any other report (progress,
/// a success once every batch is open) leaves the decision as the last evaluation left it, and
/// is not evaluated (evaluating reads every target and every report of the deployment).
fn may_decide(d: &Reported, batches: &[u8], state: DeviceState) -> bool {
    let open = usize::try_from(d.open_batches).unwrap_or(0);
    state.is_failure() || (state.is_success() && open < batches.len())
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
        (status = 409, body = ErrorBody, description = "the deployment's open batches do not include the device"),
        (status = 422, body = ErrorBody),
    )
)]
async fn status(
    State(state): State<AppState>,
    device: Device,
    Json(report): Json<StatusReport>,
) -> Result<StatusCode, ApiError> {
    state.polling.last_seen.touch(&device.entry.id, now_ms());
    if report.state == DeviceState::Pending {
        return Err(ApiError::invalid(
            "state: `pending` is not something a device reports",
        ));
    }
    if report.progress.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(ApiError::invalid("progress: must be from 0 to 1"));
    }
    if let Some(reason) = &report.reason {
        crate::names::free_text("reason", reason, MAX_REASON_CHARS, crate::names::Lines::One)?;
    }
    check_events(report.events.as_deref().unwrap_or_default())?;
    if report
        .attempts
        .is_some_and(|n| !(1..=MAX_ATTEMPTS).contains(&n))
    {
        return Err(ApiError::invalid(format!(
            "attempts: must be from 1 to {MAX_ATTEMPTS}"
        )));
    }
    // No column of its own: the attempt goes in front of the reason it ended with.
    let reason = match (report.attempts, report.reason.as_deref()) {
        (Some(n), Some(r)) => Some(format!("attempt {n}: {r}")),
        (Some(n), None) => Some(format!("attempt {n}")),
        (None, r) => r.map(str::to_owned),
    };
    let sequence =
        i64::try_from(report.sequence).map_err(|_| ApiError::invalid("sequence: out of range"))?;
    let id: &str = &device.entry.id;
    let now = now_ms();
    let mut tx = FleetChange::begin(&state).await?;
    let found: Option<Reported> = sqlx::query_as(
        "SELECT d.id, d.version_id, d.target_group, d.target_device, d.batches, d.open_batches, \
         v.accel FROM deployments d JOIN versions v ON v.id = d.version_id \
         WHERE d.sequence = $1 AND (d.target_device = $2 OR d.target_group = $3)",
    )
    .bind(sequence)
    .bind(id)
    .bind(&device.entry.group)
    .fetch_optional(&mut *tx)
    .await?;
    let found = found.ok_or_else(|| {
        ApiError::NotFound(format!(
            "deployment with sequence {sequence} for this device"
        ))
    })?;
    // The snapshot the device authenticated with offers it this deployment: it was offered (its
    // batches only grow). Otherwise the database decides (a newer deployment took its place, or
    // the snapshot is behind).
    let assigned = device
        .snapshot
        .assignment(&device.entry.id)
        .is_some_and(|a| a.deployment_id == found.id);
    let batches: Vec<u8> = serde_json::from_str(&found.batches).map_err(ApiError::internal)?;
    if !assigned && !offered(&mut tx, &found, &batches, &device.entry).await? {
        // Counting it would report installs the rollout never asked for, and could open the next
        // batch on their strength.
        return Err(ApiError::Conflict(format!(
            "deployment with sequence {sequence} has not been offered to this device: it is in \
             none of the open batches"
        )));
    }
    let (deployment_id, version_id) = (found.id, found.version_id);
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
    .bind(reason.as_deref())
    .bind(now)
    .persistent(false) // an optional float (db.rs, "Where the SQL differs")
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE devices SET last_state = $1, last_reason = $2, last_status_at = $3 WHERE id = $4",
    )
    .bind(report.state.as_str())
    .bind(reason.as_deref())
    .bind(now)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    // The offers this device's polls left pending go first, so its history reads in order.
    let offers = state.polling.last_seen.take_offers(&device.entry.id);
    for &(offered, at) in offers.offers() {
        crate::fleet::history::record_offer(&mut tx, id, offered, at).await?;
    }
    crate::fleet::history::record_report(
        &mut tx,
        id,
        deployment_id,
        report.state.as_str(),
        report.progress,
        reason.as_deref(),
        now,
    )
    .await?;
    let events = report.events.unwrap_or_default();
    if !events.is_empty() {
        // Beside the report: the row record_report just wrote (or updated) is the device's newest.
        sqlx::query(
            "UPDATE device_events SET agent_log = $1 \
             WHERE id = (SELECT MAX(id) FROM device_events WHERE device_id = $2)",
        )
        .bind(serde_json::Value::from(events.clone()).to_string())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    crate::ops::webhooks::emit::device_report(
        &mut tx,
        id,
        deployment_id,
        sequence,
        report.state.as_str(),
        reason.as_deref(),
        &events,
    )
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
    // A report that opens a batch, completes or aborts the rollout changes what devices are
    // offered; any other changes no snapshot.
    let effect = if may_decide(&found, &batches, report.state)
        && deployments::evaluate_in(&mut tx, deployment_id, &state.rollout_targets).await?
    {
        Effect::Fleet
    } else {
        Effect::Nothing
    };
    // The last success completes the deployment: recorded once, with its webhook event.
    if report.state.is_success() {
        deployments::complete_in(&mut tx, deployment_id, &state.rollout_targets).await?;
    }
    let committed = tx.commit(Record::DeviceReport, effect).await?;
    offers.written();
    committed.finish().await;
    Ok(StatusCode::NO_CONTENT)
}

/// Adds the device-token security scheme and the device tag to the OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    modifiers(&DeviceToken),
    tags((name = "device", description = "The API devices call, with a device token"))
)]
pub struct DeviceDoc;

struct DeviceToken;

impl Modify for DeviceToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "device_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A device token (`npub_dev_…`), from POST /api/v1/devices",
                    ))
                    .build(),
            ),
        );
    }
}
