//! `/api/v1/groups`: the groups devices are in, and rollback by version.
//!
//! A rollback is a new deployment (kind `rollback`) with the next, higher sequence, pointing at
//! the older pack; devices get it through their normal poll, and their manifest verifier accepts
//! it because its sequence is higher than anything they installed. Replaying the *old* manifest
//! of that version would be refused: its sequence is not.
use axum::Json as JsonResponse;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::deployments::{self, Deployment, Target};
use super::rollout::Rollout;
use crate::auth::Operator;
use crate::error::{ApiError, ErrorBody};
use crate::extract::Json;
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
    let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT g.grp, \
           (SELECT COUNT(*) FROM devices d WHERE d.grp = g.grp AND d.revoked_at IS NULL), \
           (SELECT MAX(sequence) FROM deployments p WHERE p.target_group = g.grp) \
         FROM (SELECT grp FROM devices UNION SELECT target_group FROM deployments \
               WHERE target_group IS NOT NULL) g ORDER BY g.grp",
    )
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(
        rows.into_iter()
            .map(|(group, devices, latest_sequence)| GroupInfo {
                group,
                devices,
                latest_sequence,
            })
            .collect(),
    ))
}

/// Rolls a group back to an older version: a new deployment with a higher sequence.
#[utoipa::path(
    post,
    path = "/api/v1/groups/{group}/rollback",
    tag = "deployments",
    params(("group" = String, Path, description = "group name")),
    request_body = RollbackRequest,
    security(("token" = [])),
    responses(
        (status = 201, body = Deployment),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody),
    )
)]
async fn rollback(
    State(state): State<AppState>,
    op: Operator,
    Path(group): Path<String>,
    Json(body): Json<RollbackRequest>,
) -> Result<(StatusCode, JsonResponse<Deployment>), ApiError> {
    let version = if body.version == PREVIOUS {
        previous_version(&state, &group, &body.model).await?
    } else {
        body.version
    };
    let d = deployments::create(
        &state,
        &op,
        &body.model,
        &version,
        Target {
            group: Some(group),
            device: None,
        },
        body.rollout.unwrap_or_else(Rollout::immediate),
        "rollback",
    )
    .await?;
    Ok((StatusCode::CREATED, JsonResponse(d)))
}

/// The newest version of `model` deployed to `group` before (and other than) the last one.
async fn previous_version(state: &AppState, group: &str, model: &str) -> Result<String, ApiError> {
    let history: Vec<(String,)> = sqlx::query_as(
        "SELECT v.version FROM deployments d JOIN versions v ON v.id = d.version_id \
         JOIN models m ON m.id = v.model_id WHERE d.target_group = $1 AND m.name = $2 \
         ORDER BY d.sequence DESC",
    )
    .bind(group)
    .bind(model)
    .fetch_all(&state.db)
    .await?;
    let mut versions = history.into_iter().map(|(v,)| v);
    let last = versions.next().ok_or_else(|| {
        ApiError::NotFound(format!(
            "a deployment of model {model:?} to group {group:?}"
        ))
    })?;
    versions.find(|v| *v != last).ok_or_else(|| {
        ApiError::NotFound(format!(
            "a version of model {model:?} deployed to group {group:?} before {last:?}"
        ))
    })
}
