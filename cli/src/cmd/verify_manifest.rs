//! `npub verify-manifest MANIFEST --pack PACK --pubkey KEYFILE.pub [--last-seq N] [--json]`:
//! exit 0 when the manifest is genuine, fresh and matches the pack; exit 1 with the reason when not.
//!
//! It runs the device's own code: [`manifest::verify`] against a keyring of the `--pubkey` keys,
//! then the pack streamed through [`PackCheck`] in 64 KiB chunks, then the IO bindings beside the
//! pack against the manifest's `io_digest`. `--hw`, `--accel` and `--slot` describe the device to
//! check for; left out, the manifest's own target is taken (it is still signed, just not compared).
use std::io::Read;
use std::path::{Path, PathBuf};

use npub_core::manifest::{
    self, KeyId, Keyring, ManifestView, PackCheck, Policy, VerifiedManifest, VerifiedPack,
};
use npub_core::{Accel, Blob};

use super::pack_io::{canonical_io, hex, io_json_path, unix_now};
use super::{Failure, read_file};

/// Public keys a host keyring holds at most (more `--pubkey`s than this is a usage error).
const MAX_PUBKEYS: usize = 16;
/// Read size when streaming the pack: the device's download chunk is of this order.
const CHUNK_BYTES: usize = 64 * 1024;

/// Arguments of `npub verify-manifest`.
#[derive(clap::Args)]
pub struct Args {
    /// The manifest file (from `npub sign`).
    manifest: PathBuf,
    /// The pack it should describe.
    #[arg(long, value_name = "PACK")]
    pack: PathBuf,
    /// A trusted public key (KEYFILE.pub); repeat for several.
    #[arg(long = "pubkey", value_name = "KEYFILE.pub", required = true)]
    pubkeys: Vec<PathBuf>,
    /// Key ids (16 hex digits) to treat as revoked; repeat for several.
    #[arg(long = "revoked", value_name = "KEYID")]
    revoked: Vec<String>,
    /// The last sequence the device accepted; the manifest's must be above it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    last_seq: u64,
    /// The device's hardware class (default: the manifest's own).
    #[arg(long, value_name = "CLASS")]
    hw: Option<u32>,
    /// The device's accelerator configuration, e.g. ethos-u55-256 (default: the manifest's own).
    #[arg(long, value_name = "CONFIG")]
    accel: Option<String>,
    /// The device's slot size in bytes (default: no limit).
    #[arg(long, value_name = "BYTES", default_value_t = u32::MAX)]
    slot: u32,
    /// The time to check expiry against, unix seconds (default: now).
    #[arg(long, value_name = "UNIX")]
    now: Option<u64>,
    /// The IO-bindings JSON, when it is not beside the pack as PACK.io.json.
    #[arg(long, value_name = "FILE")]
    io: Option<PathBuf>,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `npub verify-manifest`.
pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = read_file(&args.manifest)?;
    let keyring = keyring(&args.pubkeys, &args.revoked)?;
    let policy = policy(&args, &bytes)?;
    let io = match io_json_path(&args.pack, args.io.as_deref())? {
        Some(json) => {
            let pack = read_file(&args.pack)?;
            let blob = Blob::parse(&pack).map_err(|e| {
                Failure::Rejected(format!("{}: not a valid pack: {e}", args.pack.display()))
            })?;
            Some(canonical_io(&json, &blob)?)
        }
        None => None,
    };
    let verdict = check(&bytes, &keyring, &policy, &args.pack, io.as_deref());
    match (&verdict, args.json) {
        (Ok(ok), true) => println!("{}", report_json(ok.manifest())),
        (Ok(ok), false) => print_report(ok),
        (Err(Failure::Rejected(reason)), true) => {
            println!("{}", serde_json::json!({ "valid": false, "error": reason }));
        }
        (Err(_), _) => {}
    }
    verdict.map(|_| ())
}

