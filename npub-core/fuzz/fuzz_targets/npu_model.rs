//! The Ethos-U55 functional model (`npu-model`) on mutated command streams and weight streams:
//! whatever the verifier accepts is executed, and it must never panic, run unbounded or allocate
//! beyond the pack (input format and the run in `npu-model/src/harness.rs`).
//!
//! Corpus: `corpus/npu_model/`, written by `cargo run -p npu-model --example fuzz_corpus` from
//! real Vela 5.2.0 output; `npu-model/tests/fuzz_corpus.rs` replays every file in `cargo test`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    npu_model::harness::run_one(data);
});
