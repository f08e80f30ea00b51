//! The manifest signing key: generated on first start, importable, listed at `GET /api/v1/keys`.
//!
//! | Path                          | Mode | What                                        |
//! |-------------------------------|------|---------------------------------------------|
//! | `keys/<key id>.key`           | 0600 | secret key file (npub-core's key-file format) |
//! | `keys/<key id>.key.pub`       | 0644 | its public half                             |
//!
//! Files are named by key id and never overwritten; the database (`signing_keys`) says which one
//! is active. That makes every step crash-safe: a key file is written (fsynced) before the row
//! that activates it commits, so a crash leaves at worst an unused file, and a start whose active
//! key file is missing refuses to run rather than silently signing with a key no device trusts.
//!
//! Importing a key lets the root of trust stay offline: the operator generates the signing key
//! (`npub keygen`) and a root-signed keyring update (NPK1 record) that tells devices to trust it,
//! and uploads both. The server checks the record's shape and that it adds exactly the imported
//! key; the root signature is checked by the devices, which hold the root public key (the server
//! does not need it).
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use npub_core::keys::{KeyPair, public_key_file_text, read_secret_key, write_key_files};
use npub_core::manifest::{KeyId, KeyringChange, KeyringUpdate};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::audit;
use crate::auth::{Admin, Operator};
use crate::db::Db;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Json, Path as UrlPath};
use crate::state::AppState;
use crate::store::to_hex;
use crate::time::{now_ms, rfc3339};

/// The first word of npub-core's secret key file format.
const SECRET_TAG: &str = "npub-ed25519-secret-v1";

/// The active signing key.
#[derive(Debug)]
pub struct Keys {
    dir: PathBuf,
    active: RwLock<Arc<KeyPair>>,
}

impl Keys {
    /// The key manifests are signed with now.
    pub fn active(&self) -> Arc<KeyPair> {
        Arc::clone(&self.active.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn path(dir: &Path, key_id: KeyId) -> PathBuf {
        dir.join(format!("{key_id}.key"))
    }

    /// Loads the active key named by the database, or on a database without one generates a key,
    /// writes it and records it. Returns whether a key was generated.
    pub async fn load_or_generate(db: &Db, dir: PathBuf) -> Result<(Self, bool), String> {
        let active: Option<(String,)> =
            sqlx::query_as("SELECT key_id FROM signing_keys WHERE retired_at IS NULL")
                .fetch_optional(db)
                .await
                .map_err(|e| format!("reading signing keys: {e}"))?;
        if let Some((key_id,)) = active {
            let id = KeyId::from_hex(&key_id)
                .ok_or_else(|| format!("signing_keys: {key_id:?} is not a key id"))?;
            let path = Self::path(&dir, id);
            let pair = read_secret_key(&path).map_err(|e| {
                format!(
                    "the active signing key {key_id} cannot be read from {}: {e} (restore the \
                     file; a new key would not be trusted by any device)",
                    path.display()
                )
            })?;
            if pair.key_id() != id {
                return Err(format!("{} does not hold key {key_id}", path.display()));
            }
            return Ok((Self::new(dir, pair), false));
        }
        let pair = KeyPair::generate().map_err(|e| format!("generating a signing key: {e}"))?;
        let path = Self::path(&dir, pair.key_id());
        write_key_files(&path, &pair).map_err(|e| format!("writing {}: {e}", path.display()))?;
        let mut tx = crate::db::begin_write(db)
            .await
            .map_err(|e| e.to_string())?;
        insert_key(&mut tx, &pair, "generated")
            .await
            .map_err(|e| format!("recording the signing key: {e}"))?;
        audit::record_system(
            &mut tx,
            "key.generate",
            &format!("keys/{}", pair.key_id()),
            serde_json::json!({"public_key": to_hex(&pair.public_key())}),
        )
        .await
        .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())?;
        Ok((Self::new(dir, pair), true))
    }

    fn new(dir: PathBuf, pair: KeyPair) -> Self {
        Self {
            dir,
            active: RwLock::new(Arc::new(pair)),
        }
    }
}

async fn insert_key(
    conn: &mut crate::db::Conn,
    pair: &KeyPair,
    source: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO signing_keys (key_id, public_key, source, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(pair.key_id().to_string())
    .bind(to_hex(&pair.public_key()))
    .bind(source)
    .bind(now_ms())
    .execute(conn)
    .await?;
    Ok(())
}

/// A signing key (public facts only).
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyInfo {
    /// 16 hex digits: what manifests name (`npub_core::manifest::KeyId`).
    pub key_id: String,
    /// The ed25519 public key, 64 hex digits: what device keyrings hold.
    pub public_key: String,
    /// `generated` (by this server) or `imported`.
    pub source: String,
    /// Whether manifests are signed with it now.
    pub active: bool,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; absent for the active key.
    pub retired_at: Option<String>,
}

/// A stored keyring update.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyringUpdateInfo {
    /// The update's sequence.
    pub sequence: i64,
    /// The root key that signed it.
    pub root_key_id: String,
    /// The 144-byte NPK1 record, hex.
    pub record: String,
    /// RFC 3339.
    pub created_at: String,
}

/// `GET /api/v1/keys`.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeysResponse {
    /// The key manifests are signed with now.
    pub active: KeyInfo,
    /// Every key this server has used, newest first.
    pub keys: Vec<KeyInfo>,
    /// Keyring updates imported with keys, by sequence.
    pub keyring_updates: Vec<KeyringUpdateInfo>,
}

