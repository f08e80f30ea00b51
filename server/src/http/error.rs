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
    /// `invalid_request`, `request_timeout`, `payload_too_large`, `range_not_satisfiable`,
    /// `too_many_requests`, `unavailable`, `insufficient_storage` or `internal`.
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
    /// 404 in the detail's own words, for an absence that is not a named object's (a pack
    /// without release signatures: the device contract's exact words, not "… not found").
    Absent(&'static str),
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
    /// 408: the request body arrived slower than `--body-min-rate`; the detail says how slow.
    RequestTimeout(String),
    /// 413: the body, or one part of a multipart form, is larger than its limit.
    PayloadTooLarge {
        /// What is too large: `"the body"`, `"multipart part `io`"`, ….
        what: &'static str,
        /// Its limit, in bytes.
        limit: u64,
    },
    /// 416: a `Range` that starts at or past the end of a pack of `len` bytes.
    RangeNotSatisfiable {
        /// The pack's length, for `Content-Range: bytes */LEN`.
        len: u64,
    },
    /// 429: too many failed authentications from this peer (`crate::auth::guard`).
    TooManyRequests {
        /// Seconds until the peer may fail again, for `Retry-After`.
        retry_after_secs: u64,
    },
    /// 503: a dependency (the database) is not answering.
    Unavailable,
    /// 503 with `Retry-After`: PostgreSQL ended a statement that ran or waited for a lock past
    /// its limit, or a session idle in its transaction (`db/timeouts.rs`).
    DatabaseTimedOut,
    /// 503 with `Retry-After`: the pack store failed or did not answer within
    /// `--store-timeout` (the cause is logged; a device or an operator retries).
    StoreUnavailable,
    /// 503 with `Retry-After: 1`: a bounded resource (uploads in flight) is taken; the detail
    /// names it and its bound.
    Busy(String),
    /// 507: a disk is full (or an upload would eat into `--min-free-space`); nothing was
    /// stored. The detail, which names the disk, is written by `crate::ops::disk::name_the_disk`.
    InsufficientStorage(Full),
    /// 500: a bug or an environment failure. Logged, never echoed.
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// Which disk a 507 is about (carried to `crate::ops::disk::name_the_disk` in the response's
/// extensions, which knows the data directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The data directory's filesystem (`ENOSPC`, `EDQUOT`, SQLite's `SQLITE_FULL`).
    LocalDisk,
    /// PostgreSQL's own disk (SQLSTATE 53100).
    DatabaseServer,
    /// An upload that would leave less than `--min-free-space` free.
    Reserve {
        /// Bytes free when it was refused.
        free: u64,
        /// Bytes it would have added (what is known of them).
        incoming: u64,
    },
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

    /// A pack-store failure: 507 if it was the data directory's disk filling up, else 503 with
    /// `Retry-After` (a store that failed or hung is the store's problem, not a bug here).
    pub fn store(err: std::io::Error) -> Self {
        if io_disk_full(&err) {
            return Self::from(err);
        }
        tracing::warn!(error = %err, "pack store not answering");
        Self::StoreUnavailable
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
            Self::NotFound(_) | Self::Absent(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::InvalidPack(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InvalidRequest { status, .. } => *status,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable | Self::DatabaseTimedOut | Self::Busy(_) | Self::StoreUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) | Self::Absent(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::InvalidPack(_) => "invalid_pack",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::RequestTimeout(_) => "request_timeout",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::RangeNotSatisfiable { .. } => "range_not_satisfiable",
            Self::TooManyRequests { .. } => "too_many_requests",
            Self::Unavailable | Self::DatabaseTimedOut | Self::Busy(_) | Self::StoreUnavailable => {
                "unavailable"
            }
            Self::InsufficientStorage(_) => "insufficient_storage",
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
            Self::Absent(detail) => (*detail).into(),
            Self::Conflict(detail)
            | Self::InvalidPack(detail)
            | Self::RequestTimeout(detail)
            | Self::Busy(detail) => detail.clone(),
            Self::InvalidRequest { detail, .. } => detail.clone(),
            Self::PayloadTooLarge { what, limit } => {
                format!("{what} is larger than its limit of {limit} bytes")
            }
            Self::RangeNotSatisfiable { len } => {
                format!("the range starts at or past the end of the {len}-byte pack")
            }
            Self::TooManyRequests { retry_after_secs } => format!(
                "too many failed authentications from this address; retry in {retry_after_secs} s \
                 (a valid token is never refused)"
            ),
            Self::Unavailable => "the database is not answering".into(),
            Self::DatabaseTimedOut => {
                "the database did not answer in time (a statement or a lock wait ran past its \
                 limit); retry shortly"
                    .into()
            }
            Self::StoreUnavailable => {
                "the pack store is not answering; retry shortly".into()
            }
            Self::InsufficientStorage(_) => "no space left on the server's disk; nothing was stored".into(),
            Self::Internal(_) => "internal error; the server log has the cause".into(),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    /// A database that cannot be reached (PostgreSQL restarting, its connection cut, no pooled
    /// connection within the acquire timeout) is 503: the client should retry, the request was
    /// not wrong and nothing is broken here. Anything else is a bug or an environment failure.
    fn from(err: sqlx::Error) -> Self {
        if let Some(full) = disk_full(&err) {
            tracing::warn!(error = %err, "database write refused: disk full");
            return Self::InsufficientStorage(full);
        }
        if let Some(limit) = database_timed_out(&err) {
            tracing::warn!(error = %err, "database did not answer in time: {limit}");
            return Self::DatabaseTimedOut;
        }
        if database_unreachable(&err) {
            tracing::warn!(error = %err, "database not answering");
            return Self::Unavailable;
        }
        Self::Internal(Box::new(err))
    }
}

/// Whether `err` says the database is out of reach rather than that the query was refused.
fn database_unreachable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // SQLSTATE class 08 (connection exception) and 57P01..57P03 (the server is shutting
        // down, crashed, or not accepting connections yet). SQLite's codes are plain numbers.
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P0")),
        _ => false,
    }
}

/// Which of PostgreSQL's limits (`db/timeouts.rs`) ended the statement, if one did: SQLSTATE
/// 57014 `query_canceled` (`statement_timeout`), 55P03 `lock_not_available` (`lock_timeout`),
/// 25P03 `idle_in_transaction_session_timeout` (the session is gone; `Tx` closes it).
fn database_timed_out(err: &sqlx::Error) -> Option<&'static str> {
    let sqlx::Error::Database(db) = err else {
        return None;
    };
    match db.code().as_deref() {
        Some("57014") => Some("statement_timeout (or a cancel)"),
        Some("55P03") => Some("lock_timeout"),
        Some("25P03") => Some("idle_in_transaction_session_timeout"),
        _ => None,
    }
}

