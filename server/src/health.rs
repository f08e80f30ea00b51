//! `GET /healthz`: liveness and readiness for load balancers and systemd watchdogs.
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `"ok"` in a 200.
    pub status: &'static str,
    /// The server's version.
    pub version: &'static str,
}

/// `GET /healthz`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz))
}

/// 200 when the server can reach its database, 503 when it cannot. Unauthenticated.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses(
        (status = 200, body = Health),
        (status = 503, body = ErrorBody, description = "the database is not answering"),
    )
)]
async fn healthz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    sqlx::query("SELECT 1")
        .execute(&state.db)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "health check: database not answering");
            ApiError::Unavailable
        })?;
    Ok(Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    }))
}
