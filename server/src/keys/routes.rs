//! The signing keys' routes: `GET /api/v1/keys`, trust files, import, rotate, revoke (the
//! procedure: `docs/keys.md`; the keys themselves: [`super::signing`]).
use axum::Json as JsonResponse;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use npub_core::keys::{KeyPair, public_key_file_text};
use npub_core::manifest::{
    KeyId, KeyringChange, KeyringUpdate, ROTATION_BYTES, sign_keyring_update,
};
use npub_core::release::{ModelId, ReleaseChange, TrustChange, TrustUpdate};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Admin, Operator};
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Json, Path as UrlPath, small_body};
use crate::keys::release::KnownRelease;
use crate::keys::secrets::generate_seed;
use crate::keys::signing::{Keys, insert_key};
use crate::state::AppState;
use crate::store::to_hex;
use crate::time::{now_ms, rfc3339};

/// The first word of npub-core's secret key file format.
const SECRET_TAG: &str = "npub-ed25519-secret-v1";

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
    /// RFC 3339, when a keyring update revoked it; absent while devices still trust it.
    pub revoked_at: Option<String>,
}

/// The root key (public facts only): what device firmware is built with to accept keyring
/// updates.
#[derive(Debug, Serialize, ToSchema)]
pub struct RootKeyInfo {
    /// 16 hex digits: what keyring updates name.
    pub key_id: String,
    /// The ed25519 public key, 64 hex digits.
    pub public_key: String,
}

/// A stored keyring update.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyringUpdateInfo {
    /// The update's sequence.
    pub sequence: i64,
    /// The root key that signed it.
    pub root_key_id: String,
    /// `add`, `revoke` or `replace` (signing keys, made by this server); `release-add`,
    /// `release-revoke`, `release-replace`, `release-policy`, `release-policy-remove` (release
    /// records, signed offline by a release root and uploaded with `POST /api/v1/keys/updates`).
    pub action: String,
    /// The key it revokes (revoke, replace).
    pub revokes: Option<String>,
    /// The key it adds (add, replace).
    pub adds: Option<String>,
    /// A release policy record's rule: `2 of 1a2b…, 3c4d… for model 5e6f…` (`default` for the
    /// default policy); the model a `release-policy-remove` names.
    pub policy: Option<String>,
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
    /// The root key that signs this server's keyring updates.
    pub root: RootKeyInfo,
    /// Every key this server has used, newest first.
    pub keys: Vec<KeyInfo>,
    /// Keyring updates (made by rotations and revocations, or imported with keys), by sequence.
    pub keyring_updates: Vec<KeyringUpdateInfo>,
}

/// `POST /api/v1/keys/rotate` body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateKey {
    /// Also revoke the key being replaced, in the same record (Replace instead of Add): devices
    /// refuse its manifests as soon as they apply it. Default false: the previous key stays
    /// trusted until it is revoked on its own.
    #[serde(default)]
    pub revoke_previous: bool,
}

/// What a rotation or a revocation made.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyChange {
    /// The new active key (rotate) or the revoked key (revoke).
    pub key: KeyInfo,
    /// The root-signed keyring update devices will apply.
    pub keyring_update: KeyringUpdateInfo,
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
        .routes(routes!(root_trust_file))
        .routes(routes!(rotate_key))
        .routes(routes!(revoke_key))
        .routes(routes!(upload_update))
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
    let rows: Vec<KeyRow> = sqlx::query_as(
        "SELECT key_id, public_key, source, created_at, retired_at, revoked_at FROM signing_keys \
         ORDER BY id DESC",
    )
    .fetch_all(&state.db)
    .await?;
    let keys: Vec<KeyInfo> = rows.into_iter().map(key_info).collect();
    let active_pair = state
        .keys
        .active_in(&mut *state.db.acquire().await?)
        .await
        .map_err(ApiError::internal)?;
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
            revoked_at: None,
        })
        .ok_or_else(|| ApiError::internal("no active signing key row"))?;
    if active.key_id != active_pair.key_id().to_string() {
        return Err(ApiError::internal(
            "the active key in memory and in the database differ",
        ));
    }
    let updates: Vec<UpdateRow> = sqlx::query_as(
        "SELECT sequence, root_key_id, record, created_at FROM keyring_updates ORDER BY sequence",
    )
    .fetch_all(&state.db)
    .await?;
    let root = state.keys.root();
    Ok(JsonResponse(KeysResponse {
        active,
        root: RootKeyInfo {
            key_id: root.key_id().to_string(),
            public_key: to_hex(&root.public_key()),
        },
        keys,
        keyring_updates: updates.into_iter().map(update_info).collect(),
    }))
}

