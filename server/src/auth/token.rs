//! Token secrets: generation, hashing, and the first start's admin token.
use sha2::{Digest as _, Sha256};

use crate::db::Db;
use crate::store::to_hex;
use crate::time::now_ms;

/// Every operator token starts with this.
pub const OPERATOR_TOKEN_PREFIX: &str = "npub_op_";
/// Random bytes in a generated token.
const SECRET_BYTES: usize = 32;
/// Shortest accepted `NPUB_ADMIN_TOKEN`: 32 characters, so that an operator who picks their own
/// cannot pick something guessable by accident.
pub const MIN_SUPPLIED_TOKEN_CHARS: usize = 32;
/// Longest token the extractor will hash: anything longer is not a token.
pub const MAX_TOKEN_CHARS: usize = 256;

/// A fresh operator token.
pub fn generate() -> std::io::Result<String> {
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut secret).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!("{OPERATOR_TOKEN_PREFIX}{}", to_hex(&secret)))
}

/// What the database stores for `token`.
pub fn hash(token: &str) -> String {
    to_hex(&Sha256::digest(token.as_bytes()))
}

/// How the first start's admin token came about (for the banner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// The database already had tokens; nothing was created.
    Existing,
    /// Created from `NPUB_ADMIN_TOKEN`.
    FromEnvironment,
    /// Generated; this is the only time it is shown.
    Generated(String),
}

/// On an empty `tokens` table, creates the admin token named `bootstrap` (from `supplied` if
/// given, else generated) and audits it.
pub async fn bootstrap(db: &Db, supplied: Option<&str>) -> Result<Bootstrap, BootstrapError> {
    let mut tx = crate::db::begin_write(db).await?;
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tokens")
        .fetch_one(&mut *tx)
        .await?;
    if count > 0 {
        if supplied.is_some() {
            tracing::info!("NPUB_ADMIN_TOKEN ignored: the database already has tokens");
        }
        return Ok(Bootstrap::Existing);
    }
    let (secret, outcome) = match supplied {
        Some(s) => {
            let s = s.trim();
            if s.chars().count() < MIN_SUPPLIED_TOKEN_CHARS
                || s.len() > MAX_TOKEN_CHARS
                || s.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(BootstrapError::WeakToken);
            }
            (s.to_owned(), Bootstrap::FromEnvironment)
        }
        None => {
            let s = generate()?;
            (s.clone(), Bootstrap::Generated(s))
        }
    };
    let now = now_ms();
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO tokens (name, role, hash, created_at) VALUES ('bootstrap', 'admin', $1, $2) \
         RETURNING id",
    )
    .bind(hash(&secret))
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    crate::ops::audit::record_system(
        &mut tx,
        "token.create",
        &format!("tokens/{id}"),
        serde_json::json!({"name": "bootstrap", "role": "admin", "bootstrap": true}),
    )
    .await?;
    tx.commit().await?;
    Ok(outcome)
}

/// Why the first start could not create its admin token.
#[derive(Debug)]
pub enum BootstrapError {
    /// `NPUB_ADMIN_TOKEN` is too short or contains whitespace.
    WeakToken,
    /// The database failed.
    Db(sqlx::Error),
    /// The random number generator failed.
    Io(std::io::Error),
}

impl std::fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::WeakToken => write!(
                f,
                "NPUB_ADMIN_TOKEN must be {MIN_SUPPLIED_TOKEN_CHARS} to {MAX_TOKEN_CHARS} \
                 characters without whitespace"
            ),
            Self::Db(e) => write!(f, "creating the bootstrap token: {e}"),
            Self::Io(e) => write!(f, "generating the bootstrap token: {e}"),
        }
    }
}

impl std::error::Error for BootstrapError {}

impl From<sqlx::Error> for BootstrapError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e)
    }
}

impl From<std::io::Error> for BootstrapError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_prefixed_random_and_hash_stably() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(a.starts_with(OPERATOR_TOKEN_PREFIX));
        assert_eq!(a.len(), OPERATOR_TOKEN_PREFIX.len() + 64);
        assert_ne!(a, b);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a).len(), 64);
    }
}
