//! `/api/v1/models/{name}/versions…`: upload, list, inspect, download and delete packs.
//!
//! An upload is stored only if every check passes:
//!
//! | step | what                                                                 | holds                |
//! |------|----------------------------------------------------------------------|----------------------|
//! | 1    | receive the body into staging (`upload.rs`), hashed, fsynced          | an upload permit     |
//! | 2    | validate it on the CPU pool (`ops/cpu.rs`), read into an anonymous mapping | a pool thread       |
//! | 3    | put the pack into the store under its SHA-256                          | nothing              |
//! | 4    | one short write transaction: no removal of this pack under way (`store/gc.rs`), insert the version, audit, commit | the database's write lock |
//!
//! No lock is held while the store is called: a store that never answers fails the upload with
//! 503 after `--store-timeout`, and every other write goes on. Until the commit the staged file
//! stays (so the pack can be put again if a removal raced it); it is deleted on every path and
//! swept at the next start after a crash. A pack put without a row to name it (a crash or a
//! conflict between steps 3 and 4) is an orphan for the background sweep (`store/gc.rs`).
use std::sync::Arc;

use axum::Json as JsonResponse;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use npub_core::Accel;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt as _;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Operator;
use crate::catalog::models;
use crate::catalog::proof::{self, GoldenInfo, Proof};
use crate::catalog::release;
use crate::catalog::upload;
use crate::catalog::validate::{self, Accepted, SourceKind};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Path, Query};
use crate::http::page::{self, Page};
use crate::http::ranges;
use crate::keys::release::{KnownRelease, VersionFacts};
use crate::names;
use crate::ops::audit;
use crate::ops::cpu::CpuPool;
use crate::state::AppState;
use crate::store::{PackDigest, Put, Sealed, gc, to_hex};
use crate::time::{now_ms, rfc3339};

/// A version, as listed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Version {
    /// The model's name.
    pub model: String,
    /// The version.
    pub version: String,
    /// SHA-256 of the pack (64 hex digits): its name in the store and its download `ETag`.
    pub sha256: String,
    /// Pack bytes (NPU1 `total_bytes`).
    pub size: i64,
    /// NPU1 header checksum (FNV-1a of the payload), as `0x…`.
    pub checksum: String,
    /// Vela accelerator config the stream was compiled for (`ethos-u55-256`, …).
    pub accelerator: String,
    /// The NPU1 `accel` word.
    pub accel_word: i64,
    /// Region descriptors.
    pub region_count: i64,
    /// Arena bytes a device must provide (`npub_core::arena_bytes_required`).
    pub arena_bytes: i64,
    /// What was uploaded: `npub`, `tflite` or `npz`.
    pub source: String,
    /// SHA-256 of the uploaded file (the pack's own for a `.npub`).
    pub source_sha256: String,
    /// Bytes uploaded.
    pub source_size: i64,
    /// Digest of the canonical IO bindings (what a signed manifest carries); absent when none.
    pub io_digest: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// Name of the token that uploaded it.
    pub uploaded_by: String,
    /// Who released it: the key ids of its stored release signatures, in bundle order (empty:
    /// nobody yet). `GET …/release-signatures` has the rest.
    pub release_key_ids: Vec<String>,
    /// The proof against the source model: `bit_exact`, `diverged` or `not_run`; absent when
    /// the upload came without its source model.
    pub proof_status: Option<String>,
}

