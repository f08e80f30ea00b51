//! Fixed-width text fields: UTF-8, zero-padded, never empty, no control characters.
//!
//! A field of width *w* holds *n* bytes of UTF-8 (1 ≤ *n* ≤ *w*) followed by *w − n* zero bytes.
//! The first zero byte ends the text, and every byte after it must be zero too, so that each text
//! has exactly one encoding (a signer cannot hide bytes behind a NUL that a display would cut).
//! Control characters are refused because names end up in logs, terminals and JSON.
use crate::{Error, ManifestError};

/// The text in `raw`, after checking the padding, the UTF-8 and the characters.
pub(crate) fn decode<'a>(field: &'static str, raw: &'a [u8]) -> Result<&'a str, Error> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    if let Some(stray) = raw[end..].iter().position(|&b| b != 0) {
        return Err(Error::Manifest(ManifestError::TextBadPadding {
            field,
            offset: (end + stray) as u32,
        }));
    }
    let text = core::str::from_utf8(&raw[..end]).map_err(|e| {
        Error::Manifest(ManifestError::TextNotUtf8 {
            field,
            offset: e.valid_up_to() as u32,
        })
    })?;
    check(field, text)?;
    Ok(text)
}

/// Writes `text` into `out` (the field's full width), zero-padded.
pub(crate) fn encode(field: &'static str, text: &str, out: &mut [u8]) -> Result<(), Error> {
    check(field, text)?;
    if text.len() > out.len() {
        return Err(Error::Manifest(ManifestError::TextTooLong {
            field,
            len: text.len() as u32,
            max: out.len() as u32,
        }));
    }
    out.fill(0);
    out[..text.len()].copy_from_slice(text.as_bytes());
    Ok(())
}

/// Not empty, no control character (NUL included, so no text can end early).
fn check(field: &'static str, text: &str) -> Result<(), Error> {
    if text.is_empty() {
        return Err(Error::Manifest(ManifestError::TextEmpty { field }));
    }
    if let Some((offset, _)) = text.char_indices().find(|(_, c)| c.is_control()) {
        return Err(Error::Manifest(ManifestError::TextControlChar {
            field,
            offset: offset as u32,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_text_filling_the_field_exactly() {
        let mut out = [0xffu8; 8];
        encode("f", "résumé", &mut out).unwrap();
        assert_eq!(decode("f", &out), Ok("résumé"));
        encode("f", "12345678", &mut out).unwrap();
        assert_eq!(decode("f", &out), Ok("12345678"));
    }

    #[test]
    fn rejects_bytes_after_the_padding_began() {
        assert_eq!(
            decode("f", b"ab\0\0x\0\0\0"),
            Err(Error::Manifest(ManifestError::TextBadPadding {
                field: "f",
                offset: 4
            }))
        );
    }

    #[test]
    fn rejects_invalid_utf8() {
        assert_eq!(
            decode("f", b"ab\xff\0\0\0\0\0"),
            Err(Error::Manifest(ManifestError::TextNotUtf8 {
                field: "f",
                offset: 2
            }))
        );
    }

    #[test]
    fn rejects_empty_and_control_characters() {
        assert_eq!(
            decode("f", &[0; 8]),
            Err(Error::Manifest(ManifestError::TextEmpty { field: "f" }))
        );
        assert_eq!(
            decode("f", b"a\x1b[31m\0\0"),
            Err(Error::Manifest(ManifestError::TextControlChar {
                field: "f",
                offset: 1
            }))
        );
        let mut out = [0u8; 8];
        assert_eq!(
            encode("f", "a\0b", &mut out),
            Err(Error::Manifest(ManifestError::TextControlChar {
                field: "f",
                offset: 1
            }))
        );
    }

    #[test]
    fn rejects_text_wider_than_the_field() {
        let mut out = [0u8; 4];
        assert_eq!(
            encode("f", "abcde", &mut out),
            Err(Error::Manifest(ManifestError::TextTooLong {
                field: "f",
                len: 5,
                max: 4
            }))
        );
    }
}
