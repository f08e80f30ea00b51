//! Builds, at compile time on the host, what the firmware installs: the `small_net_u55_256` Vela
//! fixture as an NPU1 pack (region 0 the baked weights, region 1 the scratch arena, region 2
//! scratch_fast of size 0 — as `npub pack` maps Vela output), its manifest signed with a fixed test
//! key, and that key's public half for the firmware's keyring.
use std::path::PathBuf;

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keys::KeyPair;
use npub_core::manifest::{ManifestFields, PackFacts, sign_manifest};
use npub_core::{Accel, Role};

/// The case: the largest fixture (132 KiB of weights), so the install spans many sectors.
const CASE: &str = "small_net_u55_256";
/// Its scratch arena size, from the case's meta.json.
const SCRATCH_BYTES: u32 = 19_424;
/// The test signing key's seed: a fixed, public value — this key signs nothing but this test.
const TEST_KEY_SEED: [u8; 32] = [0x5A; 32];
/// Must match `HW_CLASS` in src/main.rs.
const HW_CLASS: u32 = 0x8A81;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let case = dir.join("../../../shared/fixtures/vela/cases").join(CASE);
    println!("cargo::rerun-if-changed={}", case.display());
    println!("cargo::rerun-if-changed=memory.x");
    let read = |f: &str| std::fs::read(case.join(f)).unwrap_or_else(|e| panic!("{CASE}/{f}: {e}"));
    let (cmd, weights) = (read("cmd.bin"), read("weights.bin"));
    let pack = build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: SCRATCH_BYTES,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .expect("building the pack");
    let facts = PackFacts::of(&pack).expect("the pack validates");
    let key = KeyPair::from_seed(TEST_KEY_SEED);
    let manifest = sign_manifest(
        &ManifestFields {
            sequence: 1,
            model_name: "small_net",
            model_version: "1.0.0",
            accel: Accel::EthosU55_256,
            hw_class: HW_CLASS,
            pack_len: facts.len,
            pack_checksum: facts.checksum,
            pack_sha256: facts.sha256,
            io_digest: [0; 32],
            issued_at: 1_700_000_000,
            expires_at: 0,
        },
        &key,
    )
    .expect("signing the manifest");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::write(out.join("pack.npub"), &pack).unwrap();
    std::fs::write(out.join("manifest.bin"), manifest).unwrap();
    std::fs::write(out.join("trust.pub.bin"), key.public_key()).unwrap();
    // cortex-m-rt's link.x includes memory.x from the linker search path.
    std::fs::copy(dir.join("memory.x"), out.join("memory.x")).unwrap();
    println!("cargo::rustc-link-search={}", out.display());
}
