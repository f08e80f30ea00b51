//! `npub verify FILE [--arena BYTES] [--format-only] [--json]`: exit 0 when the pack is valid — NPU1
//! checks, then the Ethos-U55 command-stream verifier (every operation inside its regions) unless
//! `--format-only`, and, with `--arena`, binding into an arena of that many bytes — exit 1 with the
//! first reason it is not.
use std::path::PathBuf;

use npub_core::{Blob, bind, cmdstream};

use super::{Failure, read_file};

/// Arguments of `npub verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The `.npub` file.
    file: PathBuf,
    /// Also bind it for the Ethos-U55 into an arena of this many bytes (worst-case alignment).
    #[arg(long, value_name = "BYTES")]
    arena: Option<u64>,
    /// Check the NPU1 container only, not the command stream (for packs whose stream is not an
    /// Ethos-U stream).
    #[arg(long)]
    format_only: bool,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `npub verify`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.file)?;
    let verdict = check(&bytes, args.arena, !args.format_only);
    if args.json {
        let value = match &verdict {
            Ok(()) => serde_json::json!({ "valid": true }),
            Err(e) => serde_json::json!({ "valid": false, "error": e }),
        };
        println!("{value}");
    }
    verdict.map_err(Failure::Rejected)
}

fn check(bytes: &[u8], arena: Option<u64>, commands: bool) -> Result<(), String> {
    let blob = Blob::parse(bytes).map_err(|e| e.to_string())?;
    if commands {
        cmdstream::verify_blob(&blob).map_err(|e| e.to_string())?;
    }
    if let Some(len) = arena {
        let len = usize::try_from(len).map_err(|_| format!("--arena {len} is too large"))?;
        // Bind at a deliberately misaligned start, so that "fits" means "fits wherever the device's
        // arena happens to start" — the guarantee `arena_bytes_required` gives.
        let mut buffer = vec![0u8; len + 16];
        let start = misaligned_start(&buffer);
        bind(&blob, &mut buffer[start..start + len]).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// An offset into `buffer` whose address is one byte past a 16-byte boundary: the worst case for
/// carving 16-byte-aligned regions.
fn misaligned_start(buffer: &[u8]) -> usize {
    let addr = buffer.as_ptr() as usize;
    (17 - addr % 16) % 16
}
