//! Signs the fixtures the measured code verifies: a small valid pack, its manifest, the signing
//! key's public half, and a root-signed keyring update with the root's public half, written to
//! OUT_DIR. Deterministic (fixed seed, fixed times).
use std::path::PathBuf;

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{
    HW_CLASS_RA8P1, KeyringChange, KeyringUpdate, ManifestFields, PackFacts, sign_keyring_update,
    sign_manifest,
};
use npub_core::release::{
    ModelId, ReleaseChange, ReleaseFields, ReleasePolicy, TrustChange, TrustUpdate, encode_bundle,
    sign_release, sign_trust_update,
};
use npub_core::{Accel, Role};

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::copy("memory.x", out.join("memory.x")).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");

    let weights: Vec<u8> = (0..2048u32).map(|i| (i * 31 % 251) as u8).collect();
    let pack = build_pack(
        &[0x01, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00],
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 4096,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    let facts = PackFacts::of(&pack).unwrap();
    let key = KeyPair::from_seed([0x42; 32]);
    let fields = ManifestFields {
        sequence: 2,
        model_name: "measure",
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        hw_class: HW_CLASS_RA8P1,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest: [0; 32],
        issued_at: 1_700_000_000,
        expires_at: 1_900_000_000,
    };
    let manifest = sign_manifest(&fields, &key).unwrap();
    let root = KeyPair::from_seed([0x43; 32]);
    let update = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: KeyPair::from_seed([0x44; 32]).public_key(),
        },
        issued_at: 1_700_000_000,
    };
    std::fs::write(out.join("update.bin"), sign_keyring_update(&update, &root)).unwrap();
    std::fs::write(out.join("root.bin"), root.public_key()).unwrap();
    std::fs::write(out.join("pack.bin"), &pack).unwrap();
    std::fs::write(out.join("manifest.bin"), manifest).unwrap();
    std::fs::write(out.join("pubkey.bin"), key.public_key()).unwrap();

    // A two-person release of the same pack (release keys 0x45 and 0x46), and a release-root
    // record (0x47) that sets a 2-of-2 policy for it.
    let release = ReleaseFields {
        pack_sha256: facts.sha256,
        model_name: "measure",
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        io_digest: [0; 32],
        selftest_digest: [0; 32],
        signed_at: 1_700_000_000,
    };
    let (alice, bob) = (
        KeyPair::from_seed([0x45; 32]),
        KeyPair::from_seed([0x46; 32]),
    );
    let bundle = encode_bundle(&[
        sign_release(&release, &alice).unwrap(),
        sign_release(&release, &bob).unwrap(),
    ])
    .unwrap();
    let release_root = KeyPair::from_seed([0x47; 32]);
    let policy =
        ReleasePolicy::new(ModelId::of("measure"), 2, &[alice.key_id(), bob.key_id()]).unwrap();
    let policy_update = TrustUpdate {
        sequence: 2,
        change: TrustChange::Release(ReleaseChange::SetPolicy(policy)),
        issued_at: 1_700_000_000,
    };
    let mut release_keys = alice.public_key().to_vec();
    release_keys.extend_from_slice(&bob.public_key());
    std::fs::write(out.join("bundle.bin"), bundle).unwrap();
    std::fs::write(out.join("release_keys.bin"), release_keys).unwrap();
    std::fs::write(out.join("release_root.bin"), release_root.public_key()).unwrap();
    std::fs::write(
        out.join("policy_update.bin"),
        sign_trust_update(&policy_update, &release_root).unwrap(),
    )
    .unwrap();
}
