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

use super::guard::Kind;
use super::operator::{Admin, Operator, Role};
use super::token::{self, MAX_TOKEN_CHARS};
use crate::http::error::ApiError;
use crate::state::AppState;

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
    std::str::from_utf8(bearer_token(value.as_bytes())?).ok()
}

/// The token in one raw `Authorization` value, `Bearer <token>`: the rule [`bearer`] applies,
/// on bytes, which the device lane applies to the raw header. A value that is not text
/// (`HeaderValue::to_str`'s rule, [`crate::http::header_text`]) has no token.
pub(crate) fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    if !crate::http::header_text::is_text(value) {
        return None;
    }
    let space = value.iter().position(|&b| b == b' ')?;
    let scheme = &value[..space];
    // On text, `trim_ascii` trims what `str::trim` would: spaces and tabs.
    let token = value[space + 1..].trim_ascii();
    (scheme.eq_ignore_ascii_case(b"bearer") && !token.is_empty() && token.len() <= MAX_TOKEN_CHARS)
        .then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn rejects_a_value_without_a_bearer_token() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bEaReR \t abc \t"), Some(&b"abc"[..]));
        for value in [
            &b"Bearer"[..],
            b"Bearer ",
            b"Bearer  \t ",
            b"Basic abc",
            b"Bearerabc",
            b"Bearer ab\x7fc",
            b"Bearer \xc3\xa9",
            b"Bearer a\x0bb",
        ] {
            assert_eq!(bearer_token(value), None, "{value:?}");
        }
        let long = format!("Bearer {}", "a".repeat(super::MAX_TOKEN_CHARS + 1));
        assert_eq!(bearer_token(long.as_bytes()), None);
        let longest = format!("Bearer {}", "a".repeat(super::MAX_TOKEN_CHARS));
        assert!(bearer_token(longest.as_bytes()).is_some());
    }
}
