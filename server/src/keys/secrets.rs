//! Where the secret halves of the signing keys and the root key live.
//!
//! | Store | Chosen by | Secrets | Shared by replicas |
//! |-------|-----------|---------|--------------------|
//! | files | no `--key-encryption-key` (the embedded default) | `<data-dir>/keys/<name>.key`, 0600 (npub-core's key-file format) | no: one data dir, one process |
//! | database | `--key-encryption-key` / `NPUB_KEY_ENCRYPTION_KEY` (required with `postgres://`) | `key_secrets` rows, each seed sealed with AES-256-GCM under that key | yes |
//!
//! ## Why the database, wrapped, rather than `--signing-key FILE`
//! Every replica must sign with the same key, and a rotation through replica A must be honoured
//! by replica B at once (B signs the next deployment with A's new key, or devices that already
//! applied A's keyring update and revoked the old key refuse it). A key given to each replica as
//! a file cannot follow a rotation without redeploying every replica, and the root key must stay
//! one key for the fleet's lifetime. So the secrets travel with the rows that name them: a
//! rotation commits the new key's sealed seed in the same transaction that makes it active, and
//! any replica that finds a different active key in `signing_keys` unseals it from `key_secrets`
//! (`Keys::active_in`). The database never holds a usable secret: the key-encryption key (KEK)
//! comes from each replica's environment (a secret manager, a 0600 `EnvironmentFile=`), so a
//! database dump or backup alone signs nothing.
//!
//! ## Sealed record layout (`key_secrets.sealed`, 60 bytes)
//! | Offset | Size | Field |
//! |--------|------|-------|
//! | 0      | 12   | nonce, random per record |
//! | 12     | 32   | the ed25519 seed, AES-256-GCM ciphertext |
//! | 44     | 16   | GCM tag; the associated data is the row's `name` (a sealed seed moved to another name does not open) |
//!
//! Names: a signing key is its key id (16 hex digits), the root key `root-<key id>`, as the
//! files are named.
use std::path::{Path, PathBuf};

use npub_core::keys::{KeyPair, read_secret_key, write_key_files};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use zeroize::Zeroizing;

use crate::db::Conn;

/// Bytes of an ed25519 seed.
const SEED_LEN: usize = 32;
/// Bytes of a sealed record (see the module doc's table).
const SEALED_LEN: usize = NONCE_LEN + SEED_LEN + 16;

/// The key-encryption key: 32 bytes, given as 64 hex digits.
pub struct Kek(LessSafeKey);

impl std::fmt::Debug for Kek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kek(..)")
    }
}

impl Kek {
    /// Parses `--key-encryption-key`: exactly 64 hex digits (e.g. `openssl rand -hex 32`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bytes = Zeroizing::new(
            crate::store::from_hex(text)
                .filter(|b| b.len() == 32)
                .ok_or_else(|| {
                    format!(
                        "expected 64 hex digits (32 bytes, e.g. `openssl rand -hex 32`), got {} \
                         characters",
                        text.len()
                    )
                })?,
        );
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| "AES-256-GCM key rejected")?;
        Ok(Self(LessSafeKey::new(key)))
    }

    fn seal(&self, name: &str, seed: &[u8; SEED_LEN]) -> Result<Vec<u8>, String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| format!("operating-system RNG: {e}"))?;
        let mut out = Vec::with_capacity(SEALED_LEN);
        out.extend_from_slice(&nonce);
        let mut body = Zeroizing::new(seed.to_vec());
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut *body,
            )
            .map_err(|_| "sealing a key failed")?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    fn open(&self, name: &str, sealed: &[u8]) -> Result<[u8; SEED_LEN], String> {
        if sealed.len() != SEALED_LEN {
            return Err(format!(
                "key_secrets {name}: {} bytes, expected {SEALED_LEN}",
                sealed.len()
            ));
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| "bad nonce")?;
        let mut body = Zeroizing::new(body.to_vec());
        let seed = self
            .0
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut body)
            .map_err(|_| {
                format!(
                    "key_secrets {name}: does not open with this --key-encryption-key (every \
                     replica must be given the same one)"
                )
            })?;
        seed.try_into()
            .map_err(|_| format!("key_secrets {name}: not a {SEED_LEN}-byte seed"))
    }
}

