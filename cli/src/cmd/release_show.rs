//! `npub release show PACK.release [--json]`: what a bundle says (the release, and who signed
//! it, when), without verifying anything: `npub release verify` does that.
use std::path::PathBuf;

use npub_core::release::Bundle;

use super::pack_io::hex;
use super::{Failure, read_file};

/// Arguments of `npub release show`.
#[derive(clap::Args)]
pub struct Args {
    /// The bundle of release signatures.
    bundle: PathBuf,
    /// Print it as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `npub release show`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.bundle)?;
    let reject = |e: npub_core::Error| Failure::Rejected(format!("{}: {e}", args.bundle.display()));
    let bundle = Bundle::parse(&bytes).map_err(reject)?;
    let release = bundle.first().fields().map_err(reject)?;
    let signatures: Vec<(String, u64)> = bundle
        .signatures()
        .map(|s| (s.key_id().to_string(), s.signed_at()))
        .collect();
    if args.json {
        let sigs: Vec<_> = signatures
            .iter()
            .map(|(key_id, at)| serde_json::json!({ "key_id": key_id, "signed_at": at }))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "model_name": release.model_name,
                "model_version": release.model_version,
                "accel": release.accel.name(),
                "pack_sha256": hex(&release.pack_sha256),
                "io_digest": hex(&release.io_digest),
                "selftest_digest": hex(&release.selftest_digest),
                "signatures": sigs,
            })
        );
        return Ok(());
    }
    println!(
        "release     {} {}",
        release.model_name, release.model_version
    );
    println!("accel       {}", release.accel);
    println!("pack        sha256 {}", hex(&release.pack_sha256));
    println!("io_digest   {}", hex(&release.io_digest));
    println!("selftest    {}", hex(&release.selftest_digest));
    for (key_id, at) in signatures {
        println!("signature   key {key_id}, signed_at {at} (not verified here)");
    }
    Ok(())
}
