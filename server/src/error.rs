//! The one HTTP error type.
//!
//! Every handler and extractor returns [`ApiError`]; its [`IntoResponse`] gives the status code and
//! a JSON body `{"error": "<code>", "detail": "<what happened>"}`. `error` is a stable
//! machine-readable code, `detail` is for people. Internal errors are logged with their cause and
//! answered with a generic detail: a database or filesystem message can name paths and schema,
//! which a client has no business seeing.
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The JSON body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable code: `unauthorized`, `forbidden`, `not_found`, `conflict`, `invalid_pack`,
    /// `invalid_request`, `payload_too_large`, `unavailable` or `internal`.
    pub error: &'static str,
    /// What was wrong, for a person. For `invalid_pack`, npub-core's own message.
    pub detail: String,
}

/// Everything a request can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// 401: no token, a malformed `Authorization` header, an unknown or a revoked token.
    Unauthorized,
    /// 403: a valid token whose role may not do this.
    Forbidden(&'static str),
    /// 404: the named object does not exist.
    NotFound(String),
    /// 409: the object exists already, or something still refers to it.
    Conflict(String),
    /// 422: an upload that npub-core (or the Vela importer) rejected; the detail is its message.
    InvalidPack(String),
    /// 400 or 422 (or another 4xx from a body extractor): the request itself is malformed or a
    /// field is invalid.
    InvalidRequest {
        /// 400 for unreadable bodies, 422 for well-formed but invalid values.
        status: StatusCode,
        /// Which field, and what is wrong with it.
        detail: String,
    },
    /// 413: the body is larger than the configured limit.
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// 503: a dependency (the database) is not answering.
    Unavailable,
    /// 500: a bug or an environment failure. Logged, never echoed.
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// 422 for a field with an invalid value.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::InvalidRequest {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            detail: detail.into(),
        }
    }

    /// 400 for a request that cannot be read at all.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::InvalidRequest {
            status: StatusCode::BAD_REQUEST,
            detail: detail.into(),
        }
    }

    /// 500 with `cause` logged.
    pub fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Internal(cause.into())
    }

    /// Maps a unique-constraint violation to 409 with `detail`; anything else stays internal.
    pub fn on_unique(err: sqlx::Error, detail: impl FnOnce() -> String) -> Self {
        match &err {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict(detail()),
            _ => Self::from(err),
        }
    }

    /// Maps a foreign-key violation (something still refers to the row) to 409 with `detail`.
    ///
    /// SQLite reports a plain (`NO ACTION`) reference as `SQLITE_CONSTRAINT_FOREIGNKEY`, but an
    /// `ON DELETE RESTRICT` one through its trigger machinery (`SQLITE_CONSTRAINT_TRIGGER`, 1811)
    /// with the same message; both mean "still referenced".
    pub fn on_foreign_key(err: sqlx::Error, detail: impl FnOnce() -> String) -> Self {
        match &err {
            sqlx::Error::Database(db)
                if db.is_foreign_key_violation()
                    || db.message().contains("FOREIGN KEY constraint failed") =>
            {
                Self::Conflict(detail())
            }
            _ => Self::from(err),
        }
    }

    /// The status code this error answers with.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::InvalidPack(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InvalidRequest { status, .. } => *status,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::InvalidPack(_) => "invalid_pack",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Unavailable => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    fn detail(&self) -> String {
        match self {
            Self::Unauthorized => {
                "a valid token is required: `Authorization: Bearer <token>` (an operator token for /api/v1, a device token for /api/v1/device)".into()
            }
            Self::Forbidden(what) => format!("this token's role may not {what}"),
            Self::NotFound(what) => format!("{what} not found"),
            Self::Conflict(detail) | Self::InvalidPack(detail) => detail.clone(),
            Self::InvalidRequest { detail, .. } => detail.clone(),
            Self::PayloadTooLarge { limit } => {
                format!("the body is larger than the limit of {limit} bytes")
            }
            Self::Unavailable => "the database is not answering".into(),
            Self::Internal(_) => "internal error; the server log has the cause".into(),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        Self::Internal(Box::new(err))
    }
}

impl From<std::io::Error> for ApiError {
    fn from(err: std::io::Error) -> Self {
        Self::Internal(Box::new(err))
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Internal(cause) => write!(f, "internal: {cause}"),
            other => write!(f, "{}: {}", other.code(), other.detail()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(cause) = &self {
            tracing::error!(error = %cause, "internal error");
        }
        let status = self.status_code();
        let body = ErrorBody {
            error: self.code(),
            detail: self.detail(),
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