/// The secret store of this server (see the module doc).
#[derive(Debug)]
pub enum KeyStore {
    /// Key files in this directory.
    Files(PathBuf),
    /// Sealed rows in `key_secrets`.
    Database(Box<Kek>),
}

/// A new ed25519 seed from the operating system's RNG.
pub fn generate_seed() -> Result<Zeroizing<[u8; SEED_LEN]>, String> {
    let mut seed = Zeroizing::new([0u8; SEED_LEN]);
    getrandom::fill(&mut *seed).map_err(|e| format!("operating-system RNG: {e}"))?;
    Ok(seed)
}

impl KeyStore {
    /// Which store a server uses: the database when it was given a KEK; `postgres` without one
    /// is refused (replicas would each generate their own keys).
    pub fn choose(kek: Option<Kek>, dir: PathBuf, shared_db: bool) -> Result<Self, String> {
        match kek {
            Some(kek) => Ok(Self::Database(Box::new(kek))),
            None if shared_db => Err("a postgres:// database needs --key-encryption-key \
                 (NPUB_KEY_ENCRYPTION_KEY, 64 hex digits, the same on every replica): the \
                 signing and root keys are kept in the database, sealed with it"
                .into()),
            None => Ok(Self::Files(dir)),
        }
    }

    /// Where `name`'s file is (the file store; also where the database store looks for a key
    /// written before it was enabled).
    fn file(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.key"))
    }

    /// Stores `seed` as `name`: the file store writes (and fsyncs) the file before returning,
    /// the database store inserts the sealed row in `conn`'s transaction, so it commits with the
    /// row that names the key. Returns the key pair.
    pub async fn put(
        &self,
        conn: &mut Conn,
        name: &str,
        seed: &[u8; SEED_LEN],
        now: i64,
    ) -> Result<KeyPair, String> {
        let pair = KeyPair::from_seed(*seed);
        match self {
            Self::Files(dir) => {
                let path = Self::file(dir, name);
                tokio::task::spawn_blocking(move || {
                    write_or_match(&path, &pair)
                        .map(|()| pair)
                        .map_err(|e| format!("writing {}: {e}", path.display()))
                })
                .await
                .map_err(|e| e.to_string())?
            }
            Self::Database(kek) => {
                let sealed = kek.seal(name, seed)?;
                sqlx::query(
                    "INSERT INTO key_secrets (name, sealed, created_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO NOTHING",
                )
                .bind(name)
                .bind(sealed)
                .bind(now)
                .execute(conn)
                .await
                .map_err(|e| format!("storing key {name}: {e}"))?;
                Ok(pair)
            }
        }
    }

    /// Loads `name`.
    pub async fn get(&self, conn: &mut Conn, name: &str) -> Result<KeyPair, String> {
        match self {
            Self::Files(dir) => read_file(&Self::file(dir, name)),
            Self::Database(kek) => {
                let row: Option<(Vec<u8>,)> =
                    sqlx::query_as("SELECT sealed FROM key_secrets WHERE name = $1")
                        .bind(name)
                        .fetch_optional(conn)
                        .await
                        .map_err(|e| format!("reading key {name}: {e}"))?;
                let (sealed,) = row.ok_or_else(|| {
                    format!(
                        "key_secrets holds no key {name}: restore it, or, on a SQLite \
                             database whose keys are files in <data-dir>/keys/, start without \
                             --key-encryption-key"
                    )
                })?;
                let seed = Zeroizing::new(kek.open(name, &sealed)?);
                Ok(KeyPair::from_seed(*seed))
            }
        }
    }
}

/// The file that seals other secrets in the file store (a webhook's signing secret, which the
/// server must read again to sign): a key-encryption key of its own, 64 hex digits, 0600,
/// beside the key files. The database store seals with `--key-encryption-key` instead.
const LOCAL_KEK_FILE: &str = "secrets.kek";