/// A version with everything known about its pack.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionDetail {
    /// The listing fields.
    #[serde(flatten)]
    pub version: Version,
    /// IO bindings, in npub-core's JSON form (`docs/io-bindings.md`); absent when none.
    #[schema(value_type = Option<Object>)]
    pub io_bindings: Option<serde_json::Value>,
    /// What `npub inspect --json` shows: annotated header, regions, arena bytes, checksum.
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
    /// The command-stream verifier's summary: commands, operations, per-region accessed spans.
    #[schema(value_type = Object)]
    pub stream: serde_json::Value,
    /// What the Vela import warned about (missing or suspicious IO metadata in a raw `.npz`, for
    /// instance): the pack is valid, but these deserve a look. Empty for most uploads.
    pub warnings: Vec<String>,
    /// Other versions of this model whose pack is byte-identical (same SHA-256): an upload that
    /// changed nothing, said at once rather than found out after a deployment.
    pub identical_to: Vec<String>,
    /// The proof that the pack computes what its source model computes (`catalog/proof.rs`);
    /// absent when the upload came without its source model (multipart part `source`).
    pub proof: Option<Proof>,
    /// The golden vector a device's self-test reproduces; absent when the functional model
    /// cannot run the pack (no IO bindings, an operation it does not implement).
    pub golden: Option<GoldenInfo>,
}

/// `/api/v1/models/{name}/versions…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_versions))
        .routes(routes!(upload_version, get_version, delete_version))
        .routes(routes!(download_pack))
        .routes(routes!(download_selftest))
}

/// Uploads a version: a `.npub`, a Vela `*_vela.tflite` or a Vela `.npz`, recognised by content.
/// Either the raw file as the body, or `multipart/form-data` with the file as part `pack` and,
/// for a `.npub`, optional IO-bindings JSON as part `io`. With the source model as part
/// `source`, the server proves the pack against it (`proof` in the answer); a proof that
/// diverges does not refuse the upload, but deploying the version then needs `override_proof`.
#[utoipa::path(
    post,
    path = "/api/v1/models/{name}/versions/{version}",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version, e.g. 1.2.0"),
    ),
    request_body(
        description = "the file, or a multipart form with parts `pack`, optional `io`, optional `release` and optional `source`",
        content(
            (PackFile = "application/octet-stream"),
            (UploadForm = "multipart/form-data"),
        ),
    ),
    security(("token" = [])),
    responses(
        (status = 201, body = VersionDetail),
        (status = 400, body = ErrorBody, description = "unreadable body or form"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such model"),
        (status = 409, body = ErrorBody, description = "the version exists"),
        (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "rejected by npub-core: the detail is its message"),
        (status = 503, body = ErrorBody, description = "as many uploads as the server takes at once are in flight (`Retry-After`)"),
        (status = 507, body = ErrorBody, description = "the data directory's disk is full, or the upload would leave less than `--min-free-space`: the detail names the disk"),
    )
)]
async fn upload_version(
    State(state): State<AppState>,
    op: Operator,
    Path((name, version)): Path<(String, String)>,
    request: Request,
) -> Result<(StatusCode, JsonResponse<VersionDetail>), ApiError> {
    let mut source = "unknown";
    let result = upload_inner(&state, &op, &name, &version, request, &mut source).await;
    let (outcome, bytes) = match &result {
        Ok((_, detail)) => ("stored", detail.version.source_size as u64),
        Err(ApiError::InvalidPack(_)) => ("rejected", 0),
        Err(ApiError::Conflict(_)) => ("conflict", 0),
        Err(ApiError::PayloadTooLarge { .. }) => ("too_large", 0),
        Err(ApiError::InvalidRequest { .. } | ApiError::NotFound(_)) => ("invalid", 0),
        Err(ApiError::Busy(_)) => ("busy", 0),
        Err(ApiError::RequestTimeout(_)) => ("too_slow", 0),
        Err(_) => ("failed", 0),
    };
    state.metrics.observe_upload(source, outcome, bytes);
    if let Err(ApiError::InvalidPack(reason)) = &result {
        tracing::info!(model = %name, version = %version, %reason, "upload rejected");
    }
    let (status, mut detail) = result?;
    detail.identical_to = identical_versions(&state, &name, &detail.version).await?;
    if !detail.identical_to.is_empty() {
        tracing::info!(model = %name, version = %version, same_as = ?detail.identical_to,
            "the upload is byte-identical to an existing version");
    }
    Ok((status, JsonResponse(detail)))
}

