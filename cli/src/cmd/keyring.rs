//! `npub keyring …`: root-signed keyring updates (144-byte NPK1 records) that bring release keys
//! and release policies to devices, made where the release root is kept (offline, or behind
//! `--signer-cmd`), and `npub keyring show` to read any record back.
//!
//! | subcommand                 | action | what the device does                                      |
//! |----------------------------|-------:|-----------------------------------------------------------|
//! | `release-add KEY.pub`      | 4 | trusts a release key                                           |
//! | `release-revoke KEY`       | 5 | revokes a release key for good                                 |
//! | `release-replace --revoke KEY --add NEW.pub` | 6 | both, atomically                          |
//! | `release-policy (--model NAME \| --default) --threshold K --release-key KEY…` | 7 | K of those keys for that model |
//! | `release-policy-remove (--model NAME \| --default)` | 8 | the model falls back to the default policy |
//!
//! `KEY` is a public key file (KEYFILE.pub) or a key id (16 hex digits). Every record needs
//! `--seq N`: the next keyring-update sequence, one above the newest the server lists
//! (`GET /api/v1/keys`), since release and signing-key updates share one sequence.
use std::path::{Path, PathBuf};

use npub_core::manifest::{KeyId, KeyringChange};
use npub_core::release::{
    ModelId, ReleaseChange, ReleasePolicy, TrustChange, TrustUpdate, sign_trust_update,
};

use super::pack_io::unix_now;
use super::signer::SignerArgs;
use super::{Failure, read_file};

/// Arguments of `npub keyring`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: KeyringCommand,
}

