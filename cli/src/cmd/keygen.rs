//! `npub keygen -o KEYFILE`: a new ed25519 key pair, the secret half in `KEYFILE` (mode 0600), the
//! public half in `KEYFILE.pub`. Never overwrites either file.
use std::path::PathBuf;

use npub_core::keypair::{KeyPair, write_key_files};

use super::Failure;

/// Arguments of `npub keygen`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the secret key; the public key goes to the same path plus `.pub`.
    #[arg(short = 'o', long = "out", value_name = "KEYFILE")]
    out: PathBuf,
}

/// Runs `npub keygen`.
pub fn run(args: Args) -> Result<(), Failure> {
    let key =
        KeyPair::generate().map_err(|e| Failure::Usage(format!("cannot generate a key: {e}")))?;
    let public = write_key_files(&args.out, &key)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", args.out.display())))?;
    println!("key id      {}", key.key_id());
    println!(
        "secret key  {} (mode 0600: keep it off shared disks)",
        args.out.display()
    );
    println!("public key  {}", public.display());
    Ok(())
}
