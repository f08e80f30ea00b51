//! Body and query extractors whose rejections are [`ApiError`]s, so that a malformed request gets
//! the same JSON error shape as everything else instead of axum's plain-text rejection.
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `axum::Json` with [`ApiError`] rejections.
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Json(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge {
            limit: JSON_BODY_LIMIT_BYTES,
        };
    }
    ApiError::InvalidRequest {
        status,
        detail: rejection.body_text(),
    }
}

/// axum's default limit on buffered bodies (JSON requests), reported in 413s.
pub const JSON_BODY_LIMIT_BYTES: u64 = 2 * 1024 * 1024;

/// `axum::extract::Query` with [`ApiError`] rejections.
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    ApiError::InvalidRequest {
        status: rejection.status(),
        detail: rejection.body_text(),
    }
}
