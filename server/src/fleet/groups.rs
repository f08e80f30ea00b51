//! `/api/v1/groups`: the groups devices are in, and rollback by version.
//!
//! A rollback is a new deployment (kind `rollback`) with the next, higher sequence, pointing at
//! the older pack; devices get it through their normal poll, and their manifest verifier accepts
//! it because its sequence is higher than anything they installed. Replaying the *old* manifest
//! of that version would be refused: its sequence is not.
//!
//! `"previous"` resolves **per accelerator configuration**: a mixed group (say two U55-256 and one
//! U55-128 devices) runs one pack per configuration, so for each configuration among the group's
//! devices it takes the newest version of the model deployed to the group for that configuration
//! before the last one. Configurations with nothing to go back to are left alone; one rollback
//! deployment is made per configuration that has. `?dry_run=true` answers what it would do (the
//! concrete versions, packs and devices) without making anything.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use npub_core::Accel;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::deployments::{self, CreateQuery, Deployment, Preview, Target};
use super::rollout::Rollout;
use crate::auth::Operator;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::state::AppState;

/// The word that asks for the version deployed before the current one.
pub const PREVIOUS: &str = "previous";

/// A group.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupInfo {
    /// Its name.
    pub group: String,
    /// Unrevoked devices in it.
    pub devices: i64,
    /// Sequence of the newest deployment to it, if any.
    pub latest_sequence: Option<i64>,
    /// Its maintenance window: updates are offered to its devices only inside it.
    pub window: Option<super::window::WindowSpec>,
}

/// `POST /api/v1/groups/{group}/rollback` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// Model name.
    pub model: String,
    /// The version to go back to, or `"previous"`: the newest version deployed to this group
    /// before the one deployed last.
    pub version: String,
    /// Staged rollout for the rollback; omitted: everyone at once.
    pub rollout: Option<Rollout>,
    /// Roll back even to a version whose proof against its source model diverged (audited).
    #[serde(default)]
    pub override_proof: bool,
}

/// `POST /api/v1/groups/{group}/rollback` answer: the first rollback deployment, and every one
/// made (one per accelerator configuration when `"previous"` resolved to several).
#[derive(Debug, Serialize, ToSchema)]
pub struct RollbackMade {
    /// The first (or only) deployment made.
    #[serde(flatten)]
    pub first: Deployment,
    /// Every deployment made, in sequence order (the first included).
    pub deployments: Vec<Deployment>,
}

/// `POST /api/v1/groups/{group}/rollback?dry_run=true` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct RollbackPreview {
    /// What each rollback deployment would do: the concrete version, its pack, its devices.
    pub rollbacks: Vec<Preview>,
}

/// `/api/v1/groups…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_groups))
        .routes(routes!(rollback))
}

/// Every group with a device or a deployment.
#[utoipa::path(
    get,
    path = "/api/v1/groups",
    tag = "deployments",
    security(("token" = [])),
    responses((status = 200, body = [GroupInfo]), (status = 401, body = ErrorBody))
)]
async fn list_groups(
    State(state): State<AppState>,
    _op: Operator,
) -> Result<JsonResponse<Vec<GroupInfo>>, ApiError> {
    type Row = (
        String,
        i64,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT g.grp, \
           (SELECT COUNT(*) FROM devices d WHERE d.grp = g.grp AND d.revoked_at IS NULL), \
           (SELECT MAX(sequence) FROM deployments p WHERE p.target_group = g.grp), \
           w.start_minute, w.end_minute, w.days, w.time_zone \
         FROM (SELECT grp FROM devices UNION SELECT target_group FROM deployments \
               WHERE target_group IS NOT NULL UNION SELECT grp FROM group_windows) g \
         LEFT JOIN group_windows w ON w.grp = g.grp ORDER BY g.grp",
    )
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(
        rows.into_iter()
            .map(
                |(group, devices, latest_sequence, start, end, days, zone)| GroupInfo {
                    group,
                    devices,
                    latest_sequence,
                    window: match (start, end, days, zone) {
                        (Some(s), Some(e), Some(d), Some(z)) => {
                            Some(super::window::WindowSpec::of_row(s, e, d, z))
                        }
                        _ => None,
                    },
                },
            )
            .collect(),
    ))
}

