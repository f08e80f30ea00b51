//! `npub keygen`, `npub sign` and `npub verify-manifest`, run as the real binary in a temporary
//! directory: the legitimate path is accepted, and each attack is refused with exit 1 and its own
//! message.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Role};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("npub-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn npub(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npub"))
        .args(args)
        .output()
        .expect("run npub")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit `code` and that stderr contains `needle`.
fn refused(o: &Output, code: i32, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout {}\nstderr {}",
        stdout(o),
        stderr(o)
    );
    assert!(
        stderr(o).contains(needle),
        "stderr {:?} lacks {needle:?}",
        stderr(o)
    );
}

fn ok(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout {}\nstderr {}",
        stdout(o),
        stderr(o)
    );
}

fn write_pack(path: &str, fill: u8) {
    write_pack_of(path, fill, 500);
}

/// A pack whose weights are `weights_len` bytes of `fill`.
fn write_pack_of(path: &str, fill: u8, weights_len: usize) {
    let weights = vec![fill; weights_len];
    let pack = build_pack(
        &[0x01, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00],
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 2048,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    std::fs::write(path, pack).unwrap();
}

/// A directory with a key pair, a pack and a manifest for it (sequence 10, model 2.0.0).
struct Setup {
    dir: TempDir,
    key: String,
    public: String,
    pack: String,
    manifest: String,
}

fn setup(name: &str) -> Setup {
    let dir = TempDir::new(name);
    let key = dir.path("signer");
    ok(&npub(&["keygen", "-o", &key]));
    let pack = dir.path("model.npub");
    write_pack(&pack, 2);
    let manifest = dir.path("model.manifest");
    ok(&sign(&key, &pack, "10", "2.0.0", &manifest, &[]));
    Setup {
        public: format!("{key}.pub"),
        dir,
        key,
        pack,
        manifest,
    }
}

fn sign(key: &str, pack: &str, seq: &str, version: &str, out: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "sign",
        pack,
        "--key",
        key,
        "--seq",
        seq,
        "--model",
        "person-detect",
        "--version",
        version,
        "-o",
        out,
    ];
    args.extend_from_slice(extra);
    npub(&args)
}

fn verify(s: &Setup, manifest: &str, pack: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "verify-manifest",
        manifest,
        "--pack",
        pack,
        "--pubkey",
        &s.public,
    ];
    args.extend_from_slice(extra);
    npub(&args)
}

fn key_id(public: &str) -> String {
    let key = npub_core::keypair::read_public_key(Path::new(public)).unwrap();
    npub_core::manifest::KeyId::of(&key).to_string()
}

// ----- the legitimate path ------------------------------------------------------------------------

#[test]
fn keygen_writes_a_0600_secret_and_a_public_key() {
    let s = setup("keygen");
    let mode = std::fs::metadata(&s.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        std::fs::read_to_string(&s.public)
            .unwrap()
            .starts_with("npub-ed25519-public-v1 ")
    );
    assert_eq!(std::fs::metadata(&s.manifest).unwrap().len(), 280);
}

#[test]
fn accepts_a_manifest_signed_for_its_pack() {
    let s = setup("accept");
    let out = verify(&s, &s.manifest, &s.pack, &["--last-seq", "9"]);
    ok(&out);
    assert!(stdout(&out).contains("manifest OK"), "{}", stdout(&out));
    let json = verify(
        &s,
        &s.manifest,
        &s.pack,
        &["--json", "--hw", "1", "--accel", "ethos-u55-256"],
    );
    ok(&json);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["sequence"], 10);
    assert_eq!(v["model_version"], "2.0.0");
    assert_eq!(v["key_id"], key_id(&s.public));
}

#[test]
fn accepts_a_legitimate_rollback_older_version_at_a_higher_sequence() {
    let s = setup("rollback");
    let old_pack = s.dir.path("model-1.0.0.npub");
    write_pack(&old_pack, 1);
    let rollback = s.dir.path("rollback.manifest");
    ok(&sign(&s.key, &old_pack, "11", "1.0.0", &rollback, &[]));
    ok(&verify(&s, &rollback, &old_pack, &["--last-seq", "10"]));
}

// ----- the attacks ----------------------------------------------------------------------------------

#[test]
fn rejects_garbled_signature_arbitrary_installation() {
    let s = setup("garbled");
    let mut m = std::fs::read(&s.manifest).unwrap();
    m[250] ^= 0x01;
    let bad = s.dir.path("garbled.manifest");
    std::fs::write(&bad, &m).unwrap();
    refused(
        &verify(&s, &bad, &s.pack, &[]),
        1,
        "signature does not verify",
    );
}

