//! Release signatures, their bundle, the release policy and the release trust's root-signed
//! records: the legitimate path, one `rejects_*` test per malformed input and per policy
//! failure (each asserting the exact variant), and issue 34's attacks at the npub-core level —
//! a server holding the online signing key (and the admin token, so it deploys whatever it
//! likes) still gets nothing past `release::check` that was not released.
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{
    self, KeyId, Keyring, KeyringChange, MANIFEST_BYTES, ManifestFields, PackFacts, Policy,
    ROTATION_BYTES, VerifiedManifest, sign_manifest,
};
use npub_core::release::{
    self, Applies, BUNDLE_HEADER_BYTES, Bundle, MAX_BUNDLE_BYTES, ModelId, RELEASE_BYTES,
    ReleaseChange, ReleaseFacts, ReleaseFields, ReleasePolicy, ReleaseTrust, Signer, TrustChange,
    TrustUpdate, encode_bundle, merge_bundles, sign_release, sign_trust_update,
};
use npub_core::{Accel, Error, KeyError, KeyringError, ReleaseError, Role};

const NOW: u64 = 1_750_000_000;
const MODEL: &str = "person-detect";

type Trust = ReleaseTrust<8, 4>;

/// The server's online signing key: signs manifests, never releases.
fn online() -> KeyPair {
    KeyPair::from_seed([0x51; 32])
}
/// The server's root: signs signing-key updates.
fn server_root() -> KeyPair {
    KeyPair::from_seed([0x77; 32])
}
/// The offline release root: signs release-key and policy updates.
fn release_root() -> KeyPair {
    KeyPair::from_seed([0x78; 32])
}
/// Release keys, held where models are built.
fn alice() -> KeyPair {
    KeyPair::from_seed([0xa1; 32])
}
fn bob() -> KeyPair {
    KeyPair::from_seed([0xb0; 32])
}
fn carol() -> KeyPair {
    KeyPair::from_seed([0xc0; 32])
}
fn mallory() -> KeyPair {
    KeyPair::from_seed([0x66; 32])
}

fn pack(fill: u8) -> Vec<u8> {
    build_pack(
        &[0x01, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00],
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &[fill; 300],
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 4096,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

fn release_of<'a>(pack: &[u8], model: &'a str, version: &'a str) -> ReleaseFields<'a> {
    ReleaseFields {
        pack_sha256: PackFacts::of(pack).unwrap().sha256,
        model_name: model,
        model_version: version,
        accel: Accel::EthosU55_256,
        io_digest: [0; 32],
        selftest_digest: [0; 32],
        signed_at: NOW - 3600,
    }
}

/// A bundle of `signers`' signatures over `fields`.
fn bundle(fields: &ReleaseFields<'_>, signers: &[KeyPair]) -> Vec<u8> {
    let signatures: Vec<[u8; RELEASE_BYTES]> = signers
        .iter()
        .map(|k| sign_release(fields, k).unwrap())
        .collect();
    encode_bundle(&signatures).unwrap()
}

/// What the server deploys: a manifest for `pack` as `model` `version`, signed with the online
/// key, verified as the device verifies it.
fn deployed(pack: &[u8], model: &str, version: &str, sequence: u64) -> VerifiedManifest {
    let facts = PackFacts::of(pack).unwrap();
    let fields = ManifestFields {
        sequence,
        model_name: model,
        model_version: version,
        accel: Accel::EthosU55_256,
        hw_class: manifest::HW_CLASS_RA8P1,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest: [0; 32],
        issued_at: NOW - 60,
        expires_at: 0,
    };
    let bytes: [u8; MANIFEST_BYTES] = sign_manifest(&fields, &online()).unwrap();
    let mut ring = Keyring::<4>::new();
    ring.add(&online().public_key()).unwrap();
    let device = Policy {
        hw_class: manifest::HW_CLASS_RA8P1,
        accel: Accel::EthosU55_256,
        slot_bytes: 1 << 20,
        last_sequence: sequence - 1,
        now: Some(NOW),
    };
    manifest::verify(&bytes, &ring, &device).unwrap()
}

fn trust_of(keys: &[KeyPair]) -> Trust {
    let mut trust = Trust::new();
    for k in keys {
        trust.add_key(&k.public_key()).unwrap();
    }
    trust
}

fn check(trust: &Trust, bundle: &[u8], m: &VerifiedManifest) -> Result<release::Released, Error> {
    release::check(trust, bundle, &ReleaseFacts::of_manifest(m, &[0; 32]))
}

fn rel(e: ReleaseError) -> Error {
    Error::Release(e)
}

fn id(k: &KeyPair) -> KeyId {
    k.key_id()
}

// ----- the legitimate path ------------------------------------------------------------------------

#[test]
fn accepts_a_released_pack_and_reports_the_threshold_met() {
    let p = pack(1);
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]);
    let ok = check(&trust_of(&[alice()]), &b, &deployed(&p, MODEL, "1.0.0", 7)).unwrap();
    assert!(ok.is_required());
    assert_eq!((ok.threshold(), ok.valid()), (1, 1));
    assert_eq!(ok.pack_sha256(), PackFacts::of(&p).unwrap().sha256);
    assert_eq!(ok.model(), ModelId::of(MODEL));
}

