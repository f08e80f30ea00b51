//! What an upload is, and whether it may be stored: every check npub-core has, before anything
//! is stored.
//!
//! Recognised by content, never by file name or `Content-Type`:
//!
//! | First bytes                         | Format              | What happens                               |
//! |-------------------------------------|---------------------|--------------------------------------------|
//! | bytes 4..8 = `TFL3` (flatbuffer id) | Vela `*_vela.tflite` | `npub_core::vela::import` builds the pack  |
//! | `PK\x03\x04` (zip)                  | Vela `.npz`          | `npub_core::vela::import` builds the pack  |
//! | anything else                       | `.npub`              | the upload *is* the pack                   |
//!
//! Anything that is neither Vela format is judged as a `.npub`, so that a pack with a wrong magic
//! or one shorter than its header is refused with npub-core's own message ("magic is …", "the
//! buffer is 3 bytes …") rather than a vaguer "unknown format".
//!
//! A pack then passes, in order: every NPU1 check (`Blob::parse`), the Ethos-U55 command-stream
//! verifier (`cmdstream::verify_blob`), and, when IO bindings are declared, their own checks and
//! `check_against` the pack's regions. A model that fixes its accelerator refuses packs compiled
//! for another.
use npub_core::io_bindings::{self, IoBindings};
use npub_core::{Accel, Blob, arena_bytes_required, cmdstream, inspect};

use crate::http::error::ApiError;
use crate::store::to_hex;

/// The upload's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// An NPU1 pack.
    Npub,
    /// Vela's optimised `.tflite` (one `ethos-u` custom operator).
    Tflite,
    /// Vela's raw output (`--output-format raw`), a zip of `.npy` arrays.
    Npz,
}

impl SourceKind {
    /// The name stored in `versions.source` and used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Npub => "npub",
            Self::Tflite => "tflite",
            Self::Npz => "npz",
        }
    }
}

/// Classifies an upload by its first bytes.
pub fn recognise(head: &[u8]) -> SourceKind {
    if head.get(4..8) == Some(b"TFL3") {
        SourceKind::Tflite
    } else if head.starts_with(b"PK\x03\x04") {
        SourceKind::Npz
    } else {
        SourceKind::Npub
    }
}

/// The facts about an accepted pack that the `versions` row records.
#[derive(Debug)]
pub struct Accepted {
    /// What was uploaded.
    pub kind: SourceKind,
    /// The pack, when it is not the upload itself (a Vela import built it).
    pub built_pack: Option<Vec<u8>>,
    /// NPU1 `total_bytes`.
    pub size: u64,
    /// NPU1 header word 7.
    pub checksum: u32,
    /// NPU1 header word 6.
    pub accel: Accel,
    /// Descriptors in the region table.
    pub region_count: u32,
    /// `npub_core::arena_bytes_required`.
    pub arena_bytes: u64,
    /// `npub_core::inspect::report`, as JSON, with the Vela import's warnings (if any) under
    /// `vela_warnings`, so that they are stored with the version.
    pub report: serde_json::Value,
    /// The command-stream verifier's summary, as JSON.
    pub stream: serde_json::Value,
    /// Declared IO bindings: npub-core's JSON form and the canonical encoding's digest (hex).
    pub io: Option<(String, String)>,
}

/// Judges an upload. `io_json` is the optional `io` part of a multipart `.npub` upload.
/// `model_accel` is the accelerator the model requires, if any.
///
/// Pure and synchronous (CPU-bound): run it on a blocking thread.
pub fn judge(
    upload: &[u8],
    io_json: Option<&str>,
    model_accel: Option<Accel>,
) -> Result<Accepted, ApiError> {
    let kind = recognise(upload);
    let mut warnings: Vec<String> = Vec::new();
    let (built_pack, io_canonical) = match kind {
        SourceKind::Npub => {
            let io = io_json
                .map(|text| io_bindings::from_json(text).map(|(_, canonical)| canonical))
                .transpose()
                .map_err(|e| ApiError::InvalidPack(format!("io bindings: {e}")))?;
            (None, io)
        }
        SourceKind::Tflite | SourceKind::Npz => {
            if io_json.is_some() {
                return Err(ApiError::invalid(
                    "an `io` part is accepted only with a .npub: a Vela model's IO bindings \
                     come from the model itself",
                ));
            }
            let imported = npub_core::vela::import(upload).map_err(rejected)?;
            warnings = imported.warnings.iter().map(ToString::to_string).collect();
            let canonical = if imported.io.is_empty() {
                None
            } else {
                Some(io_bindings::encode(&imported.io).map_err(rejected)?)
            };
            (Some(imported.pack), canonical)
        }
    };
    let pack = built_pack.as_deref().unwrap_or(upload);
    let blob = Blob::parse(pack).map_err(rejected)?;
    let summary = cmdstream::verify_blob(&blob).map_err(rejected)?;
    let io = match io_canonical {
        None => None,
        Some(canonical) => {
            let parsed = IoBindings::parse(&canonical)
                .map_err(|e| ApiError::InvalidPack(format!("io bindings: {e}")))?;
            parsed
                .check_against(&blob)
                .map_err(|e| ApiError::InvalidPack(format!("io bindings: {e}")))?;
            let json = io_bindings::to_json(&parsed.iter().collect::<Vec<_>>())
                .map_err(|e| ApiError::InvalidPack(format!("io bindings: {e}")))?;
            Some((json, to_hex(&io_bindings::digest(&canonical))))
        }
    };
    let accel = blob.accel();
    if let Some(want) = model_accel
        && want != accel
    {
        return Err(ApiError::InvalidPack(format!(
            "NPU1 header: accel is {} but this model's versions must be compiled for {}",
            accel.name(),
            want.name()
        )));
    }
    let header = blob.header();
    let mut report = to_json(&inspect::report(pack))?;
    if !warnings.is_empty()
        && let Some(object) = report.as_object_mut()
    {
        object.insert("vela_warnings".into(), serde_json::json!(warnings));
    }
    Ok(Accepted {
        kind,
        size: pack.len() as u64,
        checksum: header.checksum,
        accel,
        region_count: blob.region_count(),
        arena_bytes: arena_bytes_required(&blob),
        report,
        stream: to_json(&summary)?,
        io,
        built_pack,
    })
}

fn rejected(e: npub_core::Error) -> ApiError {
    ApiError::InvalidPack(e.to_string())
}

fn to_json(value: &impl serde::Serialize) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_by_content() {
        assert_eq!(recognise(b"\x18\0\0\0TFL3\0\0"), SourceKind::Tflite);
        assert_eq!(recognise(b"PK\x03\x04rest"), SourceKind::Npz);
        assert_eq!(recognise(b"NPU1"), SourceKind::Npub);
        assert_eq!(recognise(b""), SourceKind::Npub);
        assert_eq!(
            recognise(b"PK\x05\x06"),
            SourceKind::Npub,
            "an empty zip is no Vela output"
        );
    }
}
