//! `/api/v1/deployments`: create (next sequence, signed manifests), list, progress, pause,
//! resume, abort, retry the failed devices.
//!
//! A retry (`…/retry-failed`) is a deployment like any other, of the same version with the next
//! sequence, whose targets are narrowed to the devices listed in `deployment_members` (the ones
//! that failed the retried deployment): every rule that finds a deployment's targets (the poll
//! snapshot, a report's "was it offered", progress, the per-device list) narrows it the same way
//! (`ranking::members`). With `on_failure: pause` a deployment pauses itself at its failure threshold
//! instead of aborting (`rollout.rs`).
//!
//! A deployment's `state`: `active` (batches open as successes come in), `paused` (open batches
//! are offered only to devices that had started on it, no new batch opens), `aborted` (no longer offered; final). Its `phase`
//! adds `completed` for display: active or paused with every batch open and every target
//! succeeded. It is recorded once (`completed_at`, a `deployment.completed` audit entry and
//! webhook event) by whichever change completes it: the last success report, a resume, or the
//! last outstanding target leaving its targets ([`target_left_in`]). Aborting, pausing
//! or retrying a deployment changes no other deployment's targets, so completes none.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use npub_core::Accel;
use npub_core::manifest::{HW_CLASS_RA8P1, ManifestFields, sign_manifest, sign_manifest_v2};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use std::collections::HashSet;

use super::ranking;
use super::rollout::{self, Decision, DeviceState, OnFailure, Progress, Rollout};
use super::states::{self, DeploymentState};
use super::target_cache::TargetCache;
use super::targeting::{self, DeploymentDevice, Hold, Listing, Plan, Reported};
use crate::auth::Operator;
use crate::db::Conn;
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::page::{self, Page};
use crate::keys::release::{KnownRelease, VersionFacts as ReleaseFacts};
use crate::ops::audit;
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// `POST /api/v1/deployments` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDeployment {
    /// Model name.
    pub model: String,
    /// Version of that model.
    pub version: String,
    /// Target group (exactly one of `group` and `device`).
    pub group: Option<String>,
    /// Target device.
    pub device: Option<String>,
    /// Staged rollout; omitted: everyone at once.
    pub rollout: Option<Rollout>,
    /// Deploy even though the version's proof against its source model diverged (audited).
    #[serde(default)]
    pub override_proof: bool,
}

/// Where a deployment goes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Target {
    /// The group, for a group deployment.
    pub group: Option<String>,
    /// The device, for a single-device deployment.
    pub device: Option<String>,
}

/// A signed manifest of a deployment.
#[derive(Debug, Serialize, ToSchema)]
pub struct ManifestInfo {
    /// Hardware class it is signed for.
    pub hw_class: u32,
    /// Signing key id.
    pub key_id: String,
}

/// A deployment with its progress.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deployment {
    /// Its id.
    pub id: i64,
    /// The fleet-wide sequence it took (what its manifests carry).
    pub sequence: i64,
    /// `deploy` or `rollback`.
    pub kind: String,
    /// Model name.
    pub model: String,
    /// Version.
    pub version: String,
    /// SHA-256 of the pack.
    pub sha256: String,
    /// Pack bytes.
    pub size: i64,
    /// Where it goes.
    pub target: Target,
    /// `active`, `paused` or `aborted`.
    pub state: DeploymentState,
    /// `state`, or `completed` once every target succeeded.
    pub phase: String,
    /// When it first completed (RFC 3339; the `deployment.completed` webhook event was queued
    /// then); `null`: never. Kept once set, even if a device joining its group later makes its
    /// `phase` something else again.
    pub completed_at: Option<String>,
    /// Why it was aborted.
    pub abort_reason: Option<String>,
    /// Why it paused itself (its failures exceeded the threshold with `on_failure: pause`);
    /// `null` when an operator paused it or it is not paused.
    pub pause_reason: Option<String>,
    /// The deployment whose failed devices it retries (`…/retry-failed`); its targets are those
    /// devices only.
    pub retry_of: Option<i64>,
    /// Its rollout policy.
    pub rollout: Rollout,
    /// Batches offered so far.
    pub open_batches: usize,
    /// Counts per device state and per batch.
    pub progress: Progress,
    /// Its signed manifests.
    pub manifests: Vec<ManifestInfo>,
    /// RFC 3339.
    pub created_at: String,
    /// Token name that created it.
    pub created_by: String,
}

/// `POST /api/v1/deployments` query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CreateQuery {
    /// Answer what the deployment would do (200, a [`Preview`]) without making it: no sequence is
    /// taken, nothing is signed or stored.
    #[serde(default)]
    pub dry_run: bool,
}

/// One batch of a preview.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewBatch {
    /// 0-based.
    pub index: usize,
    /// Cumulative percentage of the targets.
    pub percent: u8,
    /// The ids of the devices this batch adds, in rank order.
    pub devices: Vec<String>,
}

/// A device of the target that the deployment would not reach.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewSkip {
    /// Device id.
    pub device_id: String,
    /// Its NPU configuration.
    pub accelerator: String,
    /// Why.
    pub reason: String,
}

/// What a deployment (or a rollback) would do, before it is made.
#[derive(Debug, Serialize, ToSchema)]
pub struct Preview {
    /// Model name.
    pub model: String,
    /// The concrete version (a rollback's `previous` resolved).
    pub version: String,
    /// SHA-256 of its pack.
    pub sha256: String,
    /// Pack bytes.
    pub size: i64,
    /// The accelerator the pack is compiled for.
    pub accelerator: String,
    /// Where it goes.
    pub target: Target,
    /// Devices it reaches.
    pub targets: usize,
    /// Targets that already run this exact pack (same SHA-256): they take the new sequence
    /// without downloading it.
    pub already_running: usize,
    /// Devices of the target it does not reach, and why.
    pub skipped: Vec<PreviewSkip>,
    /// What each batch of the rollout will contain.
    pub batches: Vec<PreviewBatch>,
}

