//! Manifests and keyring updates from arbitrary bytes: nothing may panic, and whatever decodes
//! must survive an encode → sign → verify round trip unchanged.
//!
//! Every input goes through every door: `verify` against a keyring holding the fuzz key (seed
//! 0x42 × 32; the corpus under corpus/manifest/ is signed with it), the field decoder that runs
//! after a signature verifies, `KeyringUpdate::decode`, and `Keyring::apply_update` with the fuzz
//! root (seed 0x43).
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use npub_core::Accel;
use npub_core::keypair::KeyPair;
use npub_core::manifest::{self, Keyring, KeyringUpdate, ManifestView, Policy, sign_manifest};

struct Keys {
    signer: KeyPair,
    root: [u8; 32],
    ring: Keyring<4>,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let signer = KeyPair::from_seed([0x42; 32]);
        let mut ring = Keyring::new();
        ring.add(&signer.public_key()).unwrap();
        Keys {
            signer,
            root: KeyPair::from_seed([0x43; 32]).public_key(),
            ring,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let k = keys();
    let device = Policy {
        hw_class: manifest::HW_CLASS_RA8P1,
        accel: Accel::EthosU55_256,
        slot_bytes: 1 << 20,
        last_sequence: 0,
        now: Some(1_750_000_000),
    };
    let _ = manifest::verify(data, &k.ring, &device);

    let _ = KeyringUpdate::decode(data);
    let mut ring = k.ring.clone();
    if ring.apply_update(data, &[k.root]).is_ok() {
        assert!(ring.update_sequence() > 0);
    }

    // Past the signature: decode the fields as if the signature had verified, then re-sign them
    // and check that the device reads back exactly what was decoded.
    let Ok(view) = ManifestView::new(data) else {
        return;
    };
    let Ok(fields) = view.fields() else {
        return;
    };
    let signed = sign_manifest(&fields, &k.signer).expect("decoded fields re-encode");
    let same_device = Policy {
        hw_class: fields.hw_class,
        accel: fields.accel,
        slot_bytes: fields.pack_len,
        last_sequence: fields.sequence - 1,
        now: None,
    };
    let verified = manifest::verify(&signed, &k.ring, &same_device).expect("re-signed verifies");
    assert_eq!(verified.sequence(), fields.sequence);
    assert_eq!(verified.model_name(), fields.model_name);
    assert_eq!(verified.model_version(), fields.model_version);
    assert_eq!(verified.pack_sha256(), fields.pack_sha256);
    assert_eq!(
        &signed[16..manifest::SIGNED_BYTES],
        &data[16..manifest::SIGNED_BYTES]
    );
});
