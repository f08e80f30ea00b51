//! The release fuzz corpus (fuzz/corpus/release/) through the same doors as the fuzz target,
//! without a fuzzer: each seed named `accept_*` or `reject_<Variant>_*` gets exactly that
//! verdict, and nothing panics. Seeds whose name contains "update" are keyring updates (applied
//! with the fuzz roots); those containing "pair" are checked as model "fuzz-pair" (2 of the two
//! fuzz release keys), the others as model "fuzz" (one signature by any release key).
//!
//! The named seeds are made here, deterministically (ed25519 signatures are): the test fails if
//! a committed seed differs from the one this file makes, and `NPUB_WRITE_RELEASE_CORPUS=1 cargo
//! test -p npub-core --test release_corpus` writes them. Crash reproducers added later (any other
//! name) need only not panic.
use std::path::{Path, PathBuf};

use ed25519_dalek::Signer as _;
use npub_core::keypair::KeyPair;
use npub_core::manifest::{Keyring, KeyringChange, ROTATION_DOMAIN, ROTATION_SIGNED_BYTES};
use npub_core::release::{
    self, BUNDLE_HEADER_BYTES, MAX_BUNDLE_BYTES, ModelId, RELEASE_BYTES, ReleaseChange,
    ReleaseFacts, ReleaseFields, ReleasePolicy, ReleaseTrust, TrustChange, TrustUpdate,
    encode_bundle, sign_release, sign_trust_update,
};
use npub_core::{Accel, Error};

fn pair(seed: u8) -> KeyPair {
    KeyPair::from_seed([seed; 32])
}

/// The fuzz target's trust: 0x44 and 0x45 (the pair policy's), 0x47 outside it, 0x48 revoked.
fn trust() -> ReleaseTrust<8, 4> {
    let mut trust = ReleaseTrust::new();
    let a = trust.add_key(&pair(0x44).public_key()).unwrap();
    let b = trust.add_key(&pair(0x45).public_key()).unwrap();
    trust.add_key(&pair(0x47).public_key()).unwrap();
    let revoked = trust.add_key(&pair(0x48).public_key()).unwrap();
    trust.revoke_key(revoked).unwrap();
    trust
        .set_policy(ReleasePolicy::new(ModelId::of("fuzz-pair"), 2, &[a, b]).unwrap())
        .unwrap();
    trust
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

fn fields(model: &str) -> ReleaseFields<'_> {
    ReleaseFields {
        pack_sha256: [0x11; 32],
        model_name: model,
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        io_digest: [0; 32],
        selftest_digest: [0; 32],
        signed_at: 1_750_000_000,
    }
}

fn signed(f: &ReleaseFields<'_>, seed: u8) -> [u8; RELEASE_BYTES] {
    sign_release(f, &pair(seed)).unwrap()
}

fn bundle_of(signatures: &[[u8; RELEASE_BYTES]]) -> Vec<u8> {
    encode_bundle(signatures).unwrap()
}

/// A bundle's bytes without the checks `encode_bundle` makes (for malformed seeds).
fn raw_bundle(count: u32, signatures: &[[u8; RELEASE_BYTES]]) -> Vec<u8> {
    let mut out = b"NPRB".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for s in signatures {
        out.extend_from_slice(s);
    }
    out
}

fn update(sequence: u64, change: TrustChange, root: u8) -> Vec<u8> {
    let u = TrustUpdate {
        sequence,
        change,
        issued_at: 1_750_000_000,
    };
    sign_trust_update(&u, &pair(root)).unwrap().to_vec()
}

/// Signs `body` (bytes 0..80 of a keyring update) as `root` would, whatever it holds.
fn raw_update(mut body: [u8; ROTATION_SIGNED_BYTES], root: u8) -> Vec<u8> {
    body[8..16].copy_from_slice(&pair(root).key_id().0);
    let key = ed25519_dalek::SigningKey::from_bytes(&[root; 32]);
    let signature = key.sign(&[ROTATION_DOMAIN, &body[..]].concat());
    [&body[..], &signature.to_bytes()[..]].concat()
}

fn add_c() -> TrustChange {
    TrustChange::Release(ReleaseChange::AddKey {
        public_key: pair(0x49).public_key(),
    })
}