/// `GET /api/v1/deployments/{id}/devices` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeviceListQuery {
    /// Only devices in this state: `pending`, `downloading`, `verified`, `installed`, `bound`,
    /// `failed`, `rolled_back`, or `skipped` (every skipped device, whatever the reason).
    pub state: Option<String>,
    /// Devices per page (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// `GET /api/v1/deployments` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeploymentQuery {
    /// Only deployments to this group.
    pub group: Option<String>,
    /// Only this state (`active`, `paused`, `aborted`).
    pub state: Option<String>,
}

/// `/api/v1/deployments…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_deployment, list_deployments))
        .routes(routes!(get_deployment))
        .routes(routes!(deployment_devices))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(abort))
        .routes(routes!(retry_failed))
}

/// Creates a deployment: takes the next sequence and signs a manifest for every hardware class
/// among its targets (and class 1, RA8P1). With `dry_run=true`, answers what it would do instead.
/// A deployment that would reach no device is refused: 404 for an unknown (or empty) group or
/// device, 422 naming the accelerators when every device of the target has another one.
#[utoipa::path(
    post,
    path = "/api/v1/deployments",
    tag = "deployments",
    params(CreateQuery),
    request_body = NewDeployment,
    security(("token" = [])),
    responses(
        (status = 201, body = Deployment),
        (status = 200, body = Preview, description = "dry_run=true: what it would do; nothing is made"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the model is marked release required and the version is not released, or the version's proof diverged and `override_proof` is not set"),
        (status = 422, body = ErrorBody),
    )
)]
async fn create_deployment(
    State(state): State<AppState>,
    op: Operator,
    Query(q): Query<CreateQuery>,
    Json(body): Json<NewDeployment>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let target = match (body.group, body.device) {
        (Some(g), None) => Target {
            group: Some(g),
            device: None,
        },
        (None, Some(d)) => Target {
            group: None,
            device: Some(d),
        },
        _ => {
            return Err(ApiError::invalid(
                "exactly one of `group` and `device` is required",
            ));
        }
    };
    let rollout = body.rollout.unwrap_or_else(Rollout::immediate);
    if q.dry_run {
        let p = preview(
            &state,
            &body.model,
            &body.version,
            target,
            &rollout,
            body.override_proof,
        )
        .await?;
        return Ok(JsonResponse(p).into_response());
    }
    let d = create(
        &state,
        &op,
        &body.model,
        &body.version,
        target,
        rollout,
        "deploy",
        None,
        body.override_proof,
    )
    .await?;
    Ok((StatusCode::CREATED, JsonResponse(d)).into_response())
}

/// `target` in words, for messages.
fn describe(target: &Target) -> String {
    match (&target.group, &target.device) {
        (Some(g), _) => format!("group {g:?}"),
        (None, Some(d)) => format!("device {d:?}"),
        (None, None) => "no target".into(),
    }
}

/// The version's facts, 404 when it does not exist.
async fn version_facts(
    conn: &mut Conn,
    model: &str,
    version: &str,
) -> Result<VersionFacts, ApiError> {
    sqlx::query_as(
        "SELECT v.id, v.sha256, v.size, v.checksum, v.accel, v.io_digest, v.golden_input, \
         v.golden_sha256 FROM versions v \
         JOIN models m ON m.id = v.model_id WHERE m.name = $1 AND v.version = $2",
    )
    .bind(model)
    .bind(version)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| ApiError::NotFound(format!("model {model:?} version {version:?}")))
}

