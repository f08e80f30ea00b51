//! A webhook's signing secret at rest: the server must read it again to sign every delivery, so
//! it cannot be hashed like a token; it is sealed by the key store as the signing keys are
//! (`keys/secrets.rs`: under `--key-encryption-key` when given, else under the data dir's own
//! sealing key), with the webhook's name as associated data, so a sealed secret copied to
//! another row does not open.
use zeroize::Zeroizing;

use super::sign::SECRET_LEN;
use crate::keys::secrets::KeyStore;

/// The associated data a webhook's secret is sealed under.
fn name(webhook: i64) -> String {
    format!("webhook-{webhook}")
}

/// A new secret from the operating system's RNG.
pub fn generate() -> Result<Zeroizing<[u8; SECRET_LEN]>, String> {
    let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
    getrandom::fill(&mut *secret).map_err(|e| format!("operating-system RNG: {e}"))?;
    Ok(secret)
}

/// Seals `secret` for webhook `webhook`.
pub async fn seal(
    store: &KeyStore,
    webhook: i64,
    secret: &[u8; SECRET_LEN],
) -> Result<Vec<u8>, String> {
    store.seal_secret(&name(webhook), secret).await
}

/// Opens webhook `webhook`'s sealed secret.
pub async fn open(
    store: &KeyStore,
    webhook: i64,
    sealed: &[u8],
) -> Result<Zeroizing<[u8; SECRET_LEN]>, String> {
    store.open_secret(&name(webhook), sealed).await
}
