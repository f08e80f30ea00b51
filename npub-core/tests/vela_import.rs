//! Vela import on real Vela 5.2 output: every case of the shared fixtures, both output forms, and
//! the inputs the importer must refuse.
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use npub_core::io_bindings::{self, IoBinding, IoBindings, IoKind};
use npub_core::vela::{self, SourceKind, VelaImport};
use npub_core::{Accel, Blob, Cop1Error, Error, Role, VelaError};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela"
    ))
    .to_path_buf()
}

fn data() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vela")).to_path_buf()
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One fixture case and the two Vela outputs of its compilation.
struct Case {
    name: String,
    dir: PathBuf,
    meta: Value,
    tflite: PathBuf,
    npz: PathBuf,
}

/// Every case under `cases/`, mapped to its Vela outputs through `meta.json`: `accelerator`
/// (`ethos-u55-256` → `vela_out/u55_256`) and `source_tflite` (`x_vela.tflite`, and `x_vela.npz`
/// in `raw/`).
fn cases() -> Vec<Case> {
    let mut dirs: Vec<_> = std::fs::read_dir(fixtures().join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    dirs.sort();
    let cases: Vec<Case> = dirs
        .into_iter()
        .map(|dir| {
            let meta: Value = serde_json::from_slice(&read(&dir.join("meta.json"))).unwrap();
            let accel = meta["accelerator"].as_str().unwrap();
            let out = fixtures()
                .join("vela_out")
                .join(accel.trim_start_matches("ethos-").replace('-', "_"));
            let tflite_name = meta["source_tflite"].as_str().unwrap();
            let npz_name = tflite_name.replace(".tflite", ".npz");
            Case {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                tflite: out.join("tflite").join(tflite_name),
                npz: out.join("raw").join(npz_name),
                dir,
                meta,
            }
        })
        .collect();
    assert!(!cases.is_empty(), "no fixture cases found");
    cases
}

fn import(p: &Path) -> VelaImport {
    vela::import(&read(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn hex_of(v: &Value) -> u32 {
    u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The pack against `cmd.bin`, `weights.bin` and the metadata's regions, accelerator and COP1 header.
fn check_pack(case: &Case, imp: &VelaImport) {
    let blob = Blob::parse(&imp.pack).unwrap();
    let name = &case.name;
    assert_eq!(
        blob.command_stream(),
        &read(&case.dir.join("cmd.bin"))[..],
        "{name}: stream"
    );
    assert_eq!(
        blob.baked_bytes(0).unwrap(),
        &read(&case.dir.join("weights.bin"))[..],
        "{name}: region 0 bytes"
    );
    let regions = case.meta["regions"].as_array().unwrap();
    assert_eq!(
        blob.region_count() as usize,
        regions.len(),
        "{name}: region count"
    );
    for r in regions {
        let i = u64_of(&r["index"]) as u32;
        let d = blob.region(i).unwrap();
        assert_eq!(
            u64::from(d.size),
            u64_of(&r["size"]),
            "{name}: region {i} size"
        );
        assert_eq!(
            d.is_baked(),
            r["baked"].as_bool().unwrap(),
            "{name}: region {i} baked"
        );
        assert_eq!(
            d.role.word(),
            u64_of(&r["role_code"]) as u32,
            "{name}: region {i} role"
        );
    }
    assert_eq!(blob.region(0).unwrap().role, Role::Weights);
    let accel = case.meta["accelerator"].as_str().unwrap();
    assert_eq!(imp.accel, Accel::from_name(accel).unwrap(), "{name}: accel");
    assert_eq!(blob.accel(), imp.accel, "{name}: header accel");
    let info = &case.meta["payload"]["info"];
    assert_eq!(u64::from(imp.cop1.release), u64_of(&info["opt_rel"]));
    assert_eq!(u64::from(imp.cop1.patch), u64_of(&info["opt_patch"]));
    assert_eq!(imp.cop1.config, hex_of(&info["config"]));
    assert_eq!(imp.cop1.id, hex_of(&info["id"]));
    assert_eq!(u64::from(imp.cop1.cmd_offset), u64_of(&info["cmd_offset"]));
    assert_eq!(u64::from(imp.cop1.cmd_words), u64_of(&info["cmd_words"]));
}

/// The bindings against the metadata's `io`. The raw form records no names or types and pads
/// shapes to rank 6; everything it does record must agree.
fn check_io(case: &Case, imp: &VelaImport) {
    let io = case.meta["io"].as_array().unwrap();
    assert_eq!(imp.io.len(), io.len(), "{}: IO count", case.name);
    for m in io {
        let kind = match m["kind"].as_str().unwrap() {
            "input" => IoKind::Input,
            _ => IoKind::Output,
        };
        let index = u64_of(&m["io_index"]) as u32;
        let b: &IoBinding = imp
            .io
            .iter()
            .find(|b| b.kind == kind && b.index == index)
            .unwrap_or_else(|| panic!("{}: no binding for {kind} {index}", case.name));
        let what = format!("{} {kind} {index} ({:?})", case.name, imp.source);
        assert_eq!(u64::from(b.region), u64_of(&m["region"]), "{what}: region");
        assert_eq!(u64::from(b.offset), u64_of(&m["offset"]), "{what}: offset");
        assert_eq!(u64::from(b.bytes), u64_of(&m["bytes"]), "{what}: bytes");
        assert_eq!(
            b.scale,
            m["scale"][0].as_f64().unwrap() as f32,
            "{what}: scale"
        );
        assert_eq!(
            i64::from(b.zero_point),
            m["zero_point"][0].as_i64().unwrap(),
            "{what}: zp"
        );
        let shape: Vec<u32> = m["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| u64_of(d) as u32)
            .collect();
        match imp.source {
            SourceKind::Tflite => {
                assert_eq!(b.shape.dims(), &shape[..], "{what}: shape");
                assert_eq!(
                    b.dtype.name(),
                    m["dtype"].as_str().unwrap(),
                    "{what}: dtype"
                );
                assert_eq!(b.name.as_str(), m["name"].as_str().unwrap(), "{what}: name");
            }
            SourceKind::Npz => {
                let mut padded = vec![1; 6 - shape.len()];
                padded.extend(&shape);
                assert_eq!(b.shape.dims(), &padded[..], "{what}: shape");
                assert_eq!(b.dtype.name(), "bits8", "{what}: dtype");
                assert_eq!(b.name.as_str(), "", "{what}: name");
            }
        }
    }
    // The canonical encoding parses, fits the pack's regions, and its JSON reads back to it.
    let canonical = imp.io_encoding();
    let view = IoBindings::parse(&canonical).unwrap();
    view.check_against(&Blob::parse(&imp.pack).unwrap())
        .unwrap();
    let (back, again) = io_bindings::from_json(&imp.io_json()).unwrap();
    assert_eq!(back, imp.io);
    assert_eq!(again, canonical);
}

#[test]
fn every_fixture_case_imports_as_its_metadata_says() {
    for case in cases() {
        let from_tflite = import(&case.tflite);
        assert_eq!(from_tflite.source, SourceKind::Tflite);
        check_pack(&case, &from_tflite);
        check_io(&case, &from_tflite);

        let from_npz = import(&case.npz);
        assert_eq!(from_npz.source, SourceKind::Npz);
        check_pack(&case, &from_npz);
        check_io(&case, &from_npz);

        assert!(
            from_tflite.pack == from_npz.pack,
            "{}: the .tflite and .npz of one compilation give different packs",
            case.name
        );
    }
}

#[test]
fn imports_are_deterministic() {
    let case = &cases()[0];
    assert_eq!(import(&case.tflite), import(&case.tflite));
}

#[test]
fn lut_model_imports_identically_from_both_forms() {
    let dir = data().join("lut_u55_256");
    let t = import(&dir.join("lut_vela.tflite"));
    let n = import(&dir.join("lut_vela.npz"));
    assert_eq!(t.pack, n.pack);
    assert_eq!(t.accel, Accel::EthosU55_256);
    let blob = Blob::parse(&t.pack).unwrap();
    // The sigmoid's lookup table lives in the weights region; scratch_fast is empty.
    assert_eq!(blob.region(0).unwrap().size, 1024);
    assert_eq!(blob.region(1).unwrap().size, 1024);
    assert_eq!(blob.region(2).unwrap().size, 0);
    for (a, b) in t.io.iter().zip(&n.io) {
        assert_eq!(
            (a.kind, a.index, a.offset, a.bytes),
            (b.kind, b.index, b.offset, b.bytes)
        );
        assert_eq!((a.scale, a.zero_point), (b.scale, b.zero_point));
    }
    assert_eq!(t.io[1].zero_point, -128);
}

#[test]
fn accel_follows_the_config_word_for_every_u55_configuration() {
    let dir = data().join("accel");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        let name = file
            .trim_start_matches("conv1_")
            .trim_end_matches("_vela.tflite");
        let accel = Accel::from_name(name).unwrap();
        if !accel.is_u55() {
            continue;
        }
        let imp = import(&p);
        assert_eq!(imp.accel, accel, "{file}");
        assert_eq!(Blob::parse(&imp.pack).unwrap().accel(), imp.accel);
        seen += 1;
    }
    assert_eq!(seen, 4);
}

// ----- refusals -------------------------------------------------------------------------------

fn first_tflite() -> Vec<u8> {
    read(&cases()[0].tflite)
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = hay
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 1, "expected one {needle:?}");
    hits[0]
}

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

#[test]
fn rebuilt_npz_still_imports() {
    // The rewriting helper itself changes nothing the importer sees.
    let case = &cases()[0];
    let bytes = read(&case.npz);
    let same = rebuild_npz(&bytes, |_, d| Some(d));
    assert_eq!(vela::import(&same).unwrap(), vela::import(&bytes).unwrap());
}

#[test]
fn rejects_cop2_payload() {
    let mut t = first_tflite();
    let at = find(&t, b"COP1");
    t[at + 3] = b'2';
    assert_eq!(vela::import(&t).unwrap_err(), Error::Cop1(Cop1Error::Cop2));
    let msg = Error::Cop1(Cop1Error::Cop2).to_string();
    assert!(msg.contains("--cop-format COP2"), "{msg}");

    let npz = rebuild_npz(&read(&cases()[0].npz), |name, mut d| {
        if name == "cmd_data.npy" {
            let at = find(&d, b"COP1");
            d[at + 3] = b'2';
        }
        Some(d)
    });
    assert_eq!(
        vela::import(&npz).unwrap_err(),
        Error::Cop1(Cop1Error::Cop2)
    );
}

#[test]
fn rejects_ethos_u65_compilations_naming_the_target() {
    for (name, config, target) in [
        ("ethos-u65-256", 0x1000_3008, "Ethos-U65-256"),
        ("ethos-u65-512", 0x1000_6009, "Ethos-U65-512"),
    ] {
        let p = data()
            .join("accel")
            .join(format!("conv1_{name}_vela.tflite"));
        let err = vela::import(&read(&p)).unwrap_err();
        assert_eq!(err, Error::Vela(VelaError::NotU55 { config }), "{name}");
        let msg = err.to_string();
        assert!(
            msg.contains(target) && msg.contains("--accelerator-config ethos-u55-{32,64,128,256}"),
            "{msg}"
        );
    }
}

/// `cmd_data` of an `.npz` with the COP1 config word (payload bytes 8..12) replaced.
fn with_config_word(d: &mut [u8], config: u32) {
    let at = find(d, b"COP1");
    d[at + 8..at + 12].copy_from_slice(&config.to_le_bytes());
}

#[test]
fn rejects_ethos_u85_before_reading_its_io() {
    // Vela 5.2's config word for ethos-u85-256. Its raw output also lacks arrays a U55 one has:
    // the target, not the missing array, is what to report.
    let u85: u32 = 0x2000_0118;
    let mut t = first_tflite();
    let at = find(&t, b"COP1");
    t[at + 8..at + 12].copy_from_slice(&u85.to_le_bytes());
    let err = vela::import(&t).unwrap_err();
    assert_eq!(err, Error::Vela(VelaError::NotU55 { config: u85 }));
    assert!(err.to_string().contains("Ethos-U85-256"), "{err}");

    let npz = rebuild_npz(&read(&cases()[0].npz), |name, mut d| match name {
        "cmd_data.npy" => {
            with_config_word(&mut d, u85);
            Some(d)
        }
        "input_offset.npy" => None,
        _ => Some(d),
    });
    assert_eq!(
        vela::import(&npz).unwrap_err(),
        Error::Vela(VelaError::NotU55 { config: u85 })
    );
}

#[test]
fn rejects_cop2_before_reading_its_io() {
    // A `--separate-io-regions` compilation puts its IO in regions 3 and 4 and its raw arrays
    // differ; the payload format is what the user must change, so it is reported first.
    let npz = rebuild_npz(&read(&cases()[0].npz), |name, mut d| match name {
        "cmd_data.npy" => {
            let at = find(&d, b"COP1");
            d[at + 3] = b'2';
            Some(d)
        }
        "input_offset.npy" | "scratch_size.npy" => None,
        _ => Some(d),
    });
    let err = vela::import(&npz).unwrap_err();
    assert_eq!(err, Error::Cop1(Cop1Error::Cop2));
    let msg = err.to_string();
    for flag in [
        "recompile without",
        "--cop-format COP2",
        "--separate-io-regions",
    ] {
        assert!(msg.contains(flag), "{msg}");
    }
}

#[test]
fn rejects_cop1_length_past_the_payload() {
    let mut t = first_tflite();
    let at = find(&t, b"COP1");
    let payload_bytes = u64_of(&cases()[0].meta["payload"]["bytes"]);
    let words = u64_of(&cases()[0].meta["payload"]["info"]["cmd_words"]) as u32;
    // The stream tag is the last word before the stream (payload offset 28 in these fixtures).
    let tag = at + 28;
    assert_eq!(t[tag], 0x02);
    t[tag + 2..tag + 4].copy_from_slice(&((words + 1) as u16).to_le_bytes());
    assert_eq!(
        vela::import(&t).unwrap_err(),
        Error::Cop1(Cop1Error::StreamPastPayload {
            offset: 32,
            words: words + 1,
            payload_bytes
        })
    );
}

#[test]
fn rejects_uncompiled_models_as_having_no_ethos_u_operator() {
    let mut seen = 0;
    for dir in [fixtures().join("models"), data().join("models")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let err = vela::import(&read(&p)).unwrap_err();
            assert!(
                matches!(err, Error::Vela(VelaError::NoEthosUOperator { operators }) if operators > 0),
                "{}: {err:?}",
                p.display()
            );
            seen += 1;
        }
    }
    assert!(seen >= 4);
}

#[test]
fn rejects_operators_left_on_the_cpu() {
    for file in ["cpu_tail_vela.tflite", "two_parts_vela.tflite"] {
        let err = vela::import(&read(&data().join(file))).unwrap_err();
        assert_eq!(
            err,
            Error::Vela(VelaError::CpuOperator {
                op: "DEQUANTIZE",
                code: 6
            }),
            "{file}"
        );
        let msg = err.to_string();
        assert!(msg.contains("DEQUANTIZE") && msg.contains("CPU"), "{msg}");
    }
}

#[test]
fn rejects_more_than_one_ethos_u_operator() {
    let err = vela::import(&read(&data().join("multi_ethos_u_vela.tflite"))).unwrap_err();
    assert_eq!(err, Error::Vela(VelaError::MultipleEthosU { count: 4 }));
}

#[test]
fn rejects_truncated_flatbuffer() {
    let t = first_tflite();
    for len in [16, 64, t.len() / 2, t.len() - 200] {
        let err = vela::import(&t[..len]).unwrap_err();
        assert!(
            matches!(err, Error::Vela(VelaError::TfliteMalformed { .. })),
            "cut at {len}: {err:?}"
        );
    }
    assert!(matches!(
        vela::import(&t[..6]),
        Err(Error::Vela(VelaError::UnknownFormat { .. }))
    ));
}

#[test]
fn rejects_garbled_flatbuffer() {
    let t = first_tflite();
    // Root offset pointing past the end.
    let mut g = t.clone();
    g[0..4].copy_from_slice(&0xFFFF_FF00u32.to_le_bytes());
    assert!(matches!(
        vela::import(&g),
        Err(Error::Vela(VelaError::TfliteMalformed { .. }))
    ));
    // The root table's vtable offset pointing outside the file.
    let mut g = t.clone();
    let root = u32::from_le_bytes(t[0..4].try_into().unwrap()) as usize;
    g[root..root + 4].copy_from_slice(&i32::MIN.to_le_bytes());
    assert!(matches!(
        vela::import(&g),
        Err(Error::Vela(VelaError::TfliteMalformed { .. }))
    ));
}

#[test]
fn rejects_npz_missing_an_array() {
    let bytes = read(&cases()[0].npz);
    // What the stream and its regions need; quantisation is not among it (see below).
    for array in [
        "scratch_size",
        "cmd_data",
        "weight_data",
        "input_shape",
        "output_offset",
    ] {
        let cut = rebuild_npz(&bytes, |name, d| {
            (name != format!("{array}.npy")).then_some(d)
        });
        let err = vela::import(&cut).unwrap_err();
        assert!(
            matches!(err, Error::Vela(VelaError::NpzMissingArray { array: a }) if a == array),
            "{array}: {err:?}"
        );
    }
}

#[test]
fn survives_npz_without_quantisation_arrays() {
    // Vela 4.x writes no `*_quantization` arrays: the pack is the same, the bindings carry
    // quantisation marked unknown, and a warning per binding says the .tflite has it.
    let case = &cases()[0];
    let bytes = read(&case.npz);
    let cut = rebuild_npz(&bytes, |name, d| {
        (!name.ends_with("_quantization.npy")).then_some(d)
    });
    let full = vela::import(&bytes).unwrap();
    let imp = vela::import(&cut).unwrap();
    assert_eq!(imp.pack, full.pack);
    assert!(full.warnings.is_empty());
    assert_eq!(imp.warnings.len(), imp.io.len());
    for b in &imp.io {
        assert!(!imp.quantisation_known(b.kind, b.index));
        assert!(full.quantisation_known(b.kind, b.index));
        assert_eq!((b.scale, b.zero_point), (0.0, 0));
        assert!(
            imp.warnings
                .contains(&vela::Warning::QuantisationNotRecorded {
                    kind: b.kind,
                    index: b.index
                })
        );
    }
}

#[test]
fn rejects_npz_with_io_arrays_that_disagree() {
    let bytes = read(&cases()[0].npz);
    // conv1 has one output; give it two_io's `output_region`, which has two entries.
    let other = read(
        &cases()
            .into_iter()
            .find(|c| c.name.starts_with("two_io"))
            .unwrap()
            .npz,
    );
    let mut archive = zip::ZipArchive::new(Cursor::new(&other[..])).unwrap();
    let mut two = Vec::new();
    archive
        .by_name("output_region.npy")
        .unwrap()
        .read_to_end(&mut two)
        .unwrap();
    let edited = rebuild_npz(&bytes, |name, d| {
        Some(if name == "output_region.npy" {
            two.clone()
        } else {
            d
        })
    });
    assert_eq!(
        vela::import(&edited).unwrap_err(),
        Error::Vela(VelaError::NpzIoCountMismatch {
            array: "output_region",
            len: 2,
            expected: 1
        })
    );
}

#[test]
fn rejects_truncated_npz_and_unknown_files() {
    let bytes = read(&cases()[0].npz);
    assert!(matches!(
        vela::import(&bytes[..bytes.len() / 2]),
        Err(Error::Vela(VelaError::NpzMalformed { .. }))
    ));
    assert_eq!(
        vela::import(b"hello world").unwrap_err(),
        Error::Vela(VelaError::UnknownFormat {
            magic: u32::from_le_bytes(*b"hell")
        })
    );
    assert_eq!(
        vela::import(b"").unwrap_err(),
        Error::Vela(VelaError::UnknownFormat { magic: 0 })
    );
}

#[test]
fn rejects_npz_payload_with_a_c_string_cut() {
    // Treating `cmd_data` as a C string would drop its trailing zero words; the importer reads
    // the raw bytes, so a header that promises more than the data holds is refused.
    let bytes = read(&cases()[0].npz);
    let edited = rebuild_npz(&bytes, |name, mut d| {
        if name == "cmd_data.npy" {
            d.truncate(d.len() - 4);
        }
        Some(d)
    });
    assert_eq!(
        vela::import(&edited).unwrap_err(),
        Error::Vela(VelaError::NpzBadArray {
            array: "cmd_data",
            problem: "its data length disagrees with its header"
        })
    );
}

/// Vela's `ethos-u` operator may take the model's inputs and outputs in another order than the
/// model (npu-model's fixtures, compiled by Vela 5.2.0 for U55-256): `cat3` feeds a, b, c into a
/// CONCATENATION and the operator takes c, b, a; `pool`'s two outputs come out swapped. The
/// bindings follow the model's order, each at its own tensor's arena offset.
#[test]
fn bindings_follow_the_models_order_not_the_operators() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../npu-model/tests/models/vela/5.2.0/u55_256"
    ));
    let cat3 = vela::import(&read(&dir.join("cat3_vela.tflite"))).unwrap();
    let names: Vec<(IoKind, u32, &str)> = cat3
        .io
        .iter()
        .map(|b| (b.kind, b.index, b.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (IoKind::Input, 0, "a"),
            (IoKind::Input, 1, "b"),
            (IoKind::Input, 2, "c"),
            (IoKind::Output, 0, "concat"),
        ]
    );
    // Three distinct tensors: three distinct places in the arena.
    let mut offsets: Vec<u32> = cat3.io[..3].iter().map(|b| b.offset).collect();
    offsets.dedup();
    assert_eq!(offsets.len(), 3);

    let pool = vela::import(&read(&dir.join("pool_vela.tflite"))).unwrap();
    let outs: Vec<(u32, &str, Vec<u32>)> = pool
        .io
        .iter()
        .filter(|b| b.kind == IoKind::Output)
        .map(|b| (b.index, b.name.as_str(), b.shape.dims().to_vec()))
        .collect();
    assert_eq!(
        outs,
        [
            (0, "pool1", vec![1, 4, 4, 16]),
            (1, "pool2", vec![1, 7, 7, 16])
        ]
    );
}
