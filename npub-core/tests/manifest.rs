//! Signed manifests against the attacks of TUF's threat list: each test is named for the attack it
//! stops, and asserts the exact error. Plus the legitimate operations that must keep working:
//! install, rollback by a higher sequence, key rotation.
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{
    self, KeyId, Keyring, KeyringChange, KeyringUpdate, MANIFEST_BYTES, ManifestFields, PackCheck,
    PackFacts, Policy, SIGNED_BYTES, Sha256Prefix, VerifiedManifest, sign_keyring_update,
    sign_manifest,
};
use npub_core::{Accel, Error, KeyringError, ManifestError, Role};

const HW: u32 = manifest::HW_CLASS_RA8P1;
const SLOT: u32 = 1 << 20;
const NOW: u64 = 1_750_000_000;

fn signer() -> KeyPair {
    KeyPair::from_seed([0x51; 32])
}
fn other_signer() -> KeyPair {
    KeyPair::from_seed([0x52; 32])
}
fn root() -> KeyPair {
    KeyPair::from_seed([0x77; 32])
}

/// A valid NPU1 pack whose weights are `weights`.
fn pack(weights: &[u8]) -> Vec<u8> {
    build_pack(
        &[0x01, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00],
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: weights,
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

fn fields_for<'a>(pack: &[u8], sequence: u64, version: &'a str) -> ManifestFields<'a> {
    let facts = PackFacts::of(pack).unwrap();
    ManifestFields {
        sequence,
        model_name: "person-detect",
        model_version: version,
        accel: Accel::EthosU55_256,
        hw_class: HW,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest: [0; 32],
        issued_at: NOW - 60,
        expires_at: NOW + 86_400,
    }
}

fn keyring() -> Keyring<4> {
    let mut ring = Keyring::new();
    ring.add(&signer().public_key()).unwrap();
    ring
}

fn policy(last_sequence: u64) -> Policy {
    Policy {
        hw_class: HW,
        accel: Accel::EthosU55_256,
        slot_bytes: SLOT,
        last_sequence,
        now: Some(NOW),
    }
}

fn signed(pack: &[u8], sequence: u64) -> [u8; MANIFEST_BYTES] {
    sign_manifest(&fields_for(pack, sequence, "2.0.0"), &signer()).unwrap()
}

fn verified(pack: &[u8], sequence: u64) -> VerifiedManifest {
    manifest::verify(&signed(pack, sequence), &keyring(), &policy(sequence - 1)).unwrap()
}

/// Streams `bytes` in `chunk`-byte pieces and finishes.
fn stream(
    m: VerifiedManifest,
    bytes: &[u8],
    chunk: usize,
) -> Result<npub_core::manifest::VerifiedPack, Error> {
    let mut check = PackCheck::new(m);
    for piece in bytes.chunks(chunk) {
        check.feed(piece)?;
    }
    check.finish()
}

// ----- the legitimate path ------------------------------------------------------------------------

#[test]
fn accepts_a_signed_manifest_and_its_pack_in_chunks_of_any_size() {
    let p = pack(&[7; 300]);
    for chunk in [1, 5, 31, 32, 33, 64, 4096] {
        let ok = stream(verified(&p, 5), &p, chunk).unwrap();
        assert_eq!(ok.manifest().sequence(), 5);
        assert_eq!(ok.manifest().model_name(), "person-detect");
        assert_eq!(ok.manifest().model_version(), "2.0.0");
        assert_eq!(ok.header().total_bytes as usize, p.len());
    }
}

#[test]
fn accepts_legitimate_rollback_older_model_version_at_a_higher_sequence() {
    let v2 = pack(&[2; 300]);
    let v1 = pack(&[1; 300]);
    let ring = keyring();
    let deployed = sign_manifest(&fields_for(&v2, 10, "2.0.0"), &signer()).unwrap();
    let deployed = manifest::verify(&deployed, &ring, &policy(9)).unwrap();
    stream(deployed, &v2, 64).unwrap();
    // Roll back to 1.0.0: a new manifest, sequence 11, pointing at the old pack.
    let rollback = sign_manifest(&fields_for(&v1, 11, "1.0.0"), &signer()).unwrap();
    let rollback = manifest::verify(&rollback, &ring, &policy(10)).unwrap();
    assert_eq!(rollback.model_version(), "1.0.0");
    stream(rollback, &v1, 64).unwrap();
}

