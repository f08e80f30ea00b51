//! `Idempotency-Key` (the IETF httpapi draft) on the requests that create things: a client that
//! retries a request it got no answer to (a timeout, a dropped connection, a double click) gets
//! the first answer again instead of a second deployment. 15 concurrent identical
//! `POST /api/v1/deployments` used to make two deployments 15 times out of 15.
//!
//! | Route                                        | Creates                     |
//! |----------------------------------------------|-----------------------------|
//! | `POST /api/v1/deployments`                   | a deployment (a manifest)   |
//! | `POST /api/v1/groups/{group}/rollback`       | rollback deployments        |
//! | `POST /api/v1/models/{name}/versions/{version}` | a version (an upload)    |
//! | `POST /api/v1/devices`                       | devices and their tokens    |
//!
//! | The same key (for the same bearer token) …            | Answer                                   |
//! |-------------------------------------------------------|------------------------------------------|
//! | never seen, or seen more than [`KEEP`] ago            | the request runs; a 2xx answer is kept    |
//! | with the same method, path and body, answered 2xx     | that answer again (`Idempotent-Replayed: true`), nothing runs |
//! | with another method, path or body                     | 422                                       |
//! | while the first is still running                      | waits for it (up to [`WAIT`]), then as above; 409 if it still runs |
//! | after a first that did not answer 2xx                 | the request runs (an error is not kept: the retry may succeed) |
//!
//! Keys belong to the token that sent them (its SHA-256 is the row's scope): one client can
//! neither read nor block another's answers. A kept answer can hold secrets (provisioning
//! answers with the new devices' tokens, which the database otherwise never holds), so it is
//! sealed with AES-256-GCM under a key derived from the bearer token itself ([`Seal`]): the
//! database holds only the token's hash, and a copy of it cannot open the answers. A body is
//! recognised by its SHA-256, computed as the handler reads it (an upload is never held in
//! memory for this); a retried request's body is read and hashed only to be compared. Rows are
//! removed once [`KEEP`] old.
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use sha2::{Digest as _, Sha256};

use crate::http::error::ApiError;
use crate::state::AppState;
use crate::store::to_hex;
use crate::time::now_ms;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The answer header on a replay.
pub const REPLAYED: &str = "idempotent-replayed";
/// How long a key and its answer are kept.
pub const KEEP: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a retry waits for the first request with its key to finish.
pub const WAIT: Duration = Duration::from_secs(30);
/// The longest key (the draft sets none; a UUID is 36 characters).
pub const KEY_MAX: usize = 255;
/// The largest answer kept (every answer of these routes is a small JSON document).
const ANSWER_MAX: usize = 1024 * 1024;
/// How often a waiting retry looks at the first request's row again.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// The routes that honour the header: `(method, route template)`.
const ROUTES: [(Method, &str); 4] = [
    (Method::POST, "/api/v1/deployments"),
    (Method::POST, "/api/v1/groups/{group}/rollback"),
    (Method::POST, "/api/v1/models/{name}/versions/{version}"),
    (Method::POST, "/api/v1/devices"),
];

/// Whether the header is honoured on `method` `route` (a route template).
pub fn honours(method: &str, route: &str) -> bool {
    ROUTES
        .iter()
        .any(|(m, r)| m.as_str() == method && *r == route)
}

/// When this process last removed expired keys (unix ms), so that it does so once a minute.
static LAST_SWEEP: AtomicI64 = AtomicI64::new(0);

/// The middleware (a route layer: it needs the matched route).
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(key) = request.headers().get(HEADER) else {
        return next.run(request).await;
    };
    let honoured = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|m| honours(request.method().as_str(), m.as_str()));
    if !honoured {
        return next.run(request).await;
    }
    let key = match key.to_str() {
        Ok(k) if !k.is_empty() && k.len() <= KEY_MAX && k.bytes().all(|b| b.is_ascii_graphic()) => {
            k.to_owned()
        }
        _ => {
            return ApiError::bad_request(format!(
                "Idempotency-Key: 1 to {KEY_MAX} visible ASCII characters (a UUID, say)"
            ))
            .into_response();
        }
    };
    // Without a bearer token the handler answers 401: nothing to remember.
    let Some((scope, seal)) = scope(&request) else {
        return next.run(request).await;
    };
    match run(&state, scope, seal, key, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

/// Whose keys these are: the SHA-256 of the request's bearer token, and the key its answers
/// are sealed with.
fn scope(request: &Request) -> Option<(String, Seal)> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim().as_bytes();
    Some((to_hex(&Sha256::digest(token)), Seal::for_token(token)))
}