/// The import warnings stored in a version's report.
fn warnings_of(report: &serde_json::Value) -> Vec<String> {
    report["vela_warnings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The other versions of model `name` whose pack is `v`'s, oldest first.
async fn identical_versions(
    state: &AppState,
    name: &str,
    v: &Version,
) -> Result<Vec<String>, ApiError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT v.version FROM versions v JOIN models m ON m.id = v.model_id \
         WHERE m.name = $1 AND v.sha256 = $2 AND v.version <> $3 ORDER BY v.id",
    )
    .bind(name)
    .bind(&v.sha256)
    .bind(&v.version)
    .fetch_all(&state.db)
    .await?;
    Ok(rows.into_iter().map(|(v,)| v).collect())
}

/// Documents a file body: bytes, not JSON.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)]
struct PackFile(Vec<u8>);

/// Documents the multipart shape of an upload.
#[derive(ToSchema)]
#[allow(dead_code)]
struct UploadForm {
    /// The release bundle (`npub release sign`'s `PACK.release`): stored as the version's
    /// release signatures, after the checks of `POST …/release-signatures`.
    #[schema(format = Binary, value_type = Option<String>)]
    release: Option<Vec<u8>>,
    /// The `.npub`, `*_vela.tflite` or `.npz`.
    #[schema(format = Binary, value_type = String)]
    pack: Vec<u8>,
    /// IO-bindings JSON (`.npub` only).
    #[schema(value_type = Option<String>)]
    io: Option<String>,
    /// The `.tflite` Vela compiled the pack from: the server runs it with TFLite's reference
    /// kernels and the pack through its functional model, and stores the verdict (`proof`).
    #[schema(format = Binary, value_type = Option<String>)]
    source: Option<Vec<u8>>,
}

