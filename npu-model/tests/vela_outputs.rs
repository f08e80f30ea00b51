//! Every committed Vela output (`tests/models/vela/<version>/u55_<macs>/`, and the shared
//! fixtures' `vela_out/`) run through the functional model on the committed input sets, compared
//! byte for byte with TFLite's reference kernels' outputs (`tests/models/ref/`). Regenerate all of
//! it with `tests/models/build.sh`.
use std::path::{Path, PathBuf};

use npu_model::prove::TensorSet;
use npub_core::vela;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models")
}

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/vela/vela_out")
}

/// Every `*_vela.tflite` under `dir`, recursively.
fn compiled(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            compiled(&p, out);
        } else if p.to_string_lossy().ends_with("_vela.tflite") {
            out.push(p);
        }
    }
}

/// Input and output sets for a model: `ref/<model>/set-<k>/{input,output}-<i>.bin`.
fn sets(model: &str) -> Vec<(TensorSet, TensorSet)> {
    let root = models().join("ref").join(model);
    let mut v = Vec::new();
    for k in 0.. {
        let d = root.join(format!("set-{k}"));
        if !d.is_dir() {
            break;
        }
        let read = |prefix: &str| {
            (0..)
                .map(|i| d.join(format!("{prefix}-{i}.bin")))
                .take_while(|p| p.is_file())
                .map(|p| std::fs::read(p).unwrap())
                .collect::<Vec<_>>()
        };
        v.push((read("input"), read("output")));
    }
    v
}

#[test]
fn every_vela_output_is_bit_exact_to_the_tflite_reference() {
    let mut files = Vec::new();
    compiled(&models().join("vela"), &mut files);
    compiled(&shared(), &mut files);
    files.sort();
    let mut failures = Vec::new();
    let mut runs = 0;
    for f in &files {
        let stem = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace("_vela.tflite", "");
        let sets = sets(&stem);
        assert!(
            !sets.is_empty(),
            "{}: no reference sets for {stem}",
            f.display()
        );
        let imp = vela::import(&std::fs::read(f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (k, (inputs, want)) in sets.iter().enumerate() {
            let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            runs += 1;
            match npu_model::run(&imp.pack, &imp.io, &refs) {
                Ok(got) if &got == want => {}
                Ok(got) => {
                    let bad: Vec<usize> = (0..got.len())
                        .filter(|&j| got.get(j) != want.get(j))
                        .collect();
                    failures.push(format!("{} set {k}: outputs {bad:?} differ", f.display()));
                }
                Err(e) => failures.push(format!("{} set {k}: {e}", f.display())),
            }
        }
    }
    assert!(files.len() >= 80, "only {} compiled models", files.len());
    assert!(
        failures.is_empty(),
        "{} of {runs} runs diverge:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