/// AES-256-GCM under SHA-256("npub idempotency answer" ‖ token): a key only the token's holder
/// (and this server while it answers them) can make.
struct Seal(ring::aead::LessSafeKey);

impl Seal {
    fn for_token(token: &[u8]) -> Self {
        let mut sha = Sha256::new();
        sha.update(b"npub idempotency answer\0");
        sha.update(token);
        let key = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &sha.finalize())
            .expect("a 32-byte key is an AES-256 key");
        Self(ring::aead::LessSafeKey::new(key))
    }

    /// `nonce (12) ‖ ciphertext ‖ tag (16)`, bound to the row (`aad`: scope and key).
    fn seal(&self, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>, ApiError> {
        let mut nonce = [0u8; ring::aead::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| ApiError::internal(e.to_string()))?;
        let mut out = plain.to_vec();
        self.0
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(aad),
                &mut out,
            )
            .map_err(|_| ApiError::internal("sealing a kept answer"))?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&out);
        Ok(sealed)
    }

    fn open(&self, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        let (nonce, rest) = sealed.split_first_chunk::<{ ring::aead::NONCE_LEN }>()?;
        let mut buf = rest.to_vec();
        let plain = self
            .0
            .open_in_place(
                ring::aead::Nonce::assume_unique_for_key(*nonce),
                ring::aead::Aad::from(aad),
                &mut buf,
            )
            .ok()?;
        Some(plain.to_vec())
    }
}

/// What is known of a key.
#[derive(Debug, sqlx::FromRow)]
struct Row {
    fingerprint: Option<String>,
    status: Option<i64>,
    content_type: Option<String>,
    location: Option<String>,
    body: Option<Vec<u8>>,
    created_at: i64,
}

async fn run(
    state: &AppState,
    scope: String,
    seal: Seal,
    key: String,
    request: Request,
    next: Next,
) -> Result<Response, Response> {
    let fail = |e: sqlx::Error| ApiError::from(e).into_response();
    sweep_expired(state).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (scope, key) DO NOTHING",
        )
        .bind(&scope)
        .bind(&key)
        .bind(now_ms())
        .execute(&state.db)
        .await
        .map_err(fail)?
        .rows_affected();
        if inserted == 1 {
            return Ok(first(state, &scope, &seal, &key, request, next).await);
        }
        let row: Option<Row> = sqlx::query_as(
            "SELECT fingerprint, status, content_type, location, body, created_at \
             FROM idempotency_keys WHERE scope = $1 AND key = $2",
        )
        .bind(&scope)
        .bind(&key)
        .fetch_optional(&state.db)
        .await
        .map_err(fail)?;
        let Some(row) = row else {
            // The first request did not succeed and gave the key back: run this one.
            continue;
        };
        if row.created_at < now_ms() - keep_ms() {
            forget(state, &scope, &key).await;
            continue;
        }
        if let (Some(fingerprint), Some(status)) = (row.fingerprint.clone(), row.status) {
            let aad = format!("{scope}\n{key}");
            return Ok(replay(request, &fingerprint, status, row, &seal, aad.as_bytes()).await);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::Conflict(
                "a request with this Idempotency-Key is still being answered; retry shortly".into(),
            )
            .into_response());
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

fn keep_ms() -> i64 {
    i64::try_from(KEEP.as_millis()).unwrap_or(i64::MAX)
}