async fn upload_inner(
    state: &AppState,
    op: &Operator,
    name: &str,
    version: &str,
    request: Request,
    source: &mut &'static str,
) -> Result<(StatusCode, VersionDetail), ApiError> {
    names::model(name)?;
    names::version(version)?;
    let object = format!("models/{name}/versions/{version}");
    // Cheap refusals before a possibly large body is received.
    let model = models::find(&mut *state.db.acquire().await?, name).await?;
    if version_id(state, model.id, version).await?.is_some() {
        return Err(conflict(name, version));
    }
    let _in_flight = Arc::clone(&state.uploads)
        .try_acquire_owned()
        .map_err(|_| {
            ApiError::Busy(format!(
                "{} uploads are in progress, the most this server takes at once; retry shortly",
                state.limits.max_uploads
            ))
        })?;
    let received = upload::receive(state, request, &object).await?;
    let release_part = received.release;
    let source_model = received.source;
    if let Some(source) = &source_model {
        check_source_model(source.path()).await?;
    }
    let source_digest = received.staged.digest();
    let source_size = received.staged.len();
    let (kind, judged) = judge(
        &state.cpu,
        received.staged.path().to_owned(),
        received.io_json,
        model.accelerator,
    )
    .await?;
    *source = kind.as_str();
    let mut accepted = judged?;
    let pack_file: Sealed = match accepted.built_pack.take() {
        None => received.staged,
        Some(pack) => {
            drop(received.staged);
            let mut staged = state.staging.create("pack").await?;
            staged.write(&pack).await?;
            staged.finish().await?
        }
    };
    state.disk.admit(0)?;
    let digest = pack_file.digest();
    let proven = proof::run(
        &state.cpu,
        &state.proof,
        pack_file.path(),
        accepted.io.as_ref().map(|(json, _)| json.as_str()),
        source_model.as_ref().map(Sealed::path),
    )
    .await;
    drop(source_model);
    if let Some(why) = &proven.no_golden {
        tracing::info!(object, reason = %why, "no golden vector for this version");
    }
    let now = now_ms();
    // A `release` part is checked before the pack is stored: a bundle that does not release
    // this very upload refuses the whole of it.
    let release_bundle = match &release_part {
        None => None,
        Some(bundle) => {
            let facts = VersionFacts::of_row(
                name,
                version,
                &digest.hex(),
                i64::from(accepted.accel.word()),
                accepted.io.as_ref().map(|(_, d)| d.as_str()),
                proven.golden.as_ref().and_then(|g| {
                    proof::selftest_digest(Some(&g.input), Some(&to_hex(&g.output_sha256)))
                }),
            )
            .ok_or_else(|| ApiError::internal("an IO digest is not 64 hex digits"))?;
            let known = KnownRelease::load(&mut *state.db.acquire().await?).await?;
            Some(release::accept(bundle, None, true, &facts, &known)?)
        }
    };

    // Outside every lock: a store that hangs holds nothing but this request.
    let mut put = state.store.put(&pack_file).await.map_err(ApiError::store)?;
    let gc = state.limits.gc;
    let mut tx = loop {
        let mut tx = crate::db::begin_write(&state.db).await?;
        if !gc::removal_pending(&mut tx, digest, gc).await? {
            break tx;
        }
        // A removal of these very bytes started before this row could name them: once it is
        // over, the pack goes in again (from the staged file, still here).
        tx.rollback().await?;
        if !gc::wait_until_removed(&state.db, digest, gc).await? {
            return Err(ApiError::Busy(
                "this pack is being removed from the store (a version with the same bytes was \
                 deleted); retry shortly"
                    .into(),
            ));
        }
        put = state.store.put(&pack_file).await.map_err(ApiError::store)?;
    };
    let orphan = OrphanGuard {
        state,
        digest,
        armed: put == Put::Created,
    };
    sqlx::query(
        "INSERT INTO versions (model_id, version, sha256, size, checksum, accel, region_count, \
         arena_bytes, source, source_sha256, source_size, io_bindings, io_digest, report, stream, \
         created_at, created_by, release_bundle, proof_status, proof, golden_input, golden_sha256) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
         $19, $20, $21, $22)",
    )
    .bind(model.id)
    .bind(version)
    .bind(digest.hex())
    .bind(accepted.size as i64)
    .bind(i64::from(accepted.checksum))
    .bind(i64::from(accepted.accel.word()))
    .bind(i64::from(accepted.region_count))
    .bind(accepted.arena_bytes as i64)
    .bind(accepted.kind.as_str())
    .bind(source_digest.hex())
    .bind(source_size as i64)
    .bind(accepted.io.as_ref().map(|(json, _)| json.as_str()))
    .bind(accepted.io.as_ref().map(|(_, digest)| digest.as_str()))
    .bind(accepted.report.to_string())
    .bind(accepted.stream.to_string())
    .bind(now)
    .bind(op.token_id)
    .bind(release_bundle.as_deref())
    .bind(proven.proof.as_ref().map(|p| p.status.clone()))
    .bind(
        proven
            .proof
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default()),
    )
    .bind(proven.golden.as_ref().map(|g| g.input.clone()))
    .bind(proven.golden.as_ref().map(|g| to_hex(&g.output_sha256)))
    .execute(&mut *tx)
    .await
    .map_err(|e| {
        ApiError::on_unique(e, || {
            format!("model {name:?} already has version {version:?}")
        })
    })?;
    audit::record(
        &mut tx,
        op,
        "version.upload",
        &object,
        serde_json::json!({
            "sha256": digest.hex(),
            "size": accepted.size,
            "source": accepted.kind.as_str(),
            "source_sha256": source_digest.hex(),
            "release_key_ids": release_bundle.as_deref().map(release_key_ids),
            "proof": proven.proof.as_ref().map(|p| p.status.as_str()),
        }),
    )
    .await?;
    tx.commit().await?;
    orphan.disarm();
    drop(pack_file);
    tracing::info!(object, %digest, source = accepted.kind.as_str(),
        proof = proven.proof.as_ref().map_or("none", |p| p.status.as_str()), "version stored");
    Ok((StatusCode::CREATED, {
        let mut detail = detail_of(
            name,
            version,
            digest,
            source_digest,
            source_size,
            now,
            op,
            accepted,
        );
        detail.version.release_key_ids = release_bundle
            .as_deref()
            .map(release_key_ids)
            .unwrap_or_default();
        detail.version.proof_status = proven.proof.as_ref().map(|p| p.status.clone());
        detail.golden = proven
            .golden
            .as_ref()
            .map(|g| GoldenInfo::of(&g.input, &to_hex(&g.output_sha256)));
        detail.proof = proven.proof;
        detail
    }))
}

