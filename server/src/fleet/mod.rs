//! The fleet: devices, deployments with staged rollouts, rollback by version, and the device API.
//!
//! | Module          | Routes / role                                                              |
//! |-----------------|----------------------------------------------------------------------------|
//! | [`devices`]     | `POST/GET /api/v1/devices`, `GET/DELETE /api/v1/devices/{id}`, `…/revoke`   |
//! | [`device_edit`] | `PATCH /api/v1/devices/{id}`, `POST /api/v1/devices/{id}/token`             |
//! | [`deployments`] | `POST/GET /api/v1/deployments`, `GET …/{id}`, `POST …/{id}/pause|resume|abort|retry-failed` |
//! | [`groups`]      | `GET /api/v1/groups`, `POST /api/v1/groups/{group}/rollback`               |
//! | [`targeting`]   | who a deployment reaches, device by device (previews, per-device lists)    |
//! | [`rollout`]     | batch membership, progress counts, batch opening and auto-abort             |
//! | [`ranked`]      | one deployment's ranked targets, moved by a fleet change without ranking again |
//! | [`ranking`]     | where a deployment's ranked targets come from: kept, moved forward, or ranked |
//! | [`target_cache`]| the ranked targets kept per deployment and generation                       |
//! | [`history`]     | each device's timeline: offers and reports                                  |
//! | [`change`]      | after a committed change: this replica's snapshot brought up to it          |
//! | [`maintenance`] | `PUT/DELETE /api/v1/groups/{group}/window`: maintenance windows per group   |
//! | [`window`]      | a maintenance window, as the device decision asks it whether it is open     |
//! | [`summary`]     | `GET /api/v1/fleet/summary`, `GET /api/v1/deployments/{id}/timeline`: the dashboard |
//!
//! Operator routes take the operator extractor ([`crate::auth::Operator`]); the device API
//! (`crate::device`) takes the device extractor, which only knows device tokens: neither kind of
//! token opens the other's routes.
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub mod change;
pub mod deployments;
pub mod device_edit;
pub mod device_info;
pub mod devices;
pub mod groups;
pub mod history;
pub mod listing;
pub mod maintenance;
pub mod ranked;
pub mod ranking;
pub mod rollout;
pub mod states;
pub mod summary;
pub mod target_cache;
pub mod targeting;
pub mod window;

/// The fleet's tags in the OpenAPI document.
#[derive(OpenApi)]
#[openapi(tags(
    (name = "devices", description = "Provisioned devices and their tokens"),
    (name = "deployments", description = "Deployments, staged rollouts, rollback by version"),
))]
struct FleetDoc;

/// Every fleet route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(FleetDoc::openapi())
        .merge(devices::router())
        .merge(deployments::router())
        .merge(groups::router())
        .merge(maintenance::router())
        .merge(summary::router())
}