/// Rolls a group back to an older version: a new deployment with a higher sequence (one per
/// accelerator configuration for `"previous"`). `dry_run=true` answers what it would do.
#[utoipa::path(
    post,
    path = "/api/v1/groups/{group}/rollback",
    tag = "deployments",
    params(("group" = String, Path, description = "group name"), CreateQuery),
    request_body = RollbackRequest,
    security(("token" = [])),
    responses(
        (status = 201, body = RollbackMade),
        (status = 200, body = RollbackPreview, description = "dry_run=true: nothing is made"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the model is marked release required and the version to roll back to is not released, or its proof diverged and `override_proof` is not set"),
        (status = 422, body = ErrorBody),
    )
)]
async fn rollback(
    State(state): State<AppState>,
    op: Operator,
    Path(group): Path<String>,
    Query(q): Query<CreateQuery>,
    Json(body): Json<RollbackRequest>,
) -> Result<Response, ApiError> {
    let versions = if body.version == PREVIOUS {
        previous_versions(&state, &group, &body.model).await?
    } else {
        vec![body.version]
    };
    let rollout = body.rollout.unwrap_or_else(Rollout::immediate);
    let target = || Target {
        group: Some(group.clone()),
        device: None,
    };
    // Every rollback is previewed (and so checked: it reaches a device) before any is made.
    let mut rollbacks = Vec::with_capacity(versions.len());
    for v in &versions {
        rollbacks.push(
            deployments::preview(
                &state,
                &body.model,
                v,
                target(),
                &rollout,
                body.override_proof,
            )
            .await?,
        );
    }
    if q.dry_run {
        return Ok(JsonResponse(RollbackPreview { rollbacks }).into_response());
    }
    let mut made = Vec::with_capacity(versions.len());
    for v in &versions {
        made.push(
            deployments::create(
                &state,
                &op,
                &body.model,
                v,
                target(),
                rollout.clone(),
                "rollback",
                None,
                body.override_proof,
            )
            .await?,
        );
    }
    let mut all = made.into_iter();
    let first = all
        .next()
        .ok_or_else(|| ApiError::internal("a rollback resolved to no version"))?;
    let mut deployments = vec![
        deployments::load(
            &mut *state.db.acquire().await?,
            first.id,
            &state.rollout_targets,
        )
        .await?,
    ];
    deployments.extend(all);
    Ok((
        StatusCode::CREATED,
        JsonResponse(RollbackMade { first, deployments }),
    )
        .into_response())
}

/// For each accelerator configuration among `group`'s devices, the newest version of `model`
/// deployed to `group` for that configuration before (and other than) the last one.
async fn previous_versions(
    state: &AppState,
    group: &str,
    model: &str,
) -> Result<Vec<String>, ApiError> {
    let accels: Vec<(i64,)> = sqlx::query_as(
        "SELECT DISTINCT accel FROM devices WHERE grp = $1 AND revoked_at IS NULL ORDER BY accel",
    )
    .bind(group)
    .fetch_all(&state.db)
    .await?;
    let history: Vec<(String, i64)> = sqlx::query_as(
        "SELECT v.version, v.accel FROM deployments d JOIN versions v ON v.id = d.version_id \
         JOIN models m ON m.id = v.model_id WHERE d.target_group = $1 AND m.name = $2 \
         ORDER BY d.sequence DESC",
    )
    .bind(group)
    .bind(model)
    .fetch_all(&state.db)
    .await?;
    if history.is_empty() {
        return Err(ApiError::NotFound(format!(
            "a deployment of model {model:?} to group {group:?}"
        )));
    }
    let mut out = Vec::new();
    let mut last_seen = Vec::new();
    for (accel,) in accels {
        let mut mine = history.iter().filter(|(_, a)| *a == accel).map(|(v, _)| v);
        let Some(last) = mine.next() else { continue };
        last_seen.push(format!(
            "{last} ({})",
            Accel::from_word(accel as u32).name()
        ));
        if let Some(previous) = mine.find(|v| *v != last)
            && !out.contains(previous)
        {
            out.push(previous.clone());
        }
    }
    if out.is_empty() {
        return Err(ApiError::NotFound(format!(
            "a version of model {model:?} deployed to group {group:?} before {}",
            if last_seen.is_empty() {
                "the last one, for an accelerator its devices have".to_owned()
            } else {
                last_seen.join(", ")
            }
        )));
    }
    Ok(out)
}
