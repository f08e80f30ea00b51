//! `npub`: the operator's and the build pipeline's tool for NPU1 packs.
//!
//! Exit codes: 0 success, 1 the input was examined and rejected (the reason is on stderr), 2 usage
//! errors (clap's own, or a file that cannot be read).
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

#[derive(Parser)]
#[command(
    name = "npub",
    version,
    about = "Inspect, verify, pack and sign NPU1 (.npub) packs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the annotated header, region table, arena needs and checksum verdict of a pack.
    Inspect(cmd::inspect::Args),
    /// Validate a pack: exit 0 when valid (and bindable into --arena bytes), 1 when not.
    Verify(cmd::verify::Args),
    /// Turn Vela output (*_vela.tflite or raw *_vela.npz) into OUT.npub and OUT.io.json.
    Pack(cmd::pack::Args),
    /// Execute a pack on the host (the Ethos-U55 functional model): raw inputs in, raw outputs out.
    Run(cmd::run::Args),
    /// Prove a pack computes what its source .tflite computes (TFLite reference kernels vs the
    /// functional model on seeded random inputs).
    Prove(cmd::prove::Args),
    /// Write a pack's golden vector as its self-test record (PACK.selftest): a seeded input and
    /// the SHA-256 of the outputs the functional model computes for it.
    Golden(cmd::golden::Args),
    /// Generate an ed25519 signing key: KEYFILE (mode 0600) and KEYFILE.pub.
    Keygen(cmd::keygen::Args),
    /// Sign a manifest for a pack: sequence, model, target, length, SHA-256, IO digest, expiry.
    Sign(cmd::sign::Args),
    /// Check a manifest as a device would (signature, freshness, target) and the pack against it.
    VerifyManifest(cmd::verify_manifest::Args),
    /// Release signatures: sign a pack's release (two people: twice, one bundle), verify, show.
    Release(cmd::release::Args),
    /// Root-signed keyring updates for release keys and policies; show any keyring update.
    Keyring(cmd::keyring::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Pack(args) => cmd::pack::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Prove(args) => cmd::prove::run(args),
        Command::Golden(args) => cmd::golden::run(args),
        Command::Keygen(args) => cmd::keygen::run(args),
        Command::Sign(args) => cmd::sign::run(args),
        Command::VerifyManifest(args) => cmd::verify_manifest::run(args),
        Command::Release(args) => cmd::release::run(args),
        Command::Keyring(args) => cmd::keyring::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command's definition (unique names, valid groups) only when it runs; this
    /// runs every subcommand's checks at once.
    #[test]
    fn every_subcommand_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
