//! Shared by `sign` and `verify-manifest`: reading keys, the clock, and the pack's IO bindings.
use std::path::{Path, PathBuf};

use npub_core::keypair::KeyPair;
use npub_core::{Blob, io_bindings};

use super::{Failure, read_file};

/// The IO-bindings JSON that travels beside `pack`: `PACK.io.json` (the pack's full name plus
/// `.io.json`) or, for `model.npub`, `model.io.json`. `explicit` (`--io FILE`) wins. Two different
/// candidates present at once is an error: which one the manifest covers would be a guess.
pub fn io_json_path(pack: &Path, explicit: Option<&Path>) -> Result<Option<PathBuf>, Failure> {
    if let Some(path) = explicit {
        return Ok(Some(path.to_path_buf()));
    }
    let mut appended = pack.as_os_str().to_owned();
    appended.push(".io.json");
    let candidates = [PathBuf::from(appended), pack.with_extension("io.json")];
    let found: Vec<&PathBuf> = candidates.iter().filter(|p| p.is_file()).collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        [a, b, ..] if a == b => Ok(Some((*a).clone())),
        [a, b, ..] => Err(Failure::Usage(format!(
            "both {} and {} exist; say which with --io",
            a.display(),
            b.display()
        ))),
    }
}

/// The canonical encoding of the IO bindings in `json`, checked against `blob`.
pub fn canonical_io(json: &Path, blob: &Blob<'_>) -> Result<Vec<u8>, Failure> {
    let text = String::from_utf8(read_file(json)?)
        .map_err(|_| Failure::Rejected(format!("{}: not UTF-8", json.display())))?;
    let (_, canonical) = io_bindings::from_json(&text)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", json.display())))?;
    io_bindings::IoBindings::parse(&canonical)
        .and_then(|b| b.check_against(blob))
        .map_err(|e| Failure::Rejected(format!("{}: {e}", json.display())))?;
    Ok(canonical)
}

/// Loads a secret key, refusing one that group or others can read.
pub fn secret_key(path: &Path) -> Result<KeyPair, Failure> {
    npub_core::keypair::read_secret_key(path)
        .map_err(|e| Failure::Usage(format!("cannot use key {}: {e}", path.display())))
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
