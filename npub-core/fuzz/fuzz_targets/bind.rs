//! The first two bytes choose the arena's length (in 16-byte units) and its misalignment; the rest
//! is the pack. An accepted bind yields aligned, disjoint runtime regions inside the arena.
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_core::{Blob, BoundRegion, bind};

fuzz_target!(|data: &[u8]| {
    let [units, misalign, pack @ ..] = data else {
        return;
    };
    let Ok(blob) = Blob::parse(pack) else {
        return;
    };
    let len = usize::from(*units) * 64;
    let mut buf = vec![0u8; len + 32];
    let start = (16 - buf.as_ptr() as usize % 16) % 16 + usize::from(misalign % 16);
    let arena = &mut buf[start..start + len];
    let lo = arena.as_ptr() as usize;
    let hi = lo + len;
    if let Ok(job) = bind(&blob, arena) {
        let mut last_end = lo;
        for r in job.regions() {
            if let BoundRegion::Runtime(b) = r {
                let a = b.as_ptr() as usize;
                assert_eq!(a % 16, 0);
                assert!(a >= last_end && a + b.len() <= hi);
                last_end = a + b.len();
            }
        }
    }
});
