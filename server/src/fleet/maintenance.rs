//! `PUT/DELETE /api/v1/groups/{group}/window`: a group's maintenance window (`fleet/window.rs`
//! says what it does), stored in `group_windows`; every change is audited and rebuilds the poll
//! snapshot, which carries the windows to the device decision.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::window::WindowSpec;
use crate::auth::Operator;
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::state::AppState;
use crate::time::now_ms;

/// `/api/v1/groups/{group}/window` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_window, clear_window))
}

/// Sets a group's maintenance window: its devices are offered updates only inside it, every day
/// or on the days it names, in its time zone. A device that already holds a manifest may still finish its download.
#[utoipa::path(
    put,
    path = "/api/v1/groups/{group}/window",
    tag = "deployments",
    params(("group" = String, Path, description = "group name")),
    request_body = WindowSpec,
    security(("token" = [])),
    responses(
        (status = 200, body = WindowSpec),
        (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a bad time of day, an empty window or an unknown time zone"),
    )
)]
async fn set_window(
    State(state): State<AppState>,
    op: Operator,
    Path(group): Path<String>,
    Json(spec): Json<WindowSpec>,
) -> Result<JsonResponse<WindowSpec>, ApiError> {
    super::device_info::check_field("group", &group)?;
    let (start, end, days) = spec.check()?;
    let mut tx = FleetChange::begin(&state).await?;
    sqlx::query(
        "INSERT INTO group_windows (grp, start_minute, end_minute, time_zone, updated_at, days) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (grp) DO UPDATE SET \
         start_minute = excluded.start_minute, end_minute = excluded.end_minute, \
         time_zone = excluded.time_zone, updated_at = excluded.updated_at, days = excluded.days",
    )
    .bind(&group)
    .bind(i64::from(start))
    .bind(i64::from(end))
    .bind(&spec.time_zone)
    .bind(now_ms())
    .bind(i64::from(days.bits()))
    .execute(&mut *tx)
    .await?;
    tx.commit(
        Record::Audit {
            op: &op,
            action: "group.window_set",
            object: format!("groups/{group}"),
            detail: serde_json::json!({"start": spec.start, "end": spec.end, "time_zone": spec.time_zone, "days": spec.days}),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    // Answered as read back: days in order, none for every day.
    Ok(JsonResponse(WindowSpec::of_row(
        i64::from(start),
        i64::from(end),
        i64::from(days.bits()),
        spec.time_zone,
    )))
}

/// Removes a group's maintenance window: its devices are offered updates at any time again.
#[utoipa::path(
    delete,
    path = "/api/v1/groups/{group}/window",
    tag = "deployments",
    params(("group" = String, Path, description = "group name")),
    security(("token" = [])),
    responses(
        (status = 204, description = "removed"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "the group has no window"),
    )
)]
async fn clear_window(
    State(state): State<AppState>,
    op: Operator,
    Path(group): Path<String>,
) -> Result<StatusCode, ApiError> {
    let mut tx = FleetChange::begin(&state).await?;
    let gone = sqlx::query("DELETE FROM group_windows WHERE grp = $1")
        .bind(&group)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if gone == 0 {
        return Err(ApiError::NotFound(format!(
            "group {group:?} has no maintenance window"
        )));
    }
    tx.commit(
        Record::Audit {
            op: &op,
            action: "group.window_clear",
            object: format!("groups/{group}"),
            detail: serde_json::json!({}),
        },
        Effect::Fleet,
    )
    .await?
    .finish()
    .await;
    Ok(StatusCode::NO_CONTENT)
}