/// A pack this upload put into the store, until its version commits: dropped armed (an error
/// path), it removes the pack in the background if nothing names it.
struct OrphanGuard<'a> {
    state: &'a AppState,
    digest: PackDigest,
    armed: bool,
}

impl OrphanGuard<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for OrphanGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (db, store, gc, digest) = (
            self.state.db.clone(),
            Arc::clone(&self.state.store),
            self.state.limits.gc,
            self.digest,
        );
        tokio::spawn(async move {
            if let Err(e) = gc::remove_if_unreferenced(&db, store.as_ref(), gc, digest).await {
                tracing::warn!(%digest, error = %e, "the pack of a failed upload stays for the sweep");
            }
        });
    }
}

/// The key ids of a stored bundle's signatures, in order.
fn release_key_ids(bundle: &[u8]) -> Vec<String> {
    npub_core::release::Bundle::parse(bundle)
        .map(|b| b.signatures().map(|s| s.key_id().to_string()).collect())
        .unwrap_or_default()
}

fn conflict(name: &str, version: &str) -> ApiError {
    ApiError::Conflict(format!("model {name:?} already has version {version:?}"))
}

/// 422 unless the `source` part is a TFLite flatbuffer (bytes 4..8 are `TFL3`).
async fn check_source_model(path: &std::path::Path) -> Result<(), ApiError> {
    let mut head = [0u8; 8];
    let mut file = tokio::fs::File::open(path).await?;
    let n = file.read(&mut head).await?;
    if n < 8 || &head[4..8] != b"TFL3" {
        return Err(ApiError::InvalidPack(
            "multipart part `source` is not a .tflite model (bytes 4..8 are not \"TFL3\")".into(),
        ));
    }
    Ok(())
}

/// Reads the staged upload (once, into an anonymous mapping that is unmapped when the judgement
/// is over) and judges it on the CPU pool.
async fn judge(
    cpu: &CpuPool,
    path: std::path::PathBuf,
    io_json: Option<String>,
    accel: Option<Accel>,
) -> Result<(SourceKind, Result<Accepted, ApiError>), ApiError> {
    cpu.run(move || {
        let bytes = read_mapped(&path)?;
        let kind = validate::recognise(&bytes);
        Ok((kind, validate::judge(&bytes, io_json.as_deref(), accel)))
    })
    .await
    .map_err(ApiError::internal)?
}

/// The whole file at `path` in memory of its own (an anonymous mapping: see `ops/cpu.rs` for why not
/// the heap).
fn read_mapped(path: &std::path::Path) -> std::io::Result<memmap2::MmapMut> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| std::io::Error::other("a staged upload larger than memory"))?;
    // A zero-length mapping is an error; an empty upload never gets here, but one byte costs
    // nothing and keeps this total.
    let mut map = memmap2::MmapMut::map_anon(len.max(1))?;
    file.read_exact(&mut map[..len])?;
    Ok(map)
}

