//! Receiving an upload: the body goes straight to a staged file under `<data-dir>/tmp/`, chunk by
//! chunk, hashed on the way, so a large pack is never held whole in memory while it arrives.
//!
//! Two body shapes are accepted:
//!
//! | `Content-Type`          | Body                                                             |
//! |-------------------------|------------------------------------------------------------------|
//! | `multipart/form-data`   | part `pack` (required): the file; part `io` (optional): IO-bindings JSON, `.npub` only; part `release` (optional): the release bundle (`PACK.release`, `docs/release.md`); part `source` (optional): the `.tflite` Vela compiled the pack from, for the proof (`proof.rs`), staged like the pack |
//! | anything else           | the file itself                                                  |
use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use futures_util::StreamExt;

use crate::http::error::ApiError;
use crate::ops::disk::DataDisk;
use crate::state::AppState;
use crate::store::{Sealed, StagedFile, Staging};

/// Largest `io` part: 64 bindings of JSON are a few tens of KiB.
pub const IO_JSON_MAX_BYTES: u64 = 256 * 1024;
/// Largest `release` part: a bundle of four signatures (`npub_core::release::MAX_BUNDLE_BYTES`).
pub const RELEASE_PART_MAX_BYTES: u64 = npub_core::release::MAX_BUNDLE_BYTES as u64;
/// Allowance for multipart framing (boundaries, part headers) on top of the pack and `io` parts.
const MULTIPART_OVERHEAD_BYTES: u64 = 64 * 1024;

/// What a 413 names, for each thing that has its own limit.
const RAW: &str = "the upload";
const FORM: &str = "the multipart form";
const PACK_PART: &str = "multipart part `pack`";
const IO_PART: &str = "multipart part `io`";
const RELEASE_PART: &str = "multipart part `release`";
const SOURCE_PART: &str = "multipart part `source`";

/// The whole multipart form's limit: the pack, its source model (no larger than a pack may be),
/// the `io` and `release` parts and the framing.
fn form_limit(pack_limit: u64) -> u64 {
    pack_limit
        .saturating_mul(2)
        .saturating_add(IO_JSON_MAX_BYTES)
        .saturating_add(RELEASE_PART_MAX_BYTES)
        .saturating_add(MULTIPART_OVERHEAD_BYTES)
}

/// A received upload, fsynced in staging.
#[derive(Debug)]
pub struct Received {
    /// The uploaded file.
    pub staged: Sealed,
    /// The `io` part, if one was sent.
    pub io_json: Option<String>,
    /// The `release` part (a release bundle, checked later), if one was sent.
    pub release: Option<Vec<u8>>,
    /// The `source` part (the model Vela compiled the pack from), fsynced in staging, if one
    /// was sent.
    pub source: Option<Sealed>,
}

/// Streams the request body into staging. `what` names the upload in the log.
pub async fn receive(state: &AppState, request: Request, what: &str) -> Result<Received, ApiError> {
    let limit = state.limits.max_upload_bytes;
    let content_type = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let declared_len = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let multipart = content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data");
    let (what_body, allowed) = if multipart {
        (FORM, form_limit(limit))
    } else {
        (RAW, limit)
    };
    if declared_len.is_some_and(|n| n > allowed) {
        return Err(ApiError::PayloadTooLarge {
            what: what_body,
            limit: allowed,
        });
    }
    // An upload that says how large it is and would not fit above the reserve is refused
    // before a byte of it is read; one that does not say is checked as it arrives.
    state.disk.admit(declared_len.unwrap_or(0))?;
    let mut staged = state.staging.create("upload").await?;
    tracing::info!(upload = what, "receiving upload");
    let body = request.into_body();
    let sink = &mut Sink {
        staged: &mut staged,
        disk: &state.disk,
        limit,
    };
    let parts = if multipart {
        receive_multipart(body, &content_type, sink, &state.staging).await?
    } else {
        receive_raw(body, sink).await?;
        Parts::default()
    };
    if staged.is_empty() {
        return Err(ApiError::bad_request("the upload is empty"));
    }
    let source = match parts.source {
        Some(source) if source.is_empty() => {
            return Err(ApiError::bad_request("multipart part `source` is empty"));
        }
        Some(source) => Some(source.finish().await?),
        None => None,
    };
    Ok(Received {
        staged: staged.finish().await?,
        io_json: parts.io_json,
        release: parts.release,
        source,
    })
}

