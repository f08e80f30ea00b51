//! What a model name, a version and a token name may be.
//!
//! Names travel in URL paths, in the signed manifest's fixed-width text fields
//! (`npub_core::manifest::MODEL_NAME_BYTES`, `MODEL_VERSION_BYTES`), in logs and in file names a
//! browser saves, so they are restricted up front to characters that need no escaping anywhere:
//! ASCII letters, digits, `.`, `_`, `-` (and `+` in versions, for semver build metadata),
//! starting with a letter or a digit. Checked at the API so that a version that could never be
//! deployed is never accepted.
use npub_core::manifest::{MODEL_NAME_BYTES, MODEL_VERSION_BYTES};

use crate::error::ApiError;

/// Longest token name: a label for people, shown in lists and the audit log.
pub const TOKEN_NAME_MAX_BYTES: usize = 64;

/// Checks a model name.
pub fn model(name: &str) -> Result<(), ApiError> {
    check("model name", name, MODEL_NAME_BYTES, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
    })
}

/// Checks a version string.
pub fn version(version: &str) -> Result<(), ApiError> {
    check("version", version, MODEL_VERSION_BYTES, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+')
    })
}

/// Checks a token's name (a label: spaces allowed, no control characters).
pub fn token(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() || name.len() > TOKEN_NAME_MAX_BYTES {
        return Err(ApiError::invalid(format!(
            "token name: must be 1..={TOKEN_NAME_MAX_BYTES} bytes and not blank"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "token name: control characters are not allowed",
        ));
    }
    Ok(())
}

fn check(what: &str, s: &str, max: usize, allowed: impl Fn(char) -> bool) -> Result<(), ApiError> {
    let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || s.len() > max {
        return Err(ApiError::invalid(format!(
            "{what} {s:?}: must be 1..={max} bytes starting with a letter or a digit"
        )));
    }
    if let Some(bad) = s.chars().find(|&c| !allowed(c)) {
        return Err(ApiError::invalid(format!(
            "{what} {s:?}: character {bad:?} is not allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        model("person-detect_v2.int8").unwrap();
        version("1.2.3-rc.1+build.7").unwrap();
        token("CI uploader").unwrap();
    }

    #[test]
    fn rejects_names_that_need_escaping_or_do_not_fit_a_manifest() {
        for bad in [
            "",
            "-lead",
            "a/b",
            "a b",
            "ü",
            &"m".repeat(MODEL_NAME_BYTES + 1),
        ] {
            assert!(model(bad).is_err(), "{bad:?}");
        }
        assert!(model(&"m".repeat(MODEL_NAME_BYTES)).is_ok());
        assert!(version(&"1".repeat(MODEL_VERSION_BYTES + 1)).is_err());
        assert!(version("1.0/..").is_err());
        assert!(token(" ").is_err());
        assert!(token("a\nb").is_err());
    }
}