/// 409 when `model` is marked release required and the release signatures of `version` do not
/// meet the rule devices will hold it to (`keys/release.rs`): a deployment and a rollback alike.
async fn release_gate(
    conn: &mut Conn,
    model: &str,
    version: &str,
    v: &VersionFacts,
) -> Result<(), ApiError> {
    let row: Option<(i64, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT m.release_required, v.release_bundle FROM versions v \
         JOIN models m ON m.id = v.model_id WHERE v.id = $1",
    )
    .bind(v.id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((_, bundle)) = row.filter(|(required, _)| *required != 0) else {
        return Ok(());
    };
    let known = KnownRelease::load(conn).await?;
    let facts = ReleaseFacts::of_row(
        model,
        version,
        &v.sha256,
        v.accel,
        v.io_digest.as_deref(),
        v.selftest_digest(),
    )
    .ok_or_else(|| ApiError::internal("versions: a digest is not 64 hex digits"))?;
    known
        .meets(bundle.as_deref().unwrap_or_default(), &facts.facts())
        .map_err(|why| {
            ApiError::Conflict(format!(
                "model {model:?} is marked release required: version {version:?} is not \
                 released ({why}); its rule is {}. Attach release signatures \
                 (POST /api/v1/models/{model}/versions/{version}/release-signatures) or turn the \
                 policy off (PATCH /api/v1/models/{model})",
                known.rule_for(model)
            ))
        })
}

/// The plan of a deployment of `v` to `target`, refused when it reaches nobody.
async fn plan_for(
    conn: &mut Conn,
    v: &VersionFacts,
    target: &Target,
    rollout: &Rollout,
    members: Option<&HashSet<String>>,
) -> Result<Plan, ApiError> {
    let mut candidates =
        targeting::candidates(conn, target.group.as_deref(), target.device.as_deref()).await?;
    if let Some(m) = members {
        candidates.retain(|c| m.contains(&c.id));
    }
    let plan = Plan::new(&candidates, v.accel, &rollout.batches);
    plan.require_targets(&describe(target), v.accel, candidates.len())?;
    Ok(plan)
}

/// What deploying `model`/`version` to `target` would do (shared with rollback previews).
pub(crate) async fn preview(
    state: &AppState,
    model: &str,
    version: &str,
    target: Target,
    rollout: &Rollout,
    override_proof: bool,
) -> Result<Preview, ApiError> {
    rollout.check()?;
    let mut conn = state.db.acquire().await?;
    let v = version_facts(&mut conn, model, version).await?;
    release_gate(&mut conn, model, version, &v).await?;
    crate::catalog::proof::gate(&mut conn, model, version, v.id, override_proof).await?;
    let plan = plan_for(&mut conn, &v, &target, rollout, None).await?;
    let running: Vec<(String,)> = sqlx::query_as(
        "SELECT d.id FROM devices d JOIN versions v ON v.id = d.current_version_id \
         WHERE v.sha256 = $1",
    )
    .bind(&v.sha256)
    .fetch_all(&mut *conn)
    .await?;
    let already_running = running
        .iter()
        .filter(|(id,)| plan.ranked.contains(id))
        .count();
    let pack = Accel::from_word(v.accel as u32).name();
    Ok(Preview {
        model: model.to_owned(),
        version: version.to_owned(),
        sha256: v.sha256.clone(),
        size: v.size,
        accelerator: pack.to_owned(),
        targets: plan.ranked.len(),
        already_running,
        skipped: plan
            .other_accelerator
            .iter()
            .map(|c| {
                let theirs = Accel::from_word(c.accel as u32).name();
                PreviewSkip {
                    device_id: c.id.clone(),
                    accelerator: theirs.to_owned(),
                    reason: format!("it is {theirs}; the pack is compiled for {pack}"),
                }
            })
            .collect(),
        batches: plan
            .batches()
            .into_iter()
            .zip(&rollout.batches)
            .enumerate()
            .map(|(index, (ids, &percent))| PreviewBatch {
                index,
                percent,
                devices: ids.to_vec(),
            })
            .collect(),
        target,
    })
}

#[derive(sqlx::FromRow)]
struct VersionFacts {
    id: i64,
    sha256: String,
    size: i64,
    checksum: i64,
    accel: i64,
    io_digest: Option<String>,
    golden_input: Option<Vec<u8>>,
    golden_sha256: Option<String>,
}

impl VersionFacts {
    /// SHA-256 of the version's self-test record, when it has a golden vector: its manifests
    /// are then version 2 and sign it.
    fn selftest_digest(&self) -> Option<[u8; 32]> {
        crate::catalog::proof::selftest_digest(
            self.golden_input.as_deref(),
            self.golden_sha256.as_deref(),
        )
    }
}

/// A retry's source deployment and the devices it retries.
pub(crate) struct Retry {
    /// The deployment retried.
    pub of: i64,
    /// Its failed devices, the only targets of the retry.
    pub devices: HashSet<String>,
}

/// Creates a deployment of `model`/`version` (shared with rollback and retry); audited as `kind`
/// (`deployment.retry` for a retry).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn create(
    state: &AppState,
    op: &Operator,
    model: &str,
    version: &str,
    target: Target,
    rollout: Rollout,
    kind: &str,
    retry: Option<Retry>,
    override_proof: bool,
) -> Result<Deployment, ApiError> {
    rollout.check()?;
    if let Some(g) = &target.group {
        super::device_info::check_field("group", g)?;
    }
    let mut tx = FleetChange::begin(state).await?;
    let v = version_facts(&mut tx, model, version).await?;
    release_gate(&mut tx, model, version, &v).await?;
    let overridden =
        crate::catalog::proof::gate(&mut tx, model, version, v.id, override_proof).await?;
    let members = retry.as_ref().map(|r| &r.devices);
    plan_for(&mut tx, &v, &target, &rollout, members).await?;
    // A retry signs for the classes of its own devices only; anything else for its target's.
    let mut classes: Vec<(i64,)> = match members {
        None => {
            sqlx::query_as(
                "SELECT DISTINCT hw_class FROM devices WHERE revoked_at IS NULL \
                 AND (grp = $1 OR id = $2)",
            )
            .bind(target.group.as_deref())
            .bind(target.device.as_deref())
            .fetch_all(&mut *tx)
            .await?
        }
        Some(m) => {
            let rows: Vec<(String, i64)> = sqlx::query_as(
                "SELECT id, hw_class FROM devices WHERE revoked_at IS NULL \
                 AND (grp = $1 OR id = $2)",
            )
            .bind(target.group.as_deref())
            .bind(target.device.as_deref())
            .fetch_all(&mut *tx)
            .await?;
            rows.into_iter()
                .filter(|(id, _)| m.contains(id))
                .map(|(_, class)| (class,))
                .collect()
        }
    };
    classes.push((i64::from(HW_CLASS_RA8P1),));
    classes.sort_unstable();
    classes.dedup();

    let (sequence,): (i64,) =
        sqlx::query_as("UPDATE fleet_sequence SET value = value + 1 WHERE id = 1 RETURNING value")
            .fetch_one(&mut *tx)
            .await?;
    let now = now_ms();
    let batches = serde_json::to_string(&rollout.batches).map_err(ApiError::internal)?;
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO deployments (sequence, version_id, target_group, target_device, kind, batches, \
         success_threshold, failure_threshold, open_batches, state, created_at, created_by, \
         on_failure, retry_of) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, 'active', $9, $10, $11, $12) RETURNING id",
    )
    .bind(sequence)
    .bind(v.id)
    .bind(target.group.as_deref())
    .bind(target.device.as_deref())
    .bind(kind)
    .bind(&batches)
    .bind(rollout.success_threshold)
    .bind(rollout.failure_threshold)
    .bind(now)
    .bind(op.token_id)
    .bind(rollout.on_failure.as_str())
    .bind(retry.as_ref().map(|r| r.of))
    .fetch_one(&mut *tx)
    .await?;
    if let Some(r) = &retry {
        let mut devices: Vec<&String> = r.devices.iter().collect();
        devices.sort();
        for device in devices {
            sqlx::query(
                "INSERT INTO deployment_members (deployment_id, device_id) VALUES ($1, $2)",
            )
            .bind(id)
            .bind(device)
            .execute(&mut *tx)
            .await?;
        }
    }

    let key = state
        .keys
        .active_in(&mut tx)
        .await
        .map_err(ApiError::internal)?;
    let sha =
        decode32(&v.sha256).ok_or_else(|| ApiError::internal("versions.sha256 is not hex"))?;
    let io_digest = match &v.io_digest {
        Some(hex) => {
            decode32(hex).ok_or_else(|| ApiError::internal("versions.io_digest is not hex"))?
        }
        None => [0; 32],
    };
    let selftest = v.selftest_digest();
    for (hw_class,) in &classes {
        let fields = ManifestFields {
            sequence: sequence as u64,
            model_name: model,
            model_version: version,
            accel: Accel::from_word(v.accel as u32),
            hw_class: *hw_class as u32,
            pack_len: v.size as u32,
            pack_checksum: v.checksum as u32,
            pack_sha256: sha,
            io_digest,
            issued_at: (now / 1000) as u64,
            expires_at: 0,
        };
        // Version 2 when the version has a self-test record: its digest is then signed with
        // the pack, and a device runs the record's golden input before confirming the pack.
        let signed = match &selftest {
            Some(digest) => sign_manifest_v2(&fields, digest, &key).map(|m| m.to_vec()),
            None => sign_manifest(&fields, &key).map(|m| m.to_vec()),
        };
        let manifest = signed.map_err(|e| {
            ApiError::invalid(format!("cannot sign a manifest for this version: {e}"))
        })?;
        sqlx::query(
            "INSERT INTO deployment_manifests (deployment_id, hw_class, key_id, manifest) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(hw_class)
        .bind(key.key_id().to_string())
        .bind(manifest.as_slice())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit(
        Record::Audit {
            op,
            action: match (kind, &retry) {
                (_, Some(_)) => "deployment.retry",
                ("rollback", None) => "deployment.rollback",
                _ => "deployment.create",
            },
            object: format!("deployments/{id}"),
            detail: serde_json::json!({
                "sequence": sequence, "model": model, "version": version, "sha256": v.sha256,
                "group": target.group, "device": target.device, "rollout": rollout,
                "retry_of": retry.as_ref().map(|r| r.of),
                "devices": retry.as_ref().map(|r| r.devices.len()),
                "override_proof": overridden,
            }),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    load(&mut *state.db.acquire().await?, id, &state.rollout_targets).await
}

fn decode32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[derive(sqlx::FromRow)]
struct DeploymentRow {
    id: i64,
    sequence: i64,
    kind: String,
    model: String,
    version: String,
    sha256: String,
    size: i64,
    accel: i64,
    target_group: Option<String>,
    target_device: Option<String>,
    #[sqlx(try_from = "String")]
    state: DeploymentState,
    abort_reason: Option<String>,
    batches: String,
    success_threshold: f64,
    failure_threshold: f64,
    on_failure: String,
    acknowledged_failures: i64,
    retry_of: Option<i64>,
    open_batches: i64,
    completed_at: Option<i64>,
    created_at: i64,
    created_by: String,
}

/// The columns of [`DeploymentRow`]; a macro so that `concat!` can finish the query.
macro_rules! select_deployment {
    () => {
        "SELECT d.id, d.sequence, d.kind, m.name AS model, v.version, \
     v.sha256, v.size, v.accel, d.target_group, d.target_device, d.state, d.abort_reason, d.batches, \
     d.success_threshold, d.failure_threshold, d.on_failure, d.acknowledged_failures, d.retry_of, \
     d.open_batches, d.completed_at, d.created_at, t.name AS created_by \
     FROM deployments d JOIN versions v ON v.id = d.version_id JOIN models m ON m.id = v.model_id \
     JOIN tokens t ON t.id = d.created_by"
    };
}

impl DeploymentRow {
    /// Which deployment this is and whom it reaches, as ranking asks.
    fn of(&self) -> ranking::Of<'_> {
        ranking::Of {
            id: self.id,
            group: self.target_group.as_deref(),
            device: self.target_device.as_deref(),
            accel: self.accel,
        }
    }

    fn rollout(&self) -> Rollout {
        Rollout {
            batches: serde_json::from_str(&self.batches).unwrap_or_default(),
            success_threshold: self.success_threshold,
            failure_threshold: self.failure_threshold,
            on_failure: OnFailure::from_db(&self.on_failure),
        }
    }
}

/// The ranked target states of a deployment as `conn` sees them now (in a write transaction:
/// with its own changes), and how many devices were incompatible (`ranking::ranked_now`).
async fn target_states(
    conn: &mut Conn,
    row: &DeploymentRow,
    cache: &TargetCache,
) -> Result<(Vec<DeviceState>, u64), ApiError> {
    let ranked = ranking::ranked_now(conn, row.of(), cache).await?;
    let states = ranking::states(conn, row.id, &ranked).await?;
    Ok((states, ranked.incompatible()))
}

async fn load_row(conn: &mut Conn, id: i64) -> Result<DeploymentRow, ApiError> {
    sqlx::query_as(concat!(select_deployment!(), " WHERE d.id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("deployment {id}")))
}

async fn render(
    conn: &mut Conn,
    row: DeploymentRow,
    cache: &TargetCache,
) -> Result<Deployment, ApiError> {
    let (states, incompatible) = target_states(conn, &row, cache).await?;
    render_states(conn, row, &states, incompatible).await
}

/// The fleet generation: read first in a read transaction, it files what the transaction then
/// reads in the [`TargetCache`].
pub(crate) async fn generation(conn: &mut Conn) -> Result<i64, ApiError> {
    let (generation,): (i64,) = sqlx::query_as("SELECT value FROM fleet_generation WHERE id = 1")
        .fetch_one(&mut *conn)
        .await?;
    Ok(generation)
}

/// Deployment `id` as [`load`] renders it, its ranked targets taken from `cache` at
/// `generation` (`ranking::ranked_at`). Its reports are read every time (they do not bump the
/// generation).
pub(crate) async fn load_cached(
    conn: &mut Conn,
    id: i64,
    cache: &TargetCache,
    generation: i64,
) -> Result<Deployment, ApiError> {
    let row = load_row(conn, id).await?;
    render_cached(conn, row, cache, generation).await
}

/// `row` rendered as [`render`] does, its ranked targets taken from `cache` at `generation`
/// (`ranking::ranked_at`); its reports are read every time.
async fn render_cached(
    conn: &mut Conn,
    row: DeploymentRow,
    cache: &TargetCache,
    generation: i64,
) -> Result<Deployment, ApiError> {
    let ranked = ranking::ranked_at(conn, row.of(), cache, generation).await?;
    let states = ranking::states(conn, row.id, &ranked).await?;
    render_states(conn, row, &states, ranked.incompatible()).await
}

async fn render_states(
    conn: &mut Conn,
    row: DeploymentRow,
    states: &[DeviceState],
    incompatible: u64,
) -> Result<Deployment, ApiError> {
    let rollout = row.rollout();
    let open = usize::try_from(row.open_batches).unwrap_or(0);
    let mut progress = rollout::progress(&rollout.batches, open, states, incompatible);
    if row.state == DeploymentState::Aborted {
        progress.cancel_pending();
    }
    let manifests: Vec<(i64, String)> = sqlx::query_as(
        "SELECT hw_class, key_id FROM deployment_manifests WHERE deployment_id = $1 ORDER BY hw_class",
    )
    .bind(row.id)
    .fetch_all(&mut *conn)
    .await?;
    let completed = is_completed(&row, open, &progress);
    Ok(Deployment {
        id: row.id,
        sequence: row.sequence,
        kind: row.kind,
        model: row.model,
        version: row.version,
        sha256: row.sha256,
        size: row.size,
        target: Target {
            group: row.target_group,
            device: row.target_device,
        },
        phase: if completed {
            "completed".into()
        } else {
            row.state.as_str().to_owned()
        },
        pause_reason: row
            .abort_reason
            .clone()
            .filter(|_| row.state == DeploymentState::Paused),
        abort_reason: row
            .abort_reason
            .filter(|_| row.state == DeploymentState::Aborted),
        retry_of: row.retry_of,
        completed_at: row.completed_at.map(rfc3339),
        state: row.state,
        rollout,
        open_batches: open,
        progress,
        manifests: manifests
            .into_iter()
            .map(|(hw_class, key_id)| ManifestInfo {
                hw_class: hw_class as u32,
                key_id,
            })
            .collect(),
        created_at: rfc3339(row.created_at),
        created_by: row.created_by,
    })
}

/// The `completed` phase: not aborted, every batch open, and every one of its (at least one)
/// targets reported `installed` or `bound`.
fn is_completed(row: &DeploymentRow, open: usize, progress: &Progress) -> bool {
    row.state != DeploymentState::Aborted
        && open == row.rollout().batches.len()
        && progress.targets > 0
        && progress.counts.successes() == progress.targets
}

/// One target of deployment `$1` that has not reported `installed` or `bound`, if any: the
/// cheap half of [`complete_in`]. Its devices are exactly a ranking's (`ranked.rs`) (unrevoked, the
/// pack's accelerator `$3`, the group or device `$2`), read through `devices_by_group_id` (or
/// the primary key) and stopping at the first unfinished one, so that a success report early in
/// a rollout pays for a few rows, not for the group.
fn unfinished_target_sql(by_group: bool, retry: bool) -> &'static str {
    macro_rules! unfinished {
        ($who:literal, $members:literal) => {
            concat!(
                "SELECT d.id FROM devices d WHERE ",
                $who,
                " AND d.revoked_at IS NULL AND d.accel = $3 AND NOT EXISTS (SELECT 1 FROM \
                 device_deployments dd WHERE dd.deployment_id = $1 AND dd.device_id = d.id \
                 AND dd.state IN ('installed', 'bound'))",
                $members,
                " LIMIT 1"
            )
        };
    }
    match (by_group, retry) {
        (true, false) => unfinished!("d.grp = $2", ""),
        (false, false) => unfinished!("d.id = $2", ""),
        (true, true) => unfinished!(
            "d.grp = $2",
            " AND EXISTS (SELECT 1 FROM deployment_members m \
             WHERE m.deployment_id = $1 AND m.device_id = d.id)"
        ),
        (false, true) => unfinished!(
            "d.id = $2",
            " AND EXISTS (SELECT 1 FROM deployment_members m \
             WHERE m.deployment_id = $1 AND m.device_id = d.id)"
        ),
    }
}

/// Records that deployment `id` completed, the first time it has (see [`is_completed`]): its
/// `completed_at`, a `deployment.completed` audit entry by `server` and the webhook event, in the
/// caller's transaction. Called at every event that can finish a deployment: a success report, a
/// resume, and a change that takes devices out of its targets ([`target_left_in`]).
/// Returns whether it completed now. Completion changes nothing a device is offered (the
/// snapshot is not rebuilt for it).
pub(crate) async fn complete_in(
    conn: &mut Conn,
    id: i64,
    cache: &TargetCache,
) -> Result<bool, ApiError> {
    let row = load_row(conn, id).await?;
    let open = usize::try_from(row.open_batches).unwrap_or(0);
    if row.completed_at.is_some()
        || row.state == DeploymentState::Aborted
        || open != row.rollout().batches.len()
    {
        return Ok(false);
    }
    let key = match (&row.target_group, &row.target_device) {
        (Some(g), _) => g.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => return Ok(false),
    };
    let unfinished: Option<(String,)> = sqlx::query_as(unfinished_target_sql(
        row.target_group.is_some(),
        row.retry_of.is_some(),
    ))
    .bind(id)
    .bind(key)
    .bind(row.accel)
    .fetch_optional(&mut *conn)
    .await?;
    if unfinished.is_some() {
        return Ok(false);
    }
    // Every target succeeded: confirm with the very computation the JSON's `phase` uses.
    let (states, incompatible) = target_states(conn, &row, cache).await?;
    let progress = rollout::progress(&row.rollout().batches, open, &states, incompatible);
    if !is_completed(&row, open, &progress) {
        return Ok(false);
    }
    let now = now_ms();
    let claimed = sqlx::query(
        "UPDATE deployments SET completed_at = $1 WHERE id = $2 AND completed_at IS NULL",
    )
    .bind(now)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    if claimed.rows_affected() != 1 {
        return Ok(false);
    }
    tracing::info!(
        deployment = id,
        targets = progress.targets,
        "deployment completed"
    );
    crate::ops::webhooks::emit::deployment_completed(
        conn,
        id,
        row.sequence,
        row.state.as_str(),
        progress.targets,
        [progress.counts.installed, progress.counts.bound],
    )
    .await?;
    audit::record_system(
        conn,
        "deployment.completed",
        &format!("deployments/{id}"),
        serde_json::json!({
            "sequence": row.sequence,
            "targets": progress.targets,
            "installed": progress.counts.installed,
            "bound": progress.counts.bound,
        }),
    )
    .await?;
    Ok(true)
}

/// The deployments still to complete that target group `$1` or device `$2`.
const OPEN_FOR_DEVICE_SQL: &str = "SELECT id FROM deployments \
     WHERE state IN ('active', 'paused') AND completed_at IS NULL \
     AND (target_group = $1 OR target_device = $2) ORDER BY id";

/// After device `device` of group `group` left some deployments' targets (revoked, moved to
/// another group, given another accelerator), applies the rollout rules to each deployment still
/// to complete (its shares changed: the next batch may open, a threshold may now be crossed) and
/// completes those whose remaining targets have all succeeded, in the caller's transaction: the
/// one that held them back may have been the device that left. Returns the deployments
/// completed now.
pub(crate) async fn target_left_in(
    conn: &mut Conn,
    device: &str,
    group: &str,
    cache: &TargetCache,
) -> Result<Vec<i64>, ApiError> {
    let open: Vec<(i64,)> = sqlx::query_as(OPEN_FOR_DEVICE_SQL)
        .bind(group)
        .bind(device)
        .fetch_all(&mut *conn)
        .await?;
    let mut completed = Vec::new();
    for (id,) in open {
        evaluate_in(conn, id, cache).await?;
        if complete_in(conn, id, cache).await? {
            completed.push(id);
        }
    }
    Ok(completed)
}

/// When deployment `id` was created (unix ms).
pub(crate) async fn created_ms(conn: &mut Conn, id: i64) -> Result<i64, ApiError> {
    Ok(load_row(conn, id).await?.created_at)
}

/// One deployment with its progress.
pub(crate) async fn load(
    conn: &mut Conn,
    id: i64,
    cache: &TargetCache,
) -> Result<Deployment, ApiError> {
    let row = load_row(conn, id).await?;
    render(conn, row, cache).await
}

/// Deployments, newest first, with their progress.
#[utoipa::path(
    get,
    path = "/api/v1/deployments",
    tag = "deployments",
    params(DeploymentQuery),
    security(("token" = [])),
    responses((status = 200, body = [Deployment]), (status = 401, body = ErrorBody))
)]
async fn list_deployments(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<DeploymentQuery>,
) -> Result<JsonResponse<Vec<Deployment>>, ApiError> {
    // One read transaction: the generation and every deployment's reports seen at one moment,
    // each deployment's ranked targets from the cache its own page fills.
    let mut conn = crate::db::begin_read(&state.db).await?;
    let generation = generation(&mut conn).await?;
    let rows: Vec<DeploymentRow> = sqlx::query_as(concat!(
        select_deployment!(),
        " WHERE ($1 IS NULL OR d.target_group = $1) \
         AND ($2 IS NULL OR d.state = $2) ORDER BY d.sequence DESC"
    ))
    .bind(q.group.as_deref())
    .bind(q.state.as_deref())
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(render_cached(&mut conn, row, &state.rollout_targets, generation).await?);
    }
    conn.rollback().await?;
    Ok(JsonResponse(out))
}