/// `POST /api/v1/keys` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportKey {
    /// The secret key: the content of a key file (`npub-ed25519-secret-v1 <64 hex>`) or the
    /// 64 hex digits alone.
    pub secret_key: String,
    /// Optional root-signed keyring update (the 144-byte NPK1 record, hex) that adds this key.
    pub keyring_update: Option<String>,
}

impl std::fmt::Debug for ImportKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportKey").finish_non_exhaustive()
    }
}

/// `/api/v1/keys` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_keys, import_key))
        .routes(routes!(trust_file))
}

/// The active signing key, every earlier one, and the imported keyring updates.
#[utoipa::path(
    get,
    path = "/api/v1/keys",
    tag = "keys",
    security(("token" = [])),
    responses((status = 200, body = KeysResponse), (status = 401, body = ErrorBody))
)]
async fn list_keys(
    State(state): State<AppState>,
    _op: Operator,
) -> Result<JsonResponse<KeysResponse>, ApiError> {
    let rows: Vec<(String, String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT key_id, public_key, source, created_at, retired_at FROM signing_keys \
         ORDER BY id DESC",
    )
    .fetch_all(&state.db)
    .await?;
    let keys: Vec<KeyInfo> = rows
        .into_iter()
        .map(
            |(key_id, public_key, source, created_at, retired_at)| KeyInfo {
                key_id,
                public_key,
                source,
                active: retired_at.is_none(),
                created_at: rfc3339(created_at),
                retired_at: retired_at.map(rfc3339),
            },
        )
        .collect();
    let active_pair = state.keys.active();
    let active = keys
        .iter()
        .find(|k| k.active)
        .map(|k| KeyInfo {
            key_id: k.key_id.clone(),
            public_key: k.public_key.clone(),
            source: k.source.clone(),
            active: true,
            created_at: k.created_at.clone(),
            retired_at: None,
        })
        .ok_or_else(|| ApiError::internal("no active signing key row"))?;
    if active.key_id != active_pair.key_id().to_string() {
        return Err(ApiError::internal(
            "the active key in memory and in the database differ",
        ));
    }
    let updates: Vec<(i64, String, Vec<u8>, i64)> = sqlx::query_as(
        "SELECT sequence, root_key_id, record, created_at FROM keyring_updates ORDER BY sequence",
    )
    .fetch_all(&state.db)
    .await?;
    Ok(JsonResponse(KeysResponse {
        active,
        keys,
        keyring_updates: updates
            .into_iter()
            .map(
                |(sequence, root_key_id, record, created_at)| KeyringUpdateInfo {
                    sequence,
                    root_key_id,
                    record: to_hex(&record),
                    created_at: rfc3339(created_at),
                },
            )
            .collect(),
    }))
}

/// The public key file a device trusts this key with: exactly what `device-agent --trust FILE`
/// (and npub-core's `read_public_key`) reads, one line `npub-ed25519-public-v1 <64 hex digits>`,
/// offered as a download named `<key id>.key.pub`. Any key this server has used (active or
/// retired) can be fetched, so a device fleet can be told to trust a retired key again on purpose.
#[utoipa::path(
    get,
    path = "/api/v1/keys/{key_id}/trust",
    tag = "keys",
    params(("key_id" = String, Path, description = "16 hex digits", pattern = "^[0-9a-f]{16}$")),
    security(("token" = [])),
    responses(
        (status = 200, content_type = "text/plain", body = String,
         description = "the device agent's --trust file"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such key"),
    )
)]
async fn trust_file(
    State(state): State<AppState>,
    _op: Operator,
    UrlPath(key_id): UrlPath<String>,
) -> Result<impl IntoResponse, ApiError> {
    let unknown = || ApiError::NotFound(format!("signing key {key_id:?}"));
    let id = KeyId::from_hex(&key_id).ok_or_else(unknown)?;
    let row: Option<(String,)> =
        sqlx::query_as("SELECT public_key FROM signing_keys WHERE key_id = $1")
            .bind(id.to_string())
            .fetch_optional(&state.db)
            .await?;
    let (public_hex,) = row.ok_or_else(unknown)?;
    let public: [u8; 32] = decode_hex(&public_hex)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ApiError::internal(format!("signing_keys: key {id} is not 32 bytes")))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.key.pub\""),
            ),
        ],
        public_key_file_text(&public),
    ))
}