#[test]
fn without_release_keys_nothing_is_required_and_the_bundle_is_not_read() {
    let p = pack(1);
    let m = deployed(&p, MODEL, "1.0.0", 7);
    for b in [&[][..], &b"garbage"[..]] {
        let ok = check(&Trust::new(), b, &m).unwrap();
        assert!(!ok.is_required());
        assert_eq!(ok.threshold(), 0);
    }
}

#[test]
fn accepts_two_of_three_signed_by_two_people_one_bundle_after_the_other() {
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let mut trust = trust_of(&[alice(), bob(), carol()]);
    trust
        .set_policy(
            ReleasePolicy::new(
                ModelId::of(MODEL),
                2,
                &[id(&alice()), id(&bob()), id(&carol())],
            )
            .unwrap(),
        )
        .unwrap();
    // Alice signs and writes the bundle; Bob adds his signature to it.
    let first = bundle(&fields, &[alice()]);
    let second = bundle(&fields, &[bob()]);
    let both = merge_bundles(&first, &second).unwrap();
    assert_eq!(Bundle::parse(&both).unwrap().len(), 2);
    let ok = check(&trust, &both, &deployed(&p, MODEL, "1.0.0", 3)).unwrap();
    assert_eq!((ok.threshold(), ok.valid()), (2, 2));
    // Merging again, or merging the bundle into itself, adds nothing.
    assert_eq!(merge_bundles(&both, &second).unwrap(), both);
    assert_eq!(merge_bundles(&both, &both).unwrap(), both);
}

#[test]
fn accepts_legitimate_rollback_an_older_released_version_redeployed_at_a_higher_sequence() {
    let v1 = pack(1);
    let v2 = pack(2);
    let trust = trust_of(&[alice()]);
    let b1 = bundle(&release_of(&v1, MODEL, "1.0.0"), &[alice()]);
    let b2 = bundle(&release_of(&v2, MODEL, "2.0.0"), &[alice()]);
    check(&trust, &b2, &deployed(&v2, MODEL, "2.0.0", 10)).unwrap();
    // The rollback is a new manifest (sequence 11) for 1.0.0, with 1.0.0's own release.
    check(&trust, &b1, &deployed(&v1, MODEL, "1.0.0", 11)).unwrap();
}

#[test]
fn a_refused_signature_does_not_stop_enough_others_from_counting() {
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    // A signature by a key this device does not hold yet (a new team member) comes first.
    let b = bundle(&fields, &[carol(), alice()]);
    let ok = check(&trust_of(&[alice()]), &b, &deployed(&p, MODEL, "1.0.0", 1)).unwrap();
    assert_eq!(ok.valid(), 1);
}

#[test]
fn an_external_signer_signs_the_documented_message() {
    // A signer that is not a key pair in memory: it gets `"npub/release/v1\0" ‖ bytes 0..224`
    // and returns a pure ed25519 signature of it, as `openssl pkeyutl -sign -rawin` does.
    struct External(KeyPair);
    impl Signer for External {
        type Error = Error;
        fn public_key(&self) -> [u8; 32] {
            self.0.public_key()
        }
        fn sign(&self, message: &[u8]) -> Result<[u8; 64], Error> {
            assert!(message.starts_with(release::RELEASE_DOMAIN));
            assert_eq!(
                message.len(),
                release::RELEASE_DOMAIN.len() + release::RELEASE_SIGNED_BYTES
            );
            use ed25519_dalek::Signer as _;
            let key = ed25519_dalek::SigningKey::from_bytes(&[0xa1; 32]);
            Ok(key.sign(message).to_bytes())
        }
    }
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let external = sign_release(&fields, &External(alice())).unwrap();
    assert_eq!(
        external,
        sign_release(&fields, &alice()).unwrap(),
        "ed25519 is deterministic"
    );
}

#[test]
fn rejects_an_external_signature_by_another_key_or_over_other_bytes() {
    struct Wrong {
        claims: KeyPair,
        uses: KeyPair,
        tamper: bool,
    }
    impl Signer for Wrong {
        type Error = Error;
        fn public_key(&self) -> [u8; 32] {
            self.claims.public_key()
        }
        fn sign(&self, message: &[u8]) -> Result<[u8; 64], Error> {
            let mut m = message.to_vec();
            if self.tamper {
                m[20] ^= 1;
            }
            self.uses.sign(&m)
        }
    }
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let want = Error::Key(KeyError::ExternalSignatureInvalid {
        key_id: id(&alice()),
    });
    let other_key = Wrong {
        claims: alice(),
        uses: bob(),
        tamper: false,
    };
    assert_eq!(sign_release(&fields, &other_key).unwrap_err(), want);
    let other_bytes = Wrong {
        claims: alice(),
        uses: alice(),
        tamper: true,
    };
    assert_eq!(sign_release(&fields, &other_bytes).unwrap_err(), want);
}

