//! Conditional and range requests on pack downloads (RFC 9110 §13.1.2, §13.1.5, §14), shared by
//! the device route (`GET /api/v1/device/packs/{sha256}`) and the operator route
//! (`GET /api/v1/models/{name}/versions/{version}/npub`). Both name a pack by its SHA-256, so the
//! `ETag` is `"<sha256>"`, a strong validator.
//!
//! | Request                                    | Answer                                           |
//! |--------------------------------------------|--------------------------------------------------|
//! | `If-None-Match` naming the `ETag` (or `*`)  | 304                                              |
//! | no `Range`                                 | 200, the whole pack                              |
//! | `If-Range` with another validator or a date | 200, the whole pack (`Range` ignored)            |
//! | a unit other than `bytes` (any case)       | 200 (`Range` ignored, §14.2)                     |
//! | a `Range` that does not parse              | 200 (`Range` ignored, §14.2)                     |
//! | several ranges                             | 200, the whole pack (§14.2 allows ignoring them) |
//! | `bytes=A-B`, `bytes=A-` with `A` < length  | 206, `B` clamped to the last byte                |
//! | `bytes=-N`                                 | 206, the last `N` bytes; the whole pack when `N` ≥ length (§14.1.3) |
//! | `bytes=A-…` with `A` ≥ length              | 416, `Content-Range: bytes */LEN`                |
//!
//! The grammar is RFC 9110's (§14.1.2), parsed here for the one range a pack download honours.
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 304: the client has this pack.
    NotModified,
    /// 200: the whole pack.
    Full,
    /// 206: bytes `start..=end`.
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// 416: the range starts at or past the end.
    Unsatisfiable,
}

impl Answer {
    /// The byte range of the body: `(offset, count)`.
    pub fn span(self, len: u64) -> (u64, u64) {
        match self {
            Answer::Partial { start, end } => (start, end - start + 1),
            _ => (0, len),
        }
    }
}

/// The response for `answer` with `body` (the bytes [`Answer::span`] names), or the 416 error.
/// `extra` headers (e.g. `Content-Disposition`) are added to a 200 or 206.
pub fn respond(
    answer: Answer,
    etag: HeaderValue,
    len: u64,
    body: impl FnOnce(u64, u64) -> Body,
    extra: &[(header::HeaderName, HeaderValue)],
) -> Result<Response, ApiError> {
    let status = match answer {
        Answer::NotModified => {
            return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
        }
        Answer::Unsatisfiable => return Err(ApiError::RangeNotSatisfiable { len }),
        Answer::Full => StatusCode::OK,
        Answer::Partial { .. } => StatusCode::PARTIAL_CONTENT,
    };
    let (offset, count) = answer.span(len);
    let mut response = (status, body(offset, count)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag);
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    if let Answer::Partial { start, end } = answer {
        let value = format!("bytes {start}-{end}/{len}");
        headers.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&value).map_err(ApiError::internal)?,
        );
    }
    for (name, value) in extra {
        headers.insert(name.clone(), value.clone());
    }
    Ok(response)
}

/// The `ETag` of the pack with this SHA-256 (hex).
pub fn etag(sha256: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("\"{sha256}\"")).ok()
}

/// Decides the answer for a pack of `len` bytes whose `ETag` is `etag`, from a request's
/// headers.
pub fn answer(headers: &HeaderMap, etag: &HeaderValue, len: u64) -> Answer {
    answer_of(
        headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .map(HeaderValue::as_bytes),
        headers.get(header::IF_RANGE).map(HeaderValue::as_bytes),
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        etag,
        len,
    )
}

/// [`answer`] from the raw headers: `If-None-Match`'s values, `If-Range` and `Range` (the
/// device lane has no `HeaderMap`; `crate::device::decide` asks this for both front ends).
pub fn answer_of<'a>(
    if_none_match: impl IntoIterator<Item = &'a [u8]>,
    if_range: Option<&[u8]>,
    range_spec: Option<&str>,
    etag: &HeaderValue,
    len: u64,
) -> Answer {
    if none_match_values(if_none_match, etag) {
        return Answer::NotModified;
    }
    let Some(spec) = range_spec else {
        return Answer::Full;
    };
    // `If-Range` absent, or naming this pack's `ETag` exactly (a date never matches: a pack is
    // named by its content, and §13.1.5 asks for a strong comparison).
    if if_range.is_some_and(|v| v != etag.as_bytes()) {
        return Answer::Full;
    }
    range(spec, len)
}

/// `If-None-Match` names `etag` (weak comparison, §13.1.2) or is `*`.
pub fn none_match(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    none_match_values(
        headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .map(HeaderValue::as_bytes),
        etag,
    )
}

/// [`none_match`] over the raw `If-None-Match` values (the accept loop's device lane has no
/// `HeaderMap`). A value that is not visible ASCII is skipped, as `HeaderValue::to_str` refuses
/// it.
pub fn none_match_values<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    etag: &HeaderValue,
) -> bool {
    values
        .into_iter()
        .filter_map(crate::http::header_text::text)
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/").as_bytes() == etag.as_bytes())
}

