//! `npub inspect FILE [--json]`: the annotated header and region table in the spec's style, the arena
//! a device must provide, and the checksum verdict. Works on invalid packs too (exit 1 then).
use std::fmt::Write as _;
use std::path::PathBuf;

use npub_core::Accel;
use npub_core::inspect::{Inspection, report};

use super::pack_io::io_json_path;
use super::{Failure, read_file};

/// Arguments of `npub inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The `.npub` file.
    file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// The IO-bindings JSON (default: `FILE.io.json` or `FILE` with extension `.io.json`, if present).
    #[arg(long, value_name = "IO_JSON")]
    io: Option<PathBuf>,
}

/// Runs `npub inspect`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.file)?;
    let mut r = report(&bytes);
    if let Some(path) = io_json_path(&args.file, args.io.as_deref())? {
        let text = String::from_utf8(read_file(&path)?)
            .map_err(|_| Failure::Rejected(format!("{}: not UTF-8", path.display())))?;
        let doc = serde_json::from_str(&text)
            .map_err(|e| Failure::Rejected(format!("{}: {e}", path.display())))?;
        npub_core::io_bindings::from_json(&text)
            .map_err(|e| Failure::Rejected(format!("{}: {e}", path.display())))?;
        r.io = Some(doc);
    }
    if args.json {
        let text = serde_json::to_string_pretty(&r)
            .map_err(|e| Failure::Usage(format!("cannot encode the report: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", render(&args.file.display().to_string(), &r));
    }
    // As in `npub verify`: a stream is held to the Ethos-U verifier's verdict only when the header
    // names an Ethos-U configuration (the report still shows the verdict either way).
    let named = !matches!(r.accel, None | Some(Accel::Unspecified | Accel::Unknown(_)));
    let stream_error = r.command_stream_error.filter(|_| named);
    match r.error.or(stream_error) {
        None => Ok(()),
        Some(e) => Err(Failure::Rejected(e)),
    }
}

/// The human-readable report.
fn render(name: &str, r: &Inspection) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{name}: {} bytes", r.bytes);
    if r.header.is_empty() {
        let _ = writeln!(out, "no header: fewer than 32 bytes");
        return out;
    }
    let _ = writeln!(out, "\nHeader");
    let _ = writeln!(out, "| Bytes | Hex         | Field        | Decoded");
    let _ = writeln!(out, "|-------|-------------|--------------|--------");
    for row in &r.header {
        let _ = writeln!(
            out,
            "| {:<5} | {} | {:<12} | {}",
            row.bytes, row.hex, row.field, row.decoded
        );
    }
    if !r.regions.is_empty() {
        let _ = writeln!(out, "\nRegions (index = BASEPn; role is informational)");
        let _ = writeln!(
            out,
            "| #  | Role      | Flags      | Kind    | Size       | Data offset"
        );
        let _ = writeln!(
            out,
            "|----|-----------|------------|---------|------------|------------"
        );
        for d in &r.regions {
            let (kind, offset) = if d.is_baked() {
                ("BAKED", d.data_offset.to_string())
            } else {
                ("RUNTIME", "-".to_string())
            };
            let _ = writeln!(
                out,
                "| {:<2} | {:<9} | {:#010x} | {:<7} | {:>10} | {}",
                d.index,
                d.role.to_string(),
                d.flags,
                kind,
                d.size,
                offset
            );
        }
    }
    if let (Some(any), Some(aligned)) = (r.arena_bytes, r.arena_bytes_aligned) {
        let _ = writeln!(
            out,
            "\nArena: {any} bytes for any start address (npub verify --arena {any}), \
             {aligned} if the arena is 16-byte aligned (npub verify --arena {aligned} --arena-aligned)"
        );
    }
    if let Some(io) = &r.io {
        let _ = writeln!(out, "\nIO bindings (sha256 {})", io.sha256);
        let _ = writeln!(
            out,
            "| Kind   | #  | Name                 | Region | Offset     | Bytes      | Shape            | Dtype  | Scale        | Zero point"
        );
        for b in &io.bindings {
            let shape = b
                .shape
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x");
            let _ = writeln!(
                out,
                "| {:<6} | {:<2} | {:<20} | {:<6} | {:>10} | {:>10} | {:<16} | {:<6} | {:<12} | {}",
                b.kind,
                b.index,
                b.name,
                b.region,
                b.offset,
                b.bytes,
                shape,
                b.dtype,
                b.scale,
                b.zero_point
            );
        }
    }
    match (&r.command_stream, &r.command_stream_error) {
        (Some(summary), _) => {
            let _ = writeln!(out, "\nCommand stream: {summary}");
        }
        (None, Some(e)) => {
            let _ = writeln!(out, "\nCommand stream: REFUSED: {e}");
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "SHA-256: {}", r.sha256);
    if let Some(c) = r.checksum {
        let verdict = if c.ok { "ok" } else { "MISMATCH" };
        let _ = writeln!(
            out,
            "Checksum: stored {:#010x}, computed {:#010x}: {verdict}",
            c.stored, c.computed
        );
    }
    match r.error.as_ref().or(r.command_stream_error.as_ref()) {
        None => {
            let _ = writeln!(
                out,
                "Verdict: valid NPU1 pack; every command stays inside its regions"
            );
        }
        Some(e) => {
            let _ = writeln!(out, "Verdict: INVALID: {e}");
        }
    }
    out
}
