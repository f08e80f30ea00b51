//! `npub release sign PACK (--key KEYFILE | --signer-cmd CMD --signer-pub KEYFILE.pub)
//! --model NAME --version VER [--accel CONFIG] [--io FILE] [--selftest FILE] -o PACK.release`:
//! a release signature over the pack, written as a bundle, or added to the bundle already at
//! `-o` (the second person of a two-person release runs the same command on the same file).
use std::path::{Path, PathBuf};

use npub_core::release::{
    Bundle, RELEASE_BYTES, ReleaseFields, encode_bundle, merge_bundles, sign_release,
};

use super::pack_io::{hex, unix_now};
use super::release_input::ReleaseArgs;
use super::signer::SignerArgs;
use super::{Failure, read_file};

/// Arguments of `npub release sign`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    release: ReleaseArgs,
    #[command(flatten)]
    signer: SignerArgs,
    /// Signing time in unix seconds (default: now; informational).
    #[arg(long, value_name = "UNIX")]
    signed_at: Option<u64>,
    /// The bundle to write; when it exists, the signature is added to it.
    #[arg(short = 'o', long = "out", value_name = "PACK.release")]
    out: PathBuf,
}

/// Runs `npub release sign`.
pub fn run(args: Args) -> Result<(), Failure> {
    let pack = args.release.read()?;
    let fields = ReleaseFields {
        pack_sha256: pack.pack_sha256,
        model_name: &args.release.model,
        model_version: &args.release.model_version,
        accel: pack.accel,
        io_digest: pack.io_digest,
        selftest_digest: pack.selftest_digest,
        signed_at: args.signed_at.unwrap_or_else(unix_now),
    };
    // Refuse what could never be added before anyone is asked to sign (a PIN, a touch).
    let existing = existing_bundle(&args.out)?;
    if let Some(bundle) = &existing {
        same_release(&args.out, bundle, &fields)?;
    }
    let signer = args.signer.signer()?;
    let signature: [u8; RELEASE_BYTES] = sign_release(&fields, &signer)?;
    let key_id = npub_core::manifest::KeyId::of(&npub_core::release::Signer::public_key(&signer));
    let one = encode_bundle(&[signature])?;
    let bundle = match &existing {
        Some(bytes) => {
            if Bundle::parse(bytes)?
                .signatures()
                .any(|s| s.key_id() == key_id)
            {
                return Err(Failure::Usage(format!(
                    "{}: key {key_id} already signed this release",
                    args.out.display()
                )));
            }
            merge_bundles(bytes, &one)
                .map_err(|e| Failure::Usage(format!("cannot add to {}: {e}", args.out.display())))?
        }
        None => one,
    };
    write_atomically(&args.out, &bundle)?;
    let count = Bundle::parse(&bundle)?.len();
    println!(
        "signed      {} ({count} signature(s) now)",
        args.out.display()
    );
    println!("key id      {key_id}");
    println!(
        "release     {} {} for {}",
        fields.model_name, fields.model_version, fields.accel
    );
    println!("pack        sha256 {}", hex(&fields.pack_sha256));
    println!("io_digest   {}", hex(&fields.io_digest));
    println!("selftest    {}", hex(&fields.selftest_digest));
    Ok(())
}

/// The bundle already at `path`, checked; `None` when there is no file.
fn existing_bundle(path: &Path) -> Result<Option<Vec<u8>>, Failure> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_file(path)?;
    Bundle::parse(&bytes).map_err(|e| {
        Failure::Usage(format!(
            "{} exists and is not a release bundle ({e}); give another -o",
            path.display()
        ))
    })?;
    Ok(Some(bytes))
}

/// The bundle at `path` releases what `fields` does.
fn same_release(path: &Path, bytes: &[u8], fields: &ReleaseFields<'_>) -> Result<(), Failure> {
    let held = Bundle::parse(bytes)?.first();
    let held = held.fields()?;
    let same = held.pack_sha256 == fields.pack_sha256
        && held.model_name == fields.model_name
        && held.model_version == fields.model_version
        && held.accel == fields.accel
        && held.io_digest == fields.io_digest
        && held.selftest_digest == fields.selftest_digest;
    if same {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "{} holds the release of {} {} for {} (pack sha256 {}), not of {} {} for {} (pack sha256 \
         {}, or other IO bindings or self-test); write this one to another file",
        path.display(),
        held.model_name,
        held.model_version,
        held.accel,
        hex(&held.pack_sha256),
        fields.model_name,
        fields.model_version,
        fields.accel,
        hex(&fields.pack_sha256),
    )))
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`: a reader (or a
/// second signer) never sees half a bundle.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let fail = |e: std::io::Error| Failure::Usage(format!("cannot write {}: {e}", path.display()));
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}
