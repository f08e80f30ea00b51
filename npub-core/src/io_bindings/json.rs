//! The JSON form of IO bindings (`OUT.io.json`, feature `std`), documented in `docs/io-bindings.md`.
//!
//! It says exactly what the canonical encoding says, field for field, plus the SHA-256 of that
//! encoding: [`from_json`] rebuilds the encoding and refuses a file whose digest disagrees, so a
//! hand-edited JSON cannot drift from what the signed manifest covers.
use serde::{Deserialize, Serialize};

use super::{Dtype, IoBinding, IoKind, NAME_BYTES, Name, Shape, digest, encode};
use crate::{Error, IoBindingsError};

/// The `format` field's value.
pub const JSON_FORMAT: &str = "npub-io-bindings";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoBindingsJson {
    /// Always [`JSON_FORMAT`].
    pub format: String,
    /// The canonical encoding's version ([`super::VERSION`]).
    pub version: u32,
    /// Lower-case hex SHA-256 of the canonical encoding ([`digest`]).
    pub sha256: String,
    /// Inputs in index order, then outputs in index order.
    pub bindings: Vec<BindingJson>,
}

/// One binding; the fields of [`IoBinding`], with names instead of codes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingJson {
    /// `"input"` or `"output"`.
    pub kind: String,
    /// The model's input (or output) number.
    pub index: u32,
    /// Tensor name, at most 48 bytes of UTF-8.
    pub name: String,
    /// Region (BASEP slot).
    pub region: u8,
    /// Byte offset inside the region.
    pub offset: u32,
    /// Size in bytes.
    pub bytes: u32,
    /// Dimensions (rank ≤ 6).
    pub shape: Vec<u32>,
    /// `"int8"`, `"uint8"`, …, or `"bits8"`… when the source recorded only the element size.
    pub dtype: String,
    /// Quantisation scale; 0 when not quantised.
    pub scale: f32,
    /// Quantisation zero point; 0 when not quantised.
    pub zero_point: i32,
}

impl From<&IoBinding> for BindingJson {
    fn from(b: &IoBinding) -> Self {
        BindingJson {
            kind: b.kind.name().into(),
            index: b.index,
            name: b.name.as_str().into(),
            region: b.region,
            offset: b.offset,
            bytes: b.bytes,
            shape: b.shape.dims().to_vec(),
            dtype: b.dtype.name().into(),
            scale: b.scale,
            zero_point: b.zero_point,
        }
    }
}

impl BindingJson {
    fn to_binding(&self, binding: u32) -> Result<IoBinding, Error> {
        let bad = |field| Error::IoBindings(IoBindingsError::JsonField { binding, field });
        let kind = match self.kind.as_str() {
            "input" => IoKind::Input,
            "output" => IoKind::Output,
            _ => return Err(bad("kind")),
        };
        if self.name.len() > NAME_BYTES || self.name.contains('\0') {
            return Err(bad("name"));
        }
        Ok(IoBinding {
            kind,
            index: self.index,
            name: Name::truncated(&self.name),
            region: self.region,
            offset: self.offset,
            bytes: self.bytes,
            shape: Shape::new(&self.shape).ok_or(bad("shape"))?,
            dtype: Dtype::from_name(&self.dtype).ok_or(bad("dtype"))?,
            scale: self.scale,
            zero_point: self.zero_point,
        })
    }
}

/// The JSON text for `bindings` (pretty-printed, ending in a newline), after checking that they
/// encode canonically.
pub fn to_json(bindings: &[IoBinding]) -> Result<String, Error> {
    let canonical = encode(bindings)?;
    let doc = IoBindingsJson {
        format: JSON_FORMAT.into(),
        version: super::VERSION,
        sha256: hex(&digest(&canonical)),
        bindings: bindings.iter().map(BindingJson::from).collect(),
    };
    // Serialising plain structs of strings and numbers cannot fail.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

/// Reads a JSON file back: the bindings and their canonical encoding, refusing a file whose
/// `sha256` is not the digest of that encoding.
pub fn from_json(text: &str) -> Result<(Vec<IoBinding>, Vec<u8>), Error> {
    let doc: IoBindingsJson = serde_json::from_str(text).map_err(|e| {
        Error::IoBindings(IoBindingsError::JsonSyntax {
            line: e.line() as u64,
            column: e.column() as u64,
        })
    })?;
    if doc.format != JSON_FORMAT {
        return Err(Error::IoBindings(IoBindingsError::JsonField {
            binding: u32::MAX,
            field: "format",
        }));
    }
    if doc.version != super::VERSION {
        return Err(Error::IoBindings(IoBindingsError::UnsupportedVersion {
            found: doc.version,
        }));
    }
    let bindings = doc
        .bindings
        .iter()
        .enumerate()
        .map(|(i, b)| b.to_binding(i as u32))
        .collect::<Result<Vec<_>, _>>()?;
    let canonical = encode(&bindings)?;
    if hex(&digest(&canonical)) != doc.sha256 {
        return Err(Error::IoBindings(IoBindingsError::JsonDigestMismatch));
    }
    Ok((bindings, canonical))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<IoBinding> {
        vec![IoBinding {
            kind: IoKind::Input,
            index: 0,
            name: Name::truncated("input_a"),
            region: 1,
            offset: 0,
            bytes: 1024,
            shape: Shape::new(&[1, 8, 8, 16]).unwrap(),
            dtype: Dtype::Int8,
            scale: 0.02,
            zero_point: 0,
        }]
    }

    #[test]
    fn round_trips_and_carries_the_digest() {
        let text = to_json(&sample()).unwrap();
        assert!(text.contains("\"scale\": 0.02"), "{text}");
        let (back, canonical) = from_json(&text).unwrap();
        assert_eq!(back, sample());
        assert_eq!(canonical, encode(&sample()).unwrap());
    }

    #[test]
    fn rejects_edited_json() {
        let text = to_json(&sample())
            .unwrap()
            .replace("\"offset\": 0", "\"offset\": 16");
        assert_eq!(
            from_json(&text).unwrap_err(),
            Error::IoBindings(IoBindingsError::JsonDigestMismatch)
        );
        let text = to_json(&sample()).unwrap().replace("int8", "int9");
        assert_eq!(
            from_json(&text).unwrap_err(),
            Error::IoBindings(IoBindingsError::JsonField {
                binding: 0,
                field: "dtype"
            })
        );
        assert!(matches!(
            from_json("{"),
            Err(Error::IoBindings(IoBindingsError::JsonSyntax {
                line: 1,
                ..
            }))
        ));
    }
}
