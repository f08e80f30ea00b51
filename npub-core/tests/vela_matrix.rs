//! Every Vela output of the matrix in `tests/data/vela/matrix/` (issue #18): Vela 3.10 to 5.2, both
//! compiler cores, the four Ethos-U55 sizes, memory modes and optimisation goals, both output forms;
//! and the U65, U85 and COP2 outputs that must be refused.
//!
//! `expected.json` there was written by `matrix.py`: per compilation its flags and the files it
//! gave (`files/`, shared by compilations that gave the same bytes), and per file the facts
//! `facts.py` reads from Vela's bytes (not from npub): the command stream's hash and the regions it names, the weights' hash,
//! the region sizes, and where each input and output lives. Every output that should pack must give
//! a pack with exactly those facts, the `.tflite` and `.npz` of one compilation must give the same
//! pack, and every refusal must say how to recompile.
//!
//! `NPUB_VELA_MATRIX=DIR` runs the same checks on a full matrix (`matrix.py ... DIR --all`).
use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use npub_core::io_bindings::{IoBindings, IoKind};
use npub_core::vela::{self, SourceKind, VelaImport, Warning};
use npub_core::{Accel, Blob, Error, VelaError, cmdstream};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> PathBuf {
    match std::env::var_os("NPUB_VELA_MATRIX") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vela/matrix"),
    }
}

/// One Vela output file and what its compilation was.
struct Output {
    /// The compilation (`5.2.0-python-u55-256-default-conv1-raw`).
    entry: String,
    /// What `--accelerator-config` said.
    accel: String,
    /// The compilation without its output form: the `.tflite` and `.npz` of one compilation share it.
    compilation: String,
    path: PathBuf,
    facts: Value,
}

impl Output {
    fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap_or_else(|e| panic!("{}: {e}", self.path.display()))
    }

    fn what(&self) -> String {
        format!(
            "{} ({})",
            self.entry,
            self.path.file_name().unwrap().to_string_lossy()
        )
    }
}