#[test]
fn rejects_unsigned_manifest_arbitrary_installation() {
    let s = setup("unsigned");
    let mut m = std::fs::read(&s.manifest).unwrap();
    m[216..].fill(0);
    let bad = s.dir.path("unsigned.manifest");
    std::fs::write(&bad, &m).unwrap();
    refused(
        &verify(&s, &bad, &s.pack, &[]),
        1,
        "signature does not verify",
    );
}

#[test]
fn rejects_manifest_from_an_unknown_key_arbitrary_installation() {
    let s = setup("unknown");
    let other = s.dir.path("other");
    ok(&npub(&["keygen", "-o", &other]));
    let other_pub = format!("{other}.pub");
    let out = npub(&[
        "verify-manifest",
        &s.manifest,
        "--pack",
        &s.pack,
        "--pubkey",
        &other_pub,
    ]);
    refused(&out, 1, "is not in the keyring");
}

#[test]
fn rejects_manifest_from_a_revoked_key_key_compromise() {
    let s = setup("revoked");
    let id = key_id(&s.public);
    refused(
        &verify(&s, &s.manifest, &s.pack, &["--revoked", &id]),
        1,
        "has been revoked",
    );
}

#[test]
fn rejects_replayed_older_sequence_rollback_attack() {
    let s = setup("older");
    refused(
        &verify(&s, &s.manifest, &s.pack, &["--last-seq", "11"]),
        1,
        "sequence 10 is not above the last accepted sequence 11",
    );
}

#[test]
fn rejects_replayed_equal_sequence_replay_attack() {
    let s = setup("equal");
    refused(
        &verify(&s, &s.manifest, &s.pack, &["--last-seq", "10"]),
        1,
        "sequence 10 is not above the last accepted sequence 10",
    );
}

#[test]
fn rejects_expired_manifest_freeze_attack() {
    let s = setup("expired");
    let old = s.dir.path("old.manifest");
    ok(&sign(
        &s.key,
        &s.pack,
        "12",
        "2.0.0",
        &old,
        &["--issued-at", "1000", "--expires", "+1h"],
    ));
    refused(
        &verify(&s, &old, &s.pack, &["--last-seq", "10"]),
        1,
        "expired at 4600",
    );
}

#[test]
fn rejects_pack_longer_than_stated_endless_data() {
    let s = setup("endless");
    let mut pack = std::fs::read(&s.pack).unwrap();
    let len = pack.len();
    pack.extend_from_slice(&[0; 100_000]);
    let longer = s.dir.path("longer.npub");
    std::fs::write(&longer, &pack).unwrap();
    refused(
        &verify(&s, &s.manifest, &longer, &[]),
        1,
        &format!("but the manifest's pack_len is {len}; download aborted"),
    );
}

#[test]
fn rejects_pack_whose_hash_differs_wrong_software() {
    let s = setup("hash");
    let mut pack = std::fs::read(&s.pack).unwrap();
    let last = pack.len() - 1;
    pack[last] ^= 0xff; // same length, same header: only the SHA-256 can tell
    let evil = s.dir.path("evil.npub");
    std::fs::write(&evil, &pack).unwrap();
    refused(&verify(&s, &s.manifest, &evil, &[]), 1, "pack: SHA-256 is");
}

#[test]
fn rejects_a_manifest_for_another_pack_mix_and_match() {
    let s = setup("mix");
    let other = s.dir.path("other.npub");
    write_pack(&other, 3);
    refused(
        &verify(&s, &s.manifest, &other, &[]),
        1,
        "NPU1 header checksum (word 7)",
    );
}

/// Another pack with its own IO bindings beside it: the verdict is about the pack (what is
/// wrong), not about the bindings that came with it.
#[test]
fn rejects_another_pack_with_its_own_bindings_by_blaming_the_pack() {
    let s = setup("mix-io");
    let other = s.dir.path("other.npub");
    write_pack(&other, 3);
    std::fs::write(
        format!("{other}.io.json"),
        npub_core::io_bindings::to_json(&[]).unwrap(),
    )
    .unwrap();
    let out = verify(&s, &s.manifest, &other, &[]);
    refused(&out, 1, "NPU1 header checksum (word 7)");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("IO bindings"));
}

#[test]
fn rejects_a_manifest_for_a_pack_of_another_length_naming_whose_length_is_which() {
    let s = setup("length");
    let manifest_len = std::fs::metadata(&s.pack).unwrap().len();
    for weights in [100, 5000] {
        let other = s.dir.path(&format!("other{weights}.npub"));
        write_pack_of(&other, 7, weights);
        let other_len = std::fs::metadata(&other).unwrap().len();
        refused(
            &verify(&s, &s.manifest, &other, &[]),
            1,
            &format!(
                "the pack is {other_len} bytes (its NPU1 total_bytes), but the manifest \
                 describes a pack of {manifest_len} bytes"
            ),
        );
    }
}