#[test]
fn accepts_a_manifest_without_expiry_or_when_the_device_has_no_clock() {
    let p = pack(&[3; 40]);
    let never = ManifestFields {
        expires_at: 0,
        ..fields_for(&p, 1, "1")
    };
    let m = sign_manifest(&never, &signer()).unwrap();
    assert!(
        manifest::verify(
            &m,
            &keyring(),
            &Policy {
                now: Some(u64::MAX),
                ..policy(0)
            }
        )
        .is_ok()
    );
    let expired = ManifestFields {
        expires_at: NOW - 1,
        issued_at: NOW - 2,
        ..fields_for(&p, 1, "1")
    };
    let m = sign_manifest(&expired, &signer()).unwrap();
    assert!(
        manifest::verify(
            &m,
            &keyring(),
            &Policy {
                now: None,
                ..policy(0)
            }
        )
        .is_ok()
    );
}

// ----- arbitrary installation --------------------------------------------------------------------

#[test]
fn rejects_garbled_signature_arbitrary_installation() {
    let p = pack(&[7; 300]);
    for bit in [0, 100, 300, 511] {
        let mut m = signed(&p, 5);
        m[SIGNED_BYTES + bit / 8] ^= 1 << (bit % 8);
        assert_eq!(
            manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
            Error::Manifest(ManifestError::BadSignature {
                key_id: signer().key_id()
            })
        );
    }
}