fn outputs() -> Vec<Output> {
    let dir = corpus();
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for e in expected["entries"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        let compilation = name
            .strip_suffix("-tflite")
            .or_else(|| name.strip_suffix("-raw"))
            .unwrap();
        for f in e["files"].as_array().unwrap() {
            let file = f["file"].as_str().unwrap();
            out.push(Output {
                entry: name.into(),
                accel: e["accel"].as_str().unwrap().into(),
                compilation: compilation.into(),
                path: dir.join("files").join(file),
                facts: expected["files"][file].clone(),
            });
        }
    }
    assert!(!out.is_empty(), "no Vela outputs in {}", dir.display());
    out
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn hex_of(v: &Value) -> u32 {
    u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn packs(o: &Output) -> bool {
    o.facts["expect"]["pack"].as_bool() == Some(true)
}

/// The pack and bindings of `o` against the facts read from Vela's bytes.
fn check_facts(o: &Output, imp: &VelaImport) {
    let what = o.what();
    let f = &o.facts;
    let blob = Blob::parse(&imp.pack).unwrap_or_else(|e| panic!("{what}: {e}"));
    // What `npub pack` proves before it writes anything.
    cmdstream::verify_blob(&blob).unwrap_or_else(|e| panic!("{what}: command stream: {e}"));

    let p = &f["payload"];
    let stream = blob.command_stream();
    assert_eq!(
        stream.len() as u64,
        u64_of(&p["cmd_bytes"]),
        "{what}: stream length"
    );
    assert_eq!(
        sha256_hex(stream),
        p["cmd_sha256"].as_str().unwrap(),
        "{what}: stream"
    );
    assert_eq!(imp.cop1.config, hex_of(&p["config"]), "{what}: config word");
    assert_eq!(imp.cop1.id, hex_of(&p["id"]), "{what}: ID word");
    assert_eq!(
        u64::from(imp.cop1.cmd_offset),
        u64_of(&p["cmd_offset"]),
        "{what}: stream offset"
    );
    let accel = Accel::from_name(&o.accel).unwrap();
    assert_eq!(imp.accel, accel, "{what}: accel");
    assert_eq!(blob.accel(), accel, "{what}: header accel");

    assert_eq!(blob.region_count(), 3, "{what}: regions");
    let weights = blob.baked_bytes(0).unwrap();
    assert_eq!(
        weights.len() as u64,
        u64_of(&f["weights"]["bytes"]),
        "{what}"
    );
    assert_eq!(
        sha256_hex(weights),
        f["weights"]["sha256"].as_str().unwrap(),
        "{what}: weights"
    );
    let size = |i| u64::from(blob.region(i).unwrap().size);
    assert_eq!(size(1), u64_of(&f["scratch"]), "{what}: scratch");
    assert_eq!(size(2), u64_of(&f["scratch_fast"]), "{what}: scratch_fast");
    for r in p["regions_named"].as_array().unwrap() {
        let r = u64_of(r) as u32;
        assert!(r < 3 && size(r) > 0, "{what}: the stream names region {r}");
    }

    let io = f["io"].as_array().unwrap();
    assert_eq!(imp.io.len(), io.len(), "{what}: IO count");
    for m in io {
        let kind = match m["kind"].as_str().unwrap() {
            "input" => IoKind::Input,
            _ => IoKind::Output,
        };
        let index = u64_of(&m["index"]) as u32;
        let b = imp
            .io
            .iter()
            .find(|b| b.kind == kind && b.index == index)
            .unwrap_or_else(|| panic!("{what}: no {kind} {index}"));
        let at = format!("{what}: {kind} {index}");
        assert_eq!(u64::from(b.region), u64_of(&m["region"]), "{at}: region");
        assert_eq!(u64::from(b.offset), u64_of(&m["offset"]), "{at}: offset");
        assert_eq!(u64::from(b.bytes), u64_of(&m["bytes"]), "{at}: bytes");
        let known = imp.quantisation_known(kind, index);
        let unknown = || {
            assert!(!known, "{at}: quantisation should be unknown");
            assert_eq!((b.scale, b.zero_point), (0.0, 0), "{at}");
            assert!(
                imp.warnings.iter().any(|w| w.io() == Some((kind, index))),
                "{at}: no warning in {:?}",
                imp.warnings
            );
        };
        // Vela 5.0's C++ raw writer gets output quantisation wrong; once it shows (an output
        // recorded per channel), none of the file's outputs is trusted.
        let untrusted_writer = kind == IoKind::Output
            && io
                .iter()
                .any(|m| m["kind"] == "output" && m["quant"] == "per_channel");
        match m["quant"].as_str().unwrap() {
            _ if untrusted_writer => unknown(),
            "per_tensor" => {
                assert!(known, "{at}: quantisation marked unknown");
                assert_eq!(b.scale, m["scales"][0].as_f64().unwrap() as f32, "{at}");
                assert_eq!(
                    i64::from(b.zero_point),
                    m["zero_points"][0].as_i64().unwrap(),
                    "{at}"
                );
            }
            "none" => assert!(known && b.scale == 0.0 && b.zero_point == 0, "{at}"),
            // Not recorded (Vela 4.x's raw writers) or recorded per channel (Vela 5.0's): unknown,
            // with a warning that says so.
            "missing" | "per_channel" => unknown(),
            other => panic!("{at}: quant {other}"),
        }
    }
    if imp.source == SourceKind::Tflite {
        assert!(imp.warnings.is_empty(), "{what}: {:?}", imp.warnings);
    }
    let canonical = imp.io_encoding();
    IoBindings::parse(&canonical)
        .and_then(|v| v.check_against(&blob))
        .unwrap_or_else(|e| panic!("{what}: bindings: {e}"));
}

#[test]
fn every_u55_output_packs_with_the_facts_vela_wrote() {
    let mut packed = 0;
    let mut forms = BTreeMap::new();
    for o in outputs().iter().filter(|o| packs(o)) {
        let imp = vela::import(&o.bytes()).unwrap_or_else(|e| panic!("{}: {e}", o.what()));
        check_facts(o, &imp);
        forms
            .entry((o.compilation.clone(), imp.source == SourceKind::Npz))
            .or_insert(imp.pack);
        packed += 1;
    }
    assert!(packed > 0);
    // The `.tflite` and `.npz` of one compilation give byte-identical packs.
    let mut pairs = 0;
    for ((compilation, is_npz), pack) in &forms {
        if *is_npz {
            if let Some(t) = forms.get(&(compilation.clone(), false)) {
                assert!(
                    t == pack,
                    "{compilation}: the .tflite and .npz packs differ"
                );
                pairs += 1;
            }
        }
    }
    assert!(pairs > 0);
}

#[test]
fn every_other_target_and_payload_format_is_refused_saying_how_to_recompile() {
    let mut refused = 0;
    for o in outputs().iter().filter(|o| !packs(o)) {
        let what = o.what();
        let err = vela::import(&o.bytes())
            .map(|_| panic!("{what}: imported"))
            .unwrap_err()
            .to_string();
        for needle in o.facts["expect"]["refuse"].as_array().unwrap() {
            let needle = needle.as_str().unwrap();
            assert!(err.contains(needle), "{what}: no {needle:?} in: {err}");
        }
        refused += 1;
    }
    assert!(refused > 0);
}

// ----- the points of issue #18, each on the outputs that showed it -----------------------------

fn output(entry: &str) -> Output {
    outputs()
        .into_iter()
        .find(|o| o.entry == entry)
        .unwrap_or_else(|| panic!("no {entry} in the corpus"))
}

#[test]
fn survives_the_python_cores_raw_output_on_every_u55_size() {
    // Vela 4.x's default core and 5.x's `--debug-force-legacy-core` record the shared-SRAM fast
    // scratch as region 1 with the scratch's own size; the `.tflite` declares it as input 3.
    for version in ["4.4.1", "4.5.0", "5.0.0", "5.1.0", "5.2.0"] {
        for size in ["32", "64", "128", "256"] {
            let name = format!("{version}-python-u55-{size}-default-conv1");
            let Some(npz) = outputs()
                .into_iter()
                .find(|o| o.entry == format!("{name}-raw"))
            else {
                continue;
            };
            let tflite = output(&format!("{name}-tflite"));
            let n = vela::import(&npz.bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let t = vela::import(&tflite.bytes()).unwrap();
            assert!(n.pack == t.pack, "{name}: packs differ");
            let blob = Blob::parse(&n.pack).unwrap();
            assert_eq!(
                blob.region(2).unwrap().size,
                blob.region(1).unwrap().size,
                "{name}: region 2 is the fast scratch the .tflite declares"
            );
        }
    }
}

#[test]
fn rejects_a_fast_scratch_in_region_1_with_a_size_of_its_own() {
    let o = output("5.2.0-python-u55-256-default-conv1-raw");
    let bytes = o.bytes();
    let scratch = u64_of(&o.facts["scratch"]);
    let edited = rebuild_npz(&bytes, |name, d| {
        Some(if name == "scratch_fast_size.npy" {
            replace_int64_scalar(d, scratch, scratch - 16)
        } else {
            d
        })
    });
    assert_eq!(
        vela::import(&edited).unwrap_err(),
        Error::Vela(VelaError::NpzScratchFastSizeMismatch {
            size: scratch - 16,
            scratch
        })
    );
}

#[test]
fn survives_vela_4_raw_output_without_quantisation() {
    for entry in [
        "4.0.1-regor-u55-256-default-conv1-raw",
        "4.4.1-regor-u55-256-default-conv1-raw",
        "4.5.0-python-u55-256-default-conv1-raw",
    ] {
        let imp = vela::import(&output(entry).bytes()).unwrap_or_else(|e| panic!("{entry}: {e}"));
        assert_eq!(imp.source, SourceKind::Npz);
        assert_eq!(
            imp.warnings,
            [
                Warning::QuantisationNotRecorded {
                    kind: IoKind::Input,
                    index: 0
                },
                Warning::QuantisationNotRecorded {
                    kind: IoKind::Output,
                    index: 0
                }
            ],
            "{entry}"
        );
        assert!(!imp.quantisation_known(IoKind::Input, 0));
        let msg = imp.warnings[0].to_string();
        assert!(msg.contains(".tflite"), "{msg}");
    }
}

#[test]
fn survives_vela_5_0_recording_outputs_wrongly() {
    // two_io: output 0 (ADD) is recorded right, output 1 (a 1x1 CONV_2D) per channel with the
    // weights' scales. The writer that does that also writes single wrong scales (a FULLY_CONNECTED
    // output gets ifm scale × weight scale), so neither output is trusted; the inputs are.
    let imp = vela::import(&output("5.0.0-regor-u55-256-default-two_io-raw").bytes()).unwrap();
    assert_eq!(
        imp.warnings,
        [
            Warning::QuantisationPerChannel {
                kind: IoKind::Output,
                index: 1,
                channels: 8
            },
            Warning::QuantisationFromUntrustedWriter {
                kind: IoKind::Output,
                index: 0
            }
        ]
    );
    assert!(imp.quantisation_known(IoKind::Input, 0) && imp.quantisation_known(IoKind::Input, 1));
    assert!(!imp.quantisation_known(IoKind::Output, 0));
    assert!(
        imp.io
            .iter()
            .filter(|b| b.kind == IoKind::Output)
            .all(|b| b.scale == 0.0)
    );
}

#[test]
fn survives_vela_5_0_recording_an_output_per_channel() {
    let imp = vela::import(&output("5.0.0-regor-u55-256-default-conv1-raw").bytes()).unwrap();
    assert_eq!(
        imp.warnings,
        [Warning::QuantisationPerChannel {
            kind: IoKind::Output,
            index: 0,
            channels: 8
        }]
    );
    // The input's parameters were recorded right and are kept.
    assert!(imp.quantisation_known(IoKind::Input, 0));
    assert_eq!((imp.io[0].scale, imp.io[0].zero_point), (0.0078125, 0));
    assert!(!imp.quantisation_known(IoKind::Output, 0));
}

// ----- helpers ------------------------------------------------------------------------------

/// Rewrites an `.npz`, letting `edit` change or drop (`None`) each entry; entries stay stored.
fn rebuild_npz(bytes: &[u8], edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).unwrap();
        let name = entry.name().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        if let Some(data) = edit(&name, data) {
            out.start_file(name, opts).unwrap();
            out.write_all(&data).unwrap();
        }
    }
    out.finish().unwrap().into_inner()
}

/// An int64 scalar `.npy` whose value `old` (its last 8 bytes) becomes `new`.
fn replace_int64_scalar(mut d: Vec<u8>, old: u64, new: u64) -> Vec<u8> {
    let at = d.len() - 8;
    assert_eq!(d[at..], old.to_le_bytes());
    d[at..].copy_from_slice(&new.to_le_bytes());
    d
}
