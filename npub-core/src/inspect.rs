//! What `npub inspect` shows and the server's version detail returns (feature `std`).
//!
//! A report is built from raw bytes, valid or not: an operator looking at a rejected pack wants to
//! see the header words and the descriptors that were readable next to the reason it was refused.
use std::string::String;
use std::vec::Vec;

use serde::Serialize;

use crate::cmdstream::{self, StreamSummary};
use crate::format::{HEADER_BYTES, Header, REGION_DESC_BYTES, RegionDesc};
use crate::io_bindings::IoBindingsJson;
use crate::{Accel, Blob, arena_bytes_required, arena_bytes_required_aligned, fnv};

/// One annotated header word, in the spec's table style.
#[derive(Debug, Clone, Serialize)]
pub struct FieldRow {
    /// Byte range, e.g. `"0-3"`.
    pub bytes: String,
    /// The four bytes as stored, e.g. `"4E 50 55 31"`.
    pub hex: String,
    /// Field name.
    pub field: &'static str,
    /// The word's value.
    pub value: u32,
    /// What it means.
    pub decoded: String,
}

/// The payload checksum's verdict.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChecksumReport {
    /// Header word 7.
    pub stored: u32,
    /// FNV-1a of bytes `32..` of the buffer.
    pub computed: u32,
    /// Whether they agree.
    pub ok: bool,
}

/// Everything `npub inspect` knows about a buffer.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// The buffer's length.
    pub bytes: u64,
    /// The header words, annotated (empty below 32 bytes).
    pub header: Vec<FieldRow>,
    /// Decoded accelerator config, when a header was readable.
    pub accel: Option<Accel>,
    /// The descriptors that lie inside the buffer, in BASEP order.
    pub regions: Vec<RegionDesc>,
    /// Arena bytes a device must provide for any arena start address (valid packs only).
    pub arena_bytes: Option<u64>,
    /// Arena bytes when the arena starts 16-byte aligned (valid packs only).
    pub arena_bytes_aligned: Option<u64>,
    /// The checksum verdict (when a header was readable).
    pub checksum: Option<ChecksumReport>,
    /// Whether every NPU1 check passed.
    pub valid: bool,
    /// The first check that failed, as the loader words it.
    pub error: Option<String>,
    /// Lower-case hex SHA-256 of the whole buffer (what a signed manifest names).
    pub sha256: String,
    /// The command-stream verifier's summary: operations, regions used, accessed span per region
    /// (valid packs whose stream passed the verifier).
    pub command_stream: Option<StreamSummary>,
    /// Why the command-stream verifier refused the stream (valid NPU1 packs only).
    pub command_stream_error: Option<String>,
    /// The IO bindings that travel beside the pack, when the caller has them.
    pub io: Option<IoBindingsJson>,
}

/// Builds the report for `bytes`.
pub fn report(bytes: &[u8]) -> Inspection {
    let parsed = Blob::parse(bytes);
    let header = Header::read(bytes);
    let (command_stream, command_stream_error) = match parsed.as_ref().map(cmdstream::verify_blob) {
        Ok(Ok(summary)) => (Some(summary), None),
        Ok(Err(e)) => (None, Some(e.to_string())),
        Err(_) => (None, None),
    };
    let (arena_bytes, arena_bytes_aligned) = match &parsed {
        Ok(blob) => (
            Some(arena_bytes_required(blob)),
            Some(arena_bytes_required_aligned(blob)),
        ),
        Err(_) => (None, None),
    };
    Inspection {
        bytes: bytes.len() as u64,
        header: header.map(|h| header_rows(bytes, &h)).unwrap_or_default(),
        accel: header.map(|h| h.accel()),
        regions: header
            .map(|h| readable_regions(bytes, &h))
            .unwrap_or_default(),
        arena_bytes,
        arena_bytes_aligned,
        checksum: header.map(|h| {
            let computed = fnv::fnv1a32(&bytes[HEADER_BYTES as usize..]);
            ChecksumReport {
                stored: h.checksum,
                computed,
                ok: computed == h.checksum,
            }
        }),
        valid: parsed.is_ok(),
        error: parsed.err().map(|e| e.to_string()),
        sha256: sha256_hex(bytes),
        command_stream,
        command_stream_error,
        io: None,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn header_rows(bytes: &[u8], h: &Header) -> Vec<FieldRow> {
    const NAMES: [&str; 8] = [
        "magic",
        "version",
        "total_bytes",
        "region_count",
        "cmd_offset",
        "cmd_bytes",
        "accel",
        "checksum",
    ];
    h.words()
        .iter()
        .zip(NAMES)
        .enumerate()
        .map(|(i, (&value, field))| {
            let at = i * 4;
            let hex = bytes[at..at + 4]
                .iter()
                .map(|b| format!("{b:02X}"))
                .collect::<Vec<_>>()
                .join(" ");
            FieldRow {
                bytes: format!("{at}-{}", at + 3),
                hex,
                field,
                value,
                decoded: decode_word(field, value, bytes),
            }
        })
        .collect()
}

fn decode_word(field: &str, value: u32, bytes: &[u8]) -> String {
    match field {
        "magic" => {
            let ascii: String = value
                .to_le_bytes()
                .iter()
                .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
                .collect();
            format!("{value:#010X}, reads \"{ascii}\"")
        }
        "total_bytes" => format!("{value:#X} = {value} bytes (buffer: {})", bytes.len()),
        "cmd_offset" => format!("{value:#X} = {value}"),
        "cmd_bytes" => format!("{value:#X} = {value} bytes"),
        "accel" => format!("{} (informational)", Accel::from_word(value)),
        "checksum" => format!("{value:#010X}, FNV-1a over bytes 32..total_bytes"),
        _ => value.to_string(),
    }
}

fn readable_regions(bytes: &[u8], h: &Header) -> Vec<RegionDesc> {
    let available =
        (bytes.len() as u64).saturating_sub(u64::from(HEADER_BYTES)) / u64::from(REGION_DESC_BYTES);
    let n = u64::from(h.region_count).min(available) as u32;
    (0..n)
        .filter_map(|i| {
            let at = HEADER_BYTES as usize + i as usize * REGION_DESC_BYTES as usize;
            RegionDesc::read(i, &bytes[at..])
        })
        .collect()
}
