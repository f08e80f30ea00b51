//! The `npu_model` fuzz target's corpus (`npub-core/fuzz/corpus/npu_model/`, real Vela streams
//! and whatever crashes the fuzzer found, each kept as a regression file) replayed through the
//! same harness: none may panic.
use std::path::Path;

#[test]
fn survives_every_fuzz_corpus_entry() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../npub-core/fuzz/corpus/npu_model");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("the corpus directory") {
        let p = e.unwrap().path();
        npu_model::harness::run_one(&std::fs::read(&p).unwrap());
        n += 1;
    }
    assert!(n >= 10, "only {n} corpus entries in {}", dir.display());
}
