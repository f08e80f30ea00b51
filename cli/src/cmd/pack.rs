//! `npub pack VELA_OUTPUT -o OUT.npub`: turn Vela output (3.10 to 5.2, for an Ethos-U55: the
//! optimised `*_vela.tflite` or the raw `*_vela.npz`) into an NPU1 pack, and write its IO bindings
//! beside it as `OUT.io.json`.
//!
//! What the import accepted without trusting it — IO quantisation a raw `.npz` omits or records
//! wrongly — is printed on stderr as `npub: warning: …`, one line each; the files are still written.
//!
//! Nothing is written unless the import succeeds, the pack parses, every command of its stream is
//! proven to stay inside its regions (`npub_core::cmdstream::verify_blob`), and every IO binding
//! fits its region. Both files are written to temporary names in the output directory and renamed
//! into place, so a failed pack leaves neither file behind (and never half of one).
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use npub_core::io_bindings::{IoBindings, IoKind};
use npub_core::{Blob, cmdstream, vela};

use super::{Failure, read_file};

/// Arguments of `npub pack`.
#[derive(clap::Args)]
pub struct Args {
    /// Vela's output: `MODEL_vela.tflite`, or `MODEL_vela.npz` from `--output-format raw`.
    input: PathBuf,
    /// The pack to write. The IO bindings go beside it, as the same name with extension `.io.json`.
    #[arg(short = 'o', long = "output", value_name = "OUT.npub")]
    output: PathBuf,
}

/// Runs `npub pack`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.input)?;
    let rejected = |what: String| Failure::Rejected(format!("{}: {what}", args.input.display()));
    let imp = vela::import(&bytes).map_err(|e| rejected(e.to_string()))?;
    let blob = Blob::parse(&imp.pack).map_err(|e| rejected(e.to_string()))?;
    let summary =
        cmdstream::verify_blob(&blob).map_err(|e| rejected(format!("command stream: {e}")))?;
    let canonical = imp.io_encoding();
    IoBindings::parse(&canonical)
        .and_then(|io| io.check_against(&blob))
        .map_err(|e| rejected(e.to_string()))?;

    let json_path = io_json_path(&args.output)?;
    write_both([
        (&args.output, &imp.pack[..]),
        (&json_path, imp.io_json().as_bytes()),
    ])?;
    // What the import accepted without trusting it (IO metadata of a raw `.npz`): the files are
    // written, but the user must know which binding fields are unknown.
    for w in &imp.warnings {
        eprintln!("npub: warning: {}: {w}", args.input.display());
    }
    println!(
        "wrote {} ({} bytes, {}, {} commands) and {} ({} inputs, {} outputs)",
        args.output.display(),
        imp.pack.len(),
        imp.accel,
        summary.commands,
        json_path.display(),
        imp.io.iter().filter(|b| b.kind == IoKind::Input).count(),
        imp.io.iter().filter(|b| b.kind == IoKind::Output).count(),
    );
    Ok(())
}

/// `OUT.npub` → `OUT.io.json`.
fn io_json_path(output: &Path) -> Result<PathBuf, Failure> {
    let json = output.with_extension("io.json");
    if json == output {
        return Err(Failure::Usage(format!(
            "-o {}: the pack and its IO bindings would share a name; end it in .npub",
            output.display()
        )));
    }
    Ok(json)
}

/// Writes every file to a temporary name beside its target, then renames them all into place.
/// On any failure the temporaries, and any target already renamed, are removed.
fn write_both(files: [(&Path, &[u8]); 2]) -> Result<(), Failure> {
    let mut temps = Vec::new();
    let result = (|| {
        for (target, bytes) in files {
            let temp = temp_name(target);
            temps.push(temp.clone());
            write_new(&temp, bytes)?;
        }
        let mut placed: Vec<&Path> = Vec::new();
        for ((target, _), temp) in files.iter().zip(&temps) {
            if let Err(e) = std::fs::rename(temp, target) {
                for p in placed {
                    let _ = std::fs::remove_file(p);
                }
                return Err(cannot_write(target, &e));
            }
            placed.push(target);
        }
        Ok(())
    })();
    if result.is_err() {
        for t in &temps {
            let _ = std::fs::remove_file(t);
        }
    }
    result
}

/// `dir/.name.tmp-PID`: same directory (so the rename stays on one file system), hidden, and
/// unique per process.
fn temp_name(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut f = File::create_new(path).map_err(|e| cannot_write(path, &e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| cannot_write(path, &e))
}

fn cannot_write(path: &Path, e: &std::io::Error) -> Failure {
    Failure::Usage(format!("cannot write {}: {e}", path.display()))
}