/// `signing_keys` as [`key_info`] reads it.
type KeyRow = (String, String, String, i64, Option<i64>, Option<i64>);
/// `keyring_updates` as [`update_info`] reads it.
type UpdateRow = (i64, String, Vec<u8>, i64);

fn key_info((key_id, public_key, source, created_at, retired_at, revoked_at): KeyRow) -> KeyInfo {
    KeyInfo {
        key_id,
        public_key,
        source,
        active: retired_at.is_none(),
        created_at: rfc3339(created_at),
        retired_at: retired_at.map(rfc3339),
        revoked_at: revoked_at.map(rfc3339),
    }
}

fn update_info((sequence, root_key_id, record, created_at): UpdateRow) -> KeyringUpdateInfo {
    // Every stored record was decoded before it was stored; one that no longer decodes is shown
    // with its bytes and no action rather than failing the whole listing.
    let model = |m: ModelId| {
        if m.is_default() {
            "the default policy".to_owned()
        } else {
            format!("model {m}")
        }
    };
    let (action, revokes, adds, policy) = match TrustUpdate::decode(&record).map(|(_, u)| u.change)
    {
        Ok(TrustChange::Keyring(change)) => match change {
            KeyringChange::Add { public_key } => ("add", None, Some(KeyId::of(&public_key)), None),
            KeyringChange::Revoke { key_id } => ("revoke", Some(key_id), None, None),
            KeyringChange::Replace { revoke, public_key } => {
                ("replace", Some(revoke), Some(KeyId::of(&public_key)), None)
            }
        },
        Ok(TrustChange::Release(change)) => match change {
            ReleaseChange::AddKey { public_key } => {
                ("release-add", None, Some(KeyId::of(&public_key)), None)
            }
            ReleaseChange::RevokeKey { key_id } => ("release-revoke", Some(key_id), None, None),
            ReleaseChange::ReplaceKey { revoke, public_key } => (
                "release-replace",
                Some(revoke),
                Some(KeyId::of(&public_key)),
                None,
            ),
            ReleaseChange::SetPolicy(p) => {
                let keys: Vec<String> = p.keys().iter().map(KeyId::to_string).collect();
                let rule = format!(
                    "{} of {} for {}",
                    p.threshold(),
                    keys.join(", "),
                    model(p.model())
                );
                ("release-policy", None, None, Some(rule))
            }
            ReleaseChange::RemovePolicy { model: m } => {
                ("release-policy-remove", None, None, Some(model(m)))
            }
        },
        Err(_) => ("unknown", None, None, None),
    };
    KeyringUpdateInfo {
        sequence,
        root_key_id,
        action: action.to_owned(),
        revokes: revokes.map(|k| k.to_string()),
        adds: adds.map(|k| k.to_string()),
        policy,
        record: to_hex(&record),
        created_at: rfc3339(created_at),
    }
}

