//! `npub pack`, run as the real binary on real Vela output.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npub_core::vela;

fn npub(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npub"))
        .args(args)
        .output()
        .expect("run npub")
}

fn vela_out() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/vela/vela_out")
}

/// Every Vela output in the shared fixtures: `vela_out/<accel>/{tflite,raw}/*_vela.{tflite,npz}`.
fn vela_outputs() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for accel in std::fs::read_dir(vela_out()).unwrap() {
        for form in ["tflite", "raw"] {
            let dir = accel.as_ref().unwrap().path().join(form);
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let name = p.to_string_lossy();
                if name.ends_with("_vela.tflite") || name.ends_with("_vela.npz") {
                    found.push(p);
                }
            }
        }
    }
    found.sort();
    assert!(!found.is_empty());
    found
}

/// A fresh, empty directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("npub-pack-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn pack_writes_the_library_pack_and_its_io_bindings() {
    let dir = TempDir::new("writes");
    for input in vela_outputs() {
        let out = dir.0.join("model.npub");
        let run = npub(&[Path::new("pack"), &input, Path::new("-o"), &out]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}: {}",
            input.display(),
            text(&run.stderr)
        );
        assert_eq!(
            dir.files(),
            ["model.io.json", "model.npub"],
            "{}",
            input.display()
        );

        let lib = vela::import(&std::fs::read(&input).unwrap()).unwrap();
        assert!(
            std::fs::read(&out).unwrap() == lib.pack,
            "{}: pack differs",
            input.display()
        );
        assert_eq!(
            std::fs::read_to_string(dir.0.join("model.io.json")).unwrap(),
            lib.io_json(),
            "{}",
            input.display()
        );
        assert!(text(&run.stdout).contains("model.npub"));
        std::fs::remove_file(&out).unwrap();
        std::fs::remove_file(dir.0.join("model.io.json")).unwrap();
    }
}

#[test]
fn a_failed_pack_leaves_no_file() {
    let dir = TempDir::new("fails");
    let uncompiled = vela_out().join("../models/conv1.tflite");
    let out = dir.0.join("model.npub");
    let run = npub(&[Path::new("pack"), &uncompiled, Path::new("-o"), &out]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("no ethos-u operator"),
        "{}",
        text(&run.stderr)
    );
    assert!(dir.files().is_empty(), "{:?}", dir.files());

    // A COP2 payload is refused after the flatbuffer was read: still nothing written.
    let good = vela_outputs()
        .into_iter()
        .find(|p| p.extension().unwrap() == "tflite")
        .unwrap();
    let mut bytes = std::fs::read(good).unwrap();
    let at = bytes.windows(4).position(|w| w == b"COP1").unwrap();
    bytes[at + 3] = b'2';
    let cop2 = std::env::temp_dir().join(format!("npub-pack-{}-cop2.tflite", std::process::id()));
    std::fs::write(&cop2, &bytes).unwrap();
    let run = npub(&[Path::new("pack"), &cop2, Path::new("-o"), &out]);
    let _ = std::fs::remove_file(&cop2);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("--cop-format COP2"),
        "{}",
        text(&run.stderr)
    );
    assert!(dir.files().is_empty(), "{:?}", dir.files());
}

#[test]
fn a_target_other_than_the_u55_is_refused_with_the_flag_to_change() {
    let dir = TempDir::new("target");
    let u65 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../npub-core/tests/data/vela/accel/conv1_ethos-u65-256_vela.tflite");
    let out = dir.0.join("model.npub");
    let run = npub(&[Path::new("pack"), &u65, Path::new("-o"), &out]);
    assert_eq!(run.status.code(), Some(1));
    let err = text(&run.stderr);
    assert!(
        err.contains("Ethos-U65-256")
            && err.contains("--accelerator-config ethos-u55-{32,64,128,256}"),
        "{err}"
    );
    assert!(dir.files().is_empty(), "{:?}", dir.files());
}

#[test]
fn warnings_reach_stderr_and_the_files_are_written() {
    // Vela 4.4.1's C++ core writes no quantisation arrays: packed, with one warning per binding.
    let dir = TempDir::new("warnings");
    let npz = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../npub-core/tests/data/vela/matrix/files/\
         4.4.1-regor-u55-256-default-conv1-raw__conv1_vela.npz",
    );
    let out = dir.0.join("model.npub");
    let run = npub(&[Path::new("pack"), &npz, Path::new("-o"), &out]);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{err}");
    assert_eq!(dir.files(), ["model.io.json", "model.npub"]);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    for w in warnings {
        assert!(w.contains("quantisation") && w.contains(".tflite"), "{w}");
    }
}

#[test]
fn a_failed_pack_keeps_the_previous_files() {
    let dir = TempDir::new("keeps");
    let out = dir.0.join("model.npub");
    std::fs::write(&out, b"old pack").unwrap();
    std::fs::write(dir.0.join("model.io.json"), b"old json").unwrap();
    let uncompiled = vela_out().join("../models/two_io.tflite");
    let run = npub(&[Path::new("pack"), &uncompiled, Path::new("-o"), &out]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(std::fs::read(&out).unwrap(), b"old pack");
    assert_eq!(
        std::fs::read(dir.0.join("model.io.json")).unwrap(),
        b"old json"
    );
    assert_eq!(dir.files(), ["model.io.json", "model.npub"]);
}

#[test]
fn an_unreadable_input_or_output_is_a_usage_error() {
    let dir = TempDir::new("usage");
    let out = dir.0.join("model.npub");
    let run = npub(&[
        Path::new("pack"),
        &dir.0.join("missing.tflite"),
        Path::new("-o"),
        &out,
    ]);
    assert_eq!(run.status.code(), Some(2));
    let input = vela_outputs().remove(0);
    let nowhere = dir.0.join("no/such/dir/model.npub");
    let run = npub(&[Path::new("pack"), &input, Path::new("-o"), &nowhere]);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(dir.files().is_empty());
}