// ----- issue 34's attacks, at the npub-core level ------------------------------------------------

#[test]
fn rejects_an_unreleased_pack_deployed_by_a_server_holding_the_online_key() {
    let p = pack(9);
    let m = deployed(&p, MODEL, "6.6.6", 99); // the manifest verifies: the server signed it
    let trust = trust_of(&[alice()]);
    assert_eq!(
        check(&trust, &[], &m),
        Err(rel(ReleaseError::Missing { needed: 1 }))
    );
    // The server signs a "release" with the keys it holds: the online key, its root.
    for server_key in [online(), server_root()] {
        let forged = bundle(
            &release_of(&p, MODEL, "6.6.6"),
            std::slice::from_ref(&server_key),
        );
        assert_eq!(
            check(&trust, &forged, &m),
            Err(rel(ReleaseError::UnknownKey {
                index: 0,
                key_id: id(&server_key)
            }))
        );
    }
}

#[test]
fn rejects_model_a_released_then_deployed_as_model_b() {
    let p = pack(1);
    let b = bundle(&release_of(&p, "model-a", "1.0.0"), &[alice()]);
    let m = deployed(&p, "model-b", "1.0.0", 1);
    assert_eq!(
        check(&trust_of(&[alice()]), &b, &m),
        Err(rel(ReleaseError::OtherModel {
            index: 0,
            key_id: id(&alice())
        }))
    );
}

#[test]
fn rejects_a_release_deployed_as_another_version() {
    let p = pack(1);
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]);
    let m = deployed(&p, MODEL, "1.0.1", 1);
    assert_eq!(
        check(&trust_of(&[alice()]), &b, &m),
        Err(rel(ReleaseError::OtherVersion {
            index: 0,
            key_id: id(&alice())
        }))
    );
}

#[test]
fn rejects_a_signature_by_a_release_key_revoked_by_a_root_signed_record() {
    let p = pack(1);
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]);
    let m = deployed(&p, MODEL, "1.0.0", 1);
    let mut ring = Keyring::<4>::new();
    let mut trust = trust_of(&[alice()]);
    check(&trust, &b, &m).unwrap();
    let revoke = record(
        1,
        ReleaseChange::RevokeKey {
            key_id: id(&alice()),
        },
        &release_root(),
    );
    apply(&mut ring, &mut trust, &revoke).unwrap();
    assert_eq!(
        check(&trust, &b, &m),
        Err(rel(ReleaseError::KeyRevoked {
            index: 0,
            key_id: id(&alice())
        }))
    );
}

#[test]
fn rejects_fewer_than_k_signatures() {
    let p = pack(1);
    let mut trust = trust_of(&[alice(), bob()]);
    trust
        .set_policy(ReleasePolicy::new(ModelId::of(MODEL), 2, &[id(&alice()), id(&bob())]).unwrap())
        .unwrap();
    let one = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]);
    assert_eq!(
        check(&trust, &one, &deployed(&p, MODEL, "1.0.0", 1)),
        Err(rel(ReleaseError::TooFewSignatures {
            needed: 2,
            found: 1
        }))
    );
}

#[test]
fn rejects_a_signature_over_another_packs_hash() {
    let released = pack(1);
    let shipped = pack(2);
    let b = bundle(&release_of(&released, MODEL, "1.0.0"), &[alice()]);
    let m = deployed(&shipped, MODEL, "1.0.0", 1);
    let want = rel(ReleaseError::OtherPack {
        index: 0,
        signed: manifest::Sha256Prefix::of(&PackFacts::of(&released).unwrap().sha256),
        pack: manifest::Sha256Prefix::of(&PackFacts::of(&shipped).unwrap().sha256),
    });
    assert_eq!(check(&trust_of(&[alice()]), &b, &m), Err(want));
}

