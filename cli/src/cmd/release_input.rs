//! What `npub release sign` and `npub release verify` read off a pack and their flags: the
//! pack's SHA-256, its accelerator, its IO-bindings digest, the self-test's digest, and the
//! model name and version the release is for.
use std::path::PathBuf;

use npub_core::manifest::PackFacts;
use npub_core::{Accel, Blob};

use super::pack_io::{canonical_io, io_json_path};
use super::sign::accel;
use super::{Failure, read_file};

/// The pack and the release's names, shared by `release sign` and `release verify`.
#[derive(clap::Args)]
pub struct ReleaseArgs {
    /// The `.npub` pack released.
    pub pack: PathBuf,
    /// Model name, exactly as the deployment's manifests will say it (UTF-8, at most 64 bytes).
    #[arg(long, value_name = "NAME")]
    pub model: String,
    /// Model version, exactly as the manifests will say it (UTF-8, at most 32 bytes).
    #[arg(long = "version", value_name = "VER")]
    pub model_version: String,
    /// Accelerator configuration (e.g. ethos-u55-256). Defaults to the pack's header; required
    /// when the header says "unspecified", refused when it disagrees.
    #[arg(long, value_name = "CONFIG")]
    pub accel: Option<String>,
    /// The IO-bindings JSON, when it is not beside the pack as PACK.io.json.
    #[arg(long, value_name = "FILE")]
    pub io: Option<PathBuf>,
    /// The self-test delivered with the pack (its SHA-256 is signed); none by default.
    #[arg(long, value_name = "FILE")]
    pub selftest: Option<PathBuf>,
}

/// What a release states about the pack, read off it.
pub struct PackRelease {
    /// SHA-256 of the whole pack.
    pub pack_sha256: [u8; 32],
    /// The accelerator configuration.
    pub accel: Accel,
    /// The IO-bindings digest (zeros: none).
    pub io_digest: [u8; 32],
    /// The self-test's SHA-256 (zeros: none).
    pub selftest_digest: [u8; 32],
}

impl ReleaseArgs {
    /// Reads the pack (it must be valid NPU1: nobody releases bytes a device would refuse), its
    /// IO bindings and the self-test.
    pub fn read(&self) -> Result<PackRelease, Failure> {
        let pack = read_file(&self.pack)?;
        let blob = Blob::parse(&pack).map_err(|e| {
            Failure::Rejected(format!("{}: not a valid pack: {e}", self.pack.display()))
        })?;
        let facts = PackFacts::of(&pack)
            .map_err(|e| Failure::Rejected(format!("{}: {e}", self.pack.display())))?;
        let io_digest = match io_json_path(&self.pack, self.io.as_deref())? {
            Some(json) => npub_core::io_bindings::digest(&canonical_io(&json, &blob)?),
            None => [0; 32],
        };
        // A release names the self-test a device will run: only a record a device would read
        // ("NPS1", `npub golden`'s output or the server's `GET …/selftest`) is signed.
        let selftest_digest = match &self.selftest {
            Some(path) => {
                let bytes = read_file(path)?;
                let record = npub_core::release::SelfTest::parse(&bytes).map_err(|e| {
                    Failure::Rejected(format!(
                        "{}: not a self-test record (make one with `npub golden`, or fetch the \
                         version's GET …/selftest): {e}",
                        path.display()
                    ))
                })?;
                record.digest()
            }
            None => [0; 32],
        };
        Ok(PackRelease {
            pack_sha256: facts.sha256,
            accel: accel(self.accel.as_deref(), facts.accel)?,
            io_digest,
            selftest_digest,
        })
    }
}
