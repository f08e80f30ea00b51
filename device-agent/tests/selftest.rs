//! The golden self-test (issue 37): a version-2 manifest signs the pack's self-test record; the
//! agent fetches the record beside the pack, checks it against the manifest in flash, runs its
//! golden input on the NPU (here the functional model, reading the pack from the flash file as
//! the simulator's NPU does) and confirms the pack only when the outputs hash to the record's
//! digest. A weight byte flipped in flash *after* the signature and hash check makes the
//! digest differ: the pack is reverted with "self-test failed: digest … != …".
mod common;

use common::*;
use device_agent::model_npu::ModelNpu;
use device_agent::{Agent, Error, Npu, Progress, ReportState};
use npub_core::Accel;
use npub_core::Blob;
use npub_core::io_bindings::IoBinding;
use npub_core::manifest::{self, Policy, sign_manifest_v2};

const SLOT: u32 = 64 * 1024;
const SEQ: u64 = 5;
/// The bit flipped in the weight byte.
const BIT: u8 = 0;

/// The `fc` model as `npub pack` makes it from Vela 5.2.0's output, its IO bindings and its
/// self-test record as the server computes it at upload.
fn fc() -> (Vec<u8>, Vec<IoBinding>, Vec<u8>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../npu-model/tests/models/vela/5.2.0/u55_256/fc_vela.tflite"
    );
    let imported = npub_core::vela::import(&std::fs::read(path).unwrap()).unwrap();
    let model = npu_model::Model::load(&imported.pack, &imported.io).unwrap();
    let golden = npu_model::golden::compute(&model, &imported.io).unwrap();
    let record = golden.record().unwrap();
    (imported.pack, imported.io, record)
}

fn manifest_v2(pack: &[u8], record: &[u8]) -> Vec<u8> {
    let fields = manifest_fields(pack, SEQ, "fc", [0; 32]);
    sign_manifest_v2(&fields, &manifest::sha256(record), &signing_key())
        .unwrap()
        .to_vec()
}

/// A weight byte the golden input catches: the first, in the pack's baked regions, whose flip
/// (bit `BIT`) changes the functional model's outputs for the golden input. Deterministic.
fn caught_weight_byte(pack: &[u8], io: &[IoBinding], record: &[u8]) -> usize {
    let t = npub_core::release::SelfTest::parse(record).unwrap();
    let inputs = npu_model::golden::split_input(io, t.input()).unwrap();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let blob = Blob::parse(pack).unwrap();
    for desc in blob.regions() {
        if !desc.is_baked() {
            continue;
        }
        for at in desc.data_offset as usize..(desc.data_offset + desc.size) as usize {
            let mut bad = pack.to_vec();
            bad[at] ^= 1 << BIT;
            let Ok(model) = npu_model::Model::load_as_bound(&bad, io) else {
                continue;
            };
            if let Ok(out) = model.run(&refs)
                && npu_model::golden::output_digest(&out) != t.output_sha256()
            {
                return at;
            }
        }
    }
    panic!("no weight byte of fc changes its golden outputs");
}

struct Setup {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    layout: device_agent::Layout,
    server: Server,
    verified: manifest::VerifiedManifest,
    npu: ModelNpu,
}

impl Setup {
    /// The agent on the flash file as it is now (a power-on of the same device).
    fn agent(&self) -> Agent<Flash> {
        let flash = Flash::with_file(&self.file, self.layout.end() as usize).unwrap();
        Agent::open(flash, self.layout, device()).unwrap()
    }
}

fn setup() -> (Setup, Vec<u8>, Vec<IoBinding>, Vec<u8>) {
    let (pack, io, record) = fc();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flash.bin");
    let layout = layout(SLOT);
    let m = manifest_v2(&pack, &record);
    let mut server = Server::default();
    server.offer_manifest(m.clone(), SEQ);
    server.serve(&pack);
    server.selftests.insert(sha256(&pack), record.clone());
    let policy = Policy {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        slot_bytes: SLOT - ERASE as u32,
        last_sequence: 0,
        now: None,
    };
    let verified = manifest::verify(&m, &keyring(), &policy).unwrap();
    let npu = ModelNpu::new(file.clone(), XIP_BASE, io.clone());
    (
        Setup {
            _dir: dir,
            file,
            layout,
            server,
            verified,
            npu,
        },
        pack,
        io,
        record,
    )
}