#[test]
fn rejects_a_release_key_added_by_a_record_the_root_did_not_sign() {
    let mut ring = Keyring::<4>::new();
    let mut trust = Trust::new();
    let add = ReleaseChange::AddKey {
        public_key: mallory().public_key(),
    };
    // Signed by a key that is no root at all.
    let by_mallory = record(1, add, &mallory());
    assert_eq!(
        apply(&mut ring, &mut trust, &by_mallory),
        Err(Error::Keyring(KeyringError::UpdateUnknownRootKey {
            key_id: id(&mallory())
        }))
    );
    // Claiming the release root's id, signed by another key.
    let mut forged = by_mallory;
    forged[8..16].copy_from_slice(&id(&release_root()).0);
    assert_eq!(
        apply(&mut ring, &mut trust, &forged),
        Err(Error::Keyring(KeyringError::UpdateBadSignature {
            key_id: id(&release_root())
        }))
    );
    // Signed by the server's own root, which may change signing keys but not release keys: a
    // stolen data directory holds that root.
    let by_server_root = record(1, add, &server_root());
    assert_eq!(
        apply(&mut ring, &mut trust, &by_server_root),
        Err(rel(ReleaseError::RootNotReleaseRoot {
            key_id: id(&server_root())
        }))
    );
    assert!(!trust.is_active());
    assert_eq!(ring.update_sequence(), 0);
    // And a release root's record for a *signing* key is refused too: each root signs its own.
    let signing = sign_trust_update(
        &TrustUpdate {
            sequence: 1,
            change: TrustChange::Keyring(KeyringChange::Add {
                public_key: mallory().public_key(),
            }),
            issued_at: NOW,
        },
        &release_root(),
    )
    .unwrap();
    assert_eq!(
        apply(&mut ring, &mut trust, &signing),
        Err(Error::Keyring(KeyringError::UpdateUnknownRootKey {
            key_id: id(&release_root())
        }))
    );
}

// ----- each policy failure -------------------------------------------------------------------------

#[test]
fn rejects_a_signature_by_a_key_the_device_does_not_hold() {
    let p = pack(1);
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[mallory()]);
    assert_eq!(
        check(&trust_of(&[alice()]), &b, &deployed(&p, MODEL, "1.0.0", 1)),
        Err(rel(ReleaseError::UnknownKey {
            index: 0,
            key_id: id(&mallory())
        }))
    );
}

#[test]
fn rejects_a_trusted_release_key_the_models_policy_does_not_name() {
    let p = pack(1);
    let mut trust = trust_of(&[alice(), bob()]);
    trust
        .set_policy(ReleasePolicy::new(ModelId::of(MODEL), 1, &[id(&alice())]).unwrap())
        .unwrap();
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[bob()]);
    let m = deployed(&p, MODEL, "1.0.0", 1);
    assert_eq!(
        check(&trust, &b, &m),
        Err(rel(ReleaseError::KeyNotInPolicy {
            index: 0,
            key_id: id(&bob())
        }))
    );
    // The default policy governs the other models: Bob may release those.
    trust
        .set_policy(ReleasePolicy::new(ModelId::DEFAULT, 1, &[id(&bob())]).unwrap())
        .unwrap();
    let other = bundle(&release_of(&p, "other", "1.0.0"), &[bob()]);
    check(&trust, &other, &deployed(&p, "other", "1.0.0", 1)).unwrap();
    assert_eq!(
        trust.applies_to("other"),
        Applies::Policy(&ReleasePolicy::new(ModelId::DEFAULT, 1, &[id(&bob())]).unwrap())
    );
}

#[test]
fn rejects_a_garbled_or_edited_signature() {
    let p = pack(1);
    let m = deployed(&p, MODEL, "1.0.0", 1);
    let trust = trust_of(&[alice()]);
    let good = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]);
    let want = rel(ReleaseError::BadSignature {
        index: 0,
        key_id: id(&alice()),
    });
    // Every signed byte after the key id, and the signature itself.
    let first = BUNDLE_HEADER_BYTES;
    for at in (first + 16..first + RELEASE_BYTES).step_by(7) {
        if (first + 148..first + 152).contains(&at) {
            continue; // the reserved word: refused by the format first
        }
        let mut b = good.clone();
        b[at] ^= 0x01;
        assert_eq!(check(&trust, &b, &m), Err(want), "byte {}", at - first);
    }
}

#[test]
fn rejects_a_release_for_another_accelerator() {
    let p = pack(1);
    let fields = ReleaseFields {
        accel: Accel::EthosU55_128,
        ..release_of(&p, MODEL, "1.0.0")
    };
    let b = bundle(&fields, &[alice()]);
    assert_eq!(
        check(&trust_of(&[alice()]), &b, &deployed(&p, MODEL, "1.0.0", 1)),
        Err(rel(ReleaseError::OtherAccel {
            index: 0,
            signed: Accel::EthosU55_128.word(),
            manifest: Accel::EthosU55_256.word()
        }))
    );
}