/// Every named seed.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let f = fields("fuzz");
    let fp = fields("fuzz-pair");
    let one = bundle_of(&[signed(&f, 0x44)]);
    let mut s = vec![
        ("accept_one", one.clone()),
        (
            "accept_pair",
            bundle_of(&[signed(&fp, 0x44), signed(&fp, 0x45)]),
        ),
        (
            "accept_any_of_three",
            bundle_of(&[signed(&f, 0x48), signed(&f, 0x47)]),
        ),
        ("accept_update_release_add", update(1, add_c(), 0x46)),
        (
            "accept_update_release_policy",
            update(
                1,
                TrustChange::Release(ReleaseChange::SetPolicy(
                    ReleasePolicy::new(ModelId::of("fuzz"), 1, &[pair(0x44).key_id()]).unwrap(),
                )),
                0x46,
            ),
        ),
        (
            "accept_update_release_revoke",
            update(
                1,
                TrustChange::Release(ReleaseChange::RevokeKey {
                    key_id: pair(0x47).key_id(),
                }),
                0x46,
            ),
        ),
        (
            "accept_update_policy_remove_default",
            update(
                2,
                TrustChange::Release(ReleaseChange::RemovePolicy {
                    model: ModelId::DEFAULT,
                }),
                0x46,
            ),
        ),
        (
            "accept_update_signing_add",
            update(
                1,
                TrustChange::Keyring(KeyringChange::Add {
                    public_key: pair(0x4a).public_key(),
                }),
                0x43,
            ),
        ),
        ("reject_Missing_empty", vec![]),
        ("reject_BundleTooShort", one[..15].to_vec()),
        ("reject_BundleTooLong", {
            let mut b = one.clone();
            b.resize(MAX_BUNDLE_BYTES + 1, 0);
            b
        }),
        ("reject_BundleBadMagic", {
            let mut b = one.clone();
            b[0] = b'X';
            b
        }),
        ("reject_BundleUnsupportedVersion", {
            let mut b = one.clone();
            b[4] = 2;
            b
        }),
        ("reject_BundleReservedNotZero", {
            let mut b = one.clone();
            b[13] = 1;
            b
        }),
        ("reject_BundleEmpty", raw_bundle(0, &[])),
        (
            "reject_BundleTooManySignatures",
            raw_bundle(5, &[signed(&f, 0x44)]),
        ),
        (
            "reject_BundleWrongLength",
            raw_bundle(2, &[signed(&f, 0x44)]),
        ),
        ("reject_SignatureBadMagic", {
            let mut b = one.clone();
            b[BUNDLE_HEADER_BYTES] = b'X';
            b
        }),
        ("reject_SignatureUnsupportedVersion", {
            let mut b = one.clone();
            b[BUNDLE_HEADER_BYTES + 4] = 2;
            b
        }),
        ("reject_SignatureReservedNotZero", {
            let mut b = one.clone();
            b[BUNDLE_HEADER_BYTES + 150] = 1;
            b
        }),
        ("reject_BundleDuplicateKey", {
            let later = ReleaseFields {
                signed_at: 1_750_000_001,
                ..f
            };
            raw_bundle(2, &[signed(&f, 0x44), signed(&later, 0x44)])
        }),
        (
            "reject_BundleMixed",
            raw_bundle(2, &[signed(&f, 0x44), signed(&fp, 0x45)]),
        ),
        ("reject_UnknownKey", bundle_of(&[signed(&f, 0x66)])),
        ("reject_KeyRevoked", bundle_of(&[signed(&f, 0x48)])),
        (
            "reject_KeyNotInPolicy_pair",
            bundle_of(&[signed(&fp, 0x44), signed(&fp, 0x47)]),
        ),
        ("reject_BadSignature", {
            let mut b = one.clone();
            b[BUNDLE_HEADER_BYTES + 40] ^= 1; // pack_sha256, after signing
            b
        }),
        (
            "reject_OtherPack",
            bundle_of(&[signed(
                &ReleaseFields {
                    pack_sha256: [0x12; 32],
                    ..f
                },
                0x44,
            )]),
        ),
        (
            "reject_OtherModel",
            bundle_of(&[signed(&fields("fuzz-other"), 0x44)]),
        ),
        (
            "reject_OtherVersion",
            bundle_of(&[signed(
                &ReleaseFields {
                    model_version: "1.0.1",
                    ..f
                },
                0x44,
            )]),
        ),
        (
            "reject_OtherAccel",
            bundle_of(&[signed(
                &ReleaseFields {
                    accel: Accel::EthosU55_128,
                    ..f
                },
                0x44,
            )]),
        ),
        (
            "reject_OtherIoDigest",
            bundle_of(&[signed(
                &ReleaseFields {
                    io_digest: [1; 32],
                    ..f
                },
                0x44,
            )]),
        ),
        (
            "reject_OtherSelfTest",
            bundle_of(&[signed(
                &ReleaseFields {
                    selftest_digest: [1; 32],
                    ..f
                },
                0x44,
            )]),
        ),
        (
            "reject_TooFewSignatures_pair",
            bundle_of(&[signed(&fp, 0x44)]),
        ),
        ("reject_RootNotReleaseRoot_update", update(1, add_c(), 0x43)),
        (
            "reject_UpdateUnknownRootKey_update",
            update(1, add_c(), 0x66),
        ),
        ("reject_UpdateBadSignature_update", {
            let mut u = update(1, add_c(), 0x46);
            u[50] ^= 1;
            u
        }),
        ("reject_UpdateReplayed_update", update(0, add_c(), 0x46)),
        ("reject_PolicyBadThreshold_update", {
            let policy =
                ReleasePolicy::new(ModelId::of("fuzz"), 1, &[pair(0x44).key_id()]).unwrap();
            let u = update(
                1,
                TrustChange::Release(ReleaseChange::SetPolicy(policy)),
                0x46,
            );
            let mut body: [u8; ROTATION_SIGNED_BYTES] =
                u[..ROTATION_SIGNED_BYTES].try_into().unwrap();
            body[28] = 2; // 2 of 1 key
            raw_update(body, 0x46)
        }),
        ("reject_UpdateUnusedFieldNotZero_update", {
            let u = update(1, add_c(), 0x46);
            let mut body: [u8; ROTATION_SIGNED_BYTES] =
                u[..ROTATION_SIGNED_BYTES].try_into().unwrap();
            body[33] = 1; // revoke_key_id, unused by release-add
            raw_update(body, 0x46)
        }),
        ("reject_UpdateBadAction_update", {
            let u = update(1, add_c(), 0x46);
            let mut body: [u8; ROTATION_SIGNED_BYTES] =
                u[..ROTATION_SIGNED_BYTES].try_into().unwrap();
            body[24] = 9; // not a release action: the signing roots' to sign
            raw_update(body, 0x43)
        }),
    ];
    s.sort_by_key(|(name, _)| *name);
    s
}