/// Stores a release keyring record (admin only): one 144-byte NPK1 record of actions 4 to 8
/// (release key add, revoke, replace; release policy set, remove), signed offline by a release
/// root with `npub keyring release-*`, as the body. Its sequence must be exactly one above the
/// newest stored (`GET /api/v1/keys`): release and signing-key records share the sequence
/// devices follow. Stored verbatim and sent to devices by `GET /api/v1/device/keys` in order.
///
/// The server checks the record's format, its action, that this server's own root did not sign
/// it (devices take release records only from a release root), the sequence, and that devices
/// holding every stored record could apply it (capacity, a revoked key added again). It cannot
/// check the signature: the release root's public key is in device firmware, not here.
#[utoipa::path(
    post,
    path = "/api/v1/keys/updates",
    tag = "keys",
    request_body(content = String, content_type = "application/octet-stream",
        description = "one 144-byte NPK1 record of actions 4 to 8"),
    security(("token" = [])),
    responses(
        (status = 201, body = KeyringUpdateInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the sequence is not the next one: the detail names the expected sequence"),
        (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "not a release record devices could apply: the detail says why"),
    )
)]
async fn upload_update(
    State(state): State<AppState>,
    Admin(op): Admin,
    request: axum::extract::Request,
) -> Result<(StatusCode, JsonResponse<KeyringUpdateInfo>), ApiError> {
    let record = small_body(
        request.into_body(),
        ROTATION_BYTES + 1,
        "the keyring record",
    )
    .await?;
    let refuse = |why: String| ApiError::invalid(format!("keyring record: {why}"));
    let (root_key_id, update) = TrustUpdate::decode(&record).map_err(|e| refuse(e.to_string()))?;
    let TrustChange::Release(change) = update.change else {
        return Err(refuse(
            "actions 1 to 3 change signing keys, which this server's own root signs \
             (POST /api/v1/keys/rotate, …/revoke); upload release records (actions 4 to 8) only"
                .into(),
        ));
    };
    if root_key_id == state.keys.root().key_id() {
        return Err(refuse(format!(
            "it is signed by this server's own root key {root_key_id}: devices take release \
             records only from a release root kept offline (docs/keys.md), and would refuse it"
        )));
    }
    let now = now_ms();
    let mut tx = FleetChange::begin(&state).await?;
    let (last,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(sequence), 0) FROM keyring_updates")
        .fetch_one(&mut *tx)
        .await?;
    let expected = last as u64 + 1;
    if update.sequence != expected {
        return Err(ApiError::Conflict(format!(
            "keyring record: its sequence is {}, but the next one is {expected} (the newest \
             stored is {last}): sign it again with --seq {expected}",
            update.sequence
        )));
    }
    let mut known = KnownRelease::load(&mut tx).await?;
    known.apply(change).map_err(|e| {
        refuse(format!(
            "devices holding every stored record would refuse it: {e}"
        ))
    })?;
    let sequence =
        i64::try_from(update.sequence).map_err(|_| refuse("sequence too large".into()))?;
    sqlx::query(
        "INSERT INTO keyring_updates (sequence, root_key_id, record, created_at, created_by) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(sequence)
    .bind(root_key_id.to_string())
    .bind(record.as_slice())
    .bind(now)
    .bind(op.token_id)
    .execute(&mut *tx)
    .await
    .map_err(|e| {
        ApiError::on_unique(e, || {
            format!("keyring record: sequence {sequence} is taken; the next one is {expected}")
        })
    })?;
    let info = update_info((sequence, root_key_id.to_string(), record.clone(), now));
    let audit = Record::Audit {
        op: &op,
        action: "key.release_record",
        object: format!("keys/updates/{sequence}"),
        detail: serde_json::json!({
            "action": info.action,
            "root_key_id": info.root_key_id,
            "revokes": info.revokes,
            "adds": info.adds,
            "policy": info.policy,
        }),
    };
    tx.commit(audit, Effect::Fleet).await?.finish().await;
    tracing::info!(sequence, action = %info.action, "release keyring record stored");
    Ok((StatusCode::CREATED, JsonResponse(info)))
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
    let seed = parse_secret(&body.secret_key)?;
    let pair = KeyPair::from_seed(*seed);
    let key_id = pair.key_id();
    let update = body
        .keyring_update
        .as_deref()
        .map(|hex| parse_update(hex, &pair))
        .transpose()?;

    let now = now_ms();
    let mut tx = FleetChange::begin(&state).await?;
    let known: Option<(i64,)> = sqlx::query_as("SELECT id FROM signing_keys WHERE key_id = $1")
        .bind(key_id.to_string())
        .fetch_optional(&mut *tx)
        .await?;
    if known.is_some() {
        return Err(ApiError::Conflict(format!(
            "key {key_id} was used by this server before; a retired key is never reused"
        )));
    }
    let pair = state
        .keys
        .store
        .put(&mut tx, &key_id.to_string(), &seed, now)
        .await
        .map_err(ApiError::internal)?;
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
    let record = Record::Audit {
        op: &op,
        action: "key.import",
        object: format!("keys/{key_id}"),
        detail: serde_json::json!({
            "public_key": to_hex(&pair.public_key()),
            "keyring_update_sequence": update.as_ref().map(|(_, u, _)| u.sequence),
        }),
    };
    // Only a keyring update changes what devices are offered.
    let effect = if update.is_some() {
        Effect::Fleet
    } else {
        Effect::Nothing
    };
    let committed = tx.commit(record, effect).await?;
    let public_key = to_hex(&pair.public_key());
    // Active before the write lock is released: no other writer signs with the old key after it.
    state.keys.set_active(pair);
    committed.finish().await;
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
            revoked_at: None,
        }),
    ))
}

