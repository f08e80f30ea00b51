//! The `Operator` extractor: fails closed.
//!
//! A handler that takes an [`Operator`] cannot run without a valid, unrevoked token: a missing
//! header, a scheme other than Bearer, a malformed value, an unknown or revoked token all end in
//! 401 before the handler is called. There is deliberately no `Option<Operator>`: "no token"
//! must never quietly become "anonymous" because a header was misspelt. Every such failure goes
//! through [`super::guard`] (counted, logged, throttled per peer).
//!
//! An admin-only route takes [`Admin`] instead, which answers 403 for an operator-role token in
//! the same place: before any body is read, so that the role, not the body, decides first.
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::Serialize;
use utoipa::ToSchema;

use super::guard::Kind;
use super::token::{self, MAX_TOKEN_CHARS};
use crate::error::ApiError;
use crate::state::AppState;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, including tokens and signing keys.
    Admin,
    /// Models, versions and deployments.
    Operator,
}

impl Role {
    /// The database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
        }
    }

    /// From the database spelling; anything unknown is the lesser role.
    pub fn from_db(s: &str) -> Self {
        if s == "admin" {
            Role::Admin
        } else {
            Role::Operator
        }
    }
}

/// The authenticated caller of an operator route.
#[derive(Debug, Clone)]
pub struct Operator {
    /// `tokens.id`.
    pub token_id: i64,
    /// The token's name, as the audit log shows it.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// The authenticated caller of an admin-only route: an [`Operator`] whose role is admin. As an
/// extractor it runs before the body extractor, so an operator-role token gets 403 whatever it
/// sent, never a 422 about a body it may not send at all.
#[derive(Debug, Clone)]
pub struct Admin(pub Operator);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let op = Operator::from_request_parts(parts, state).await?;
        if op.role == Role::Admin {
            Ok(Admin(op))
        } else {
            Err(ApiError::Forbidden(
                "call this route: it manages tokens or signing keys, which needs an admin token",
            ))
        }
    }
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let failed = || state.auth_guard.failed(peer(parts), Kind::Operator);
        let secret = bearer(parts).ok_or_else(failed)?;
        let row: Option<(i64, String, String)> = sqlx::query_as(
            "SELECT id, name, role FROM tokens WHERE hash = $1 AND revoked_at IS NULL",
        )
        .bind(token::hash(secret))
        .fetch_optional(&state.db)
        .await?;
        let (token_id, name, role) = row.ok_or_else(failed)?;
        Ok(Operator {
            token_id,
            name,
            role: Role::from_db(&role),
        })
    }
}

/// The peer's address, which the accept loop puts in every request (absent in in-process tests).
pub(crate) fn peer(parts: &Parts) -> Option<SocketAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, RFC 9110),
/// or `None` for anything else.
pub(crate) fn bearer(parts: &Parts) -> Option<&str> {
    let mut values = parts.headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None; // two Authorization headers: ambiguous, refuse
    }
    bearer_token(value.to_str().ok()?)
}

/// The token in one `Authorization` value, `Bearer <token>` (the rule [`bearer`] applies; the
/// device lane applies it to the raw header).
pub(crate) fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN_CHARS)
        .then_some(token)
}