#[test]
fn a_pack_whose_golden_outputs_match_is_confirmed() {
    let (mut s, pack, _, record) = setup();
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let installed = agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap();
    assert_eq!(s.npu.runs, 1, "the golden input ran once");
    assert_eq!(agent.state().active(), Some(installed.slot()));
    assert!(
        s.server
            .reports
            .iter()
            .any(|r| r.state == ReportState::Installed)
    );
    // The record is in flash right after the pack's last sector, as fetched.
    let image = std::fs::read(&s.file).unwrap();
    let at = s.layout.slot(installed.slot()) as usize + (pack.len()).next_multiple_of(ERASE);
    assert_eq!(&image[at..at + record.len()], &record[..]);
}

#[test]
fn a_weight_byte_flipped_in_flash_after_the_signature_check_reverts_with_the_digests() {
    let (mut s, pack, io, record) = setup();
    let byte = caught_weight_byte(&pack, &io, &record);
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let mut job = agent
        .begin_install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap();
    let bound = loop {
        match agent
            .continue_install(
                &mut job,
                &mut s.server,
                &mut s.npu,
                &mut mem.arena(),
                u32::MAX,
            )
            .unwrap()
        {
            Progress::Pending(bound) => break bound,
            Progress::Downloading { .. } => {}
        }
    };
    // Verified in flash (SHA-256, NPU1, command stream) and bound: now the weight rots.
    let at = s.layout.slot(bound.slot()) + byte as u32;
    agent.flash_mut().flip_stored_bit(at, BIT);
    let mut image = std::fs::read(&s.file).unwrap();
    image[at as usize] ^= 1 << BIT;
    std::fs::write(&s.file, image).unwrap();

    let golden = agent
        .install_golden_input(&job)
        .unwrap()
        .map(<[u8]>::to_vec);
    assert!(
        golden.is_some(),
        "a version-2 manifest's pack has a golden input"
    );
    let outcome = s.npu.self_test(bound.registers(), golden.as_deref());
    let got = outcome.unwrap().expect("the model ran");
    let expected = npub_core::release::SelfTest::parse(&record)
        .unwrap()
        .output_sha256();
    assert_ne!(got, expected);
    let e = agent
        .finish_install(job, outcome, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap_err();
    assert_eq!(
        e,
        Error::SelfTestDigest {
            expected: manifest::Sha256Prefix::of(&expected),
            got: manifest::Sha256Prefix::of(&got),
        }
    );
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "self-test failed: digest {} != {}",
            manifest::Sha256Prefix::of(&expected),
            manifest::Sha256Prefix::of(&got)
        )),
        "{text}"
    );
    assert_eq!(agent.state().active(), None, "nothing confirmed");
    let last = s.server.reports.last().unwrap();
    assert_eq!(last.state, ReportState::RolledBack);
    assert_eq!(last.reason, Some(e));
}

#[test]
fn rejects_a_self_test_record_other_than_the_signed_one() {
    let (mut s, pack, _, mut record) = setup();
    record[48] ^= 1;
    s.server.selftests.insert(sha256(&pack), record);
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let e = agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap_err();
    assert!(matches!(e, Error::SelfTestRecordMismatch { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("self-test record: in flash it hashes to "),
        "the record's own words, not the pack's: {e}"
    );
    assert_eq!(s.npu.runs, 0, "nothing ran");
}

/// A version-2 manifest signs that a record exists: a server without one (404), or a transport
/// with none to give (the C request callbacks have no such call), fails the install, reported
/// `failed` with the digest the manifest names. Nothing is confirmed without the golden run.
#[test]
fn rejects_a_signed_self_test_record_the_server_does_not_have() {
    let (mut s, pack, _, record) = setup();
    s.server.selftests.remove(&sha256(&pack));
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let e = agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap_err();
    let named = manifest::Sha256Prefix::of(&manifest::sha256(&record));
    assert_eq!(e, Error::SelfTestRecordMissing { manifest: named });
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "self-test record missing: the manifest names {named}"
        )),
        "{text}"
    );
    assert_eq!(s.npu.runs, 0, "no golden input to run");
    assert_eq!(agent.state().active(), None, "nothing confirmed");
    let last = s.server.reports.last().unwrap();
    assert_eq!(last.state, ReportState::Failed);
    assert_eq!(last.reason, Some(e));
}

