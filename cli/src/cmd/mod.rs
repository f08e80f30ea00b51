//! One file per subcommand; each exposes `Args` (clap) and `run(Args) -> Result<(), Failure>`.
use std::process::ExitCode;

pub mod golden;
pub mod inspect;
pub mod keygen;
pub mod keyring;
pub mod pack;
mod pack_io;
pub mod prove;
pub mod release;
mod release_input;
mod release_show;
mod release_sign;
mod release_verify;
pub mod run;
pub mod sign;
mod signer;
pub mod verify;
pub mod verify_manifest;

/// Why a subcommand did not succeed, and so which exit code it ends with.
#[derive(Debug)]
pub enum Failure {
    /// The input was read and judged invalid: exit 1.
    Rejected(String),
    /// The command could not do its job (unreadable file, bad arguments): exit 2.
    Usage(String),
}

impl Failure {
    /// Prints the message on stderr and returns the exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Rejected(msg) => {
                eprintln!("npub: {msg}");
                ExitCode::from(1)
            }
            Failure::Usage(msg) => {
                eprintln!("npub: {msg}");
                ExitCode::from(2)
            }
        }
    }
}

/// Reads a whole file, mapping failure to a usage error that names the path.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))
}
