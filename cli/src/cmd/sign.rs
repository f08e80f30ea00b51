//! `npub sign PACK --key KEYFILE --seq N --model NAME --version VER [--accel CONFIG] [--hw CLASS]
//! [--expires WHEN] [--selftest FILE] -o MANIFEST`: a 280-byte signed manifest for a pack, or a
//! 312-byte version-2 manifest that also signs the pack's self-test record (`--selftest`, from
//! `npub golden`): a device then runs its golden input before it confirms the pack.
//!
//! The pack must be a valid NPU1 pack: a signer never vouches for bytes a device would refuse.
//! Its length, header checksum and SHA-256 are read off it; the IO-bindings digest comes from the
//! JSON beside it (`PACK.io.json`, or `--io FILE`), and is all zeros when there is none.
use std::path::PathBuf;

use npub_core::manifest::{self, ManifestFields, PackFacts, sign_manifest, sign_manifest_v2};
use npub_core::{Accel, Blob};

use super::pack_io::{canonical_io, hex, io_json_path, secret_key, unix_now};
use super::{Failure, read_file};

/// Arguments of `npub sign`.
#[derive(clap::Args)]
pub struct Args {
    /// The `.npub` pack the manifest describes.
    pack: PathBuf,
    /// The secret key file (from `npub keygen`; must be mode 0600 or stricter).
    #[arg(long, value_name = "KEYFILE")]
    key: PathBuf,
    /// Deployment sequence, ≥ 1, above every sequence deployed before (a rollback too).
    #[arg(long, value_name = "N")]
    seq: u64,
    /// Model name (UTF-8, at most 64 bytes).
    #[arg(long, value_name = "NAME")]
    model: String,
    /// Model version (UTF-8, at most 32 bytes).
    #[arg(long = "version", value_name = "VER")]
    model_version: String,
    /// Accelerator configuration (Vela's name, e.g. ethos-u55-256). Defaults to the pack's header;
    /// required when the header says "unspecified", refused when it disagrees.
    #[arg(long, value_name = "CONFIG")]
    accel: Option<String>,
    /// Hardware class id (non-zero; 1 = RA8P1 boards).
    #[arg(long, value_name = "CLASS", default_value_t = manifest::HW_CLASS_RA8P1)]
    hw: u32,
    /// Expiry: unix seconds, or `+N` followed by s, m, h or d (relative to --issued-at).
    /// Without it the manifest never expires.
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
    /// Issue time in unix seconds (default: now).
    #[arg(long, value_name = "UNIX")]
    issued_at: Option<u64>,
    /// The IO-bindings JSON, when it is not beside the pack as PACK.io.json.
    #[arg(long, value_name = "FILE")]
    io: Option<PathBuf>,
    /// The pack's self-test record ("NPS1", from `npub golden`): its SHA-256 is signed into a
    /// version-2 manifest. Without it, a version-1 manifest (no self-test on the device).
    #[arg(long, value_name = "FILE")]
    selftest: Option<PathBuf>,
    /// Where to write the manifest.
    #[arg(short = 'o', long = "out", value_name = "MANIFEST")]
    out: PathBuf,
}

/// Runs `npub sign`.
pub fn run(args: Args) -> Result<(), Failure> {
    let key = secret_key(&args.key)?;
    let pack = read_file(&args.pack)?;
    let blob = Blob::parse(&pack).map_err(|e| {
        Failure::Rejected(format!("{}: not a valid pack: {e}", args.pack.display()))
    })?;
    let facts = PackFacts::of(&pack)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", args.pack.display())))?;
    let accel = accel(args.accel.as_deref(), facts.accel)?;
    let io_digest = match io_json_path(&args.pack, args.io.as_deref())? {
        Some(json) => npub_core::io_bindings::digest(&canonical_io(&json, &blob)?),
        None => [0; 32],
    };
    let issued_at = args.issued_at.unwrap_or_else(unix_now);
    let expires_at = match args.expires.as_deref() {
        Some(when) => expiry(when, issued_at)?,
        None => 0,
    };
    let fields = ManifestFields {
        sequence: args.seq,
        model_name: &args.model,
        model_version: &args.model_version,
        accel,
        hw_class: args.hw,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest,
        issued_at,
        expires_at,
    };
    let selftest = match &args.selftest {
        Some(path) => {
            let bytes = read_file(path)?;
            let record = npub_core::release::SelfTest::parse(&bytes).map_err(|e| {
                Failure::Rejected(format!(
                    "{}: not a self-test record (make one with `npub golden`): {e}",
                    path.display()
                ))
            })?;
            Some(record.digest())
        }
        None => None,
    };
    let signed = match &selftest {
        Some(digest) => sign_manifest_v2(&fields, digest, &key).map(|m| m.to_vec()),
        None => sign_manifest(&fields, &key).map(|m| m.to_vec()),
    }
    .map_err(|e| Failure::Usage(e.to_string()))?;
    std::fs::write(&args.out, &signed)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", args.out.display())))?;
    println!(
        "signed      {} ({} bytes)",
        args.out.display(),
        signed.len()
    );
    println!("key id      {}", key.key_id());
    println!("sequence    {}", args.seq);
    println!("model       {} {}", args.model, args.model_version);
    println!("target      hw_class {} / {accel}", args.hw);
    println!(
        "pack        {} bytes, sha256 {}",
        facts.len,
        hex(&facts.sha256)
    );
    println!("io_digest   {}", hex(&io_digest));
    if let Some(digest) = &selftest {
        println!("selftest    {}", hex(digest));
    }
    Ok(())
}

/// `--accel` against the pack header's own word.
pub(super) fn accel(flag: Option<&str>, declared: Accel) -> Result<Accel, Failure> {
    let Some(name) = flag else {
        return match declared {
            Accel::Unspecified | Accel::Unknown(_) => Err(Failure::Usage(format!(
                "the pack's header says accel {declared}; give --accel (e.g. ethos-u55-256)"
            ))),
            known => Ok(known),
        };
    };
    let chosen = Accel::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Accel::ALL[1..].iter().map(|a| a.name()).collect();
        Failure::Usage(format!(
            "--accel {name}: expected one of {}",
            names.join(", ")
        ))
    })?;
    if declared != Accel::Unspecified && declared != chosen {
        return Err(Failure::Usage(format!(
            "--accel {chosen} disagrees with the pack's header ({declared}): the command stream \
             was compiled for {declared}"
        )));
    }
    Ok(chosen)
}

/// `--expires`: unix seconds, or `+N[smhd]` after `issued_at`.
fn expiry(when: &str, issued_at: u64) -> Result<u64, Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--expires {when}: expected unix seconds or +N followed by s, m, h or d"
        ))
    };
    let Some(relative) = when.strip_prefix('+') else {
        return when.parse().map_err(|_| bad());
    };
    let split = relative.len().checked_sub(1).ok_or_else(bad)?;
    let (count, unit) = relative.split_at(split);
    let unit_seconds: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let count: u64 = count.parse().map_err(|_| bad())?;
    count
        .checked_mul(unit_seconds)
        .and_then(|s| issued_at.checked_add(s))
        .ok_or_else(bad)
}
