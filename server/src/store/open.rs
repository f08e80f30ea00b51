//! Opening the store `--pack-store` names.
use std::time::Duration;

use super::local::LocalStore;
use super::pack_store::PackStore;
use super::s3::{S3Settings, S3Store};
use super::timed::Timed;

/// The store `--pack-store` names (`spec`), or the local one under `local_root`; `presign` and
/// `overrides` apply to an `s3://` store; every call is bounded by `timeout` ([`Timed`]). The
/// error says what is wrong with the setting. Nothing is contacted.
pub fn open(
    spec: Option<&str>,
    local_root: std::path::PathBuf,
    presign: bool,
    overrides: &[(String, String)],
    timeout: Duration,
) -> Result<std::sync::Arc<dyn PackStore>, String> {
    let store: std::sync::Arc<dyn PackStore> = match spec {
        None | Some("") if presign => {
            return Err(
                "--presign-downloads needs an s3:// --pack-store: a local store has no URL to sign"
                    .into(),
            );
        }
        None | Some("") => std::sync::Arc::new(LocalStore::new(local_root)),
        Some(url) => std::sync::Arc::new(S3Store::open(&S3Settings {
            url: url.to_owned(),
            overrides: overrides.to_vec(),
            presign,
        })?),
    };
    Ok(std::sync::Arc::new(Timed::new(store, timeout)))
}
