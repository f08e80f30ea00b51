//! The manifest signing key: generated on first start, importable, listed at `GET /api/v1/keys`.
//!
//! | Path                          | Mode | What                                        |
//! |-------------------------------|------|---------------------------------------------|
//! | `keys/<key id>.key`           | 0600 | secret key file (npub-core's key-file format) |
//! | `keys/<key id>.key.pub`       | 0644 | its public half                             |
//! | `keys/root-<key id>.key`      | 0600 | the root key: signs keyring updates only    |
//! | `keys/root-<key id>.key.pub`  | 0644 | its public half: what devices are built with |
//!
//! That is the file store, the embedded default; with `--key-encryption-key` (required on
//! PostgreSQL, where replicas share the keys) the same secrets are rows of `key_secrets`, sealed,
//! and every replica follows the active row ([`Keys::active_in`]); `keys/secrets.rs` says why.
//!
//! Files are named by key id and never overwritten; the database (`signing_keys`) says which one
//! is active. That makes every step crash-safe: a key file is written (fsynced) before the row
//! that activates it commits, so a crash leaves at worst an unused file, and a start whose active
//! key file is missing refuses to run rather than silently signing with a key no device trusts.
//!
//! Rotation (`POST /api/v1/keys/rotate`) generates a new signing key, makes it active and stores
//! a keyring update signed by the server's root key that tells devices to trust it (Add), or to
//! trust it and revoke the previous key at once (Replace). `POST /api/v1/keys/{key_id}/revoke`
//! stores a Revoke record for a retired key. Devices fetch the records through the device API
//! (`GET /api/v1/device/keys?after=N`, announced by `Npub-Keyring-Sequence` on every manifest
//! poll). The root key is generated at the first start, beside the signing keys, and is never
//! used for a manifest; `docs/keys.md` is the operator's procedure.
//!
//! Importing a key lets the root of trust stay offline instead: the operator generates the signing key
//! (`npub keygen`) and a root-signed keyring update (NPK1 record) that tells devices to trust it,
//! and uploads both. The server checks the record's shape and that it adds exactly the imported
//! key; the root signature is checked by the devices, which hold the root public key (the server
//! does not need it).
use std::sync::{Arc, PoisonError, RwLock};

use npub_core::keys::KeyPair;
use npub_core::manifest::KeyId;

use crate::db::{Db, Tx};
use crate::keys::secrets::{KeyStore, generate_seed};
use crate::ops::audit;
use crate::store::to_hex;
use crate::time::now_ms;

/// The active signing key and the root key, with the store their secrets live in.
#[derive(Debug)]
pub struct Keys {
    pub(crate) store: KeyStore,
    active: RwLock<Arc<KeyPair>>,
    root: KeyPair,
}

/// The store name of the root key `id` (its file is `keys/root-<id>.key`).
fn root_name(id: KeyId) -> String {
    format!("root-{id}")
}

