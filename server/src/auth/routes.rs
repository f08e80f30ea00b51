//! `/api/v1/tokens`: create (shown once), list, revoke. Admin only.
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Admin, Role, token};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::names;
use crate::ops::audit;
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// `POST /api/v1/tokens` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// A label for people ("CI uploader"); shown in lists and the audit log.
    pub name: String,
    /// `operator` (default) or `admin`.
    #[serde(default = "default_role")]
    pub role: Role,
}

fn default_role() -> Role {
    Role::Operator
}

/// A token as listed (never its secret).
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenInfo {
    /// Its id (for `DELETE /api/v1/tokens/{id}`).
    pub id: i64,
    /// Its label.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// RFC 3339.
    pub created_at: String,
    /// Name of the token that created it; absent for the bootstrap token.
    pub created_by: Option<String>,
    /// RFC 3339; absent while the token is valid.
    pub revoked_at: Option<String>,
}

/// A newly created token: the only response that carries the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenCreated {
    /// The token's metadata.
    #[serde(flatten)]
    pub info: TokenInfo,
    /// The secret, for `Authorization: Bearer <token>`. Shown once; store it now.
    pub token: String,
}

/// `/api/v1/tokens…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(revoke_token))
}

/// Creates a token and returns its secret, once.
#[utoipa::path(
    post,
    path = "/api/v1/tokens",
    tag = "tokens",
    request_body = NewToken,
    security(("token" = [])),
    responses(
        (status = 201, body = TokenCreated),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody),
    )
)]
async fn create_token(
    State(state): State<AppState>,
    Admin(op): Admin,
    Json(new): Json<NewToken>,
) -> Result<(StatusCode, JsonResponse<TokenCreated>), ApiError> {
    names::token(&new.name)?;
    let secret = token::generate()?;
    let now = now_ms();
    let mut tx = crate::db::begin_write(&state.db).await?;
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO tokens (name, role, hash, created_at, created_by) VALUES ($1, $2, $3, $4, $5) \
         RETURNING id",
    )
    .bind(&new.name)
    .bind(new.role.as_str())
    .bind(token::hash(&secret))
    .bind(now)
    .bind(op.token_id)
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut tx,
        &op,
        "token.create",
        &format!("tokens/{id}"),
        serde_json::json!({"name": new.name, "role": new.role}),
    )
    .await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        JsonResponse(TokenCreated {
            info: TokenInfo {
                id,
                name: new.name,
                role: new.role,
                created_at: rfc3339(now),
                created_by: Some(op.name),
                revoked_at: None,
            },
            token: secret,
        }),
    ))
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    id: i64,
    name: String,
    role: String,
    created_at: i64,
    created_by: Option<String>,
    revoked_at: Option<i64>,
}

/// Lists every token, revoked ones included (never their secrets).
#[utoipa::path(
    get,
    path = "/api/v1/tokens",
    tag = "tokens",
    security(("token" = [])),
    responses((status = 200, body = [TokenInfo]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody))
)]
async fn list_tokens(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<JsonResponse<Vec<TokenInfo>>, ApiError> {
    let rows: Vec<TokenRow> = sqlx::query_as(
        "SELECT t.id, t.name, t.role, t.created_at, c.name AS created_by, t.revoked_at \
         FROM tokens t LEFT JOIN tokens c ON c.id = t.created_by ORDER BY t.id",
    )
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(
        rows.into_iter()
            .map(|r| TokenInfo {
                id: r.id,
                name: r.name,
                role: Role::from_db(&r.role),
                created_at: rfc3339(r.created_at),
                created_by: r.created_by,
                revoked_at: r.revoked_at.map(rfc3339),
            })
            .collect(),
    ))
}

/// Revokes a token, effective for the next request. Revoking a revoked token is a no-op (204);
/// revoking the last valid admin token is refused (409), since nobody could then manage tokens.
#[utoipa::path(
    delete,
    path = "/api/v1/tokens/{id}",
    tag = "tokens",
    params(("id" = i64, Path, description = "token id")),
    security(("token" = [])),
    responses(
        (status = 204, description = "revoked"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
    )
)]
async fn revoke_token(
    State(state): State<AppState>,
    Admin(op): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let not_found = || ApiError::NotFound(format!("token {id:?}"));
    let id: i64 = id.parse().map_err(|_| not_found())?;
    let _serial = state.write_turn().await?;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let row: Option<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT name, role, revoked_at FROM tokens WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let (name, role, revoked_at) = row.ok_or_else(not_found)?;
    if revoked_at.is_some() {
        return Ok(StatusCode::NO_CONTENT);
    }
    if role == "admin" {
        let (admins,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM tokens WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(&mut *tx)
        .await?;
        if admins <= 1 {
            return Err(ApiError::Conflict(format!(
                "token {id} is the last valid admin token; create another admin token first"
            )));
        }
    }
    sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2")
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        &op,
        "token.revoke",
        &format!("tokens/{id}"),
        serde_json::json!({"name": name}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
