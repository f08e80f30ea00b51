//! `npub release verify PACK --release PACK.release --pubkey A.pub [--pubkey B.pub]…
//! [--threshold K] --model NAME --version VER [--revoked KEYID]… [--json]`: exit 0 when the
//! bundle releases this pack as this model and version with at least K valid signatures by
//! different `--pubkey` keys; exit 1 with the reason when not; exit 2 on usage errors.
//!
//! It runs the device's own check ([`release::check`]) against a release trust of the
//! `--pubkey` keys and, with `--threshold` above 1, a policy for the model naming them all (at
//! most [`MAX_POLICY_KEYS`]); with `--threshold 1` (the default) one signature by any of them,
//! as a device with release keys and no policy requires.
use std::path::PathBuf;

use npub_core::manifest::KeyId;
use npub_core::release::{
    self, Bundle, MAX_POLICY_KEYS, ModelId, ReleaseFacts, ReleasePolicy, ReleaseTrust,
};

use super::pack_io::hex;
use super::release_input::ReleaseArgs;
use super::{Failure, read_file};

/// Release keys a host trust holds at most (more `--pubkey`s is a usage error).
const MAX_PUBKEYS: usize = 16;

/// Arguments of `npub release verify`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    release: ReleaseArgs,
    /// The bundle of release signatures (from `npub release sign`).
    #[arg(long = "release", value_name = "PACK.release")]
    bundle: PathBuf,
    /// A release public key (KEYFILE.pub); repeat for several.
    #[arg(long = "pubkey", value_name = "KEYFILE.pub", required = true)]
    pubkeys: Vec<PathBuf>,
    /// Valid signatures needed, by different keys (k of the n --pubkey keys).
    #[arg(long, value_name = "K", default_value_t = 1)]
    threshold: u8,
    /// Key ids (16 hex digits) to treat as revoked; repeat for several.
    #[arg(long = "revoked", value_name = "KEYID")]
    revoked: Vec<String>,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `npub release verify`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bundle = read_file(&args.bundle)?;
    let trust = trust(&args)?;
    let pack = args.release.read()?;
    let facts = ReleaseFacts {
        pack_sha256: &pack.pack_sha256,
        model_name: &args.release.model,
        model_version: &args.release.model_version,
        accel: pack.accel,
        io_digest: &pack.io_digest,
        selftest_digest: &pack.selftest_digest,
    };
    let verdict = release::check(&trust, &bundle, &facts)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", args.bundle.display())));
    match (&verdict, args.json) {
        (Ok(ok), true) => println!(
            "{}",
            serde_json::json!({
                "valid": true,
                "model_name": facts.model_name,
                "model_version": facts.model_version,
                "pack_sha256": hex(facts.pack_sha256),
                "threshold": ok.threshold(),
                "signatures": signers(&bundle),
            })
        ),
        (Ok(ok), false) => {
            println!(
                "release OK: {} of {} needed valid signature(s) for {} {}",
                ok.valid(),
                ok.threshold(),
                facts.model_name,
                facts.model_version
            );
            println!("pack        sha256 {}", hex(facts.pack_sha256));
            for key_id in signers(&bundle) {
                println!("signed by   {key_id}");
            }
        }
        (Err(Failure::Rejected(reason)), true) => {
            println!("{}", serde_json::json!({ "valid": false, "error": reason }));
        }
        (Err(_), _) => {}
    }
    verdict.map(|_| ())
}

/// The key ids of the bundle's signatures, in order.
fn signers(bundle: &[u8]) -> Vec<String> {
    Bundle::parse(bundle)
        .map(|b| b.signatures().map(|s| s.key_id().to_string()).collect())
        .unwrap_or_default()
}

fn trust(args: &Args) -> Result<ReleaseTrust<MAX_PUBKEYS, 1>, Failure> {
    if args.pubkeys.len() > MAX_PUBKEYS {
        return Err(Failure::Usage(format!(
            "{} --pubkey keys: at most {MAX_PUBKEYS}",
            args.pubkeys.len()
        )));
    }
    let mut trust = ReleaseTrust::new();
    let mut ids = Vec::new();
    for path in &args.pubkeys {
        let key = npub_core::keypair::read_public_key(path)
            .map_err(|e| Failure::Usage(format!("cannot use {}: {e}", path.display())))?;
        ids.push(
            trust
                .add_key(&key)
                .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?,
        );
    }
    for id in &args.revoked {
        let key_id = KeyId::from_hex(id)
            .ok_or_else(|| Failure::Usage(format!("--revoked {id}: expected 16 hex digits")))?;
        trust
            .revoke_key(key_id)
            .map_err(|e| Failure::Usage(format!("--revoked {id}: {e}")))?;
    }
    if args.threshold == 0 {
        return Err(Failure::Usage(
            "--threshold 0: at least one signature".into(),
        ));
    }
    if args.threshold > 1 {
        if ids.len() > MAX_POLICY_KEYS {
            return Err(Failure::Usage(format!(
                "--threshold {} over {} keys: a release policy names at most {MAX_POLICY_KEYS}",
                args.threshold,
                ids.len()
            )));
        }
        let policy = ReleasePolicy::new(ModelId::of(&args.release.model), args.threshold, &ids)
            .map_err(|e| Failure::Usage(e.to_string()))?;
        trust.set_policy(policy)?;
    }
    Ok(trust)
}