impl Keys {
    /// The key manifests were last signed with by this process (for the banner and logs; a
    /// signature takes [`Keys::active_in`], which follows rotations made by other replicas).
    pub fn active(&self) -> Arc<KeyPair> {
        Arc::clone(&self.active.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The active signing key as the database names it, read through `conn` (in a write
    /// transaction: the key that signs is the key whose row is active when the signature
    /// commits). A rotation made through another replica is picked up here: its secret is
    /// loaded from the store and kept as this process's active key.
    pub async fn active_in(&self, conn: &mut crate::db::Conn) -> Result<Arc<KeyPair>, String> {
        let (key_id,): (String,) =
            sqlx::query_as("SELECT key_id FROM signing_keys WHERE retired_at IS NULL")
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| format!("reading the active signing key: {e}"))?;
        let current = self.active();
        if current.key_id().to_string() == key_id {
            return Ok(current);
        }
        let id = KeyId::from_hex(&key_id)
            .ok_or_else(|| format!("signing_keys: {key_id:?} is not a key id"))?;
        let pair = self.store.get(conn, &id.to_string()).await?;
        if pair.key_id() != id {
            return Err(format!("the stored secret of {key_id} holds another key"));
        }
        tracing::info!(%key_id, "following a signing key rotated by another replica");
        self.set_active(pair);
        Ok(self.active())
    }

    /// The root key: signs keyring updates, never manifests.
    pub fn root(&self) -> &KeyPair {
        &self.root
    }

    /// Loads the root key named by the database, or on a database without one generates it and
    /// records it (secret first, then the row, in one transaction).
    async fn load_or_generate_root(store: &KeyStore, tx: &mut Tx) -> Result<KeyPair, String> {
        let row: Option<(String,)> = sqlx::query_as("SELECT key_id FROM root_keys")
            .fetch_optional(&mut **tx)
            .await
            .map_err(|e| format!("reading the root key: {e}"))?;
        if let Some((key_id,)) = row {
            let id = KeyId::from_hex(&key_id)
                .ok_or_else(|| format!("root_keys: {key_id:?} is not a key id"))?;
            let pair = store
                .get(tx, &root_name(id))
                .await
                .map_err(|e| format!("the root key {key_id}: {e}"))?;
            if pair.key_id() != id {
                return Err(format!("the stored root key does not hold key {key_id}"));
            }
            return Ok(pair);
        }
        let seed = generate_seed().map_err(|e| format!("generating the root key: {e}"))?;
        let id = KeyPair::from_seed(*seed).key_id();
        let now = now_ms();
        let pair = store.put(tx, &root_name(id), &seed, now).await?;
        sqlx::query("INSERT INTO root_keys (key_id, public_key, created_at) VALUES ($1, $2, $3)")
            .bind(pair.key_id().to_string())
            .bind(to_hex(&pair.public_key()))
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(|e| format!("recording the root key: {e}"))?;
        audit::record_system(
            tx,
            "key.root_generate",
            &format!("keys/root/{}", pair.key_id()),
            serde_json::json!({"public_key": to_hex(&pair.public_key())}),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(pair)
    }

    /// Loads the active key named by the database, or on a database without one generates a key
    /// and records it; the same for the root key. One write transaction: replicas starting at
    /// once on one database generate one root key and one signing key between them. Returns
    /// whether a signing key was generated.
    pub async fn load_or_generate(db: &Db, store: KeyStore) -> Result<(Self, bool), String> {
        let mut tx = crate::db::begin_write(db)
            .await
            .map_err(|e| e.to_string())?;
        let root = Self::load_or_generate_root(&store, &mut tx).await?;
        let active: Option<(String,)> =
            sqlx::query_as("SELECT key_id FROM signing_keys WHERE retired_at IS NULL")
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| format!("reading signing keys: {e}"))?;
        if let Some((key_id,)) = active {
            let id = KeyId::from_hex(&key_id)
                .ok_or_else(|| format!("signing_keys: {key_id:?} is not a key id"))?;
            let pair = store.get(&mut tx, &id.to_string()).await.map_err(|e| {
                format!(
                    "the active signing key {key_id}: {e} (a new key would not be trusted by                      any device)"
                )
            })?;
            if pair.key_id() != id {
                return Err(format!("the stored signing key does not hold key {key_id}"));
            }
            tx.commit().await.map_err(|e| e.to_string())?;
            return Ok((Self::new(store, pair, root), false));
        }
        let seed = generate_seed().map_err(|e| format!("generating a signing key: {e}"))?;
        let id = KeyPair::from_seed(*seed).key_id();
        let pair = store.put(&mut tx, &id.to_string(), &seed, now_ms()).await?;
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
        Ok((Self::new(store, pair, root), true))
    }

    fn new(store: KeyStore, pair: KeyPair, root: KeyPair) -> Self {
        Self {
            store,
            active: RwLock::new(Arc::new(pair)),
            root,
        }
    }

    pub(super) fn set_active(&self, pair: KeyPair) {
        *self.active.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(pair);
    }
}

pub(super) async fn insert_key(
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