/// The device's verdict: manifest, then pack, then IO bindings.
fn check(
    bytes: &[u8],
    keyring: &Keyring<MAX_PUBKEYS>,
    policy: &Policy,
    pack: &Path,
    io: Option<&[u8]>,
) -> Result<VerifiedPack, Failure> {
    let reject = |e: npub_core::Error| Failure::Rejected(e.to_string());
    let verified: VerifiedManifest = manifest::verify(bytes, keyring, policy).map_err(reject)?;
    // Judged now (the pack check takes the manifest), reported after the pack's own verdict: a
    // pack that is not the manifest's is that, whatever bindings sit beside it.
    let io_verdict = verified.check_io_bindings(io);
    let mut file = std::fs::File::open(pack)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", pack.display())))?;
    let mut check = PackCheck::new(verified);
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", pack.display())))?;
        if n == 0 {
            break;
        }
        check.feed(&buf[..n]).map_err(reject)?;
    }
    let pack = check.finish().map_err(reject)?;
    io_verdict.map_err(reject)?;
    Ok(pack)
}

fn keyring(pubkeys: &[PathBuf], revoked: &[String]) -> Result<Keyring<MAX_PUBKEYS>, Failure> {
    let mut ring = Keyring::new();
    for path in pubkeys {
        let key = npub_core::keypair::read_public_key(path)
            .map_err(|e| Failure::Usage(format!("cannot use {}: {e}", path.display())))?;
        ring.add(&key)
            .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    }
    for id in revoked {
        let key_id = KeyId::from_hex(id)
            .ok_or_else(|| Failure::Usage(format!("--revoked {id}: expected 16 hex digits")))?;
        ring.revoke(key_id)
            .map_err(|e| Failure::Usage(format!("--revoked {id}: {e}")))?;
    }
    Ok(ring)
}

/// The device to check for. Where a flag is absent the manifest's own (unverified) value stands
/// in, which makes that comparison vacuous; everything else is still checked.
fn policy(args: &Args, bytes: &[u8]) -> Result<Policy, Failure> {
    let view = ManifestView::new(bytes).ok();
    let accel = match args.accel.as_deref() {
        Some(name) => Accel::from_name(name)
            .ok_or_else(|| Failure::Usage(format!("--accel {name}: not a known configuration")))?,
        None => view.map_or(Accel::Unspecified, |v| Accel::from_word(v.accel_word())),
    };
    Ok(Policy {
        hw_class: args
            .hw
            .or(view.map(|v| v.hw_class()))
            .unwrap_or(manifest::HW_CLASS_RA8P1),
        accel,
        slot_bytes: args.slot,
        last_sequence: args.last_seq,
        now: Some(args.now.unwrap_or_else(unix_now)),
    })
}

fn print_report(ok: &VerifiedPack) {
    let m = ok.manifest();
    println!("manifest OK: genuine, fresh, and matches the pack");
    println!("key id      {}", m.key_id());
    println!("sequence    {}", m.sequence());
    println!("model       {} {}", m.model_name(), m.model_version());
    println!("target      hw_class {} / {}", m.hw_class(), m.accel());
    println!(
        "pack        {} bytes, sha256 {}",
        m.pack_len(),
        hex(&m.pack_sha256())
    );
    println!("io_digest   {}", hex(&m.io_digest()));
    println!("issued_at   {}", m.issued_at());
    match m.expires_at() {
        0 => println!("expires_at  never"),
        t => println!("expires_at  {t}"),
    }
}

fn report_json(m: &VerifiedManifest) -> serde_json::Value {
    serde_json::json!({
        "valid": true,
        "key_id": m.key_id().to_string(),
        "sequence": m.sequence(),
        "model_name": m.model_name(),
        "model_version": m.model_version(),
        "accel": m.accel().name(),
        "hw_class": m.hw_class(),
        "pack_len": m.pack_len(),
        "pack_checksum": m.pack_checksum(),
        "pack_sha256": hex(&m.pack_sha256()),
        "io_digest": hex(&m.io_digest()),
        "issued_at": m.issued_at(),
        "expires_at": m.expires_at(),
    })
}
