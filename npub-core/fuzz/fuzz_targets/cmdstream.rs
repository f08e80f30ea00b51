//! The command-stream verifier on arbitrary region tables and streams (input format in
//! `cmdstream_input.rs`). It must never panic; an accepted stream's summary must stay inside the
//! regions it was given; every error must format.
//!
//! Corpus: `corpus/cmdstream/`, written by `tests/data/cmdstream/gen_corpus.py` from the Vela
//! fixtures (each `accept_*` file is a real stream with its real region sizes, each
//! `reject_<Variant>_*` one mutation); `tests/cmdstream.rs` checks every file's verdict.
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_core::cmdstream::verify;

#[path = "cmdstream_input.rs"]
mod input;

fuzz_target!(|data: &[u8]| {
    let Some(input) = input::split(data) else {
        return;
    };
    match verify(input.cmd, input.regions(), input.shram) {
        Ok(summary) => input::check_summary(&input, &summary),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