/// The root key's public file, for device firmware and the simulator's `--root FILE`: one line
/// `npub-ed25519-public-v1 <64 hex digits>`, offered as `root-<key id>.key.pub`.
#[utoipa::path(
    get,
    path = "/api/v1/keys/root/trust",
    tag = "keys",
    security(("token" = [])),
    responses(
        (status = 200, content_type = "text/plain", body = String,
         description = "the device agent's --root file"),
        (status = 401, body = ErrorBody),
    )
)]
async fn root_trust_file(State(state): State<AppState>, _op: Operator) -> impl IntoResponse {
    let root = state.keys.root();
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"root-{}.key.pub\"", root.key_id()),
            ),
        ],
        public_key_file_text(&root.public_key()),
    )
}

/// Rotates the signing key (admin only): a new key is generated and made active, and a keyring
/// update signed by the root key tells devices to trust it: Add, or Replace (trust it and revoke
/// the previous key in one record) with `revoke_previous`. Manifests of deployments made from
/// now on are signed with the new key; devices apply the update at their next poll, before they
/// verify a manifest.
#[utoipa::path(
    post,
    path = "/api/v1/keys/rotate",
    tag = "keys",
    request_body = RotateKey,
    security(("token" = [])),
    responses(
        (status = 201, body = KeyChange),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody),
    )
)]
async fn rotate_key(
    State(state): State<AppState>,
    Admin(op): Admin,
    Json(body): Json<RotateKey>,
) -> Result<(StatusCode, JsonResponse<KeyChange>), ApiError> {
    let seed = generate_seed().map_err(ApiError::internal)?;
    let key_id = KeyPair::from_seed(*seed).key_id();
    let now = now_ms();
    let mut tx = FleetChange::begin(&state).await?;
    // The previous key as the database has it: another replica may have rotated since this one
    // last signed.
    let previous = state
        .keys
        .active_in(&mut tx)
        .await
        .map_err(ApiError::internal)?;
    let previous_id = previous.key_id();
    let pair = state
        .keys
        .store
        .put(&mut tx, &key_id.to_string(), &seed, now)
        .await
        .map_err(ApiError::internal)?;
    let change = if body.revoke_previous {
        KeyringChange::Replace {
            revoke: previous_id,
            public_key: pair.public_key(),
        }
    } else {
        KeyringChange::Add {
            public_key: pair.public_key(),
        }
    };

    sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    if body.revoke_previous {
        sqlx::query("UPDATE signing_keys SET revoked_at = $1 WHERE key_id = $2")
            .bind(now)
            .bind(previous_id.to_string())
            .execute(&mut *tx)
            .await?;
    }
    insert_key(&mut tx, &pair, "generated").await?;
    let update = store_update(&mut tx, &state.keys, &op, change, now).await?;
    crate::ops::webhooks::emit::key_rotated(
        &mut tx,
        &key_id.to_string(),
        &previous_id.to_string(),
        body.revoke_previous,
        update.sequence,
    )
    .await?;
    let record = Record::Audit {
        op: &op,
        action: "key.rotate",
        object: format!("keys/{key_id}"),
        detail: serde_json::json!({
            "public_key": to_hex(&pair.public_key()),
            "previous": previous_id.to_string(),
            "revoke_previous": body.revoke_previous,
            "keyring_update_sequence": update.sequence,
        }),
    };
    let committed = tx.commit(record, Effect::Fleet).await?;
    let public_key = to_hex(&pair.public_key());
    // Active before the write lock is released: no other writer signs with the old key after it.
    state.keys.set_active(pair);
    committed.finish().await;
    tracing::info!(%key_id, previous = %previous_id, sequence = update.sequence, "signing key rotated");
    Ok((
        StatusCode::CREATED,
        JsonResponse(KeyChange {
            key: KeyInfo {
                key_id: key_id.to_string(),
                public_key,
                source: "generated".into(),
                active: true,
                created_at: rfc3339(now),
                retired_at: None,
                revoked_at: None,
            },
            keyring_update: update,
        }),
    ))
}