#[test]
fn rejects_a_release_of_other_io_bindings_or_another_self_test() {
    let p = pack(1);
    let m = deployed(&p, MODEL, "1.0.0", 1);
    let trust = trust_of(&[alice()]);
    let io = ReleaseFields {
        io_digest: [7; 32],
        ..release_of(&p, MODEL, "1.0.0")
    };
    assert_eq!(
        check(&trust, &bundle(&io, &[alice()]), &m),
        Err(rel(ReleaseError::OtherIoDigest {
            index: 0,
            key_id: id(&alice())
        }))
    );
    let selftest = ReleaseFields {
        selftest_digest: [5; 32],
        ..release_of(&p, MODEL, "1.0.0")
    };
    let b = bundle(&selftest, &[alice()]);
    assert_eq!(
        check(&trust, &b, &m),
        Err(rel(ReleaseError::OtherSelfTest {
            index: 0,
            key_id: id(&alice())
        }))
    );
    // Delivered with the pack, the same self-test matches.
    release::check(&trust, &b, &ReleaseFacts::of_manifest(&m, &[5; 32])).unwrap();
}

#[test]
fn rejects_fewer_than_k_reporting_the_first_refused_signature() {
    let p = pack(1);
    let mut trust = trust_of(&[alice(), bob()]);
    trust
        .set_policy(ReleasePolicy::new(ModelId::of(MODEL), 2, &[id(&alice()), id(&bob())]).unwrap())
        .unwrap();
    trust.revoke_key(id(&bob())).unwrap();
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice(), bob()]);
    assert_eq!(
        check(&trust, &b, &deployed(&p, MODEL, "1.0.0", 1)),
        Err(rel(ReleaseError::KeyRevoked {
            index: 1,
            key_id: id(&bob())
        }))
    );
}

// ----- the bundle's format ----------------------------------------------------------------------

fn one() -> Vec<u8> {
    bundle(&release_of(&pack(1), MODEL, "1.0.0"), &[alice()])
}

fn parse(b: &[u8]) -> Error {
    Bundle::parse(b).unwrap_err()
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn rejects_a_bundle_shorter_than_its_header() {
    assert_eq!(
        parse(&one()[..15]),
        rel(ReleaseError::BundleTooShort { len: 15 })
    );
    assert_eq!(parse(&[]), rel(ReleaseError::BundleTooShort { len: 0 }));
}

#[test]
fn rejects_a_bundle_above_the_size_limit_before_reading_it() {
    let mut b = one();
    b.resize(MAX_BUNDLE_BYTES + 1, 0);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::BundleTooLong {
            len: MAX_BUNDLE_BYTES as u64 + 1
        })
    );
}

#[test]
fn rejects_a_bundle_with_a_bad_magic_version_or_reserved_word() {
    let mut b = one();
    b[12] = 1;
    assert_eq!(parse(&b), rel(ReleaseError::BundleReservedNotZero));
    set_u32(&mut b, 4, 2);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::BundleUnsupportedVersion { found: 2 })
    );
    b[0] = b'X';
    assert!(matches!(
        parse(&b),
        Error::Release(ReleaseError::BundleBadMagic { .. })
    ));
}

#[test]
fn rejects_a_bundle_with_no_signature_or_too_many() {
    let mut b = one();
    set_u32(&mut b, 8, 0);
    b.truncate(BUNDLE_HEADER_BYTES);
    assert_eq!(parse(&b), rel(ReleaseError::BundleEmpty));
    set_u32(&mut b, 8, 5);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::BundleTooManySignatures { count: 5 })
    );
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let five: Vec<[u8; RELEASE_BYTES]> = [alice(), bob(), carol(), mallory(), online()]
        .iter()
        .map(|k| sign_release(&fields, k).unwrap())
        .collect();
    assert_eq!(
        encode_bundle(&five).unwrap_err(),
        rel(ReleaseError::BundleTooManySignatures { count: 5 })
    );
    assert_eq!(
        encode_bundle(&[]).unwrap_err(),
        rel(ReleaseError::BundleEmpty)
    );
}

#[test]
fn rejects_a_bundle_whose_length_is_not_its_count_of_signatures() {
    let mut b = one();
    b.push(0);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::BundleWrongLength { len: 305, count: 1 })
    );
    let mut b = one();
    set_u32(&mut b, 8, 2);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::BundleWrongLength { len: 304, count: 2 })
    );
}

#[test]
fn rejects_a_signature_with_a_bad_magic_version_or_reserved_word() {
    let at = BUNDLE_HEADER_BYTES;
    let mut b = one();
    b[at + 148] = 1;
    assert_eq!(
        parse(&b),
        rel(ReleaseError::SignatureReservedNotZero { index: 0 })
    );
    set_u32(&mut b, at + 4, 7);
    assert_eq!(
        parse(&b),
        rel(ReleaseError::SignatureUnsupportedVersion { index: 0, found: 7 })
    );
    b[at] = b'Z';
    assert!(matches!(
        parse(&b),
        Error::Release(ReleaseError::SignatureBadMagic { index: 0, .. })
    ));
}

#[test]
fn rejects_a_bundle_where_one_key_signs_twice() {
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let a1 = sign_release(&fields, &alice()).unwrap();
    let a2 = sign_release(
        &ReleaseFields {
            signed_at: NOW,
            ..fields
        },
        &alice(),
    )
    .unwrap();
    assert_eq!(
        encode_bundle(&[a1, a2]).unwrap_err(),
        rel(ReleaseError::BundleDuplicateKey {
            index: 1,
            key_id: id(&alice())
        })
    );
}

