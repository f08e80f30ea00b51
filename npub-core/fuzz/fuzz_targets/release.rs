//! Release bundles and keyring updates of every action from arbitrary bytes: nothing may panic,
//! and whatever decodes must survive a decode → encode (→ sign) round trip unchanged.
//!
//! Every input goes through every door: `Bundle::parse`, `release::check` against a trust
//! holding the fuzz release keys (seeds 0x44 and 0x45 trusted, 0x47 trusted outside the pair
//! policy, 0x48 revoked; corpus/release/ is signed with them) for model "fuzz" (one signature by
//! any key) and "fuzz-pair" (2 of 0x44, 0x45), `TrustUpdate::decode`, and `apply_update` with the
//! server root (0x43) and the release root (0x46).
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use npub_core::Accel;
use npub_core::keypair::KeyPair;
use npub_core::manifest::{Keyring, ROTATION_SIGNED_BYTES};
use npub_core::release::{
    self, Bundle, ModelId, ReleaseFacts, ReleasePolicy, ReleaseTrust, TrustUpdate, sign_release,
};

struct Keys {
    signer: KeyPair,
    trust: ReleaseTrust<8, 4>,
    root: [u8; 32],
    release_root: [u8; 32],
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let pair = |seed: u8| KeyPair::from_seed([seed; 32]).public_key();
        let mut trust = ReleaseTrust::new();
        let a = trust.add_key(&pair(0x44)).unwrap();
        let b = trust.add_key(&pair(0x45)).unwrap();
        trust.add_key(&pair(0x47)).unwrap();
        let revoked = trust.add_key(&pair(0x48)).unwrap();
        trust.revoke_key(revoked).unwrap();
        trust
            .set_policy(ReleasePolicy::new(ModelId::of("fuzz-pair"), 2, &[a, b]).unwrap())
            .unwrap();
        Keys {
            signer: KeyPair::from_seed([0x44; 32]),
            trust,
            root: pair(0x43),
            release_root: pair(0x46),
        }
    })
}

fn facts(model: &str) -> ReleaseFacts<'_> {
    ReleaseFacts {
        pack_sha256: &[0x11; 32],
        model_name: model,
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        io_digest: &[0; 32],
        selftest_digest: &[0; 32],
    }
}

fuzz_target!(|data: &[u8]| {
    let k = keys();
    for model in ["fuzz", "fuzz-pair"] {
        if let Ok(ok) = release::check(&k.trust, data, &facts(model)) {
            assert!(ok.valid() >= ok.threshold() && ok.threshold() > 0);
        }
    }

    let mut ring = Keyring::<4>::new();
    let mut trust = k.trust.clone();
    if release::apply_update(&mut ring, &mut trust, data, &[k.root], &[k.release_root]).is_ok() {
        assert!(ring.update_sequence() > 0);
    }
    if let Ok((root_key_id, update)) = TrustUpdate::decode(data) {
        assert_eq!(
            &update.encode(root_key_id)[..],
            &data[..ROTATION_SIGNED_BYTES]
        );
    }

    // Past the signatures: decode each one's fields as if it had verified, re-sign them, and
    // check that the bytes a device compares come back unchanged.
    let Ok(bundle) = Bundle::parse(data) else {
        return;
    };
    assert!((1..=release::MAX_BUNDLE_SIGNATURES).contains(&bundle.len()));
    for signature in bundle.signatures() {
        let Ok(fields) = signature.fields() else {
            continue;
        };
        let again = sign_release(&fields, &k.signer).expect("decoded fields re-encode");
        assert_eq!(&again[16..224], &signature.as_bytes()[16..224]);
    }
});
