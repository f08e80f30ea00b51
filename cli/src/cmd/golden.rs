//! `npub golden PACK [--io FILE] -o PACK.selftest`: the pack's golden vector as the self-test
//! record ("NPS1", `npub_core::release::SelfTest`) that travels beside it: a seeded input (from
//! the IO bindings alone) and the SHA-256 of the outputs the functional model computes for it.
//! The server computes the same record at upload (`GET …/versions/{v}/selftest`); a release
//! signs its SHA-256 with `npub release sign --selftest PACK.selftest`.
//!
//! Exit 0 when written, 1 when the functional model cannot run the pack, 2 on usage errors.
use std::path::PathBuf;

use npu_model::golden;

use super::run::load_bindings;
use super::{Failure, read_file};

/// Arguments of `npub golden`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// The IO bindings (default: PACK.io.json beside the pack).
    #[arg(long = "io", value_name = "FILE")]
    io: Option<PathBuf>,
    /// Where to write the self-test record.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
}

/// Runs `npub golden`.
pub fn run(args: Args) -> Result<(), Failure> {
    let pack = read_file(&args.pack)?;
    let io = load_bindings(&args.pack, args.io.as_deref())?;
    let rejected =
        |e: npu_model::RunError| Failure::Rejected(format!("{}: {e}", args.pack.display()));
    let model = npu_model::Model::load(&pack, &io).map_err(rejected)?;
    let g = golden::compute(&model, &io).map_err(rejected)?;
    let record = g.record().ok_or_else(|| {
        Failure::Rejected(format!(
            "{}: a {}-byte golden input is larger than a self-test record carries",
            args.pack.display(),
            g.input.len()
        ))
    })?;
    std::fs::write(&args.output, &record)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", args.output.display())))?;
    let hex = |d: &[u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    println!("golden input  {} bytes", g.input.len());
    println!("output sha256 {}", hex(&g.output_sha256));
    println!(
        "selftest      {} ({})",
        hex(&golden::output_digest(&[&record])),
        args.output.display()
    );
    Ok(())
}