#[allow(clippy::too_many_arguments)]
fn detail_of(
    name: &str,
    version: &str,
    digest: PackDigest,
    source_digest: PackDigest,
    source_size: u64,
    now: i64,
    op: &Operator,
    accepted: Accepted,
) -> VersionDetail {
    VersionDetail {
        version: Version {
            model: name.to_owned(),
            version: version.to_owned(),
            sha256: digest.hex(),
            size: accepted.size as i64,
            checksum: format!("{:#010x}", accepted.checksum),
            accelerator: accepted.accel.name().to_owned(),
            accel_word: i64::from(accepted.accel.word()),
            region_count: i64::from(accepted.region_count),
            arena_bytes: accepted.arena_bytes as i64,
            source: accepted.kind.as_str().to_owned(),
            source_sha256: source_digest.hex(),
            source_size: source_size as i64,
            io_digest: accepted.io.as_ref().map(|(_, d)| d.clone()),
            created_at: rfc3339(now),
            uploaded_by: op.name.clone(),
            release_key_ids: Vec::new(),
            proof_status: None,
        },
        io_bindings: accepted
            .io
            .as_ref()
            .and_then(|(json, _)| serde_json::from_str(json).ok()),
        warnings: warnings_of(&accepted.report),
        report: accepted.report,
        stream: accepted.stream,
        identical_to: Vec::new(),
        proof: None,
        golden: None,
    }
}

async fn version_id(
    state: &AppState,
    model_id: i64,
    version: &str,
) -> Result<Option<i64>, ApiError> {
    let row: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM versions WHERE model_id = $1 AND version = $2")
            .bind(model_id)
            .bind(version)
            .fetch_optional(&state.db)
            .await?;
    Ok(row.map(|(id,)| id))
}

/// The columns of [`VersionRow`], by name; a macro so that `concat!` can finish the query.
macro_rules! select_version {
    () => {
        "SELECT v.id, m.name AS model, v.version, v.sha256, v.size, v.checksum, \
     v.accel, v.region_count, v.arena_bytes, v.source, v.source_sha256, v.source_size, \
     v.io_digest, v.created_at, t.name AS uploaded_by, v.io_bindings, v.report, v.stream, \
     v.release_bundle, v.proof_status, v.proof, v.golden_input, v.golden_sha256 \
     FROM versions v JOIN models m ON m.id = v.model_id JOIN tokens t ON t.id = v.created_by"
    };
}

#[derive(sqlx::FromRow)]
struct VersionRow {
    id: i64,
    model: String,
    version: String,
    sha256: String,
    size: i64,
    checksum: i64,
    accel: i64,
    region_count: i64,
    arena_bytes: i64,
    source: String,
    source_sha256: String,
    source_size: i64,
    io_digest: Option<String>,
    created_at: i64,
    uploaded_by: String,
    io_bindings: Option<String>,
    report: String,
    stream: String,
    release_bundle: Option<Vec<u8>>,
    proof_status: Option<String>,
    proof: Option<String>,
    golden_input: Option<Vec<u8>>,
    golden_sha256: Option<String>,
}

impl VersionRow {
    fn summary(&self) -> Version {
        Version {
            model: self.model.clone(),
            version: self.version.clone(),
            sha256: self.sha256.clone(),
            size: self.size,
            checksum: format!("{:#010x}", self.checksum),
            accelerator: Accel::from_word(self.accel as u32).name().to_owned(),
            accel_word: self.accel,
            region_count: self.region_count,
            arena_bytes: self.arena_bytes,
            source: self.source.clone(),
            source_sha256: self.source_sha256.clone(),
            source_size: self.source_size,
            io_digest: self.io_digest.clone(),
            created_at: rfc3339(self.created_at),
            uploaded_by: self.uploaded_by.clone(),
            release_key_ids: self
                .release_bundle
                .as_deref()
                .map(release_key_ids)
                .unwrap_or_default(),
            proof_status: self.proof_status.clone(),
        }
    }