#[test]
fn rejects_unsigned_manifest_arbitrary_installation() {
    let p = pack(&[7; 300]);
    let mut m = signed(&p, 5);
    m[SIGNED_BYTES..].fill(0);
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::BadSignature {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_any_signed_byte_changed_after_signing_arbitrary_installation() {
    let p = pack(&[7; 300]);
    let original = signed(&p, 5);
    // One byte in every field after the key id (magic, version and key id are refused before
    // the signature, each with its own error), and the last signed byte.
    for at in [
        16,
        23,
        24,
        87,
        88,
        120,
        124,
        128,
        132,
        136,
        168,
        200,
        208,
        SIGNED_BYTES - 1,
    ] {
        let mut m = original;
        m[at] ^= 0x01;
        assert_eq!(
            manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
            Error::Manifest(ManifestError::BadSignature {
                key_id: signer().key_id()
            }),
            "byte {at}"
        );
    }
}

#[test]
fn rejects_malleated_signature_s_plus_group_order() {
    // ed25519 signatures are (R, S); S and S + ℓ verify under lax checking. verify_strict refuses
    // the non-canonical one, so a manifest has exactly one valid signature.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let p = pack(&[7; 300]);
    let mut m = signed(&p, 5);
    let s = &mut m[SIGNED_BYTES + 32..];
    let mut carry = 0u16;
    for (byte, l) in s.iter_mut().zip(L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::BadSignature {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_manifest_signed_by_an_unknown_key_arbitrary_installation() {
    let p = pack(&[7; 300]);
    let m = sign_manifest(&fields_for(&p, 5, "2.0.0"), &other_signer()).unwrap();
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::UnknownKey {
            key_id: other_signer().key_id()
        })
    );
}

#[test]
fn rejects_manifest_claiming_a_trusted_key_id_but_signed_by_another_key() {
    let p = pack(&[7; 300]);
    let mut m = sign_manifest(&fields_for(&p, 5, "2.0.0"), &other_signer()).unwrap();
    m[8..16].copy_from_slice(&signer().key_id().0);
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::BadSignature {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_a_keyring_update_passed_off_as_a_manifest_domain_separation() {
    // A root-signed record is not a manifest, whatever its bytes: wrong length, and its signature
    // is over another domain even if an attacker pads it out.
    let root = root();
    let update = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: other_signer().public_key(),
        },
        issued_at: NOW,
    };
    let record = sign_keyring_update(&update, &root);
    assert!(matches!(
        manifest::verify(&record, &keyring(), &policy(0)),
        Err(Error::Manifest(ManifestError::WrongLength { len: 144 }))
    ));
}

// ----- key compromise -----------------------------------------------------------------------------

#[test]
fn rejects_manifest_signed_by_a_revoked_key_key_compromise() {
    let p = pack(&[7; 300]);
    let mut ring = keyring();
    let revoke = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Revoke {
            key_id: signer().key_id(),
        },
        issued_at: NOW,
    };
    ring.apply_update(
        &sign_keyring_update(&revoke, &root()),
        &[root().public_key()],
    )
    .unwrap();
    assert_eq!(
        manifest::verify(&signed(&p, 5), &ring, &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::KeyRevoked {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn accepts_the_new_key_and_refuses_the_old_after_a_rotation() {
    let p = pack(&[7; 300]);
    let mut ring = keyring();
    let rotate = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Replace {
            revoke: signer().key_id(),
            public_key: other_signer().public_key(),
        },
        issued_at: NOW,
    };
    ring.apply_update(
        &sign_keyring_update(&rotate, &root()),
        &[root().public_key()],
    )
    .unwrap();
    assert_eq!(ring.update_sequence(), 1);
    let new = sign_manifest(&fields_for(&p, 5, "2.0.0"), &other_signer()).unwrap();
    assert!(manifest::verify(&new, &ring, &policy(4)).is_ok());
    assert_eq!(
        manifest::verify(&signed(&p, 5), &ring, &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::KeyRevoked {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_keyring_update_signed_by_a_signing_key_not_a_root() {
    let mut ring = keyring();
    let before = ring.clone();
    let add = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: other_signer().public_key(),
        },
        issued_at: NOW,
    };
    let record = sign_keyring_update(&add, &signer());
    assert_eq!(
        ring.apply_update(&record, &[root().public_key()])
            .unwrap_err(),
        Error::Keyring(KeyringError::UpdateUnknownRootKey {
            key_id: signer().key_id()
        })
    );
    assert_eq!(ring, before);
}

#[test]
fn rejects_keyring_update_with_a_garbled_signature() {
    let mut ring = keyring();
    let add = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: other_signer().public_key(),
        },
        issued_at: NOW,
    };
    let mut record = sign_keyring_update(&add, &root());
    record[100] ^= 0x40;
    assert_eq!(
        ring.apply_update(&record, &[root().public_key()])
            .unwrap_err(),
        Error::Keyring(KeyringError::UpdateBadSignature {
            key_id: root().key_id()
        })
    );
    // And a changed body under the original signature.
    let mut record = sign_keyring_update(&add, &root());
    record[16] = 9;
    assert_eq!(
        ring.apply_update(&record, &[root().public_key()])
            .unwrap_err(),
        Error::Keyring(KeyringError::UpdateBadSignature {
            key_id: root().key_id()
        })
    );
}

#[test]
fn rejects_replayed_keyring_update_re_adding_a_revoked_key() {
    let roots = [root().public_key()];
    let mut ring = Keyring::<4>::new();
    let add = sign_keyring_update(
        &KeyringUpdate {
            sequence: 1,
            change: KeyringChange::Add {
                public_key: other_signer().public_key(),
            },
            issued_at: NOW,
        },
        &root(),
    );
    ring.apply_update(&add, &roots).unwrap();
    let revoke = sign_keyring_update(
        &KeyringUpdate {
            sequence: 2,
            change: KeyringChange::Revoke {
                key_id: other_signer().key_id(),
            },
            issued_at: NOW,
        },
        &root(),
    );
    ring.apply_update(&revoke, &roots).unwrap();
    assert_eq!(
        ring.apply_update(&add, &roots).unwrap_err(),
        Error::Keyring(KeyringError::UpdateReplayed {
            sequence: 1,
            last: 2
        })
    );
    // Even freshly signed at a higher sequence, a revoked key stays revoked.
    let re_add = sign_keyring_update(
        &KeyringUpdate {
            sequence: 3,
            change: KeyringChange::Add {
                public_key: other_signer().public_key(),
            },
            issued_at: NOW,
        },
        &root(),
    );
    assert_eq!(
        ring.apply_update(&re_add, &roots).unwrap_err(),
        Error::Keyring(KeyringError::KeyRevoked {
            key_id: other_signer().key_id()
        })
    );
    assert_eq!(ring.update_sequence(), 2);
}

#[test]
fn a_device_provisioned_after_rotations_catches_up_from_the_first_update() {
    // The server's history: 1 adds key B, 2 revokes key A, 3 replaces B with C. A device made
    // after update 2 trusts only B (the active key then), and replays 1..3.
    let roots = [root().public_key()];
    let third = KeyPair::from_seed([0x53; 32]);
    let update = |sequence, change| {
        sign_keyring_update(
            &KeyringUpdate {
                sequence,
                change,
                issued_at: NOW,
            },
            &root(),
        )
    };
    let history = [
        update(
            1,
            KeyringChange::Add {
                public_key: other_signer().public_key(),
            },
        ),
        update(
            2,
            KeyringChange::Revoke {
                key_id: signer().key_id(),
            },
        ),
        update(
            3,
            KeyringChange::Replace {
                revoke: other_signer().key_id(),
                public_key: third.public_key(),
            },
        ),
    ];
    let mut ring = Keyring::<4>::new();
    ring.add(&other_signer().public_key()).unwrap();
    for record in &history {
        ring.apply_update(record, &roots).unwrap();
    }
    assert_eq!(ring.update_sequence(), 3);
    assert!(ring.get(other_signer().key_id()).unwrap().is_revoked());
    assert!(!ring.get(third.key_id()).unwrap().is_revoked());
    assert!(ring.get(signer().key_id()).is_none());
    // And a device that trusted key A from the start ends the same way, with A revoked.
    let mut old = Keyring::<4>::new();
    old.add(&signer().public_key()).unwrap();
    for record in &history {
        old.apply_update(record, &roots).unwrap();
    }
    assert!(old.get(signer().key_id()).unwrap().is_revoked());
    assert!(!old.get(third.key_id()).unwrap().is_revoked());
}

#[test]
fn rejects_a_replace_that_cannot_complete_and_changes_nothing() {
    let roots = [root().public_key()];
    let mut ring = Keyring::<1>::new();
    ring.add(&signer().public_key()).unwrap();
    let before = ring.clone();
    // Revoking frees no entry, so the added key cannot fit: neither half may happen.
    let replace = sign_keyring_update(
        &KeyringUpdate {
            sequence: 1,
            change: KeyringChange::Replace {
                revoke: signer().key_id(),
                public_key: other_signer().public_key(),
            },
            issued_at: NOW,
        },
        &root(),
    );
    assert_eq!(
        ring.apply_update(&replace, &roots).unwrap_err(),
        Error::Keyring(KeyringError::Full { capacity: 1 })
    );
    assert_eq!(ring, before);
}

#[test]
fn rejects_keyring_update_with_unused_fields_set_or_an_unknown_action() {
    let add = KeyringUpdate {
        sequence: 1,
        change: KeyringChange::Add {
            public_key: other_signer().public_key(),
        },
        issued_at: NOW,
    };
    let mut record = sign_keyring_update(&add, &root());
    record[32] = 1; // revoke_key_id, unused by "add"
    assert_eq!(
        KeyringUpdate::decode(&record).unwrap_err(),
        Error::Keyring(KeyringError::UpdateUnusedFieldNotZero {
            field: "revoke_key_id"
        })
    );
    let mut record = sign_keyring_update(&add, &root());
    record[24] = 9;
    assert_eq!(
        KeyringUpdate::decode(&record).unwrap_err(),
        Error::Keyring(KeyringError::UpdateBadAction { action: 9 })
    );
    // Actions 4 to 8 change release keys and policies: a signing keyring alone refuses them by
    // name (`release::apply_update` applies them).
    record[24] = 4;
    assert_eq!(
        KeyringUpdate::decode(&record).unwrap_err(),
        Error::Keyring(KeyringError::UpdateReleaseAction { action: 4 })
    );
    assert_eq!(
        KeyringUpdate::decode(&record[..143]).unwrap_err(),
        Error::Keyring(KeyringError::UpdateWrongLength { len: 143 })
    );
}

// ----- rollback and replay ------------------------------------------------------------------------

#[test]
fn rejects_replayed_older_sequence_rollback_attack() {
    let p = pack(&[7; 300]);
    assert_eq!(
        manifest::verify(&signed(&p, 5), &keyring(), &policy(6)).unwrap_err(),
        Error::Manifest(ManifestError::Replayed {
            sequence: 5,
            last: 6
        })
    );
}

#[test]
fn rejects_replayed_equal_sequence_replay_attack() {
    let p = pack(&[7; 300]);
    assert_eq!(
        manifest::verify(&signed(&p, 5), &keyring(), &policy(5)).unwrap_err(),
        Error::Manifest(ManifestError::Replayed {
            sequence: 5,
            last: 5
        })
    );
}

// ----- freeze -------------------------------------------------------------------------------------

#[test]
fn rejects_expired_manifest_freeze_attack() {
    let p = pack(&[7; 300]);
    let f = ManifestFields {
        issued_at: NOW - 100,
        expires_at: NOW - 1,
        ..fields_for(&p, 5, "2")
    };
    let m = sign_manifest(&f, &signer()).unwrap();
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::Expired {
            expires_at: NOW - 1,
            now: NOW
        })
    );
    // The expiry instant itself is already too late.
    let f = ManifestFields {
        expires_at: NOW,
        ..f
    };
    let m = sign_manifest(&f, &signer()).unwrap();
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::Expired {
            expires_at: NOW,
            now: NOW
        })
    );
}

// ----- endless data -------------------------------------------------------------------------------

#[test]
fn rejects_pack_longer_than_stated_endless_data() {
    let p = pack(&[7; 300]);
    let len = p.len() as u32;
    let mut check = PackCheck::new(verified(&p, 5));
    check.feed(&p).unwrap();
    // The first byte past pack_len aborts, and the check stays failed.
    let want = Error::Manifest(ManifestError::PackLongerThanManifest {
        expected: len,
        received: u64::from(len) + 1,
    });
    assert_eq!(check.feed(&[0]).unwrap_err(), want);
    assert_eq!(check.feed(&[]).unwrap_err(), want);
    assert_eq!(check.finish().unwrap_err(), want);
}

#[test]
fn rejects_endless_data_in_the_chunk_that_overruns_before_hashing_it() {
    let p = pack(&[7; 300]);
    let len = p.len() as u32;
    let mut longer = p.clone();
    longer.extend_from_slice(&[0xAA; 1000]);
    let mut check = PackCheck::new(verified(&p, 5));
    check.feed(&longer[..100]).unwrap();
    assert_eq!(
        check.feed(&longer[100..]).unwrap_err(),
        Error::Manifest(ManifestError::PackLongerThanManifest {
            expected: len,
            received: 100 + longer.len() as u64 - 100
        })
    );
    assert_eq!(check.received(), 100);
}

#[test]
fn rejects_pack_shorter_than_stated() {
    let p = pack(&[7; 300]);
    assert_eq!(
        stream(verified(&p, 5), &p[..p.len() - 1], 64).unwrap_err(),
        Error::Manifest(ManifestError::PackShorterThanManifest {
            expected: p.len() as u32,
            received: p.len() as u64 - 1
        })
    );
}

// ----- wrong software and mix-and-match -----------------------------------------------------------

#[test]
fn rejects_pack_whose_hash_differs_wrong_software() {
    let p = pack(&[7; 300]);
    // Same length, same header (so the same checksum word): only a payload byte differs, with the
    // checksum left as it was. The SHA-256 is what catches it.
    let mut evil = p.clone();
    let last = evil.len() - 1;
    evil[last] ^= 0xff;
    let m = verified(&p, 5);
    let stated = m.pack_sha256();
    let err = stream(m, &evil, 64).unwrap_err();
    assert_eq!(
        err,
        Error::Manifest(ManifestError::PackHashMismatch {
            manifest: Sha256Prefix::of(&stated),
            computed: Sha256Prefix::of(&manifest::sha256(&evil)),
        })
    );
}

#[test]
fn rejects_a_manifest_for_another_pack_mix_and_match() {
    let a = pack(&[7; 300]);
    let b = pack(&[8; 300]);
    assert_eq!(a.len(), b.len());
    let m = verified(&a, 5);
    let want = Error::Manifest(ManifestError::PackChecksumMismatch {
        manifest: PackFacts::of(&a).unwrap().checksum,
        pack: PackFacts::of(&b).unwrap().checksum,
    });
    // Caught as soon as the 32-byte header is in, long before the end.
    let mut check = PackCheck::new(m);
    check.feed(&b[..31]).unwrap();
    assert_eq!(check.feed(&b[31..40]).unwrap_err(), want);
}

#[test]
fn rejects_a_manifest_for_a_pack_of_another_length_mix_and_match() {
    let a = pack(&[7; 300]);
    let b = pack(&[7; 200]);
    let want = |pack: &[u8], manifest: &[u8]| {
        Error::Manifest(ManifestError::PackLengthDiffersFromManifest {
            pack_total_bytes: pack.len() as u32,
            manifest_pack_len: manifest.len() as u32,
        })
    };
    for chunk in [1, 64, 4096] {
        // A shorter pack than the manifest describes, and a longer one (whose first chunk
        // already overruns the manifest's length): both name whose length is which.
        assert_eq!(
            stream(verified(&a, 5), &b, chunk).unwrap_err(),
            want(&b, &a)
        );
        assert_eq!(
            stream(verified(&b, 5), &a, chunk).unwrap_err(),
            want(&a, &b)
        );
    }
}

#[test]
fn rejects_manifest_for_another_hardware_class_wrong_hardware() {
    let p = pack(&[7; 300]);
    let f = ManifestFields {
        hw_class: 2,
        ..fields_for(&p, 5, "2")
    };
    let m = sign_manifest(&f, &signer()).unwrap();
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::WrongHardware {
            manifest: 2,
            device: HW
        })
    );
}

