//! Import of Arm Vela output into an NPU1 pack and its IO bindings (feature `std`: host only).
//!
//! [`import`] recognises the file by its content — Vela's optimised `.tflite` (a flatbuffer whose
//! file identifier is `TFL3`) or its raw `.npz` (a zip) — and maps it onto NPU1:
//!
//! | NPU1                  | from the `.tflite`                    | from the `.npz`              |
//! |-----------------------|---------------------------------------|------------------------------|
//! | command stream        | `ethos-u` input 0 minus its COP1 header | `cmd_data` minus its COP1 header |
//! | padding before the stream | that COP1 header, ending at `cmd_offset` | idem |
//! | `accel`               | the COP1 config word                  | idem                         |
//! | region 0, weights, BAKED  | `ethos-u` input 1 (`read_only`)   | `weight_data`                |
//! | region 1, scratch, RUNTIME | input 2's tensor size            | `scratch_size`               |
//! | region 2, scratch, RUNTIME | input 3's tensor size, 0 when it is input 2 again | `scratch_fast_size` |
//! | IO bindings           | inputs 4.. and the outputs, at their `OfflineMemoryAllocation` offsets | `input_*` / `output_*` |
//!
//! Descriptor 2 is kept even when scratch_fast is empty, so that every region's index stays its
//! BASEP slot. Both forms of one compilation give byte-identical packs; their IO bindings differ
//! only where the raw format records less (no names, no element types, shapes padded to rank 6).
//!
//! Refused, each with a message that says what to change: COP2 payloads (`--cop-format COP2`,
//! `--separate-io-regions`) and targets other than an Ethos-U55 (U65, U85) — both checked as soon
//! as the payload is found, before any IO metadata —, operators left on the CPU, more than one
//! `ethos-u` operator, and anything structurally inconsistent.
use crate::format::build::{RegionSpec, build_pack_for_driver};
use crate::format::{Accel, Role};
use crate::io_bindings::{self, IoBinding, IoKind};
use crate::{Error, VelaError};

mod builtin_ops;
mod extracted;
mod fb;
mod npz;
mod tflite;
mod warning;

pub use crate::format::cop1::{self, Cop1Info};
pub use warning::Warning;

use extracted::screen;

/// Which of Vela's two output forms was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The optimised `*_vela.tflite`.
    Tflite,
    /// The raw `*_vela.npz` (`--output-format raw`).
    Npz,
}

/// An imported compilation.
#[derive(Debug, Clone, PartialEq)]
pub struct VelaImport {
    /// The NPU1 pack.
    pub pack: Vec<u8>,
    /// Where the model's inputs and outputs live (inputs in order, then outputs).
    pub io: Vec<IoBinding>,
    /// The accelerator configuration the stream was compiled for.
    pub accel: Accel,
    /// The COP1 payload header.
    pub cop1: Cop1Info,
    /// The form imported.
    pub source: SourceKind,
    /// What was accepted without being trusted (IO metadata of the raw form), in file order.
    pub warnings: Vec<Warning>,
}

impl VelaImport {
    /// The canonical encoding of [`Self::io`] (what the manifest digests).
    pub fn io_encoding(&self) -> Vec<u8> {
        // `import` encoded these bindings once already; encoding is deterministic.
        io_bindings::encode(&self.io).unwrap_or_default()
    }

    /// Whether the quantisation of binding `kind` `index` is known. When it is not, the binding
    /// holds scale 0 and zero point 0 — which the binding format reads as "not quantised" — and a
    /// [`Warning`] says why.
    pub fn quantisation_known(&self, kind: IoKind, index: u32) -> bool {
        !self
            .warnings
            .iter()
            .any(|w| w.io() == Some((kind, index)) || w.kind_wide() == Some(kind))
    }

    /// The JSON form of [`Self::io`] (`OUT.io.json`).
    pub fn io_json(&self) -> String {
        io_bindings::to_json(&self.io).unwrap_or_default()
    }
}

/// Local file header signature of a zip archive ("PK\x03\x04"), what an `.npz` starts with.
const ZIP_MAGIC: [u8; 4] = *b"PK\x03\x04";

/// Imports Vela output, recognised by content. No `.npz` member may hold more than the input.
pub fn import(bytes: &[u8]) -> Result<VelaImport, Error> {
    import_limited(bytes, u64::MAX)
}

/// [`import`], refusing any `.npz` member that claims more than `member_limit` bytes (e.g. a
/// server's upload limit). Nothing is allocated from a size the file claims.
pub fn import_limited(bytes: &[u8], member_limit: u64) -> Result<VelaImport, Error> {
    let (source, parts) = if fb::Fb::is_tflite(bytes) {
        (SourceKind::Tflite, tflite::extract(bytes)?)
    } else if bytes.starts_with(&ZIP_MAGIC) {
        (SourceKind::Npz, npz::extract(bytes, member_limit)?)
    } else {
        let mut magic = [0u8; 4];
        let n = bytes.len().min(4);
        magic[..n].copy_from_slice(&bytes[..n]);
        return Err(Error::Vela(VelaError::UnknownFormat {
            magic: u32::from_le_bytes(magic),
        }));
    };
    let payload = screen(&parts.payload)?;
    let size = |region: u32, bytes: u64| {
        u32::try_from(bytes).map_err(|_| Error::Vela(VelaError::RegionTooLarge { region, bytes }))
    };
    let regions = [
        RegionSpec::Baked {
            role: Role::Weights,
            bytes: &parts.weights,
        },
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: size(1, parts.scratch)?,
        },
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: size(2, parts.scratch_fast)?,
        },
    ];
    // The payload's header goes into the pack right before the stream, so that the device hands
    // Arm's driver its payload in place (see `format::cop1::driver_payload`).
    let head = &parts.payload[..payload.info.cmd_offset as usize];
    let pack = build_pack_for_driver(head, payload.stream, &regions, payload.accel)?;
    // Refuse here, not on the device, bindings the canonical encoding cannot hold.
    io_bindings::encode(&parts.io)?;
    Ok(VelaImport {
        pack,
        io: parts.io,
        accel: payload.accel,
        cop1: payload.info,
        source,
        warnings: parts.warnings,
    })
}