#[test]
fn rejects_a_bundle_mixing_signatures_of_two_releases() {
    let p = pack(1);
    let a = sign_release(&release_of(&p, MODEL, "1.0.0"), &alice()).unwrap();
    let b = sign_release(&release_of(&p, MODEL, "1.0.1"), &bob()).unwrap();
    assert_eq!(
        encode_bundle(&[a, b]).unwrap_err(),
        rel(ReleaseError::BundleMixed { index: 1 })
    );
    let first = encode_bundle(&[a]).unwrap();
    let second = encode_bundle(&[b]).unwrap();
    assert_eq!(
        merge_bundles(&first, &second).unwrap_err(),
        rel(ReleaseError::BundleMixed { index: 1 })
    );
}

#[test]
fn bundle_layout_matches_its_table() {
    let p = pack(1);
    let fields = release_of(&p, MODEL, "1.0.0");
    let b = bundle(&fields, &[alice(), bob()]);
    assert_eq!(b.len(), 16 + 2 * 288);
    assert_eq!(&b[0..4], b"NPRB");
    assert_eq!(&b[4..8], &1u32.to_le_bytes());
    assert_eq!(&b[8..12], &2u32.to_le_bytes());
    assert_eq!(&b[12..16], &[0; 4]);
    assert_eq!(&b[16..20], b"NPR1");
    assert_eq!(&b[16 + 288..16 + 292], b"NPR1");
    let parsed = Bundle::parse(&b).unwrap();
    let shown = parsed.first().fields().unwrap();
    assert_eq!(shown, fields);
    let ids: Vec<KeyId> = parsed.signatures().map(|s| s.key_id()).collect();
    assert_eq!(ids, vec![id(&alice()), id(&bob())]);
}

// ----- release keys and policies through root-signed records --------------------------------------

fn record(sequence: u64, change: ReleaseChange, root: &KeyPair) -> [u8; ROTATION_BYTES] {
    sign_trust_update(
        &TrustUpdate {
            sequence,
            change: TrustChange::Release(change),
            issued_at: NOW,
        },
        root,
    )
    .unwrap()
}

fn apply(ring: &mut Keyring<4>, trust: &mut Trust, record: &[u8]) -> Result<(), Error> {
    release::apply_update(
        ring,
        trust,
        record,
        &[server_root().public_key()],
        &[release_root().public_key()],
    )
}

#[test]
fn release_records_add_replace_set_and_remove_in_the_keyrings_sequence() {
    let mut ring = Keyring::<4>::new();
    ring.add(&online().public_key()).unwrap();
    let mut trust = Trust::new();
    let r = release_root();
    let policy = ReleasePolicy::new(ModelId::of(MODEL), 2, &[id(&alice()), id(&bob())]).unwrap();
    apply(
        &mut ring,
        &mut trust,
        &record(
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
            &r,
        ),
    )
    .unwrap();
    // A signing-key rotation by the server's root, in the same sequence.
    let rotation = sign_trust_update(
        &TrustUpdate {
            sequence: 2,
            change: TrustChange::Keyring(KeyringChange::Add {
                public_key: mallory().public_key(),
            }),
            issued_at: NOW,
        },
        &server_root(),
    )
    .unwrap();
    apply(&mut ring, &mut trust, &rotation).unwrap();
    assert!(
        ring.get(id(&mallory())).is_some(),
        "the signing key went to the keyring"
    );
    assert!(
        trust.key(id(&mallory())).is_none(),
        "and not to the release trust"
    );
    apply(
        &mut ring,
        &mut trust,
        &record(
            3,
            ReleaseChange::AddKey {
                public_key: bob().public_key(),
            },
            &r,
        ),
    )
    .unwrap();
    apply(
        &mut ring,
        &mut trust,
        &record(4, ReleaseChange::SetPolicy(policy), &r),
    )
    .unwrap();
    assert_eq!(trust.applies_to(MODEL), Applies::Policy(&policy));
    assert_eq!(ring.update_sequence(), 4);
    // Bob's key leaks: replace it with Carol's, then name Carol in the policy.
    apply(
        &mut ring,
        &mut trust,
        &record(
            5,
            ReleaseChange::ReplaceKey {
                revoke: id(&bob()),
                public_key: carol().public_key(),
            },
            &r,
        ),
    )
    .unwrap();
    assert!(trust.key(id(&bob())).unwrap().is_revoked());
    let next = ReleasePolicy::new(ModelId::of(MODEL), 2, &[id(&alice()), id(&carol())]).unwrap();
    apply(
        &mut ring,
        &mut trust,
        &record(6, ReleaseChange::SetPolicy(next), &r),
    )
    .unwrap();
    let p = pack(1);
    let b = bundle(&release_of(&p, MODEL, "1.0.0"), &[alice(), carol()]);
    check(&trust, &b, &deployed(&p, MODEL, "1.0.0", 1)).unwrap();
    apply(
        &mut ring,
        &mut trust,
        &record(
            7,
            ReleaseChange::RemovePolicy {
                model: ModelId::of(MODEL),
            },
            &r,
        ),
    )
    .unwrap();
    assert_eq!(trust.applies_to(MODEL), Applies::AnyKey);
    assert_eq!(ring.update_sequence(), 7);
}