    fn detail(self) -> VersionDetail {
        let parse = |s: &str| serde_json::from_str(s).unwrap_or(serde_json::Value::Null);
        let report = parse(&self.report);
        VersionDetail {
            version: self.summary(),
            io_bindings: self.io_bindings.as_deref().map(parse),
            warnings: warnings_of(&report),
            report,
            stream: parse(&self.stream),
            identical_to: Vec::new(),
            proof: self
                .proof
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok()),
            golden: match (&self.golden_input, &self.golden_sha256) {
                (Some(input), Some(sha)) => Some(GoldenInfo::of(input, sha)),
                _ => None,
            },
        }
    }
}

async fn find_version(state: &AppState, name: &str, version: &str) -> Result<VersionRow, ApiError> {
    sqlx::query_as::<_, VersionRow>(concat!(
        select_version!(),
        " WHERE m.name = $1 AND v.version = $2"
    ))
    .bind(name)
    .bind(version)
    .fetch_optional(&state.db)
    .await?
    .ok_or_else(|| ApiError::NotFound(format!("model {name:?} version {version:?}")))
}

/// `GET /api/v1/models/{name}/versions` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VersionListQuery {
    /// Versions per page (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// A model's versions, oldest first, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}/versions",
    tag = "versions",
    params(("name" = String, Path, description = "model name"), VersionListQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = Page<Version>),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a bad `limit` or `cursor`"),
    )
)]
async fn list_versions(
    State(state): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
    Query(q): Query<VersionListQuery>,
) -> Result<JsonResponse<Page<Version>>, ApiError> {
    let limit = page::limit(q.limit)?;
    let after = page::decode_int(q.cursor.as_deref())?.unwrap_or(0);
    let model = models::find(&mut *state.db.acquire().await?, &name).await?;
    let rows = sqlx::query_as::<_, VersionRow>(concat!(
        select_version!(),
        " WHERE v.model_id = $1 AND v.id > $2 ORDER BY v.id LIMIT $3"
    ))
    .bind(model.id)
    .bind(after)
    .bind(i64::from(limit) + 1)
    .fetch_all(&state.db)
    .await?;
    let rows: Vec<(i64, Version)> = rows.iter().map(|r| (r.id, r.summary())).collect();
    let page = Page::from_rows(rows, limit, |(id, _)| id.to_string());
    Ok(JsonResponse(Page {
        items: page.items.into_iter().map(|(_, v)| v).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// A version's metadata and everything `npub inspect --json` shows about its pack.
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}/versions/{version}",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
    ),
    security(("token" = [])),
    responses((status = 200, body = VersionDetail), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_version(
    State(state): State<AppState>,
    _op: Operator,
    Path((name, version)): Path<(String, String)>,
) -> Result<JsonResponse<VersionDetail>, ApiError> {
    let mut detail = find_version(&state, &name, &version).await?.detail();
    detail.identical_to = identical_versions(&state, &name, &detail.version).await?;
    Ok(JsonResponse(detail))
}

/// The pack itself (`application/octet-stream`), byte-identical to what was stored; `ETag` is
/// its SHA-256. `Range`, `If-Range` and `If-None-Match` as on the device route (RFC 9110,
/// `server/src/http/ranges.rs`).
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}/versions/{version}/npub",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
    ),
    security(("token" = [])),
    responses(
        (status = 200, description = "the pack", content_type = "application/octet-stream", body = PackFile),
        (status = 206, description = "the requested range", content_type = "application/octet-stream", body = PackFile),
        (status = 304, description = "If-None-Match matched"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 416, body = ErrorBody, description = "the range starts at or past the end"),
    )
)]
async fn download_pack(
    State(state): State<AppState>,
    _op: Operator,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let row = find_version(&state, &name, &version).await?;
    let digest: PackDigest = row.sha256.parse().map_err(ApiError::internal)?;
    let etag =
        ranges::etag(&row.sha256).ok_or_else(|| ApiError::internal("a digest is a header"))?;
    let len = u64::try_from(row.size).map_err(ApiError::internal)?;
    let answer = ranges::answer(&headers, &etag, len);
    let (offset, count) = answer.span(len);
    let reader = match answer {
        ranges::Answer::Full | ranges::Answer::Partial { .. } => {
            let pack = state
                .store
                .open_from(digest, offset)
                .await
                .map_err(ApiError::store)?
                .ok_or_else(|| {
                    ApiError::store(std::io::Error::other(format!(
                        "pack {digest} of {name} {version} is missing from the store"
                    )))
                })?;
            if pack.len != len {
                return Err(ApiError::store(std::io::Error::other(format!(
                    "pack {digest} is {} bytes in the store but {len} in its row",
                    pack.len
                ))));
            }
            Some(pack.reader)
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
    // Names are restricted to header-safe characters (names.rs), so this cannot fail.
    let disposition =
        HeaderValue::from_str(&format!("attachment; filename=\"{name}-{version}.npub\""))
            .map_err(ApiError::internal)?;
    ranges::respond(
        answer,
        etag,
        len,
        body,
        &[(header::CONTENT_DISPOSITION, disposition)],
    )
}

/// The version's self-test record (`application/octet-stream`, "NPS1": the golden input and
/// the SHA-256 of the outputs the functional model computes for it; `docs/release.md`): what
/// `npub release sign --selftest` signs. 404 when the version has no golden vector.
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}/versions/{version}/selftest",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
    ),
    security(("token" = [])),
    responses(
        (status = 200, description = "the self-test record", content_type = "application/octet-stream", body = proof::SelfTestRecord),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such version, or it has no golden vector"),
    )
)]
async fn download_selftest(
    State(state): State<AppState>,
    _op: Operator,
    Path((name, version)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let row = find_version(&state, &name, &version).await?;
    let record = match (&row.golden_input, &row.golden_sha256) {
        (Some(input), Some(sha)) => proof::selftest_record(input, sha),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::NotFound(format!(
            "a golden vector of model {name:?} version {version:?} (the functional model could \
             not run its pack)"
        ))
    })?;
    Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from(record))
        .map_err(ApiError::internal)
}