/// Whether `err` says a disk is full: SQLite's `SQLITE_FULL` (13, the data directory's disk),
/// PostgreSQL's `disk_full` (53100, its own), or an `ENOSPC` on the way.
fn disk_full(err: &sqlx::Error) -> Option<Full> {
    match err {
        sqlx::Error::Io(io) if io_disk_full(io) => Some(Full::LocalDisk),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("13") => Some(Full::LocalDisk),
            Some("53100") => Some(Full::DatabaseServer),
            _ => None,
        },
        _ => None,
    }
}

/// `ENOSPC` or `EDQUOT`.
fn io_disk_full(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl From<std::io::Error> for ApiError {
    fn from(err: std::io::Error) -> Self {
        if io_disk_full(&err) {
            tracing::warn!(error = %err, "write refused: disk full");
            return Self::InsufficientStorage(Full::LocalDisk);
        }
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
        if let Self::InsufficientStorage(full) = self {
            response.extensions_mut().insert(full);
        }
        let headers = response.headers_mut();
        match self {
            Self::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Self::TooManyRequests { retry_after_secs } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            Self::Busy(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Self::StoreUnavailable | Self::DatabaseTimedOut => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            Self::RangeNotSatisfiable { len } => {
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                    headers.insert(header::CONTENT_RANGE, v);
                }
                headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            }
            _ => {}
        }
        response
    }
}
