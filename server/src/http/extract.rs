//! Path, query and body extractors whose rejections are [`ApiError`]s, so that a malformed request
//! gets the same JSON error shape as everything else instead of axum's plain-text rejection
//! (`GET /api/v1/deployments/abc` once answered 400 `text/plain` "Invalid URL: Cannot parse…").
//! Handlers take these, never axum's own; multipart uploads are read by `catalog/upload.rs`, whose errors
//! are [`ApiError`]s already.
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};

use crate::http::error::ApiError;

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
    if let Some(slow) = crate::http::body_rate::too_slow(&rejection) {
        return ApiError::RequestTimeout(slow.to_string());
    }
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge {
            what: "the JSON body",
            limit: JSON_BODY_LIMIT_BYTES,
        };
    }
    // axum says "Failed to deserialize the JSON body into the target type: tags[0]: invalid
    // type: …": the operator needs the field and what was wrong with it, not the Rust type.
    let text = rejection.body_text();
    let detail = match text.split_once("into the target type: ") {
        Some((_, field)) => format!("the JSON body does not fit this request: {field}"),
        None => text,
    };
    ApiError::InvalidRequest { status, detail }
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

/// `axum::extract::Path` with [`ApiError`] rejections.
pub struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    let status = rejection.status();
    if status.is_server_error() {
        // A route whose template lacks the handler's parameters: a bug, not the client's fault.
        return ApiError::internal(rejection.body_text());
    }
    // axum says "Failed to deserialize the JSON body into the target type: tags[0]: invalid
    // type: …": the operator needs the field and what was wrong with it, not the Rust type.
    let text = rejection.body_text();
    let detail = match text.split_once("into the target type: ") {
        Some((_, field)) => format!("the JSON body does not fit this request: {field}"),
        None => text,
    };
    ApiError::InvalidRequest { status, detail }
}

/// `deserialize_with` for an integer field of a JSON body: JSON Schema's `integer` is any number
/// with a zero fraction, so `3.0` is one (and what schema-driven clients send), while serde's
/// integers refuse every float. Refuses a fraction and anything outside `T`.
pub fn integral<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    let n = serde_json::Number::deserialize(deserializer)?;
    integral_of(&n).map_err(D::Error::custom)
}

/// [`integral`] for a list of integers.
pub fn integrals<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Vec::<serde_json::Number>::deserialize(deserializer)?
        .iter()
        .map(|n| integral_of(n).map_err(D::Error::custom))
        .collect()
}

fn integral_of<T: TryFrom<i128>>(n: &serde_json::Number) -> Result<T, String> {
    let exact = if let Some(u) = n.as_u64() {
        Some(i128::from(u))
    } else if let Some(i) = n.as_i64() {
        Some(i128::from(i))
    } else {
        // Every f64 of magnitude below 2^100 converts exactly once its fraction is zero.
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 2f64.powi(100))
            .map(|f| f as i128)
    };
    exact
        .ok_or_else(|| format!("{n} is not an integer"))
        .and_then(|v| T::try_from(v).map_err(|_| format!("{n} is out of range")))
}

/// A small binary body (a release bundle, a keyring record), read whole: 413 naming `what` past
/// `limit` bytes, 408 when it arrives too slowly, 400 when it cannot be read.
pub async fn small_body(
    body: axum::body::Body,
    limit: usize,
    what: &'static str,
) -> Result<Vec<u8>, ApiError> {
    use futures_util::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| match crate::http::body_rate::too_slow(&e) {
            Some(slow) => ApiError::RequestTimeout(slow.to_string()),
            None => ApiError::bad_request(format!("{what}: the body cannot be read: {e}")),
        })?;
        if out.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge {
                what,
                limit: limit as u64,
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[serde(deserialize_with = "integral")]
        n: u32,
        #[serde(deserialize_with = "integrals")]
        v: Vec<u8>,
    }

    #[test]
    fn survives_integers_spelt_as_floats_and_rejects_fractions() {
        let ok: Body = serde_json::from_str(r#"{"n": 3737056.0, "v": [1, 2.0, 100]}"#).unwrap();
        assert_eq!((ok.n, ok.v), (3_737_056, vec![1, 2, 100]));
        for bad in [
            r#"{"n": 1.5, "v": []}"#,
            r#"{"n": -1, "v": []}"#,
            r#"{"n": 1e300, "v": []}"#,
            r#"{"n": 1, "v": [256]}"#,
        ] {
            assert!(serde_json::from_str::<Body>(bad).is_err(), "{bad}");
        }
    }
}