/// One deployment: counts per device state and per batch.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    security(("token" = [])),
    responses((status = 200, body = Deployment), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_deployment(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<i64>,
) -> Result<JsonResponse<Deployment>, ApiError> {
    let mut conn = crate::db::begin_read(&state.db).await?;
    let generation = generation(&mut conn).await?;
    let d = load_cached(&mut conn, id, &state.rollout_targets, generation).await?;
    conn.rollback().await?;
    Ok(JsonResponse(d))
}

/// The devices of a deployment, one by one: each target with its batch, whether it is offered,
/// what it last reported (state, reason, time), and the devices skipped with why (another
/// accelerator, a batch not open yet, no longer a target). Targets first, in rank order.
/// What the devices of deployment `$1` reported on it, with their names: the targets' states a
/// deployment's devices page filters by (through the primary keys of both tables).
pub const REPORTED_SQL: &str = "SELECT dd.device_id, d.name, dd.state, dd.reason, dd.updated_at \
     FROM device_deployments dd JOIN devices d ON d.id = dd.device_id WHERE dd.deployment_id = $1";

#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/devices",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id"), DeviceListQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = Page<DeploymentDevice>),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "an unknown `state`, a bad `limit` or `cursor`"),
    )
)]
async fn deployment_devices(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<i64>,
    Query(q): Query<DeviceListQuery>,
) -> Result<JsonResponse<Page<DeploymentDevice>>, ApiError> {
    let limit = page::limit(q.limit)?;
    let after = page::decode_int(q.cursor.as_deref())?;
    if let Some(s) = &q.state
        && s != "skipped"
        && s != "cancelled"
        && !DeviceState::ALL.iter().any(|st| st.as_str() == s)
    {
        return Err(ApiError::invalid(format!(
            "state: {s:?} is not a device state (pending, downloading, verified, installed, \
             bound, failed, rolled_back, skipped, cancelled)"
        )));
    }
    let mut conn = crate::db::begin_read(&state.db).await?;
    let generation = generation(&mut conn).await?;
    let row = load_row(&mut conn, id).await?;
    let ranked =
        ranking::ranked_at(&mut conn, row.of(), &state.rollout_targets, generation).await?;
    let reported: Vec<(String, String, String, Option<String>, i64)> = sqlx::query_as(REPORTED_SQL)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    conn.rollback().await?;
    let mut names = std::collections::HashMap::new();
    let mut reports = std::collections::HashMap::new();
    for (device, name, st, reason, updated_at) in reported {
        names.insert(device.clone(), name);
        reports.insert(
            device,
            Reported {
                state: states::reported(st).map_err(ApiError::internal)?,
                reason,
                updated_at,
            },
        );
    }
    let hold = match row.state {
        DeploymentState::Active => Hold::None,
        // A paused deployment holds: only a device that had started on it is still offered it.
        DeploymentState::Paused => Hold::Paused,
        // Nobody is offered an aborted deployment, whatever batch it reached, and a device that
        // had reported nothing never will.
        DeploymentState::Aborted => Hold::Aborted,
    };
    let listing = Listing::new(
        &ranked,
        &row.rollout().batches,
        &reports,
        &names,
        usize::try_from(row.open_batches).unwrap_or(0),
        row.accel,
        hold,
    );
    // The rollout's order (batch by batch, by SHA-256 of the device id): a cursor is the
    // position after the page's last device. A device that joins or leaves the group between two
    // pages moves the devices after it by one.
    let start = usize::try_from(after.unwrap_or(0)).unwrap_or(usize::MAX);
    let want = q.state.as_deref();
    // A reported state is found from the reports; the others (pending, skipped, cancelled: no
    // report says them) by walking every entry.
    let reported = want.and_then(|w| {
        DeviceState::ALL
            .into_iter()
            .find(|st| *st != DeviceState::Pending && st.as_str() == w)
    });
    let entries: Box<dyn Iterator<Item = targeting::Entry<'_>>> = match reported {
        Some(st) => Box::new(listing.reported(st)),
        None => Box::new(listing.entries().filter(|e| match want {
            None => true,
            Some("skipped") => e.skipped.is_some(),
            Some(w) => e.state.as_str() == w,
        })),
    };
    let rows: Vec<(usize, DeploymentDevice)> = entries
        .enumerate()
        .skip(start)
        .take(limit as usize + 1)
        .map(|(i, e)| (i, listing.render(e)))
        .collect();
    let page = Page::from_rows(rows, limit, |(i, _)| (i + 1).to_string());
    Ok(JsonResponse(Page {
        items: page.items.into_iter().map(|(_, d)| d).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// Pauses a deployment: it holds. No new batch opens, and it is offered only to the devices that
/// had started on it (one mid-download may finish); the others are offered what they would be
/// without it until it is resumed.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/pause",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    security(("token" = [])),
    responses((status = 200, body = Deployment), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody))
)]
async fn pause(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<i64>,
) -> Result<JsonResponse<Deployment>, ApiError> {
    transition(
        &state,
        &op,
        id,
        "pause",
        &[DeploymentState::Active],
        DeploymentState::Paused,
    )
    .await
}