/// Revokes a retired signing key (admin only): a keyring update signed by the root key tells
/// devices to refuse its manifests from now on, for good. The active key cannot be revoked
/// (rotate first, or rotate with `revoke_previous`).
#[utoipa::path(
    post,
    path = "/api/v1/keys/{key_id}/revoke",
    tag = "keys",
    params(("key_id" = String, Path, description = "16 hex digits", pattern = "^[0-9a-f]{16}$")),
    security(("token" = [])),
    responses(
        (status = 201, body = KeyChange),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such signing key"),
        (status = 409, body = ErrorBody, description = "the key is the active one, or already revoked"),
    )
)]
async fn revoke_key(
    State(state): State<AppState>,
    Admin(op): Admin,
    UrlPath(key_id): UrlPath<String>,
) -> Result<(StatusCode, JsonResponse<KeyChange>), ApiError> {
    let unknown = || ApiError::NotFound(format!("signing key {key_id:?}"));
    let id = KeyId::from_hex(&key_id).ok_or_else(unknown)?;
    let now = now_ms();
    let mut tx = FleetChange::begin(&state).await?;
    let row: Option<KeyRow> = sqlx::query_as(
        "SELECT key_id, public_key, source, created_at, retired_at, revoked_at FROM signing_keys \
         WHERE key_id = $1",
    )
    .bind(id.to_string())
    .fetch_optional(&mut *tx)
    .await?;
    let mut key = key_info(row.ok_or_else(unknown)?);
    if key.active {
        return Err(ApiError::Conflict(format!(
            "key {id} is the active signing key: devices would refuse every new deployment. \
             Rotate first (POST /api/v1/keys/rotate, or with \"revoke_previous\": true to do both \
             in one step)"
        )));
    }
    if key.revoked_at.is_some() {
        return Err(ApiError::Conflict(format!("key {id} is already revoked")));
    }
    sqlx::query("UPDATE signing_keys SET revoked_at = $1 WHERE key_id = $2")
        .bind(now)
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
    let update = store_update(
        &mut tx,
        &state.keys,
        &op,
        KeyringChange::Revoke { key_id: id },
        now,
    )
    .await?;
    let record = Record::Audit {
        op: &op,
        action: "key.revoke",
        object: format!("keys/{id}"),
        detail: serde_json::json!({"keyring_update_sequence": update.sequence}),
    };
    tx.commit(record, Effect::Fleet).await?.finish().await;
    tracing::info!(key_id = %id, sequence = update.sequence, "signing key revoked");
    key.revoked_at = Some(rfc3339(now));
    Ok((
        StatusCode::CREATED,
        JsonResponse(KeyChange {
            key,
            keyring_update: update,
        }),
    ))
}

/// Signs `change` with the root key as the next keyring update (one above every stored one,
/// imported or made here) and stores it, in the caller's transaction.
async fn store_update(
    conn: &mut crate::db::Conn,
    keys: &Keys,
    op: &Operator,
    change: KeyringChange,
    now: i64,
) -> Result<KeyringUpdateInfo, ApiError> {
    let (last,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(sequence), 0) FROM keyring_updates")
        .fetch_one(&mut *conn)
        .await?;
    let sequence = last
        .checked_add(1)
        .ok_or_else(|| ApiError::internal("keyring update sequence exhausted"))?;
    let update = KeyringUpdate {
        sequence: sequence as u64,
        change,
        issued_at: u64::try_from(now / 1000).unwrap_or(0),
    };
    let root = keys.root();
    let record = sign_keyring_update(&update, root);
    sqlx::query(
        "INSERT INTO keyring_updates (sequence, root_key_id, record, created_at, created_by) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(sequence)
    .bind(root.key_id().to_string())
    .bind(record.as_slice())
    .bind(now)
    .bind(op.token_id)
    .execute(&mut *conn)
    .await?;
    Ok(update_info((
        sequence,
        root.key_id().to_string(),
        record.to_vec(),
        now,
    )))
}

fn parse_secret(text: &str) -> Result<zeroize::Zeroizing<[u8; 32]>, ApiError> {
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
    let mut seed = zeroize::Zeroizing::new([0u8; 32]);
    seed.copy_from_slice(&bytes);
    Ok(seed)
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
    crate::store::from_hex(text)
}
