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
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::keys::release::KnownRelease;
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
    /// Whether a version needs release signatures that meet the model's rule to be deployed or
    /// rolled back to (`PATCH` sets it; `docs/release.md`).
    pub release_required: bool,
}

/// `PATCH /api/v1/models/{name}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelPatch {
    /// Require release signatures for deployments and rollbacks of this model's versions.
    pub release_required: bool,
}

/// `PATCH /api/v1/models/{name}` answer: the model, and what the policy finds deployed.
#[derive(Debug, Serialize, ToSchema)]
pub struct PatchedModel {
    /// The model after the change.
    #[serde(flatten)]
    pub model: Model,
    /// Versions of this model that a deployment not aborted names, or that a device reports
    /// running, and that do not meet the release rule. Turning the policy on does not stop them: it refuses new
    /// deployments and rollbacks; devices with release keys refuse these versions on their own.
    pub unreleased_deployed: Vec<String>,
    /// What to do about them, when there are any.
    pub warning: Option<String>,
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
        .routes(routes!(get_model, patch_model))
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
            release_required: false,
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
    i64,
);

/// The columns of [`ModelTuple`]; a macro so that `concat!` can finish the (static) query.
macro_rules! select_models {
    () => {
        "SELECT m.name, m.description, m.accelerator, \
     (SELECT COUNT(*) FROM versions v WHERE v.model_id = m.id), \
     (SELECT v.version FROM versions v WHERE v.model_id = m.id ORDER BY v.id DESC LIMIT 1), \
     m.created_at, t.name, m.release_required \
     FROM models m JOIN tokens t ON t.id = m.created_by"
    };
}

fn model_of(row: ModelTuple) -> Model {
    let (name, description, accel, versions, latest_version, created_at, created_by, required) =
        row;
    Model {
        name,
        description,
        accelerator: accel.map(|w| Accel::from_word(w as u32).name().to_owned()),
        versions,
        latest_version,
        created_at: rfc3339(created_at),
        created_by,
        release_required: required != 0,
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

/// Sets a model's release policy: with `release_required`, a version can still be uploaded, but a
/// deployment or rollback to one whose release signatures do not meet the model's rule is refused
/// (409 naming the policy). Turning it on while unreleased versions are deployed is allowed: the
/// answer lists them (`unreleased_deployed`) and they keep running; redeploy a released version.
#[utoipa::path(
    patch,
    path = "/api/v1/models/{name}",
    tag = "models",
    params(("name" = String, Path, description = "model name")),
    request_body = ModelPatch,
    security(("token" = [])),
    responses(
        (status = 200, body = PatchedModel),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody),
    )
)]
async fn patch_model(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Json(patch): Json<ModelPatch>,
) -> Result<JsonResponse<PatchedModel>, ApiError> {
    let mut tx = FleetChange::begin(&state).await?;
    let model = find(&mut tx, &name).await?;
    let (before,): (i64,) = sqlx::query_as("SELECT release_required FROM models WHERE id = $1")
        .bind(model.id)
        .fetch_one(&mut *tx)
        .await?;
    let unreleased = if patch.release_required {
        unreleased_deployed(&mut tx, &name, model.id).await?
    } else {
        Vec::new()
    };
    if (before != 0) == patch.release_required {
        tx.abandon().await?;
    } else {
        sqlx::query("UPDATE models SET release_required = $1 WHERE id = $2")
            .bind(i64::from(patch.release_required))
            .bind(model.id)
            .execute(&mut *tx)
            .await?;
        let record = Record::Audit {
            op: &op,
            action: "model.release_policy",
            object: format!("models/{name}"),
            detail: serde_json::json!({
                "release_required": patch.release_required,
                "unreleased_deployed": unreleased,
            }),
        };
        tx.commit(record, Effect::Nothing).await?.finish().await;
    }
    let row: ModelTuple = sqlx::query_as(concat!(select_models!(), " WHERE m.name = $1"))
        .bind(&name)
        .fetch_one(&state.db)
        .await?;
    let warning = (!unreleased.is_empty()).then(|| {
        format!(
            "unreleased version(s) {} of {name:?} are deployed (named by a deployment that was \
             not aborted, or running on a device): nothing is stopped, devices that run them keep \
             them (devices with release keys refuse to install them); deploy a released version",
            unreleased.join(", ")
        )
    });
    Ok(JsonResponse(PatchedModel {
        model: model_of(row),
        unreleased_deployed: unreleased,
        warning,
    }))
}

/// Versions of model `model_id` that a deployment not aborted names, or a device runs, and that
/// do not meet the release rule, oldest first.
async fn unreleased_deployed(
    conn: &mut Conn,
    name: &str,
    model_id: i64,
) -> Result<Vec<String>, ApiError> {
    type Row = (
        String,
        String,
        i64,
        Option<String>,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT v.version, v.sha256, v.accel, v.io_digest, v.release_bundle, v.golden_input, \
         v.golden_sha256 FROM versions v \
         WHERE v.model_id = $1 AND (EXISTS (SELECT 1 FROM deployments d \
         WHERE d.version_id = v.id AND d.state <> 'aborted') \
         OR EXISTS (SELECT 1 FROM devices dv WHERE dv.current_version_id = v.id)) ORDER BY v.id",
    )
    .bind(model_id)
    .fetch_all(&mut *conn)
    .await?;
    let known = KnownRelease::load(conn).await?;
    let mut out = Vec::new();
    for (version, sha, accel, io, bundle, golden, golden_sha) in rows {
        let facts = super::release::stored_facts(
            name,
            &version,
            &sha,
            accel,
            io.as_deref(),
            golden.as_deref(),
            golden_sha.as_deref(),
        )?;
        if known
            .meets(bundle.as_deref().unwrap_or_default(), &facts.facts())
            .is_err()
        {
            out.push(version);
        }
    }
    Ok(out)
}