/// Resumes a paused deployment (and opens every batch its progress already allows).
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/resume",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    security(("token" = [])),
    responses((status = 200, body = Deployment), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody))
)]
async fn resume(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<i64>,
) -> Result<JsonResponse<Deployment>, ApiError> {
    transition(
        &state,
        &op,
        id,
        "resume",
        &[DeploymentState::Paused],
        DeploymentState::Active,
    )
    .await
}

/// Aborts a deployment: it is no longer offered; devices that installed it keep it.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/abort",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    security(("token" = [])),
    responses((status = 200, body = Deployment), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody))
)]
async fn abort(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<i64>,
) -> Result<JsonResponse<Deployment>, ApiError> {
    transition(
        &state,
        &op,
        id,
        "abort",
        &[DeploymentState::Active, DeploymentState::Paused],
        DeploymentState::Aborted,
    )
    .await
}

/// `POST /api/v1/deployments/{id}/retry-failed` body (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// Staged rollout for the retry; omitted: every failed device at once, with the retried
    /// deployment's thresholds and `on_failure`.
    pub rollout: Option<Rollout>,
    /// Retry a version whose proof against its source model diverged (audited), as its
    /// deployment needed too.
    #[serde(default)]
    pub override_proof: bool,
}

/// Retries the failed devices of a deployment: a new deployment of the same version with the
/// next, higher sequence (a new signed manifest), whose only targets are the devices that
/// reported `failed` or `rolled_back` on this one and are still its targets. Being newer, the
/// retry is what those devices are offered; the retried deployment goes on for the others as it
/// was (a deployment paused at its failure threshold stays paused until resumed). 409 when no
/// device failed.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/retry-failed",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    request_body(content = RetryRequest, content_type = "application/json", description = "optional"),
    security(("token" = [])),
    responses(
        (status = 201, body = Deployment, description = "the retry"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "no device failed on it"),
        (status = 422, body = ErrorBody),
    )
)]
async fn retry_failed(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<i64>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, JsonResponse<Deployment>), ApiError> {
    // The body is optional: none (or whitespace) is `{}`.
    let body: RetryRequest = if body.trim_ascii().is_empty() {
        RetryRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::invalid(format!("the JSON body does not fit this request: {e}"))
        })?
    };
    if let Some(r) = &body.rollout {
        r.check()?;
    }
    let (row, failed) = {
        let mut conn = state.db.acquire().await?;
        let row = load_row(&mut conn, id).await?;
        let ranked = ranking::ranked_now(&mut conn, row.of(), &state.rollout_targets).await?;
        let reported: Vec<(String,)> = sqlx::query_as(
            "SELECT device_id FROM device_deployments WHERE deployment_id = $1 \
             AND state IN ('failed', 'rolled_back')",
        )
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
        let failed: HashSet<String> = reported
            .into_iter()
            .map(|(d,)| d)
            .filter(|d| ranked.position(d).is_some())
            .collect();
        (row, failed)
    };
    if failed.is_empty() {
        return Err(ApiError::Conflict(format!(
            "deployment {id}: none of its targets reported failed or rolled_back; nothing to retry"
        )));
    }
    let rollout = body.rollout.unwrap_or_else(|| Rollout {
        batches: vec![100],
        ..row.rollout()
    });
    let target = Target {
        group: row.target_group.clone(),
        device: row.target_device.clone(),
    };
    let made = create(
        &state,
        &op,
        &row.model,
        &row.version,
        target,
        rollout,
        &row.kind,
        Some(Retry {
            of: id,
            devices: failed,
        }),
        body.override_proof,
    )
    .await?;
    Ok((StatusCode::CREATED, JsonResponse(made)))
}