impl KeyStore {
    /// Seals a 32-byte secret the server uses again later (a webhook's signing secret) under
    /// `name` (the associated data: it opens under that name only). The database never holds
    /// it in the clear: the database store seals it under `--key-encryption-key`, the file store
    /// under [`LOCAL_KEK_FILE`], made on first use.
    pub async fn seal_secret(
        &self,
        name: &str,
        secret: &[u8; SEED_LEN],
    ) -> Result<Vec<u8>, String> {
        match self {
            Self::Database(kek) => kek.seal(name, secret),
            Self::Files(dir) => local_kek(dir.clone()).await?.seal(name, secret),
        }
    }

    /// Opens what [`KeyStore::seal_secret`] sealed under `name`.
    pub async fn open_secret(
        &self,
        name: &str,
        sealed: &[u8],
    ) -> Result<Zeroizing<[u8; SEED_LEN]>, String> {
        match self {
            Self::Database(kek) => kek.open(name, sealed).map(Zeroizing::new),
            Self::Files(dir) => local_kek(dir.clone())
                .await?
                .open(name, sealed)
                .map(Zeroizing::new),
        }
    }
}

/// Reads the file store's own key-encryption key, or creates it (0600, fsynced) when missing.
async fn local_kek(dir: PathBuf) -> Result<Kek, String> {
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = dir.join(LOCAL_KEK_FILE);
        let read = |path: &Path| {
            let text = Zeroizing::new(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?,
            );
            Kek::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
        };
        if path.exists() {
            return read(&path);
        }
        let seed = generate_seed()?;
        let hex = Zeroizing::new(crate::store::to_hex(&*seed));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(hex.as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                Kek::parse(&hex)
            }
            // Another request made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
            Err(e) => Err(format!("creating {}: {e}", path.display())),
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

fn read_file(path: &Path) -> Result<KeyPair, String> {
    read_secret_key(path).map_err(|e| {
        format!(
            "{} cannot be read: {e} (restore the file; devices only trust the keys they know)",
            path.display()
        )
    })
}

/// Writes the key files, or accepts existing ones holding the same key (a retried import after a
/// crash between the file write and the commit).
fn write_or_match(path: &Path, pair: &KeyPair) -> std::io::Result<()> {
    match write_key_files(path, pair) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let existing = read_secret_key(path)?;
            if existing.public_key() == pair.public_key() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "{} holds another key",
                    path.display()
                )))
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEK: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn sealed_seeds_open_under_their_own_name_only() {
        let kek = Kek::parse(KEK).unwrap();
        let seed = [7u8; 32];
        let sealed = kek.seal("0011223344556677", &seed).unwrap();
        assert_eq!(sealed.len(), SEALED_LEN);
        assert_eq!(kek.open("0011223344556677", &sealed).unwrap(), seed);
        assert!(kek.open("root-0011223344556677", &sealed).is_err());
    }

    #[test]
    fn rejects_a_sealed_seed_under_another_kek() {
        let sealed = Kek::parse(KEK).unwrap().seal("k", &[1; 32]).unwrap();
        let other = Kek::parse(&KEK.replace("00", "ff")).unwrap();
        let err = other.open("k", &sealed).unwrap_err();
        assert!(err.contains("same one"), "{err}");
    }

    #[test]
    fn rejects_a_kek_that_is_not_64_hex_digits() {
        for bad in [
            "",
            "00",
            &KEK[..62],
            &format!("{KEK}00"),
            &KEK.replace('0', "g"),
        ] {
            let err = Kek::parse(bad).unwrap_err();
            assert!(err.contains("64 hex digits"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn rejects_postgres_without_a_kek() {
        let err = KeyStore::choose(None, "k".into(), true).unwrap_err();
        assert!(err.contains("--key-encryption-key"), "{err}");
        assert!(matches!(
            KeyStore::choose(None, "k".into(), false),
            Ok(KeyStore::Files(_))
        ));
    }
}
