//! `npub run PACK.npub --input FILE… --output-dir DIR`: execute the pack's command stream on the
//! host with the Ethos-U55 functional model (`npu-model`).
//!
//! Inputs are raw tensor bytes (NHWC, the input's dtype, no header), one file per model input in
//! the model's input order. Writes `DIR/output-0.bin`, `DIR/output-1.bin`, … in the model's output
//! order. The IO bindings come from `PACK.io.json` beside the pack (or `--io`). Exit 0 when the
//! outputs are written, 1 when the pack or an input is rejected or uses an operation the model
//! does not implement (the message names it and its command offset), 2 on usage errors.
use std::path::{Path, PathBuf};

use npub_core::io_bindings::{self, IoBinding};

use super::pack_io::io_json_path;
use super::{Failure, read_file};

/// Arguments of `npub run`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// A model input's raw bytes; give one per input, in the model's input order.
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Where to write output-0.bin, output-1.bin, …
    #[arg(long = "output-dir", value_name = "DIR")]
    output_dir: PathBuf,
    /// The IO bindings (default: PACK.io.json beside the pack).
    #[arg(long = "io", value_name = "FILE")]
    io: Option<PathBuf>,
}

/// Runs `npub run`.
pub fn run(args: Args) -> Result<(), Failure> {
    let pack = read_file(&args.pack)?;
    let io = load_bindings(&args.pack, args.io.as_deref())?;
    let inputs = args
        .inputs
        .iter()
        .map(|p| read_file(p))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let outputs = npu_model::run(&pack, &io, &refs)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", args.pack.display())))?;
    std::fs::create_dir_all(&args.output_dir)
        .map_err(|e| Failure::Usage(format!("cannot create {}: {e}", args.output_dir.display())))?;
    for (i, bytes) in outputs.iter().enumerate() {
        let path = args.output_dir.join(format!("output-{i}.bin"));
        std::fs::write(&path, bytes)
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    }
    println!(
        "ran {}: {} output(s) in {}",
        args.pack.display(),
        outputs.len(),
        args.output_dir.display()
    );
    Ok(())
}

/// The pack's IO bindings, from `explicit` or the JSON beside it.
pub fn load_bindings(pack: &Path, explicit: Option<&Path>) -> Result<Vec<IoBinding>, Failure> {
    let json = io_json_path(pack, explicit)?.ok_or_else(|| {
        Failure::Usage(format!(
            "{}: no IO bindings beside it (PACK.io.json, written by `npub pack`); give --io FILE",
            pack.display()
        ))
    })?;
    let text = String::from_utf8(read_file(&json)?)
        .map_err(|_| Failure::Rejected(format!("{}: not UTF-8", json.display())))?;
    let (bindings, _) = io_bindings::from_json(&text)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", json.display())))?;
    Ok(bindings)
}