#[test]
fn rejects_manifest_for_another_accelerator_wrong_hardware() {
    let p = pack(&[7; 300]);
    let f = ManifestFields {
        accel: Accel::EthosU55_128,
        ..fields_for(&p, 5, "2")
    };
    let m = sign_manifest(&f, &signer()).unwrap();
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::WrongAccel {
            manifest: 3,
            device: 4
        })
    );
}

#[test]
fn rejects_pack_larger_than_the_slot() {
    let p = pack(&[7; 300]);
    let small = Policy {
        slot_bytes: p.len() as u32 - 1,
        ..policy(4)
    };
    assert_eq!(
        manifest::verify(&signed(&p, 5), &keyring(), &small).unwrap_err(),
        Error::Manifest(ManifestError::PackTooLarge {
            len: p.len() as u32,
            slot: p.len() as u32 - 1
        })
    );
}

// ----- format ---------------------------------------------------------------------------------------

#[test]
fn rejects_truncated_and_foreign_manifests_before_looking_up_a_key() {
    let p = pack(&[7; 300]);
    let m = signed(&p, 5);
    let empty = Keyring::<1>::new();
    assert_eq!(
        manifest::verify(&m[..100], &empty, &policy(0)).unwrap_err(),
        Error::Manifest(ManifestError::WrongLength { len: 100 })
    );
    let mut foreign = m;
    foreign[..4].copy_from_slice(b"NPU1");
    assert_eq!(
        manifest::verify(&foreign, &empty, &policy(0)).unwrap_err(),
        Error::Manifest(ManifestError::BadMagic { found: 0x3155_504E })
    );
}

