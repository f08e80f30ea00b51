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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Verify(args) => cmd::verify::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
