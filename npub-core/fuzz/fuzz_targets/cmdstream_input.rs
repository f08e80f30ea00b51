// How the `cmdstream` fuzz target reads its input; shared with `tests/cmdstream.rs`, which runs the
// committed corpus through the same split (`#[path]`-included by both, so they cannot drift).
//
// | bytes         | meaning                                                        |
// |---------------|----------------------------------------------------------------|
// | 0             | region count, modulo 9 (0..=8 descriptors)                     |
// | 1             | `accel` word: SHRAM size is `shram_bytes(Accel::from_word(b))` |
// | 2 .. 2 + 4·n  | region sizes, little-endian `u32`, BASEP order                 |
// | rest          | the command stream                                             |
#![allow(dead_code)]

use npub_core::Accel;
use npub_core::cmdstream::{StreamSummary, shram_bytes};

/// Descriptors the input format can carry: the Ethos-U55's eight base pointers.
pub const MAX_REGIONS: usize = 8;

/// One fuzz input, split.
pub struct Input<'a> {
    sizes: [u32; MAX_REGIONS],
    count: usize,
    /// SHRAM bytes.
    pub shram: u32,
    /// The stream.
    pub cmd: &'a [u8],
}

impl Input<'_> {
    /// The region sizes (index = BASEP n).
    pub fn regions(&self) -> &[u32] {
        &self.sizes[..self.count]
    }
}

/// Splits `data`, or `None` if it is too short for its own header.
pub fn split(data: &[u8]) -> Option<Input<'_>> {
    let (&count, rest) = data.split_first()?;
    let (&accel, mut rest) = rest.split_first()?;
    let count = usize::from(count) % (MAX_REGIONS + 1);
    let mut sizes = [0u32; MAX_REGIONS];
    for size in sizes.iter_mut().take(count) {
        let (word, tail) = rest.split_first_chunk::<4>()?;
        *size = u32::from_le_bytes(*word);
        rest = tail;
    }
    Some(Input {
        sizes,
        count,
        shram: shram_bytes(Accel::from_word(u32::from(accel))),
        cmd: rest,
    })
}

/// What must hold of any accepted stream: every span inside its region, the used bits matching
/// the spans, and no more commands than words.
pub fn check_summary(input: &Input<'_>, s: &StreamSummary) {
    for (i, span) in s.spans.iter().enumerate() {
        let used = s.regions_used & (1 << i) != 0;
        assert_eq!(used, span.is_some(), "region {i}");
        if let Some(span) = span {
            assert!(span.start < span.end, "region {i}: empty span {span}");
            assert!(
                span.end <= input.regions()[i],
                "region {i}: {span} past its size"
            );
        }
    }
    if let Some(span) = s.shram {
        assert!(
            span.start < span.end && span.end <= input.shram,
            "SHRAM {span}"
        );
    }
    assert!(s.commands as usize <= input.cmd.len() / 4);
    assert!(s.ops.total() < s.commands);
}