/// Imports a signing key (admin only); it becomes the active key and the previous one is
/// retired. A key that this server has used before cannot be imported again.
#[utoipa::path(
    post,
    path = "/api/v1/keys",
    tag = "keys",
    request_body = ImportKey,
    security(("token" = [])),
    responses(
        (status = 201, body = KeyInfo),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the key, or the update's sequence, was used before"),
        (status = 422, body = ErrorBody),
    )
)]
async fn import_key(
    State(state): State<AppState>,
    Admin(op): Admin,
    Json(body): Json<ImportKey>,
) -> Result<(StatusCode, JsonResponse<KeyInfo>), ApiError> {
    let pair = parse_secret(&body.secret_key)?;
    let key_id = pair.key_id();
    let update = body
        .keyring_update
        .as_deref()
        .map(|hex| parse_update(hex, &pair))
        .transpose()?;

    let _serial = state.write_lock.lock().await;
    let dir = state.keys.dir.clone();
    let path = Keys::path(&dir, key_id);
    let pair = tokio::task::spawn_blocking(move || write_or_match(&path, &pair).map(|()| pair))
        .await
        .map_err(ApiError::internal)??;

    let now = now_ms();
    let mut tx = crate::db::begin_write(&state.db).await?;
    sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    insert_key(&mut tx, &pair, "imported").await.map_err(|e| {
        ApiError::on_unique(e, || {
            format!("key {key_id} was used by this server before; a retired key is never reused")
        })
    })?;
    if let Some((root_key_id, update, record)) = &update {
        sqlx::query(
            "INSERT INTO keyring_updates (sequence, root_key_id, record, created_at, created_by) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(
            i64::try_from(update.sequence)
                .map_err(|_| ApiError::invalid("keyring_update: sequence too large"))?,
        )
        .bind(root_key_id.to_string())
        .bind(record.as_slice())
        .bind(now)
        .bind(op.token_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            ApiError::on_unique(e, || {
                format!(
                    "a keyring update with sequence {} was imported before",
                    update.sequence
                )
            })
        })?;
    }
    audit::record(
        &mut tx,
        &op,
        "key.import",
        &format!("keys/{key_id}"),
        serde_json::json!({
            "public_key": to_hex(&pair.public_key()),
            "keyring_update_sequence": update.as_ref().map(|(_, u, _)| u.sequence),
        }),
    )
    .await?;
    tx.commit().await?;
    let public_key = to_hex(&pair.public_key());
    *state
        .keys
        .active
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Arc::new(pair);
    tracing::info!(%key_id, "signing key imported and active");
    Ok((
        StatusCode::CREATED,
        JsonResponse(KeyInfo {
            key_id: key_id.to_string(),
            public_key,
            source: "imported".into(),
            active: true,
            created_at: rfc3339(now),
            retired_at: None,
        }),
    ))
}

/// Writes the key files, or accepts existing ones holding the same key (a retried import after a
/// crash between the file write and the commit).
fn write_or_match(path: &Path, pair: &KeyPair) -> Result<(), ApiError> {
    match write_key_files(path, pair) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let existing = read_secret_key(path)?;
            if existing.public_key() == pair.public_key() {
                Ok(())
            } else {
                Err(ApiError::internal(format!(
                    "{} holds another key",
                    path.display()
                )))
            }
        }
        Err(e) => Err(e.into()),
    }
}

fn parse_secret(text: &str) -> Result<KeyPair, ApiError> {
    let text = text.trim();
    let digits = text
        .strip_prefix(SECRET_TAG)
        .map(str::trim_start)
        .unwrap_or(text);
    let bytes = decode_hex(digits)
        .filter(|b| b.len() == 32)
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "secret_key: expected `{SECRET_TAG} <64 hex digits>` or the 64 hex digits alone"
            ))
        })?;
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&bytes);
    Ok(KeyPair::from_seed(seed))
}

/// Decodes and checks a keyring update: well-formed, and adding exactly `pair`'s public key.
fn parse_update(hex: &str, pair: &KeyPair) -> Result<(KeyId, KeyringUpdate, Vec<u8>), ApiError> {
    let record =
        decode_hex(hex.trim()).ok_or_else(|| ApiError::invalid("keyring_update: not hex"))?;
    let (root_key_id, update) = KeyringUpdate::decode(&record)
        .map_err(|e| ApiError::invalid(format!("keyring_update: {e}")))?;
    let adds = match update.change {
        KeyringChange::Add { public_key } | KeyringChange::Replace { public_key, .. } => {
            Some(public_key)
        }
        KeyringChange::Revoke { .. } => None,
    };
    if adds != Some(pair.public_key()) {
        return Err(ApiError::invalid(format!(
            "keyring_update: it does not add the imported key {}",
            pair.key_id()
        )));
    }
    Ok((root_key_id, update, record))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
