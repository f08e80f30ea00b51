//! Writes the fuzz corpus of `npub-core/fuzz`'s `npu_model` target from real Vela output: each
//! committed compilation of npu-model's fixtures for U55-256 and U55-32 (Vela 5.2.0), in the
//! harness's input format (`src/harness.rs`).
//!
//! `cargo run -p npu-model --example fuzz_corpus -- npub-core/fuzz/corpus/npu_model`
use std::path::Path;

use npub_core::{Blob, vela};

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: fuzz_corpus OUT_DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&out).expect("create the corpus directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/vela/5.2.0");
    for accel in ["u55_256", "u55_32"] {
        for model in [
            "conv1", "two_io", "pool", "eltwise", "act", "kernels", "fc", "concat3", "conv16",
        ] {
            let path = root.join(accel).join(format!("{model}_vela.tflite"));
            let imp = vela::import(&std::fs::read(&path).expect("read")).expect("import");
            let blob = Blob::parse(&imp.pack).expect("parse");
            let scratch = blob.region(1).map_or(0, |r| r.size);
            if scratch > u32::from(npu_model::harness::MAX_SCRATCH) {
                continue;
            }
            let bytes = npu_model::harness::encode(
                blob.accel(),
                blob.command_stream(),
                scratch,
                blob.baked_bytes(0).unwrap_or(&[]),
            );
            let name = Path::new(&out).join(format!("{model}_{accel}"));
            std::fs::write(&name, bytes).expect("write");
            println!("{}", name.display());
        }
    }
}