#[test]
fn every_error_message_names_its_field_and_numbers() {
    let cases = [
        (
            Error::Manifest(ManifestError::Replayed {
                sequence: 5,
                last: 6,
            }),
            &["sequence 5", "6"][..],
        ),
        (
            Error::Manifest(ManifestError::Expired {
                expires_at: 10,
                now: 20,
            }),
            &["expired at 10", "20"],
        ),
        (
            Error::Manifest(ManifestError::WrongHardware {
                manifest: 2,
                device: 1,
            }),
            &["hw_class is 2", "1"],
        ),
        (
            Error::Manifest(ManifestError::WrongAccel {
                manifest: 3,
                device: 4,
            }),
            &["ethos-u55-128", "ethos-u55-256"],
        ),
        (
            Error::Manifest(ManifestError::PackLongerThanManifest {
                expected: 9,
                received: 10,
            }),
            &["10 bytes", "pack_len is 9"],
        ),
        (
            Error::Manifest(ManifestError::UnknownKey {
                key_id: KeyId([0xab; 8]),
            }),
            &["abababababababab"],
        ),
    ];
    for (e, parts) in cases {
        let text = e.to_string();
        for part in parts {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
    }
}

// ----- version 2: the self-test's digest under the signature --------------------------------------

fn signed_v2(pack: &[u8], sequence: u64, selftest: &[u8; 32]) -> [u8; manifest::MANIFEST_V2_BYTES] {
    manifest::sign_manifest_v2(&fields_for(pack, sequence, "2.0.0"), selftest, &signer()).unwrap()
}

#[test]
fn accepts_a_version_2_manifest_and_names_its_selftest_digest() {
    let p = pack(&[7; 300]);
    let m = manifest::verify(&signed_v2(&p, 5, &[0xA5; 32]), &keyring(), &policy(4)).unwrap();
    assert_eq!(m.version(), manifest::MANIFEST_VERSION_2);
    assert_eq!(m.selftest_digest(), Some([0xA5; 32]));
    assert_eq!(m.selftest_digest_or_zeros(), &[0xA5; 32]);
    assert_eq!(m.as_bytes().len(), manifest::MANIFEST_V2_BYTES);
    stream(m, &p, 64).unwrap();
    let v1 = verified(&p, 5);
    assert_eq!(v1.version(), manifest::MANIFEST_VERSION);
    assert_eq!(v1.selftest_digest(), None);
    assert_eq!(v1.selftest_digest_or_zeros(), &[0; 32]);
    assert_eq!(v1.as_bytes().len(), MANIFEST_BYTES);
}

#[test]
fn rejects_a_swapped_selftest_digest_as_a_bad_signature() {
    let p = pack(&[7; 300]);
    let mut m = signed_v2(&p, 5, &[0xA5; 32]);
    m[SIGNED_BYTES] ^= 1;
    assert_eq!(
        manifest::verify(&m, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::BadSignature {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_a_version_2_manifest_downgraded_to_version_1() {
    // Strip the digest and relabel: the version-2 signature is over another domain and other
    // bytes, so the self-test cannot be dropped from a signed manifest.
    let p = pack(&[7; 300]);
    let v2 = signed_v2(&p, 5, &[0xA5; 32]);
    let mut v1 = [0u8; MANIFEST_BYTES];
    v1[..SIGNED_BYTES].copy_from_slice(&v2[..SIGNED_BYTES]);
    v1[4] = 1;
    v1[SIGNED_BYTES..].copy_from_slice(&v2[manifest::SIGNED_BYTES_V2..]);
    assert_eq!(
        manifest::verify(&v1, &keyring(), &policy(4)).unwrap_err(),
        Error::Manifest(ManifestError::BadSignature {
            key_id: signer().key_id()
        })
    );
}

#[test]
fn rejects_a_version_2_manifest_with_a_zero_selftest_digest_at_signing() {
    let p = pack(&[7; 300]);
    assert_eq!(
        manifest::sign_manifest_v2(&fields_for(&p, 5, "2.0.0"), &[0; 32], &signer()).unwrap_err(),
        Error::Manifest(ManifestError::SelfTestDigestZero)
    );
}
