//! The first byte chooses a chunk size; the stream validator must agree with `Blob::parse` exactly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_core::{Blob, StreamValidator};

fuzz_target!(|data: &[u8]| {
    let [chunk, pack @ ..] = data else {
        return;
    };
    let Ok(len) = u32::try_from(pack.len()) else {
        return;
    };
    let mut v = StreamValidator::new(len);
    let fed = pack
        .chunks(usize::from(*chunk).max(1))
        .try_for_each(|c| v.feed(c));
    let verdict = fed.and_then(|()| v.finish().map(|_| ()));
    assert_eq!(verdict, Blob::parse(pack).map(|_| ()));
});
