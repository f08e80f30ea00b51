//! Any bytes: `Blob::parse` returns Ok or an error, never panics, and every slice of an accepted
//! blob lies inside the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_core::Blob;

fuzz_target!(|data: &[u8]| {
    if let Ok(blob) = Blob::parse(data) {
        let range = data.as_ptr_range();
        let cmd = blob.command_stream();
        assert!(!cmd.is_empty() && range.contains(&cmd.as_ptr()));
        for d in blob.regions() {
            if let Some(b) = blob.baked_bytes(d.index) {
                assert_eq!(b.len(), d.size as usize);
            }
        }
    }
});