fn verdict(name: &str, data: &[u8]) -> Result<(), Error> {
    let trust = trust();
    let mut ring = Keyring::<4>::new();
    let mut updated = trust.clone();
    let roots = [pair(0x43).public_key()];
    let release_roots = [pair(0x46).public_key()];
    let update = release::apply_update(&mut ring, &mut updated, data, &roots, &release_roots);
    let _ = TrustUpdate::decode(data);
    let model = if name.contains("pair") {
        "fuzz-pair"
    } else {
        "fuzz"
    };
    let checked = release::check(&trust, data, &facts(model)).map(|_| ());
    if name.contains("update") {
        update
    } else {
        checked
    }
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/release")
}

/// With `NPUB_WRITE_RELEASE_CORPUS` set, writes the named seeds (once, before either test reads).
fn write_if_asked() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("NPUB_WRITE_RELEASE_CORPUS").is_some() {
            std::fs::create_dir_all(dir()).unwrap();
            for (name, bytes) in seeds() {
                std::fs::write(dir().join(name), bytes).unwrap();
            }
        }
    });
}

#[test]
fn every_release_corpus_seed_gets_the_verdict_its_name_states() {
    write_if_asked();
    let mut named = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        let got = verdict(&name, &data);
        if name.starts_with("accept_") {
            assert_eq!(got, Ok(()), "{name}");
            named += 1;
        } else if let Some(rest) = name.strip_prefix("reject_") {
            let want = rest.split('_').next().unwrap();
            let err = got.expect_err(&name);
            assert_eq!(variant(&err), want, "{name}: got {err:?}");
            named += 1;
        }
    }
    assert_eq!(named, seeds().len(), "named seeds in {}", dir().display());
}

#[test]
fn the_committed_seeds_are_the_ones_this_file_makes() {
    write_if_asked();
    for (name, bytes) in seeds() {
        let path = dir().join(name);
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (NPUB_WRITE_RELEASE_CORPUS=1 writes it)",
                path.display()
            )
        });
        assert_eq!(committed, bytes, "{name} differs from what this file makes");
    }
}

/// The name of an error's variant within its domain (`Release(Missing { .. })` → `Missing`).
fn variant(e: &Error) -> String {
    let s = format!("{e:?}");
    let inner = s.split_once('(').map_or(s.as_str(), |(_, inner)| inner);
    inner
        .split([' ', '{', '(', ')'])
        .next()
        .unwrap()
        .to_string()
}
