//! `/api/v1/models`: the named things operators version and deploy.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use npub_core::Accel;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Operator;
use crate::db::Conn;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::names;
use crate::ops::audit;
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// Longest description, in characters: a paragraph, not a document.
pub(crate) const DESCRIPTION_MAX_CHARS: usize = 4096;

/// `POST /api/v1/models` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewModel {
    /// 1..=64 of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
    pub name: String,
    /// Free text: at most 4096 characters; lines and tabs, but no other control characters.
    #[serde(default)]
    pub description: String,
    /// Vela accelerator config every version must be compiled for (`ethos-u55-256`, …);
    /// omitted: any.
    pub accelerator: Option<String>,
}

/// A model.
#[derive(Debug, Serialize, ToSchema)]
pub struct Model {
    /// Its name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// The accelerator config its versions are compiled for, if fixed.
    pub accelerator: Option<String>,
    /// How many versions it has.
    pub versions: i64,
    /// The most recently uploaded version, if any.
    pub latest_version: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// Name of the token that created it.
    pub created_by: String,
}

/// A model row, as handlers need it.
#[derive(Debug, Clone)]
pub struct ModelRow {
    /// `models.id`.
    pub id: i64,
    /// The accel word versions must carry, if fixed.
    pub accelerator: Option<Accel>,
}

/// The model named `name`, or 404.
pub async fn find(conn: &mut Conn, name: &str) -> Result<ModelRow, ApiError> {
    let row: Option<(i64, Option<i64>)> =
        sqlx::query_as("SELECT id, accelerator FROM models WHERE name = $1")
            .bind(name)
            .fetch_optional(conn)
            .await?;
    let (id, accel) = row.ok_or_else(|| ApiError::NotFound(format!("model {name:?}")))?;
    Ok(ModelRow {
        id,
        accelerator: accel.map(|w| Accel::from_word(w as u32)),
    })
}

/// `/api/v1/models` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_model, list_models))
        .routes(routes!(get_model))
}

/// Creates a model (no versions yet).
#[utoipa::path(
    post,
    path = "/api/v1/models",
    tag = "models",
    request_body = NewModel,
    security(("token" = [])),
    responses(
        (status = 201, body = Model),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "a model with this name exists"),
        (status = 422, body = ErrorBody),
    )
)]
async fn create_model(
    State(state): State<AppState>,
    op: Operator,
    Json(new): Json<NewModel>,
) -> Result<(StatusCode, JsonResponse<Model>), ApiError> {
    names::model(&new.name)?;
    names::free_text(
        "description",
        &new.description,
        DESCRIPTION_MAX_CHARS,
        names::Lines::Many,
    )?;
    let accel = match new.accelerator.as_deref() {
        None => None,
        Some(name) => Some(
            Accel::from_name(name)
                .filter(|a| *a != Accel::Unspecified)
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "accelerator {name:?}: not a Vela accelerator config; one of {}",
                        Accel::ALL[1..]
                            .iter()
                            .map(|a| a.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?,
        ),
    };
    let now = now_ms();
    let mut tx = crate::db::begin_write(&state.db).await?;
    sqlx::query(
        "INSERT INTO models (name, description, accelerator, created_at, created_by) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&new.name)
    .bind(&new.description)
    .bind(accel.map(|a| i64::from(a.word())))
    .bind(now)
    .bind(op.token_id)
    .execute(&mut *tx)
    .await
    .map_err(|e| ApiError::on_unique(e, || format!("model {:?} already exists", new.name)))?;
    audit::record(
        &mut tx,
        &op,
        "model.create",
        &format!("models/{}", new.name),
        serde_json::json!({"accelerator": accel.map(|a| a.name())}),
    )
    .await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        JsonResponse(Model {
            name: new.name,
            description: new.description,
            accelerator: accel.map(|a| a.name().to_owned()),
            versions: 0,
            latest_version: None,
            created_at: rfc3339(now),
            created_by: op.name,
        }),
    ))
}

type ModelTuple = (
    String,
    String,
    Option<i64>,
    i64,
    Option<String>,
    i64,
    String,
);

/// The columns of [`ModelTuple`]; a macro so that `concat!` can finish the (static) query.
macro_rules! select_models {
    () => {
        "SELECT m.name, m.description, m.accelerator, \
     (SELECT COUNT(*) FROM versions v WHERE v.model_id = m.id), \
     (SELECT v.version FROM versions v WHERE v.model_id = m.id ORDER BY v.id DESC LIMIT 1), \
     m.created_at, t.name \
     FROM models m JOIN tokens t ON t.id = m.created_by"
    };
}

fn model_of(row: ModelTuple) -> Model {
    let (name, description, accel, versions, latest_version, created_at, created_by) = row;
    Model {
        name,
        description,
        accelerator: accel.map(|w| Accel::from_word(w as u32).name().to_owned()),
        versions,
        latest_version,
        created_at: rfc3339(created_at),
        created_by,
    }
}

/// Every model, by name.
#[utoipa::path(
    get,
    path = "/api/v1/models",
    tag = "models",
    security(("token" = [])),
    responses((status = 200, body = [Model]), (status = 401, body = ErrorBody))
)]
async fn list_models(
    State(state): State<AppState>,
    _op: Operator,
) -> Result<JsonResponse<Vec<Model>>, ApiError> {
    let rows: Vec<ModelTuple> = sqlx::query_as(concat!(select_models!(), " ORDER BY m.name"))
        .fetch_all(&state.db)
        .await?;
    Ok(JsonResponse(rows.into_iter().map(model_of).collect()))
}

/// One model.
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}",
    tag = "models",
    params(("name" = String, Path, description = "model name")),
    security(("token" = [])),
    responses((status = 200, body = Model), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_model(
    State(state): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> Result<JsonResponse<Model>, ApiError> {
    let row: Option<ModelTuple> = sqlx::query_as(concat!(select_models!(), " WHERE m.name = $1"))
        .bind(&name)
        .fetch_optional(&state.db)
        .await?;
    row.map(|r| JsonResponse(model_of(r)))
        .ok_or_else(|| ApiError::NotFound(format!("model {name:?}")))
}