#[test]
fn rejects_a_replayed_release_record() {
    let mut ring = Keyring::<4>::new();
    let mut trust = Trust::new();
    let add = record(
        3,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
        &release_root(),
    );
    apply(&mut ring, &mut trust, &add).unwrap();
    assert_eq!(
        apply(&mut ring, &mut trust, &add),
        Err(Error::Keyring(KeyringError::UpdateReplayed {
            sequence: 3,
            last: 3
        }))
    );
}

#[test]
fn rejects_re_adding_a_revoked_release_key_and_a_full_trust() {
    let mut ring = Keyring::<4>::new();
    let mut trust = ReleaseTrust::<1, 1>::new();
    let apply1 = |ring: &mut Keyring<4>, trust: &mut ReleaseTrust<1, 1>, rec: &[u8]| {
        release::apply_update(ring, trust, rec, &[], &[release_root().public_key()])
    };
    let r = release_root();
    apply1(
        &mut ring,
        &mut trust,
        &record(
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
            &r,
        ),
    )
    .unwrap();
    assert_eq!(
        apply1(
            &mut ring,
            &mut trust,
            &record(
                2,
                ReleaseChange::AddKey {
                    public_key: bob().public_key()
                },
                &r
            )
        ),
        Err(rel(ReleaseError::KeysFull { capacity: 1 }))
    );
    apply1(
        &mut ring,
        &mut trust,
        &record(
            2,
            ReleaseChange::RevokeKey {
                key_id: id(&alice()),
            },
            &r,
        ),
    )
    .unwrap();
    assert_eq!(
        apply1(
            &mut ring,
            &mut trust,
            &record(
                3,
                ReleaseChange::AddKey {
                    public_key: alice().public_key()
                },
                &r
            )
        ),
        Err(rel(ReleaseError::KeyRevokedForGood {
            key_id: id(&alice())
        }))
    );
    let p1 = ReleasePolicy::new(ModelId::of("a"), 1, &[id(&alice())]).unwrap();
    let p2 = ReleasePolicy::new(ModelId::of("b"), 1, &[id(&alice())]).unwrap();
    apply1(
        &mut ring,
        &mut trust,
        &record(3, ReleaseChange::SetPolicy(p1), &r),
    )
    .unwrap();
    assert_eq!(
        apply1(
            &mut ring,
            &mut trust,
            &record(4, ReleaseChange::SetPolicy(p2), &r)
        ),
        Err(rel(ReleaseError::PoliciesFull { capacity: 1 }))
    );
    assert_eq!(
        ring.update_sequence(),
        3,
        "a refused record changes nothing"
    );
}

#[test]
fn a_device_provisioned_later_replays_the_whole_history() {
    // The fleet's history: Alice added, a policy naming Alice and Bob's old key, Bob's old key
    // revoked. A new device is provisioned with Alice only and replays from sequence 1.
    let r = release_root();
    let bob_old = KeyPair::from_seed([0xb1; 32]);
    let history = [
        record(
            1,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
            &r,
        ),
        record(
            2,
            ReleaseChange::SetPolicy(
                ReleasePolicy::new(ModelId::of(MODEL), 1, &[id(&alice()), id(&bob_old)]).unwrap(),
            ),
            &r,
        ),
        record(
            3,
            ReleaseChange::RevokeKey {
                key_id: id(&bob_old),
            },
            &r,
        ),
        record(
            4,
            ReleaseChange::RemovePolicy {
                model: ModelId::of("never-set"),
            },
            &r,
        ),
    ];
    let mut ring = Keyring::<4>::new();
    let mut trust = trust_of(&[alice()]);
    for rec in &history {
        apply(&mut ring, &mut trust, rec).unwrap();
    }
    assert_eq!(ring.update_sequence(), 4);
    let p = pack(1);
    check(
        &trust,
        &bundle(&release_of(&p, MODEL, "1.0.0"), &[alice()]),
        &deployed(&p, MODEL, "1.0.0", 1),
    )
    .unwrap();
}