/// Runs the request that owns the key's row; keeps a 2xx answer whose body the handler read to
/// its end, and gives the key back otherwise.
async fn first(
    state: &AppState,
    scope: &str,
    seal: &Seal,
    key: &str,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let digest = Arc::new(Mutex::new(Fingerprint::new(&parts.method, &parts.uri)));
    let hashed = Body::new(Hashing {
        inner: body,
        digest: Arc::clone(&digest),
    });
    let response = next.run(Request::from_parts(parts, hashed)).await;
    let fingerprint = digest
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .finished();
    let (Some(fingerprint), true) = (fingerprint, response.status().is_success()) else {
        forget(state, scope, key).await;
        return response;
    };
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, ANSWER_MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            forget(state, scope, key).await;
            return ApiError::internal(format!("reading an answer to keep it: {e}"))
                .into_response();
        }
    };
    let sealed = match seal.seal(format!("{scope}\n{key}").as_bytes(), &bytes) {
        Ok(sealed) => sealed,
        Err(e) => {
            forget(state, scope, key).await;
            return e.into_response();
        }
    };
    let text = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let kept = sqlx::query(
        "UPDATE idempotency_keys SET fingerprint = $3, status = $4, content_type = $5, \
         location = $6, body = $7 WHERE scope = $1 AND key = $2",
    )
    .bind(scope)
    .bind(key)
    .bind(&fingerprint)
    .bind(i64::from(parts.status.as_u16()))
    .bind(text(header::CONTENT_TYPE))
    .bind(text(header::LOCATION))
    .bind(sealed)
    .execute(&state.db)
    .await;
    if let Err(e) = kept {
        // The request did what it did; a retry will run again rather than find nothing.
        tracing::warn!(error = %e, "cannot keep an answer for its Idempotency-Key");
        forget(state, scope, key).await;
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The kept answer, if `request` is the one it answered; 422 if it is another.
async fn replay(
    request: Request,
    fingerprint: &str,
    status: i64,
    row: Row,
    seal: &Seal,
    aad: &[u8],
) -> Response {
    let (parts, body) = request.into_parts();
    let mut digest = Fingerprint::new(&parts.method, &parts.uri);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => digest.update(&bytes),
            Err(e) => {
                return ApiError::bad_request(format!("reading the body: {e}")).into_response();
            }
        }
    }
    if digest.hex() != fingerprint {
        return ApiError::invalid(
            "this Idempotency-Key was used for another request (another method, path or body) \
             within the last 24 h: use a new key for a new request",
        )
        .into_response();
    }
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let Some(body) = row.body.as_deref().and_then(|b| seal.open(aad, b)) else {
        return ApiError::internal("a kept answer does not open under its token's key")
            .into_response();
    };
    let mut response = (status, Body::from(body)).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, row.content_type),
        (header::LOCATION, row.location),
    ] {
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, v);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// Gives the key back (its first request did not succeed, or its row expired).
async fn forget(state: &AppState, scope: &str, key: &str) {
    let removed = sqlx::query("DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2")
        .bind(scope)
        .bind(key)
        .execute(&state.db)
        .await;
    if let Err(e) = removed {
        tracing::warn!(error = %e, "cannot give an Idempotency-Key back");
    }
}

/// Removes keys older than [`KEEP`], at most once a minute per process.
async fn sweep_expired(state: &AppState) {
    let now = now_ms();
    let last = LAST_SWEEP.load(Ordering::Relaxed);
    if now - last < 60_000
        || LAST_SWEEP
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let swept = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
        .bind(now - keep_ms())
        .execute(&state.db)
        .await;
    if let Err(e) = swept {
        tracing::warn!(error = %e, "cannot remove expired Idempotency-Keys");
    }
}

/// SHA-256 over the method, the path with its query, and the body.
struct Fingerprint {
    sha: Sha256,
    /// Set once the body's end was read.
    complete: bool,
}

impl Fingerprint {
    fn new(method: &Method, uri: &axum::http::Uri) -> Self {
        let mut sha = Sha256::new();
        sha.update(method.as_str().as_bytes());
        sha.update(b" ");
        sha.update(uri.path_and_query().map_or("", |p| p.as_str()).as_bytes());
        sha.update(b"\n");
        Self {
            sha,
            complete: false,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        self.sha.update(bytes);
    }

    fn hex(self) -> String {
        to_hex(&self.sha.finalize())
    }

    /// The digest, if the whole body went through it.
    fn finished(&mut self) -> Option<String> {
        self.complete
            .then(|| to_hex(&std::mem::take(&mut self.sha).finalize()))
    }
}

/// A request body that feeds what the handler reads into a [`Fingerprint`].
struct Hashing {
    inner: Body,
    digest: Arc<Mutex<Fingerprint>>,
}

impl http_body::Body for Hashing {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let mut digest = this.digest.lock().unwrap_or_else(PoisonError::into_inner);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    digest.update(data);
                }
            }
            Poll::Ready(None) => digest.complete = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