#[test]
fn rejects_a_manifest_for_another_hardware_class_wrong_hardware() {
    let s = setup("hw");
    refused(
        &verify(&s, &s.manifest, &s.pack, &["--hw", "2"]),
        1,
        "hw_class is 1 but this device's hardware class is 2",
    );
    let other_hw = s.dir.path("hw7.manifest");
    ok(&sign(
        &s.key,
        &s.pack,
        "11",
        "2.0.0",
        &other_hw,
        &["--hw", "7"],
    ));
    refused(
        &verify(&s, &other_hw, &s.pack, &["--hw", "1"]),
        1,
        "hw_class is 7",
    );
}

#[test]
fn rejects_a_manifest_for_another_accelerator() {
    let s = setup("accel");
    refused(
        &verify(&s, &s.manifest, &s.pack, &["--accel", "ethos-u55-128"]),
        1,
        "this device's NPU is ethos-u55-128",
    );
}

#[test]
fn rejects_with_json_verdict_and_exit_1() {
    let s = setup("json");
    let out = verify(&s, &s.manifest, &s.pack, &["--last-seq", "10", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert!(v["error"].as_str().unwrap().contains("sequence 10"));
}

// ----- keys and signing refusals ----------------------------------------------------------------------

#[test]
fn rejects_signing_with_a_key_readable_by_others() {
    let s = setup("open");
    std::fs::set_permissions(&s.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = sign(
        &s.key,
        &s.pack,
        "11",
        "2.0.0",
        &s.dir.path("x.manifest"),
        &[],
    );
    refused(&out, 2, "mode 0644");
}

/// `--key KEYFILE.pub` is the wrong file, not a leaked secret: the refusal says which file to
/// give, and not to `chmod` a public key.
#[test]
fn rejects_signing_with_the_public_key_file_naming_the_secret_one() {
    let s = setup("pubkey");
    let public = format!("{}.pub", s.key);
    let out = sign(
        &public,
        &s.pack,
        "11",
        "2.0.0",
        &s.dir.path("x.manifest"),
        &[],
    );
    refused(&out, 2, "is a public key file");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without .pub"), "{err}");
    assert!(!err.contains("chmod"), "{err}");
    assert!(!err.contains("leaked"), "{err}");
}

#[test]
fn rejects_keygen_over_an_existing_key() {
    let s = setup("exists");
    refused(&npub(&["keygen", "-o", &s.key]), 2, "already exists");
}

#[test]
fn rejects_signing_sequence_zero_an_invalid_pack_and_a_conflicting_accel() {
    let s = setup("refuse");
    let out = s.dir.path("x.manifest");
    refused(
        &sign(&s.key, &s.pack, "0", "1", &out, &[]),
        2,
        "sequence is 0",
    );
    refused(
        &sign(
            &s.key,
            &s.pack,
            "1",
            "1",
            &out,
            &["--accel", "ethos-u55-64"],
        ),
        2,
        "disagrees",
    );
    let junk = s.dir.path("junk.npub");
    std::fs::write(&junk, b"not a pack at all, definitely not").unwrap();
    refused(
        &sign(&s.key, &junk, "1", "1", &out, &[]),
        1,
        "not a valid pack",
    );
}

// ----- IO bindings ----------------------------------------------------------------------------------

#[test]
fn io_bindings_beside_the_pack_are_signed_and_checked() {
    let s = setup("io");
    let json = format!("{}.io.json", s.pack);
    std::fs::write(&json, npub_core::io_bindings::to_json(&[]).unwrap()).unwrap();
    let with_io = s.dir.path("io.manifest");
    let signed = sign(&s.key, &s.pack, "11", "2.0.0", &with_io, &[]);
    ok(&signed);
    assert!(!stdout(&signed).contains(&format!("io_digest   {}", "0".repeat(64))));
    ok(&verify(&s, &with_io, &s.pack, &["--last-seq", "10"]));
    // The manifest signed without bindings no longer matches the pack now that it has some.
    refused(
        &verify(&s, &s.manifest, &s.pack, &[]),
        1,
        "not the bindings this manifest was signed with",
    );
    std::fs::remove_file(&json).unwrap();
    refused(
        &verify(&s, &with_io, &s.pack, &["--last-seq", "10"]),
        1,
        "not the bindings this manifest was signed with",
    );
}