#[test]
fn old_signing_key_records_still_decode_and_apply_as_before() {
    // A record made by the existing signer, before release actions existed.
    let add = manifest::sign_keyring_update(
        &manifest::KeyringUpdate {
            sequence: 1,
            change: KeyringChange::Add {
                public_key: mallory().public_key(),
            },
            issued_at: NOW,
        },
        &server_root(),
    );
    let (root, decoded) = TrustUpdate::decode(&add).unwrap();
    assert_eq!(root, id(&server_root()));
    assert_eq!(
        decoded.change,
        TrustChange::Keyring(KeyringChange::Add {
            public_key: mallory().public_key()
        })
    );
    let mut via_release = Keyring::<4>::new();
    let mut trust = Trust::new();
    apply(&mut via_release, &mut trust, &add).unwrap();
    let mut via_keyring = Keyring::<4>::new();
    via_keyring
        .apply_update(&add, &[server_root().public_key()])
        .unwrap();
    assert_eq!(via_release, via_keyring);
    assert!(!trust.is_active());
}

#[test]
fn rejects_a_release_record_on_a_signing_keyring_alone() {
    let rec = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
        &server_root(),
    );
    let mut ring = Keyring::<4>::new();
    assert_eq!(
        ring.apply_update(&rec, &[server_root().public_key()]),
        Err(Error::Keyring(KeyringError::UpdateReleaseAction {
            action: 4
        }))
    );
}

#[test]
fn release_records_match_the_table() {
    let r = release_root();
    let add = record(
        9,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
        &r,
    );
    assert_eq!(&add[0..4], b"NPK1");
    assert_eq!(&add[8..16], &id(&r).0);
    assert_eq!(add[16], 9);
    assert_eq!(&add[24..28], &4u32.to_le_bytes());
    assert_eq!(&add[40..72], &alice().public_key());
    let policy = ReleasePolicy::new(ModelId::of(MODEL), 2, &[id(&alice()), id(&bob())]).unwrap();
    let set = record(10, ReleaseChange::SetPolicy(policy), &r);
    assert_eq!(&set[24..28], &7u32.to_le_bytes());
    assert_eq!((set[28], set[29]), (2, 2));
    assert_eq!(&set[32..40], &ModelId::of(MODEL).0);
    assert_eq!(&set[40..48], &id(&alice()).0);
    assert_eq!(&set[48..56], &id(&bob()).0);
    assert_eq!(&set[28..72], &policy.encode());
    let remove = record(
        11,
        ReleaseChange::RemovePolicy {
            model: ModelId::DEFAULT,
        },
        &r,
    );
    assert_eq!(&remove[24..28], &8u32.to_le_bytes());
    for (rec, change) in [
        (
            add,
            ReleaseChange::AddKey {
                public_key: alice().public_key(),
            },
        ),
        (set, ReleaseChange::SetPolicy(policy)),
        (
            remove,
            ReleaseChange::RemovePolicy {
                model: ModelId::DEFAULT,
            },
        ),
    ] {
        assert_eq!(
            TrustUpdate::decode(&rec).unwrap().1.change,
            TrustChange::Release(change)
        );
    }
}

#[test]
fn rejects_release_records_with_unused_fields_set_or_a_bad_policy() {
    let r = release_root();
    let mut ring = Keyring::<4>::new();
    let mut trust = Trust::new();
    let mut add = record(
        1,
        ReleaseChange::AddKey {
            public_key: alice().public_key(),
        },
        &r,
    );
    add[32] = 1; // revoke_key_id, unused by release-add
    assert_eq!(
        TrustUpdate::decode(&add).unwrap_err(),
        Error::Keyring(KeyringError::UpdateUnusedFieldNotZero {
            field: "revoke_key_id"
        })
    );
    let policy = ReleasePolicy::new(ModelId::of(MODEL), 1, &[id(&alice())]).unwrap();
    let mut set = record(1, ReleaseChange::SetPolicy(policy), &r);
    set[28] = 2; // threshold 2 of 1 key
    assert_eq!(
        TrustUpdate::decode(&set).unwrap_err(),
        rel(ReleaseError::PolicyBadThreshold {
            threshold: 2,
            keys: 1
        })
    );
    // Edited after signing, the record is refused by its signature before its fields are read.
    assert_eq!(
        apply(&mut ring, &mut trust, &set),
        Err(Error::Keyring(KeyringError::UpdateBadSignature {
            key_id: id(&r)
        }))
    );
    let mut remove = record(
        1,
        ReleaseChange::RemovePolicy {
            model: ModelId::DEFAULT,
        },
        &r,
    );
    remove[40] = 1;
    assert_eq!(
        TrustUpdate::decode(&remove).unwrap_err(),
        Error::Keyring(KeyringError::UpdateUnusedFieldNotZero {
            field: "add_public_key"
        })
    );
    let mut unknown = add;
    unknown[24] = 9;
    assert_eq!(
        TrustUpdate::decode(&unknown).unwrap_err(),
        Error::Keyring(KeyringError::UpdateBadAction { action: 9 })
    );
}
