//! A header value as text, decided on its raw bytes: the rule of `HeaderValue::to_str` (visible
//! ASCII and tab), for the code that reads header bytes without a `HeaderMap` (the accept loop's
//! device lane) and for the router's code that must decide the same way.
//!
//! | Byte                 | Text? |
//! |----------------------|-------|
//! | `\t` (0x09)          | yes   |
//! | 0x20 ..= 0x7e        | yes   |
//! | any other (controls, DEL, 0x80 ..= 0xff) | no: the whole value is not text |

/// Whether `value` is text by `HeaderValue::to_str`'s rule. One pass without early exit, so that
/// the compiler can check many bytes at once (a device's `Authorization` is about 60 bytes and
/// is checked on every poll).
pub fn is_text(value: &[u8]) -> bool {
    value.iter().fold(true, |ok, &b| {
        ok & ((b == b'\t') | (b.wrapping_sub(0x20) < 0x5f))
    })
}

/// `value` as a `&str` when it is text (what `HeaderValue::to_str` returns), else `None`.
pub fn text(value: &[u8]) -> Option<&str> {
    if is_text(value) {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn rejects_exactly_what_to_str_rejects() {
        for b in 0..=u8::MAX {
            let value = [b'a', b, b'z'];
            // Some bytes are not even a header value; those are not text either.
            let reference = HeaderValue::from_bytes(&value)
                .ok()
                .and_then(|v| v.to_str().ok().map(str::to_owned));
            assert_eq!(text(&value).map(str::to_owned), reference, "byte {b:#04x}");
        }
        assert_eq!(text(b""), Some(""));
        assert_eq!(text(b"Bearer npub_dev_ab"), Some("Bearer npub_dev_ab"));
        assert_eq!(text(b"Bearer \xc3\xa9"), None);
        assert_eq!(text(b"Bearer \x7f"), None);
    }
}
