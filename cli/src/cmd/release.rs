//! `npub release sign | verify | show`: release signatures, made where the model is built, by
//! keys the server never holds (`docs/release.md`).
use super::Failure;
use super::{release_show, release_sign, release_verify};

/// Arguments of `npub release`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ReleaseCommand,
}

#[derive(clap::Subcommand)]
enum ReleaseCommand {
    /// Sign a release of a pack (model, version, accelerator, IO bindings, self-test) into
    /// PACK.release, or add a signature to the bundle already there.
    Sign(release_sign::Args),
    /// Check a bundle as a device would: exit 0 when at least --threshold valid signatures by
    /// different --pubkey keys release this pack as this model and version, 1 when not.
    Verify(release_verify::Args),
    /// Show what a bundle says and who signed it (verifies nothing).
    Show(release_show::Args),
}

/// Runs `npub release`.
pub fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        ReleaseCommand::Sign(args) => release_sign::run(args),
        ReleaseCommand::Verify(args) => release_verify::run(args),
        ReleaseCommand::Show(args) => release_show::run(args),
    }
}