/// Deletes a version. 409 while a deployment refers to it. The pack file goes when no other
/// version shares it.
#[utoipa::path(
    delete,
    path = "/api/v1/models/{name}/versions/{version}",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
    ),
    security(("token" = [])),
    responses(
        (status = 204, description = "deleted"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "a deployment refers to this version"),
    )
)]
async fn delete_version(
    State(state): State<AppState>,
    op: Operator,
    Path((name, version)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let object = format!("models/{name}/versions/{version}");
    let mut tx = crate::db::begin_write(&state.db).await?;
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT v.id, v.sha256 FROM versions v JOIN models m ON m.id = v.model_id \
         WHERE m.name = $1 AND v.version = $2",
    )
    .bind(&name)
    .bind(&version)
    .fetch_optional(&mut *tx)
    .await?;
    let (id, sha256) =
        row.ok_or_else(|| ApiError::NotFound(format!("model {name:?} version {version:?}")))?;
    // A deployment's foreign key (ON DELETE RESTRICT) refuses this while it refers to the version.
    sqlx::query("DELETE FROM versions WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            ApiError::on_foreign_key(e, || {
                format!("model {name:?} version {version:?} is referenced by a deployment")
            })
        })?;
    let (sharing,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM versions WHERE sha256 = $1")
        .bind(&sha256)
        .fetch_one(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        &op,
        "version.delete",
        &object,
        serde_json::json!({"sha256": sha256}),
    )
    .await?;
    tx.commit().await?;
    if sharing == 0 {
        let digest: PackDigest = sha256.parse().map_err(ApiError::internal)?;
        // Committed already, and no lock is held: if this fails, the background sweep removes
        // the orphan later.
        if let Err(e) =
            gc::remove_if_unreferenced(&state.db, state.store.as_ref(), state.limits.gc, digest)
                .await
        {
            tracing::warn!(%digest, error = %e, "cannot remove an unreferenced pack");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