async fn transition(
    state: &AppState,
    op: &Operator,
    id: i64,
    verb: &str,
    from: &[DeploymentState],
    to: DeploymentState,
) -> Result<JsonResponse<Deployment>, ApiError> {
    let mut tx = FleetChange::begin(state).await?;
    let row = load_row(&mut tx, id).await?;
    if !from.contains(&row.state) {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        return Err(ApiError::Conflict(format!(
            "deployment {id} is {}; only a deployment that is {} can {verb}",
            row.state,
            from.join(" or ")
        )));
    }
    sqlx::query("UPDATE deployments SET state = $1, abort_reason = $2 WHERE id = $3")
        .bind(to.as_str())
        .bind((to == DeploymentState::Aborted).then(|| format!("aborted by {}", op.name)))
        .bind(id)
        .execute(&mut *tx)
        .await?;
    crate::ops::webhooks::emit::deployment_state(
        &mut tx,
        id,
        row.sequence,
        to.as_str(),
        Some(&op.name),
        None,
    )
    .await?;
    if to == DeploymentState::Active {
        // The operator resumes over the failures counted now: with `on_failure: pause` only a
        // failure after this pauses it again.
        let (states, _) = target_states(&mut tx, &row, &state.rollout_targets).await?;
        let open = usize::try_from(row.open_batches).unwrap_or(0);
        let failures =
            rollout::progress(&row.rollout().batches, open, &states, 0).failures_offered();
        sqlx::query("UPDATE deployments SET acknowledged_failures = $1 WHERE id = $2")
            .bind(i64::try_from(failures).unwrap_or(i64::MAX))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        evaluate_in(&mut tx, id, &state.rollout_targets).await?;
        complete_in(&mut tx, id, &state.rollout_targets).await?;
    }
    // Webhooks: a deployment state change by an operator (pause, resume, abort) is recorded
    // here.
    tx.commit(
        Record::Audit {
            op,
            action: &format!("deployment.{verb}"),
            object: format!("deployments/{id}"),
            detail: serde_json::json!({"sequence": row.sequence}),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    Ok(JsonResponse(
        load(&mut *state.db.acquire().await?, id, &state.rollout_targets).await?,
    ))
}

/// Applies the rollout rules to deployment `id` after a change (a report, a resume): opens
/// batches or aborts. Returns whether anything changed (the caller bumps the generation).
pub(crate) async fn evaluate_in(
    conn: &mut Conn,
    id: i64,
    cache: &TargetCache,
) -> Result<bool, ApiError> {
    let row = load_row(conn, id).await?;
    if row.state == DeploymentState::Aborted {
        return Ok(false);
    }
    let (states, _) = target_states(conn, &row, cache).await?;
    let rollout = row.rollout();
    let open = usize::try_from(row.open_batches).unwrap_or(0);
    let acknowledged = u64::try_from(row.acknowledged_failures).unwrap_or(0);
    match rollout::decide(
        &rollout,
        open,
        row.state == DeploymentState::Paused,
        acknowledged,
        &states,
    ) {
        Decision::Stay => Ok(false),
        Decision::Open(n) => {
            if !rollout::claim_open(conn, id, open, n).await? {
                return Ok(false);
            }
            crate::ops::webhooks::emit::batch_opened(conn, id, row.sequence, open, n).await?;
            audit::record_system(
                conn,
                "deployment.batch_open",
                &format!("deployments/{id}"),
                serde_json::json!({"sequence": row.sequence, "open_batches": n, "from": open}),
            )
            .await?;
            Ok(true)
        }
        Decision::Pause(reason) => {
            if !rollout::claim_pause(conn, id, &reason).await? {
                return Ok(false);
            }
            tracing::warn!(deployment = id, %reason, "deployment auto-paused");
            // A deployment state change (active -> paused, threshold hit), queued for the
            // webhooks in the transaction that made it.
            crate::ops::webhooks::emit::threshold_hit(conn, id, row.sequence, "paused", &reason)
                .await?;
            audit::record_system(
                conn,
                "deployment.auto_pause",
                &format!("deployments/{id}"),
                serde_json::json!({"sequence": row.sequence, "reason": reason}),
            )
            .await?;
            Ok(true)
        }
        Decision::Abort(reason) => {
            if !rollout::claim_abort(conn, id, row.state, &reason).await? {
                return Ok(false);
            }
            // Webhooks: a deployment state change (-> aborted, threshold hit) is recorded here.
            tracing::warn!(deployment = id, %reason, "deployment auto-aborted");
            crate::ops::webhooks::emit::threshold_hit(conn, id, row.sequence, "aborted", &reason)
                .await?;
            audit::record_system(
                conn,
                "deployment.auto_abort",
                &format!("deployments/{id}"),
                serde_json::json!({"sequence": row.sequence, "reason": reason}),
            )
            .await?;
            Ok(true)
        }
    }
}
