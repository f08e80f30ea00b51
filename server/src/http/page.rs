//! Cursor paging, one shape for every listing that can grow with the fleet (devices, a
//! deployment's devices, the audit log, a model's versions).
//!
//! | query     | meaning                                                                      |
//! |-----------|------------------------------------------------------------------------------|
//! | `limit`   | items per page, 1 to [`MAX_LIMIT`] (default [`DEFAULT_LIMIT`])               |
//! | `cursor`  | the `next_cursor` of the page before; absent for the first page              |
//!
//! The body is `{"items": [...], "next_cursor": "..."}`; `next_cursor` is absent on the last
//! page. Every listing has a stable order on a unique key (a device's id, an audit entry's id),
//! and a cursor is that key of the page's last item: a page never repeats or skips an item that
//! existed before the first page was read, whatever is added or removed meanwhile (keyset
//! paging, not `OFFSET`, so page 1,000 costs what page 1 costs). A cursor is opaque to clients:
//! hex of the key's bytes, so it needs no escaping in a URL.
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;

/// Items per page when the query gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 100;
/// Most items per page: bounds every answer whatever the query.
pub const MAX_LIMIT: u32 = 1000;

/// One page of a listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    /// The items, in the listing's order.
    pub items: Vec<T>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page from `rows` fetched with `limit + 1`: the extra row says there is another page, and
    /// is dropped; `key` gives an item's cursor key.
    pub fn from_rows(mut rows: Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> Self {
        let limit = limit as usize;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_cursor = if more {
            rows.last().map(|last| encode(&key(last)))
        } else {
            None
        };
        Page {
            items: rows,
            next_cursor,
        }
    }
}

/// The page size a query asked for: 422 outside 1 to [`MAX_LIMIT`].
pub fn limit(asked: Option<u32>) -> Result<u32, ApiError> {
    match asked {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid(format!(
            "limit: {n} is not from 1 to {MAX_LIMIT}"
        ))),
    }
}

/// The key a `cursor` carries: any hex string is taken (a key that names no item still bounds
/// the page: the items after it), 422 when it is not hex.
pub fn decode(cursor: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let bad = || {
        ApiError::invalid(format!(
            "cursor: {cursor:?} is not a cursor this listing gave (pass a page's `next_cursor` as it is)"
        ))
    };
    if cursor.is_empty() || cursor.len() % 2 != 0 || cursor.len() > 2 * 256 {
        return Err(bad());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A cursor carrying an integer key (an audit entry's id, a version's row id, a position): the
/// hex of its decimal digits, at most 18 of them (so it fits an `i64`).
pub fn decode_int(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    match decode(cursor)? {
        None => Ok(None),
        Some(key) if key.len() <= 18 && key.bytes().all(|b| b.is_ascii_digit()) => key
            .parse()
            .map(Some)
            .map_err(|_| ApiError::internal("eighteen digits fit an i64")),
        Some(_) => Err({
            ApiError::invalid(format!(
                "cursor: {:?} is not a cursor this listing gave (pass a page's `next_cursor` as it is)",
                cursor.unwrap_or_default()
            ))
        }),
    }
}

fn encode(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_carries_its_key_back() {
        let page = Page::from_rows(vec!["a", "b:c", "d"], 2, |s| (*s).to_owned());
        assert_eq!(page.items, ["a", "b:c"]);
        let cursor = page.next_cursor.expect("a next page");
        assert_eq!(decode(Some(&cursor)).unwrap().as_deref(), Some("b:c"));
        let last = Page::from_rows(vec!["a"], 2, |s| (*s).to_owned());
        assert!(last.next_cursor.is_none());
    }

    #[test]
    fn rejects_a_cursor_no_page_gave() {
        for bad in ["", "0", "zz", &"61".repeat(300)] {
            let err = decode(Some(bad)).unwrap_err().to_string();
            assert!(
                err.contains("is not a cursor this listing gave"),
                "{bad}: {err}"
            );
        }
        assert_eq!(decode(Some("ff")).unwrap().as_deref(), Some("\u{fffd}"));
        assert!(decode_int(Some(&encode("x1"))).is_err());
        assert!(decode_int(Some(&encode(&"9".repeat(19)))).is_err());
        assert_eq!(decode_int(Some(&encode("42"))).unwrap(), Some(42));
    }

    #[test]
    fn rejects_a_limit_out_of_range() {
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(MAX_LIMIT + 1)).is_err());
        assert_eq!(limit(Some(MAX_LIMIT)).unwrap(), MAX_LIMIT);
    }
}