/// Where a body's bytes go: the staged file, within the upload limit and above the disk's
/// reserve.
struct Sink<'a> {
    staged: &'a mut StagedFile,
    disk: &'a DataDisk,
    limit: u64,
}

/// How often (in bytes received) an upload of unknown length looks at the disk's free space.
const DISK_CHECK_BYTES: u64 = 1024 * 1024;

impl Sink<'_> {
    /// Appends `chunk`, refusing it past `limit` (413 naming `what`) or past the reserve (507).
    async fn write(&mut self, chunk: &[u8], what: &'static str) -> Result<(), ApiError> {
        write_within(self.staged, self.disk, self.limit, chunk, what).await
    }
}

/// Appends `chunk` to `staged`, refusing it past `limit` (413 naming `what`) or past the
/// disk's reserve (507).
async fn write_within(
    staged: &mut StagedFile,
    disk: &DataDisk,
    limit: u64,
    chunk: &[u8],
    what: &'static str,
) -> Result<(), ApiError> {
    let before = staged.len();
    let after = before.saturating_add(chunk.len() as u64);
    if after > limit {
        return Err(ApiError::PayloadTooLarge { what, limit });
    }
    if before / DISK_CHECK_BYTES != after / DISK_CHECK_BYTES {
        disk.admit(DISK_CHECK_BYTES)?;
    }
    staged.write(chunk).await?;
    Ok(())
}

/// The parts of a multipart upload besides `pack`.
#[derive(Default)]
struct Parts {
    io_json: Option<String>,
    release: Option<Vec<u8>>,
    source: Option<StagedFile>,
}

async fn receive_raw(body: Body, sink: &mut Sink<'_>) -> Result<(), ApiError> {
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| match crate::http::body_rate::too_slow(&e) {
            Some(slow) => ApiError::RequestTimeout(slow.to_string()),
            None => ApiError::bad_request(format!("reading the body: {e}")),
        })?;
        sink.write(&chunk, RAW).await?;
    }
    Ok(())
}

async fn receive_multipart(
    body: Body,
    content_type: &str,
    sink: &mut Sink<'_>,
    staging: &Staging,
) -> Result<Parts, ApiError> {
    let limit = sink.limit;
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| ApiError::bad_request(format!("multipart: {e}")))?;
    let constraints = multer::Constraints::new()
        .allowed_fields(vec!["pack", "io", "release", "source"])
        .size_limit(
            multer::SizeLimit::new()
                .whole_stream(form_limit(limit))
                .for_field("pack", limit)
                .for_field("io", IO_JSON_MAX_BYTES)
                .for_field("release", RELEASE_PART_MAX_BYTES)
                .for_field("source", limit),
        );
    let mut form =
        multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
    let mut parts = Parts::default();
    let mut seen_pack = false;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("pack") if !seen_pack => {
                seen_pack = true;
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    sink.write(&chunk, PACK_PART).await?;
                }
            }
            Some("io") if parts.io_json.is_none() => {
                parts.io_json = Some(field.text().await.map_err(multipart_error)?);
            }
            Some("release") if parts.release.is_none() => {
                parts.release = Some(field.bytes().await.map_err(multipart_error)?.to_vec());
            }
            Some("source") if parts.source.is_none() => {
                let mut staged = staging.create("source").await?;
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    write_within(&mut staged, sink.disk, limit, &chunk, SOURCE_PART).await?;
                }
                parts.source = Some(staged);
            }
            name => {
                return Err(ApiError::bad_request(format!(
                    "multipart: unexpected or repeated part {name:?}; expected one `pack` and at \
                     most one `io`, one `release` and one `source`"
                )));
            }
        }
    }
    if !seen_pack {
        return Err(ApiError::bad_request("multipart: no `pack` part"));
    }
    Ok(parts)
}

/// multer's error as an [`ApiError`]; a 413 names the part (or the form) and its own limit.
fn multipart_error(e: multer::Error) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { limit } => {
            ApiError::PayloadTooLarge { what: FORM, limit }
        }
        multer::Error::FieldSizeExceeded { limit, field_name } => ApiError::PayloadTooLarge {
            what: match field_name.as_deref() {
                Some("io") => IO_PART,
                Some("release") => RELEASE_PART,
                Some("source") => SOURCE_PART,
                _ => PACK_PART,
            },
            limit,
        },
        multer::Error::StreamReadFailed(e) if crate::http::body_rate::too_slow(&*e).is_some() => {
            ApiError::RequestTimeout(e.to_string())
        }
        other => ApiError::bad_request(format!("multipart: {other}")),
    }
}