#[derive(clap::Subcommand)]
enum KeyringCommand {
    /// A record that makes devices trust a release key (action 4).
    ReleaseAdd {
        /// The release public key (KEYFILE.pub, from `npub keygen`).
        public: PathBuf,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// A record that revokes a release key for good (action 5).
    ReleaseRevoke {
        /// The release key: KEYFILE.pub or its key id.
        #[arg(value_name = "KEY")]
        release_key: String,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// A record that revokes a release key and trusts another, atomically (action 6).
    ReleaseReplace {
        /// The release key to revoke: KEYFILE.pub or its key id.
        #[arg(long, value_name = "KEY")]
        revoke: String,
        /// The release public key to trust (KEYFILE.pub).
        #[arg(long, value_name = "KEYFILE.pub")]
        add: PathBuf,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// A record that sets a model's release policy, or the default one (action 7).
    ReleasePolicy {
        #[command(flatten)]
        model: ModelArgs,
        /// Valid signatures needed (k), by different keys.
        #[arg(long, value_name = "K")]
        threshold: u8,
        /// A release key whose signatures count (KEYFILE.pub or key id); 1 to 4 of them.
        #[arg(long = "release-key", value_name = "KEY", required = true)]
        keys: Vec<String>,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// A record that removes a model's release policy, or the default one (action 8).
    ReleasePolicyRemove {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// Decode keyring-update records (any action) and, with --root, check their signature.
    Show {
        /// Record files (144 bytes each, or several concatenated).
        records: Vec<PathBuf>,
        /// A root public key to check signatures against; repeat for several.
        #[arg(long = "root", value_name = "ROOT.pub")]
        roots: Vec<PathBuf>,
    },
}

/// The model a policy is for.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct ModelArgs {
    /// The model name, exactly as its manifests say it.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// The default policy: every model without one of its own.
    #[arg(long)]
    default: bool,
}

impl ModelArgs {
    fn id(&self) -> ModelId {
        self.model.as_deref().map_or(ModelId::DEFAULT, ModelId::of)
    }

    fn describe(&self) -> String {
        match &self.model {
            Some(name) => format!("model {name} (id {})", ModelId::of(name)),
            None => "the default policy".into(),
        }
    }
}

/// What every record needs: its sequence, its root signer, where it goes.
#[derive(clap::Args)]
struct RecordArgs {
    /// The record's sequence: one above the newest keyring update the server lists.
    #[arg(long, value_name = "N")]
    seq: u64,
    /// The root signs: --key ROOT.key, or --signer-cmd with --signer-pub ROOT.pub.
    #[command(flatten)]
    signer: SignerArgs,
    /// Issue time in unix seconds (default: now; informational).
    #[arg(long, value_name = "UNIX")]
    issued_at: Option<u64>,
    /// Where to write the 144-byte record.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
}

/// Runs `npub keyring`.
pub fn run(args: Args) -> Result<(), Failure> {
    let (change, record, what) = match args.command {
        KeyringCommand::Show { records, roots } => return show(&records, &roots),
        KeyringCommand::ReleaseAdd { public, record } => {
            let public_key = public_key(&public)?;
            let what = format!("trust release key {}", KeyId::of(&public_key));
            (ReleaseChange::AddKey { public_key }, record, what)
        }
        KeyringCommand::ReleaseRevoke {
            release_key,
            record,
        } => {
            let key_id = key_id(&release_key)?;
            let what = format!("revoke release key {key_id}");
            (ReleaseChange::RevokeKey { key_id }, record, what)
        }
        KeyringCommand::ReleaseReplace {
            revoke,
            add,
            record,
        } => {
            let revoke = key_id(&revoke)?;
            let public_key = public_key(&add)?;
            let what = format!(
                "revoke release key {revoke} and trust {}",
                KeyId::of(&public_key)
            );
            let change = ReleaseChange::ReplaceKey { revoke, public_key };
            (change, record, what)
        }
        KeyringCommand::ReleasePolicy {
            model,
            threshold,
            keys,
            record,
        } => {
            let ids = keys
                .iter()
                .map(|k| key_id(k))
                .collect::<Result<Vec<_>, _>>()?;
            let policy = ReleasePolicy::new(model.id(), threshold, &ids)?;
            let names: Vec<String> = ids.iter().map(KeyId::to_string).collect();
            let what = format!("{}: {threshold} of {}", model.describe(), names.join(", "));
            (ReleaseChange::SetPolicy(policy), record, what)
        }
        KeyringCommand::ReleasePolicyRemove { model, record } => {
            let what = format!("remove {}", model.describe());
            let change = ReleaseChange::RemovePolicy { model: model.id() };
            (change, record, what)
        }
    };
    let update = TrustUpdate {
        sequence: record.seq,
        change: TrustChange::Release(change),
        issued_at: record.issued_at.unwrap_or_else(unix_now),
    };
    if update.sequence == 0 {
        return Err(Failure::Usage(
            "--seq 0: keyring updates count from 1".into(),
        ));
    }
    let signer = record.signer.signer()?;
    let bytes = sign_trust_update(&update, &signer)?;
    std::fs::write(&record.out, bytes)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", record.out.display())))?;
    let root = KeyId::of(&npub_core::release::Signer::public_key(&signer));
    println!(
        "record      {} ({} bytes)",
        record.out.display(),
        bytes.len()
    );
    println!("sequence    {}", update.sequence);
    println!("root key    {root}");
    println!("change      {what}");
    Ok(())
}

/// `npub keyring show`.
fn show(records: &[PathBuf], roots: &[PathBuf]) -> Result<(), Failure> {
    let roots = roots
        .iter()
        .map(|p| public_key(p))
        .collect::<Result<Vec<_>, _>>()?;
    for path in records {
        let bytes = read_file(path)?;
        if bytes.is_empty() || bytes.len() % npub_core::manifest::ROTATION_BYTES != 0 {
            return Err(Failure::Rejected(format!(
                "{}: {} bytes, not whole 144-byte records",
                path.display(),
                bytes.len()
            )));
        }
        for record in bytes.chunks_exact(npub_core::manifest::ROTATION_BYTES) {
            let reject =
                |e: npub_core::Error| Failure::Rejected(format!("{}: {e}", path.display()));
            let (root, update) = TrustUpdate::decode(record).map_err(reject)?;
            println!(
                "sequence {:>4}  root {root}  {}",
                update.sequence,
                describe(&update.change)
            );
            if !roots.is_empty() {
                check_signature(record, &roots).map_err(reject)?;
                println!("               signature verifies under root {root}");
            }
        }
    }
    Ok(())
}

/// The record's signature verifies under one of `roots`.
fn check_signature(record: &[u8], roots: &[[u8; 32]]) -> Result<(), npub_core::Error> {
    npub_core::release::check_update_signature(record, roots).map(|_| ())
}

fn describe(change: &TrustChange) -> String {
    match change {
        TrustChange::Keyring(KeyringChange::Add { public_key }) => {
            format!("signing key add {}", KeyId::of(public_key))
        }
        TrustChange::Keyring(KeyringChange::Revoke { key_id }) => {
            format!("signing key revoke {key_id}")
        }
        TrustChange::Keyring(KeyringChange::Replace { revoke, public_key }) => {
            format!("signing key replace {revoke} by {}", KeyId::of(public_key))
        }
        TrustChange::Release(ReleaseChange::AddKey { public_key }) => {
            format!("release key add {}", KeyId::of(public_key))
        }
        TrustChange::Release(ReleaseChange::RevokeKey { key_id }) => {
            format!("release key revoke {key_id}")
        }
        TrustChange::Release(ReleaseChange::ReplaceKey { revoke, public_key }) => {
            format!("release key replace {revoke} by {}", KeyId::of(public_key))
        }
        TrustChange::Release(ReleaseChange::SetPolicy(p)) => {
            let keys: Vec<String> = p.keys().iter().map(KeyId::to_string).collect();
            format!(
                "release policy for model id {}: {} of {}",
                p.model(),
                p.threshold(),
                keys.join(", ")
            )
        }
        TrustChange::Release(ReleaseChange::RemovePolicy { model }) => {
            format!("release policy remove for model id {model}")
        }
    }
}

fn public_key(path: &Path) -> Result<[u8; 32], Failure> {
    npub_core::keypair::read_public_key(path)
        .map_err(|e| Failure::Usage(format!("cannot use {}: {e}", path.display())))
}

/// A key named by its public key file or its 16-hex-digit id.
fn key_id(key: &str) -> Result<KeyId, Failure> {
    if let Some(id) = KeyId::from_hex(key) {
        return Ok(id);
    }
    let path = Path::new(key);
    if path.exists() {
        return Ok(KeyId::of(&public_key(path)?));
    }
    Err(Failure::Usage(format!(
        "{key}: neither a public key file nor a key id (16 hex digits)"
    )))
}
