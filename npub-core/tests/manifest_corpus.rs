//! The manifest fuzz corpus (fuzz/corpus/manifest/) through the same doors as the fuzz target,
//! without a fuzzer: nothing panics, and each seed named `accept_*` or `reject_<Variant>_*` gets
//! exactly that verdict. Seeds whose name contains "update" are keyring updates; the others are
//! manifests. Crash reproducers added later need only not panic.
use std::path::Path;

use npub_core::keypair::KeyPair;
use npub_core::manifest::{self, Keyring, KeyringUpdate, ManifestView, Policy};
use npub_core::{Accel, Error};

fn device() -> Policy {
    Policy {
        hw_class: manifest::HW_CLASS_RA8P1,
        accel: Accel::EthosU55_256,
        slot_bytes: 1 << 20,
        last_sequence: 0,
        now: Some(1_750_000_000),
    }
}

fn ring() -> Keyring<4> {
    let mut ring = Keyring::new();
    ring.add(&KeyPair::from_seed([0x42; 32]).public_key())
        .unwrap();
    ring
}

fn verdict(name: &str, data: &[u8]) -> Result<(), Error> {
    let root = KeyPair::from_seed([0x43; 32]).public_key();
    let mut updated = ring();
    let update = updated.apply_update(data, &[root]);
    let verified = manifest::verify(data, &ring(), &device()).map(|_| ());
    let _ = KeyringUpdate::decode(data);
    if let Ok(view) = ManifestView::new(data) {
        let _ = view.fields();
    }
    if name.contains("update") {
        update
    } else {
        verified
    }
}

#[test]
fn every_manifest_corpus_seed_gets_the_verdict_its_name_states() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/manifest");
    let mut named = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        let got = verdict(&name, &data);
        if name.starts_with("accept_") {
            assert_eq!(got, Ok(()), "{name}");
            named += 1;
        } else if let Some(rest) = name.strip_prefix("reject_") {
            let variant = rest.split('_').next().unwrap();
            let err = got.expect_err(&name);
            assert_eq!(self::variant(&err), variant, "{name}: got {err:?}");
            named += 1;
        }
    }
    assert!(named >= 20, "only {named} named seeds in {}", dir.display());
}

/// The name of an error's variant within its domain, as `Debug` spells it
/// (`Stream(Truncated { .. })` → `Truncated`).
fn variant(e: &Error) -> String {
    let s = format!("{e:?}");
    let inner = s.split_once('(').map_or(s.as_str(), |(_, inner)| inner);
    inner
        .split([' ', '{', '(', ')'])
        .next()
        .unwrap()
        .to_string()
}
