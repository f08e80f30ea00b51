//! What a model name, a version and a token name may be.
//!
//! Names travel in URL paths, in the signed manifest's fixed-width text fields
//! (`npub_core::manifest::MODEL_NAME_BYTES`, `MODEL_VERSION_BYTES`), in logs and in file names a
//! browser saves, so they are restricted up front to characters that need no escaping anywhere:
//! ASCII letters, digits, `.`, `_`, `-` (and `+` in versions, for semver build metadata),
//! starting with a letter or a digit. Checked at the API so that a version that could never be
//! deployed is never accepted.
use npub_core::manifest::{MODEL_NAME_BYTES, MODEL_VERSION_BYTES};

use crate::http::error::ApiError;

/// Longest token name, in characters: a label for people, shown in lists and the audit log.
pub const TOKEN_NAME_MAX_CHARS: usize = 64;

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
    if name.trim().is_empty() || name.chars().count() > TOKEN_NAME_MAX_CHARS {
        return Err(ApiError::invalid(format!(
            "token name: must be 1 to {TOKEN_NAME_MAX_CHARS} characters and not blank"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "token name: control characters are not allowed",
        ));
    }
    Ok(())
}

/// Whether free text may span lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// One line: no control character at all.
    One,
    /// Several lines: `\n` and `\t` allowed, no other control character (no `\r`, no NUL, no
    /// ESC that would start a terminal escape sequence in a log viewer).
    Many,
}

/// Checks free text (a description, a device's failure reason): at most `max` characters (as
/// JSON Schema's `maxLength` counts, so the OpenAPI document can say it exactly), and no
/// control character beyond what `lines` allows. Such text ends up in logs and in the UI, where a
/// NUL truncates and an escape sequence rewrites what an operator's terminal shows.
pub fn free_text(field: &str, text: &str, max: usize, lines: Lines) -> Result<(), ApiError> {
    if text.chars().count() > max {
        return Err(ApiError::invalid(format!(
            "{field}: longer than {max} characters"
        )));
    }
    let allowed = |c: char| lines == Lines::Many && matches!(c, '\n' | '\t');
    if let Some((at, bad)) = text
        .char_indices()
        .find(|&(_, c)| c.is_control() && !allowed(c))
    {
        return Err(ApiError::invalid(format!(
            "{field}: control character {bad:?} at byte {at} is not allowed{}",
            if lines == Lines::Many {
                " (only \\n and \\t are)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

fn check(what: &str, s: &str, max: usize, allowed: impl Fn(char) -> bool) -> Result<(), ApiError> {
    let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || s.len() > max {
        return Err(ApiError::invalid(format!(
            "{what} {s:?}: must be 1 to {max} bytes starting with a letter or a digit"
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
        for bad in ["a\0b", "\x1b[2J", "a\rb", "\u{85}"] {
            assert!(free_text("d", bad, 64, Lines::Many).is_err(), "{bad:?}");
        }
        assert!(free_text("d", "two\n\tlines", 64, Lines::Many).is_ok());
        assert!(free_text("d", "two\nlines", 64, Lines::One).is_err());
        assert!(free_text("d", "long", 3, Lines::One).is_err());
        assert!(token("a\nb").is_err());
    }
}