/// The answer to the `Range` value `spec` for `len` bytes (no `If-None-Match`, `If-Range`
/// aside).
///
/// RFC 9110 §14.1.2's grammar, for one range: `bytes=first-[last]` or `bytes=-suffix`, each a
/// run of digits (leading zeros allowed: `bytes=00-01` is bytes 0 and 1), optional whitespace
/// around ranges, empty list elements ignored. A number too large for 64 bits is as good as
/// infinite: a start past any pack, an end or suffix covering the rest of it.
pub fn range(spec: &str, len: u64) -> Answer {
    // The unit is case-insensitive (§14.1).
    let Some((unit, set)) = spec.split_once('=') else {
        return Answer::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Answer::Full;
    }
    let mut ranges = set.split(',').map(str::trim).filter(|r| !r.is_empty());
    let (Some(only), None) = (ranges.next(), ranges.next()) else {
        // None, or several (§14.2 allows answering those with the whole pack).
        return Answer::Full;
    };
    let Some((first, last)) = only.split_once('-') else {
        return Answer::Full;
    };
    if first.is_empty() {
        // `-N`: the last N bytes; all of them when N ≥ length; none is unsatisfiable (§14.1.3).
        return match digits(last) {
            Some(0) => Answer::Unsatisfiable,
            Some(_) if len == 0 => Answer::Unsatisfiable,
            Some(n) => Answer::Partial {
                start: len.saturating_sub(n),
                end: len - 1,
            },
            None => Answer::Full,
        };
    }
    let Some(start) = digits(first) else {
        return Answer::Full;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match digits(last) {
            Some(end) => end,
            None => return Answer::Full,
        }
    };
    if end < start {
        // Not a valid range: ignored (§14.1.1).
        return Answer::Full;
    }
    if start >= len {
        return Answer::Unsatisfiable;
    }
    Answer::Partial {
        start,
        end: end.min(len - 1),
    }
}

/// A run of ASCII digits (at least one) as a number, saturating at `u64::MAX`; `None` for
/// anything else.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn of(spec: &str) -> Answer {
        answer(&with(&[(header::RANGE, spec)]), &etag("ab").unwrap(), 100)
    }

    #[test]
    fn answers_single_ranges_with_206() {
        assert_eq!(of("bytes=0-9"), Answer::Partial { start: 0, end: 9 });
        assert_eq!(of("bytes=90-"), Answer::Partial { start: 90, end: 99 });
        assert_eq!(of("bytes=90-500"), Answer::Partial { start: 90, end: 99 });
        assert_eq!(of("bytes=-10"), Answer::Partial { start: 90, end: 99 });
        assert_eq!(Answer::Partial { start: 90, end: 99 }.span(100), (90, 10));
    }

    #[test]
    fn survives_a_suffix_longer_than_the_pack() {
        assert_eq!(of("bytes=-100"), Answer::Partial { start: 0, end: 99 });
        assert_eq!(of("bytes=-5000"), Answer::Partial { start: 0, end: 99 });
    }

    #[test]
    fn survives_unit_case_and_ignores_what_it_does_not_understand() {
        assert_eq!(of("BYTES=0-9"), Answer::Partial { start: 0, end: 9 });
        assert_eq!(of("Bytes=0-9"), Answer::Partial { start: 0, end: 9 });
        for ignored in [
            "items=0-9",
            "bytes",
            "bytes=abc",
            "bytes=9-0",
            "bytes=0-9,20-29",
            "bytes=0-9,5-15",
            "",
        ] {
            assert_eq!(of(ignored), Answer::Full, "{ignored:?}");
        }
    }

    #[test]
    fn survives_leading_zeros_whitespace_and_numbers_past_64_bits() {
        assert_eq!(of("bytes=00-01"), Answer::Partial { start: 0, end: 1 });
        assert_eq!(of("bytes=007-"), Answer::Partial { start: 7, end: 99 });
        assert_eq!(of("bytes=-010"), Answer::Partial { start: 90, end: 99 });
        assert_eq!(of("bytes= 1-2 "), Answer::Partial { start: 1, end: 2 });
        assert_eq!(of("bytes=1-2,"), Answer::Partial { start: 1, end: 2 });
        let huge = "99999999999999999999999";
        assert_eq!(
            of(&format!("bytes=0-{huge}")),
            Answer::Partial { start: 0, end: 99 }
        );
        assert_eq!(of(&format!("bytes={huge}-")), Answer::Unsatisfiable);
        assert_eq!(
            of(&format!("bytes=-{huge}")),
            Answer::Partial { start: 0, end: 99 }
        );
        for ignored in [
            "bytes=+1-2",
            "bytes=1 -2",
            "bytes=0x1-2",
            "bytes=-",
            "bytes=1-2-3",
        ] {
            assert_eq!(of(ignored), Answer::Full, "{ignored:?}");
        }
    }

    #[test]
    fn rejects_a_range_starting_past_the_end() {
        assert_eq!(of("bytes=100-"), Answer::Unsatisfiable);
        assert_eq!(of("bytes=5000-6000"), Answer::Unsatisfiable);
        assert_eq!(of("bytes=-0"), Answer::Unsatisfiable);
    }

    #[test]
    fn honours_validators() {
        let tag = etag("ab").unwrap();
        let h = with(&[(header::IF_NONE_MATCH, "\"x\", W/\"ab\"")]);
        assert_eq!(answer(&h, &tag, 100), Answer::NotModified);
        let h = with(&[(header::RANGE, "bytes=1-2"), (header::IF_RANGE, "\"ab\"")]);
        assert_eq!(answer(&h, &tag, 100), Answer::Partial { start: 1, end: 2 });
        let h = with(&[(header::RANGE, "bytes=1-2"), (header::IF_RANGE, "\"old\"")]);
        assert_eq!(answer(&h, &tag, 100), Answer::Full);
        let date = "Tue, 01 Jan 2030 00:00:00 GMT";
        let h = with(&[(header::RANGE, "bytes=1-2"), (header::IF_RANGE, date)]);
        assert_eq!(answer(&h, &tag, 100), Answer::Full);
    }
}