/// A server whose record ends before the length its own header states (48 bytes and
/// `input_bytes`): its own error with both numbers, not a hash mismatch over erased flash; the
/// install fails, nothing is confirmed, and a server with the whole record installs it next.
#[test]
fn rejects_a_self_test_record_shorter_than_its_header_states() {
    let (mut s, pack, _, record) = setup();
    let cut = record.len() - 7;
    s.server
        .selftests
        .insert(sha256(&pack), record[..cut].to_vec());
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let e = agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap_err();
    assert_eq!(
        e,
        Error::SelfTestRecordShort {
            got: cut as u32,
            stated: record.len() as u64,
        }
    );
    assert_eq!(
        e.to_string(),
        format!(
            "self-test record shorter than stated: got {cut} of {} bytes",
            record.len()
        )
    );
    assert_eq!(s.npu.runs, 0, "nothing ran");
    assert_eq!(agent.state().active(), None, "nothing confirmed");
    assert_eq!(s.server.reports.last().unwrap().reason, Some(e));

    s.server.selftests.insert(sha256(&pack), record);
    agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .expect("the whole record installs");
    assert_eq!(s.npu.runs, 1);
}

/// A board whose self-test runs no golden inference (no NPU: the QEMU firmware's) confirms the
/// pack on its own checks, and the `installed` report says the self-test was skipped; a run
/// that answered a matching digest is a pass, reported without it.
#[test]
fn a_pack_confirmed_without_its_golden_run_is_reported_skipped() {
    let (mut s, _, _, _) = setup();
    let mut agent = s.agent();
    let mut mem = ArenaMem::new();
    let mut no_npu = device_agent::RecordingNpu::default();
    agent
        .install(&s.verified, &mut s.server, &mut no_npu, &mut mem.arena())
        .unwrap();
    assert!(no_npu.last_golden.is_some(), "the golden input was offered");
    let last = s.server.reports.last().unwrap();
    assert_eq!(last.state, ReportState::Installed);
    assert!(last.selftest_skipped, "{last:?}");
    assert!(device_agent::SELFTEST_SKIPPED.starts_with("self-test skipped: no NPU"));

    // The functional model runs it: a pass, not a skip.
    let (mut s, _, _, _) = setup();
    let mut agent = s.agent();
    agent
        .install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
        .unwrap();
    let last = s.server.reports.last().unwrap();
    assert_eq!(last.state, ReportState::Installed);
    assert!(!last.selftest_skipped, "{last:?}");
}

/// A trial boot after a reset reads the slot's descriptor again for the record it names: a
/// descriptor that rotted since the install (one byte of it flipped) cannot say whether the
/// pack has a record, so the golden input is refused with the descriptor's own error and the
/// trial fails instead of confirming a version-2 pack without its signed self-test.
#[test]
fn rejects_a_trial_whose_descriptor_no_longer_reads_back() {
    let (mut s, _, _, _) = setup();
    let mut mem = ArenaMem::new();
    let slot = {
        let mut agent = s.agent();
        let mut job = agent
            .begin_install(&s.verified, &mut s.server, &mut s.npu, &mut mem.arena())
            .unwrap();
        loop {
            match agent
                .continue_install(
                    &mut job,
                    &mut s.server,
                    &mut s.npu,
                    &mut mem.arena(),
                    u32::MAX,
                )
                .unwrap()
            {
                Progress::Pending(bound) => break bound.slot(),
                Progress::Downloading { .. } => {}
            }
        }
        // Power cut before the self-test's answer: the pack is on trial at the next boot.
    };
    let at = s.layout.descriptor::<Flash>(slot) as usize + 20;
    let mut image = std::fs::read(&s.file).unwrap();
    image[at] ^= 1;
    std::fs::write(&s.file, image).unwrap();

    let mut agent = s.agent();
    let runs = s.npu.runs;
    let bound = match agent.boot_start(&mut s.npu, &mut mem.arena()) {
        device_agent::BootStart::Trial(bound) => bound,
        device_agent::BootStart::Done(d) => panic!("no trial: {d:?}"),
    };
    assert_eq!(bound.slot(), slot);
    let e = agent.trial_golden_input(slot).unwrap_err();
    assert_eq!(e, Error::DescriptorReadBack { slot });
    assert!(
        e.to_string()
            .ends_with("the descriptor did not read back as programmed"),
        "{e}"
    );
    let _ = agent.settle_trial(&bound, Ok(None), &mut s.npu, &mut mem.arena());
    assert_eq!(s.npu.runs, runs, "no golden run");
    assert_eq!(agent.state().active(), None, "the trial was not confirmed");
    assert_eq!(agent.state().on_trial(), None, "the trial was given up");
}
