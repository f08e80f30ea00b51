//! `npub verify FILE [--arena BYTES [--arena-aligned]] [--format-only | --commands] [--json]`: exit 0 when the pack is
//! valid — the NPU1 checks, then the Ethos-U command-stream verifier (every operation inside its
//! regions), and, with `--arena`, binding into an arena of that many bytes — exit 1 with the first
//! reason it is not.
//!
//! Which streams are verified: NPU1's `accel` word is informational and the spec's own example
//! leaves it 0, so a pack whose header names no Ethos-U configuration (unspecified or an unassigned
//! value) carries a stream nothing says is an Ethos-U stream. For those the container is checked
//! and a note on stderr says the stream was not; `--commands` checks it anyway, `--format-only`
//! never does. Every pack `npub pack` makes names its configuration, so it is always verified, and
//! the server and the device agent run the verifier on every pack whatever its `accel` says.
use std::path::PathBuf;

use npub_core::{Accel, Blob, bind, cmdstream};

use super::{Failure, read_file};

/// Arguments of `npub verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The `.npub` file.
    file: PathBuf,
    /// Also bind it for the Ethos-U55 into an arena of this many bytes starting at any address
    /// (the first size `npub inspect` reports).
    #[arg(long, value_name = "BYTES")]
    arena: Option<u64>,
    /// The `--arena` starts 16-byte aligned, as a linker-placed arena does (the second, smaller
    /// size `npub inspect` reports).
    #[arg(long, requires = "arena")]
    arena_aligned: bool,
    /// Check the NPU1 container only, not the command stream (for packs whose stream is not an
    /// Ethos-U stream).
    #[arg(long)]
    format_only: bool,
    /// Verify the command stream even when the header names no Ethos-U configuration.
    #[arg(long, conflicts_with = "format_only")]
    commands: bool,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `npub verify`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.file)?;
    let verdict = check(&bytes, &args);
    if args.json {
        let value = match &verdict {
            Ok(stream) => serde_json::json!({ "valid": true, "command_stream": stream.name() }),
            Err(e) => serde_json::json!({ "valid": false, "error": e }),
        };
        println!("{value}");
    }
    match verdict {
        Ok(Stream::Unnamed(accel)) if !args.format_only => {
            eprintln!(
                "npub: note: the header's accel ({accel}) names no Ethos-U configuration, so the \
                 command stream was not verified; --commands verifies it anyway"
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::Rejected(e)),
    }
}

/// What became of the command stream.
enum Stream {
    /// Verified: every operation stays inside its regions.
    Checked,
    /// Not verified: `--format-only`, or the header names no Ethos-U configuration.
    Unnamed(Accel),
}

impl Stream {
    fn name(&self) -> &'static str {
        match self {
            Stream::Checked => "checked",
            Stream::Unnamed(_) => "not checked",
        }
    }
}

fn check(bytes: &[u8], args: &Args) -> Result<Stream, String> {
    let blob = Blob::parse(bytes).map_err(|e| e.to_string())?;
    let accel = blob.accel();
    let named = !matches!(accel, Accel::Unspecified | Accel::Unknown(_));
    let stream = if !args.format_only && (args.commands || named) {
        cmdstream::verify_blob(&blob).map_err(|e| e.to_string())?;
        Stream::Checked
    } else {
        Stream::Unnamed(accel)
    };
    let arena = args.arena;
    if let Some(len) = arena {
        let len = usize::try_from(len).map_err(|_| format!("--arena {len} is too large"))?;
        // Without --arena-aligned, bind at a deliberately misaligned start, so that "fits" means
        // "fits wherever the device's arena happens to start" — the guarantee
        // `arena_bytes_required` gives; with it, at a 16-byte boundary
        // (`arena_bytes_required_aligned`).
        let mut buffer = vec![0u8; len + 16];
        let start = if args.arena_aligned {
            aligned_start(&buffer)
        } else {
            misaligned_start(&buffer)
        };
        bind(&blob, &mut buffer[start..start + len]).map_err(|e| e.to_string())?;
    }
    Ok(stream)
}

/// An offset into `buffer` whose address is on a 16-byte boundary.
fn aligned_start(buffer: &[u8]) -> usize {
    let addr = buffer.as_ptr() as usize;
    (16 - addr % 16) % 16
}

/// An offset into `buffer` whose address is one byte past a 16-byte boundary: the worst case for
/// carving 16-byte-aligned regions.
fn misaligned_start(buffer: &[u8]) -> usize {
    let addr = buffer.as_ptr() as usize;
    (17 - addr % 16) % 16
}
