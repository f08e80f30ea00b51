//! `npub release sign | verify | show` and `npub keyring …`, run as the real binary in a
//! temporary directory: a two-person release in one bundle, a signature made by OpenSSL through
//! `--signer-cmd` (the worked example in docs/examples/), each refusal with its exit code and
//! its reason, and root-signed records that npub-core applies.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::manifest::{KeyId, Keyring};
use npub_core::release::{self, Applies, ModelId, ReleasePolicy, ReleaseTrust};
use npub_core::{Accel, Role};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("npub-release-{name}-{}", std::process::id()));
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts exit `code` and that stderr contains `needle`.
fn refused(o: &Output, code: i32, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout {}\nstderr {}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains(needle),
        "stderr {:?} lacks {needle:?}",
        text(&o.stderr)
    );
}

fn ok(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout {}\nstderr {}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

fn write_pack(path: &str, fill: u8) {
    let weights = vec![fill; 500];
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

/// A directory with two release keys (alice, bob), a root, and a pack.
struct Setup {
    dir: TempDir,
    pack: String,
    bundle: String,
}

impl Setup {
    fn new(name: &str) -> Self {
        let dir = TempDir::new(name);
        for key in ["alice", "bob", "root"] {
            ok(&npub(&["keygen", "-o", &dir.path(key)]));
        }
        let pack = dir.path("model.npub");
        write_pack(&pack, 2);
        Setup {
            bundle: dir.path("model.npub.release"),
            pack,
            dir,
        }
    }

    fn key(&self, name: &str) -> String {
        self.dir.path(name)
    }

    fn public(&self, name: &str) -> String {
        format!("{}.pub", self.dir.path(name))
    }

    fn key_id(&self, name: &str) -> String {
        let key = npub_core::keypair::read_public_key(Path::new(&self.public(name))).unwrap();
        KeyId::of(&key).to_string()
    }

    /// `npub release sign` of the pack as person-detect `version`, with `signer` flags.
    fn sign(&self, version: &str, signer: &[&str]) -> Output {
        let mut args = vec![
            "release",
            "sign",
            &self.pack,
            "--model",
            "person-detect",
            "--version",
            version,
            "-o",
            &self.bundle,
        ];
        args.extend_from_slice(signer);
        npub(&args)
    }

    fn sign_with(&self, key: &str) -> Output {
        self.sign("1.0.0", &["--key", &self.key(key)])
    }

    /// `npub release verify` of `pack` as person-detect `version` with `extra` flags.
    fn verify(&self, pack: &str, version: &str, extra: &[&str]) -> Output {
        let mut args = vec![
            "release",
            "verify",
            pack,
            "--release",
            &self.bundle,
            "--model",
            "person-detect",
            "--version",
            version,
        ];
        args.extend_from_slice(extra);
        npub(&args)
    }
}

// ----- the legitimate path ------------------------------------------------------------------------

#[test]
fn accepts_a_two_person_release_signed_into_one_bundle() {
    let s = Setup::new("two");
    ok(&s.sign_with("alice"));
    let second = s.sign_with("bob");
    ok(&second);
    assert!(text(&second.stdout).contains("2 signature(s) now"));
    let (a, b) = (s.public("alice"), s.public("bob"));
    let out = s.verify(
        &s.pack,
        "1.0.0",
        &["--pubkey", &a, "--pubkey", &b, "--threshold", "2"],
    );
    ok(&out);
    assert!(
        text(&out.stdout).contains("release OK: 2 of 2"),
        "{}",
        text(&out.stdout)
    );
    let shown = npub(&["release", "show", &s.bundle, "--json"]);
    ok(&shown);
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(v["model_name"], "person-detect");
    assert_eq!(v["model_version"], "1.0.0");
    assert_eq!(v["accel"], "ethos-u55-256");
    assert_eq!(v["signatures"][0]["key_id"], s.key_id("alice"));
    assert_eq!(v["signatures"][1]["key_id"], s.key_id("bob"));
    // The bundle is the documented format: 16-byte header, then 288 bytes per signature.
    assert_eq!(std::fs::metadata(&s.bundle).unwrap().len(), 16 + 2 * 288);
}

/// The worked example of docs/examples/openssl-ed25519-signer.sh, as written there: a key
/// OpenSSL made and holds, its npub public key file made with the shell line the script gives,
/// signatures printed raw, then piped through `base64` and `od` (hex) to exercise the three
/// forms npub reads.
#[test]
fn accepts_a_release_signed_by_openssl_through_signer_cmd() {
    let s = Setup::new("openssl");
    let pem = s.dir.path("release.pem");
    let public = s.dir.path("release.pub");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/examples/openssl-ed25519-signer.sh"
    );
    let made = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out", &pem])
        .output()
        .expect("openssl (in .ci/run's packages)");
    ok(&made);
    let to_pub = format!(
        "printf 'npub-ed25519-public-v1 %s\\n' \"$(openssl pkey -in '{pem}' -pubout -outform DER \
         | tail -c 32 | od -An -tx1 | tr -d ' \\n')\" > '{public}'"
    );
    ok(&Command::new("sh").args(["-c", &to_pub]).output().unwrap());
    let raw = format!("sh '{script}' '{pem}'");
    let forms = [
        raw.clone(),
        format!("{raw} | base64"),
        format!("{raw} | od -An -tx1 | tr -d ' \\n'"),
    ];
    for (i, cmd) in forms.iter().enumerate() {
        let _ = std::fs::remove_file(&s.bundle);
        let version = format!("1.0.{i}");
        ok(&s.sign(&version, &["--signer-cmd", cmd, "--signer-pub", &public]));
        ok(&s.verify(&s.pack, &version, &["--pubkey", &public]));
    }
    // And a root record the same way.
    let record = s.dir.path("add.npk");
    let args = [
        "keyring",
        "release-add",
        &s.public("alice"),
        "--seq",
        "1",
        "--signer-cmd",
        &raw,
        "--signer-pub",
        &public,
        "-o",
        &record,
    ];
    ok(&npub(&args));
    ok(&npub(&["keyring", "show", &record, "--root", &public]));
}

// ----- refusals ------------------------------------------------------------------------------------

#[test]
fn rejects_fewer_than_k_signatures() {
    let s = Setup::new("few");
    ok(&s.sign_with("alice"));
    let (a, b) = (s.public("alice"), s.public("bob"));
    let out = s.verify(
        &s.pack,
        "1.0.0",
        &["--pubkey", &a, "--pubkey", &b, "--threshold", "2"],
    );
    refused(
        &out,
        1,
        "too few valid release signatures: the model's policy needs 2, found 1",
    );
    let json = s.verify(
        &s.pack,
        "1.0.0",
        &["--pubkey", &a, "--pubkey", &b, "--threshold", "2", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["valid"], false);
}

#[test]
fn rejects_a_release_checked_as_another_model_version_or_pack() {
    let s = Setup::new("other");
    ok(&s.sign_with("alice"));
    let a = s.public("alice");
    refused(
        &s.verify(&s.pack, "2.0.0", &["--pubkey", &a]),
        1,
        "released another version",
    );
    let other = s.dir.path("other.npub");
    write_pack(&other, 3);
    refused(
        &s.verify(&other, "1.0.0", &["--pubkey", &a]),
        1,
        "signed over pack sha256",
    );
    let out = npub(&[
        "release",
        "verify",
        &s.pack,
        "--release",
        &s.bundle,
        "--model",
        "other-model",
        "--version",
        "1.0.0",
        "--pubkey",
        &a,
    ]);
    refused(&out, 1, "released another model");
}

#[test]
fn rejects_a_revoked_or_unknown_release_key() {
    let s = Setup::new("revoked");
    ok(&s.sign_with("alice"));
    let a = s.public("alice");
    let id = s.key_id("alice");
    refused(
        &s.verify(&s.pack, "1.0.0", &["--pubkey", &a, "--revoked", &id]),
        1,
        "was revoked",
    );
    let b = s.public("bob");
    refused(
        &s.verify(&s.pack, "1.0.0", &["--pubkey", &b]),
        1,
        "is not one of the trusted release keys",
    );
}

#[test]
fn rejects_a_tampered_or_garbage_bundle() {
    let s = Setup::new("tampered");
    ok(&s.sign_with("alice"));
    let a = s.public("alice");
    let mut bytes = std::fs::read(&s.bundle).unwrap();
    bytes[16 + 60] ^= 1; // model_name, after signing
    std::fs::write(&s.bundle, &bytes).unwrap();
    refused(
        &s.verify(&s.pack, "1.0.0", &["--pubkey", &a]),
        1,
        "does not verify",
    );
    std::fs::write(&s.bundle, b"not a bundle at all").unwrap();
    refused(
        &s.verify(&s.pack, "1.0.0", &["--pubkey", &a]),
        1,
        "release bundle: magic",
    );
    refused(
        &npub(&["release", "show", &s.bundle]),
        1,
        "release bundle: magic",
    );
}

#[test]
fn rejects_a_second_signature_by_the_same_key_and_another_release_in_the_bundle() {
    let s = Setup::new("same");
    ok(&s.sign_with("alice"));
    refused(&s.sign_with("alice"), 2, "already signed this release");
    refused(
        &s.sign("2.0.0", &["--key", &s.key("bob")]),
        2,
        "holds the release of person-detect 1.0.0",
    );
    assert_eq!(
        std::fs::metadata(&s.bundle).unwrap().len(),
        16 + 288,
        "left as it was"
    );
}

#[test]
fn rejects_sign_without_a_signer_and_bad_release_fields() {
    let s = Setup::new("usage");
    refused(&s.sign("1.0.0", &[]), 2, "--key");
    refused(
        &s.sign("", &["--key", &s.key("alice")]),
        2,
        "model_version is empty",
    );
}

#[test]
fn rejects_a_signer_cmd_that_fails_stalls_prints_garbage_or_uses_another_key() {
    let s = Setup::new("signer");
    let a = s.public("alice");
    let with = |cmd: &str, extra: &[&str]| {
        let mut args = vec!["--signer-cmd", cmd, "--signer-pub", &a];
        args.extend_from_slice(extra);
        s.sign("1.0.0", &args)
    };
    refused(&with("exit 3", &[]), 2, "failed (exit status: 3)");
    refused(
        &with("sleep 30", &["--signer-timeout", "1"]),
        2,
        "did not finish within 1 s (--signer-timeout); killed",
    );
    refused(
        &with("echo hello", &[]),
        2,
        "printed 6 bytes, not a signature",
    );
    // 64 zero bytes: a signature in form, by nobody.
    refused(
        &with("head -c 64 /dev/zero", &[]),
        2,
        "the external signer's signature does not verify under this key",
    );
    assert!(!Path::new(&s.bundle).exists(), "nothing written");
}

// ----- root-signed records -------------------------------------------------------------------------

#[test]
fn keyring_records_bring_release_keys_and_a_policy_that_npub_core_applies() {
    let s = Setup::new("records");
    let root = s.key("root");
    let record = |name: &str, args: &[&str], seq: &str| {
        let out = s.dir.path(name);
        let mut all = vec!["keyring"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--seq", seq, "--key", &root, "-o", &out]);
        ok(&npub(&all));
        std::fs::read(&out).unwrap()
    };
    let (a, b) = (s.public("alice"), s.public("bob"));
    let bob_id = s.key_id("bob");
    let records = [
        record("1.npk", &["release-add", &a], "1"),
        record("2.npk", &["release-add", &b], "2"),
        record(
            "3.npk",
            &[
                "release-policy",
                "--model",
                "person-detect",
                "--threshold",
                "2",
                "--release-key",
                &a,
                "--release-key",
                &bob_id,
            ],
            "3",
        ),
        record(
            "4.npk",
            &[
                "release-policy",
                "--default",
                "--threshold",
                "1",
                "--release-key",
                &a,
            ],
            "4",
        ),
        record("5.npk", &["release-policy-remove", "--default"], "5"),
    ];
    let root_pub = npub_core::keypair::read_public_key(Path::new(&s.public("root"))).unwrap();
    let mut ring = Keyring::<4>::new();
    let mut trust = ReleaseTrust::<4, 4>::new();
    for r in &records {
        assert_eq!(r.len(), 144);
        release::apply_update(&mut ring, &mut trust, r, &[], &[root_pub]).unwrap();
    }
    assert_eq!(ring.update_sequence(), 5);
    let alice = KeyId::from_hex(&s.key_id("alice")).unwrap();
    let bob = KeyId::from_hex(&bob_id).unwrap();
    assert_eq!(
        trust.applies_to("person-detect"),
        Applies::Policy(
            &ReleasePolicy::new(ModelId::of("person-detect"), 2, &[alice, bob]).unwrap()
        )
    );
    assert_eq!(trust.applies_to("anything-else"), Applies::AnyKey);
    // Show decodes them all and checks them against the root; another root is refused.
    let all = s.dir.path("all.npk");
    std::fs::write(&all, records.concat()).unwrap();
    let shown = npub(&["keyring", "show", &all, "--root", &s.public("root")]);
    ok(&shown);
    let out = text(&shown.stdout);
    assert!(out.contains("release policy for model id"), "{out}");
    assert!(
        out.contains(&format!("2 of {}, {bob_id}", s.key_id("alice"))),
        "{out}"
    );
    refused(
        &npub(&["keyring", "show", &all, "--root", &a]),
        1,
        "is not one of this device's root keys",
    );
    // Revoke and replace name a key by file or by id.
    let replaced = record(
        "6.npk",
        &[
            "release-replace",
            "--revoke",
            &bob_id,
            "--add",
            &s.public("root"),
        ],
        "6",
    );
    release::apply_update(&mut ring, &mut trust, &replaced, &[], &[root_pub]).unwrap();
    assert!(trust.key(bob).unwrap().is_revoked());
    let revoked = record("7.npk", &["release-revoke", &a], "7");
    release::apply_update(&mut ring, &mut trust, &revoked, &[], &[root_pub]).unwrap();
    assert!(trust.key(alice).unwrap().is_revoked());
}

#[test]
fn rejects_a_bad_policy_record_before_signing_it() {
    let s = Setup::new("badpolicy");
    let a = s.public("alice");
    let root = s.key("root");
    let base = [
        "keyring",
        "release-policy",
        "--model",
        "m",
        "--release-key",
        &a,
        "--seq",
        "1",
    ];
    let out = s.dir.path("p.npk");
    let mut args = base.to_vec();
    args.extend_from_slice(&["--threshold", "2", "--key", &root, "-o", &out]);
    refused(&npub(&args), 2, "threshold 2 of 1 keys");
    let mut args = base.to_vec();
    args.extend_from_slice(&["--threshold", "1", "--default", "--key", &root, "-o", &out]);
    refused(&npub(&args), 2, "cannot be used with");
    assert!(!Path::new(&out).exists());
}
