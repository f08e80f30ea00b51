//! `npub run` and `npub prove`, as the real binary on real Vela output (npu-model's fixtures:
//! Vela 5.2.0 for U55-256, and the TFLite reference kernels' outputs for committed inputs).
//!
//! `npub prove` is run here with a stand-in for the reference interpreter that hands back the
//! committed reference outputs, so these tests need no Python; `.ci/run` also runs it with the
//! real pinned interpreter.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn npub(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npub"))
        .args(args)
        .env_remove("NPUB_REFERENCE_PYTHON")
        .output()
        .expect("run npub")
}

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../npu-model/tests/models")
}

fn text(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// A fresh, empty directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("npub-run-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `npub pack` of `model`'s Vela 5.2.0 U55-256 output into `dir/model.npub`.
fn pack(dir: &Path, model: &str) -> PathBuf {
    let src = models().join(format!("vela/5.2.0/u55_256/{model}_vela.tflite"));
    let out = dir.join(format!("{model}.npub"));
    let o = npub(&["pack", &text(&src), "-o", &text(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn ref_set(model: &str) -> PathBuf {
    models().join(format!("ref/{model}/set-0"))
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    (0..)
        .map(|i| dir.join(format!("{prefix}-{i}.bin")))
        .take_while(|p| p.is_file())
        .collect()
}

/// `npub run PACK --input … --output-dir OUT` with the reference set's inputs.
fn run(pack: &Path, inputs: &[PathBuf], out: &Path) -> Output {
    let mut args = vec!["run".to_owned(), text(pack)];
    for i in inputs {
        args.push("--input".into());
        args.push(text(i));
    }
    args.push("--output-dir".into());
    args.push(text(out));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    npub(&args)
}

#[test]
fn run_takes_inputs_and_writes_outputs_in_the_models_order() {
    // cat3: Vela's ethos-u operator takes the model's inputs a, b, c as c, b, a; pool: it lists
    // the two outputs swapped. Both must come out as the model has them.
    for model in ["cat3", "concat3", "pool", "conv1", "act"] {
        let dir = TempDir::new(model);
        let p = pack(&dir.0, model);
        let set = ref_set(model);
        let out = dir.0.join("out");
        let o = run(&p, &files(&set, "input"), &out);
        assert!(
            o.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let want = files(&set, "output");
        assert_eq!(files(&out, "output").len(), want.len(), "{model}");
        for (i, w) in want.iter().enumerate() {
            let got = std::fs::read(out.join(format!("output-{i}.bin"))).unwrap();
            assert_eq!(got, std::fs::read(w).unwrap(), "{model} output {i}");
        }
    }
}

#[test]
fn rejects_run_with_too_few_inputs() {
    let dir = TempDir::new("few");
    let p = pack(&dir.0, "concat3");
    let inputs = files(&ref_set("concat3"), "input");
    let o = run(&p, &inputs[..3], &dir.0.join("out"));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("3 input file(s) given, the model has 4 input(s)"),
        "{err}"
    );
    assert!(!dir.0.join("out/output-0.bin").exists());
}

#[test]
fn rejects_run_without_io_bindings() {
    let dir = TempDir::new("noio");
    let p = pack(&dir.0, "conv1");
    std::fs::remove_file(dir.0.join("conv1.io.json")).unwrap();
    let o = run(&p, &files(&ref_set("conv1"), "input"), &dir.0.join("out"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no IO bindings beside it"));
}

/// A stand-in interpreter: copies `outputs` into every set directory it is given.
fn stub_interpreter(dir: &Path, outputs: &[(usize, Vec<u8>)]) -> PathBuf {
    let data = dir.join("stub-outputs");
    std::fs::create_dir_all(&data).unwrap();
    for (i, bytes) in outputs {
        std::fs::write(data.join(format!("output-{i}.bin")), bytes).unwrap();
    }
    let script = dir.join("python");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n# reference.py MODEL DIR\nfor s in \"$3\"/set-*; do cp {}/output-*.bin \"$s\"/; done\n",
            text(&data)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn prove(pack: &Path, python: &Path, inputs: &[PathBuf], json: &Path) -> Output {
    let mut args = vec![
        "prove".to_owned(),
        text(pack),
        "--source".into(),
        text(&models().join("src/pool.tflite")),
        "--inputs".into(),
        "0".into(),
        "--python".into(),
        text(python),
        "--json".into(),
        text(json),
    ];
    for i in inputs {
        args.push("--input".into());
        args.push(text(i));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    npub(&args)
}

#[test]
fn prove_reports_bit_exact_per_output() {
    let dir = TempDir::new("prove-ok");
    let p = pack(&dir.0, "pool");
    let set = ref_set("pool");
    let outs: Vec<(usize, Vec<u8>)> = files(&set, "output")
        .iter()
        .enumerate()
        .map(|(i, f)| (i, std::fs::read(f).unwrap()))
        .collect();
    let py = stub_interpreter(&dir.0, &outs);
    let json = dir.0.join("proof.json");
    let o = prove(&p, &py, &files(&set, "input"), &json);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("output 0 (pool1): bit-exact on 1/1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("output 1 (pool2): bit-exact on 1/1"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["format"], "npub-proof");
    assert_eq!(report["outputs"][1]["bit_exact"], 1);
}

#[test]
fn prove_names_the_operation_where_an_output_diverges() {
    let dir = TempDir::new("prove-diverge");
    let p = pack(&dir.0, "pool");
    let set = ref_set("pool");
    let mut outs: Vec<(usize, Vec<u8>)> = files(&set, "output")
        .iter()
        .enumerate()
        .map(|(i, f)| (i, std::fs::read(f).unwrap()))
        .collect();
    // The reference says element 5 of output 1 is 9 more than the pack computes.
    outs[1].1[5] = outs[1].1[5].wrapping_add(9);
    let py = stub_interpreter(&dir.0, &outs);
    let o = prove(&p, &py, &files(&set, "input"), &dir.0.join("proof.json"));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("output 0 (pool1): bit-exact on 1/1"),
        "{stdout}"
    );
    assert!(stdout.contains("output 1 (pool2): DIVERGES"), "{stdout}");
    assert!(stdout.contains("first differing element 5"), "{stdout}");
    assert!(stdout.contains("largest absolute difference 9"), "{stdout}");
    assert!(
        stdout.contains("written by POOL AVERAGE at command offset"),
        "{stdout}"
    );
}

#[test]
fn rejects_prove_without_a_reference_interpreter() {
    let dir = TempDir::new("prove-nopy");
    let p = pack(&dir.0, "conv1");
    let o = prove(
        &p,
        &dir.0.join("no-such-python"),
        &files(&ref_set("conv1"), "input"),
        &dir.0.join("proof.json"),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("tflite-runtime==2.14"), "{err}");
}

#[test]
fn golden_writes_the_self_test_record_that_run_reproduces() {
    let dir = TempDir::new("golden");
    let p = pack(&dir.0, "fc");
    let out = dir.0.join("fc.selftest");
    let o = npub(&["golden", &text(&p), "-o", &text(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let record = std::fs::read(&out).unwrap();
    let t = npub_core::release::SelfTest::parse(&record).unwrap();
    // `npub run` on the record's input (one file per model input) hashes to its digest.
    let json = std::fs::read_to_string(dir.0.join("fc.io.json")).unwrap();
    let (io, _) = npub_core::io_bindings::from_json(&json).unwrap();
    let inputs: Vec<PathBuf> = npu_model::golden::split_input(&io, t.input())
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let f = dir.0.join(format!("golden-input-{i}.bin"));
            std::fs::write(&f, bytes).unwrap();
            f
        })
        .collect();
    assert_eq!(inputs.len(), 2, "fc has two inputs");
    let o = run(&p, &inputs, &dir.0.join("out"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let outputs: Vec<u8> = files(&dir.0.join("out"), "output")
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect();
    assert_eq!(
        npu_model::golden::output_digest(&[outputs]),
        t.output_sha256()
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("ran"), "{stdout}");
}

/// `npub sign --selftest` signs the record `npub golden` wrote into a version-2 manifest;
/// a file that is not a record is refused before anything is written.
#[test]
fn sign_with_a_selftest_record_makes_a_version_2_manifest_that_names_it() {
    let dir = TempDir::new("sign-selftest");
    let p = pack(&dir.0, "fc");
    let record = dir.0.join("fc.selftest");
    let o = npub(&["golden", &text(&p), "-o", &text(&record)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let key = dir.0.join("signer");
    assert!(npub(&["keygen", "-o", &text(&key)]).status.success());
    let sign = |selftest: &Path, out: &Path| {
        npub(&[
            "sign",
            &text(&p),
            "--key",
            &text(&key),
            "--seq",
            "3",
            "--model",
            "fc",
            "--version",
            "1.0.0",
            "--selftest",
            &text(selftest),
            "-o",
            &text(out),
        ])
    };
    let out = dir.0.join("fc.manifest");
    let o = sign(&record, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest = std::fs::read(&out).unwrap();
    let view = npub_core::manifest::ManifestView::new(&manifest).unwrap();
    assert_eq!(manifest.len(), npub_core::manifest::MANIFEST_V2_BYTES);
    assert_eq!(
        view.selftest_digest(),
        Some(npub_core::manifest::sha256(
            &std::fs::read(&record).unwrap()
        ))
    );
    let bad = dir.0.join("bad.manifest");
    let o = sign(&p, &bad);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a self-test record"), "{err}");
    assert!(!bad.exists());
}

#[test]
fn rejects_golden_without_io_bindings() {
    let dir = TempDir::new("golden-noio");
    let p = pack(&dir.0, "fc");
    std::fs::remove_file(dir.0.join("fc.io.json")).unwrap();
    let o = npub(&["golden", &text(&p), "-o", &text(&dir.0.join("x"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no IO bindings"));
}
