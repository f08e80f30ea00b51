//! Property tests: build → parse round-trips; any single flipped byte is rejected; the stream
//! validator agrees with `parse` under any chunking.
mod common;

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Blob, Role, StreamValidator, arena_bytes_required, bind};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Spec {
    Baked(u32, Vec<u8>),
    Runtime(u32, u32),
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (0u32..6, proptest::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(r, b)| Spec::Baked(r, b)),
        (0u32..6, 0u32..5000).prop_map(|(r, s)| Spec::Runtime(r, s)),
    ]
}

fn pack() -> impl Strategy<Value = (Vec<u8>, Vec<Spec>, u32, Vec<u8>)> {
    (
        proptest::collection::vec(any::<u8>(), 1..300),
        proptest::collection::vec(spec(), 0..10),
        0u32..9,
    )
        .prop_map(|(cmd, specs, accel)| {
            let regions: Vec<RegionSpec<'_>> = specs
                .iter()
                .map(|s| match s {
                    Spec::Baked(r, b) => RegionSpec::Baked {
                        role: Role::from_word(*r),
                        bytes: b,
                    },
                    Spec::Runtime(r, size) => RegionSpec::Runtime {
                        role: Role::from_word(*r),
                        size: *size,
                    },
                })
                .collect();
            let bytes = build_pack(&cmd, &regions, Accel::from_word(accel)).unwrap();
            (cmd, specs, accel, bytes)
        })
}

fn stream(b: &[u8], cuts: &[usize]) -> Result<(), npub_core::Error> {
    let mut v = StreamValidator::new(b.len() as u32);
    let mut at = 0;
    for &c in cuts {
        let end = (at + c).min(b.len());
        v.feed(&b[at..end])?;
        at = end;
    }
    v.feed(&b[at..])?;
    v.finish().map(|_| ())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn build_then_parse_round_trips((cmd, specs, accel, bytes) in pack()) {
        let blob = Blob::parse(&bytes).unwrap();
        prop_assert_eq!(blob.command_stream(), &cmd[..]);
        prop_assert_eq!(blob.accel().word(), accel);
        prop_assert_eq!(blob.region_count() as usize, specs.len());
        prop_assert_eq!(blob.header().cmd_offset % 16, 0);
        for (d, s) in blob.regions().zip(&specs) {
            match s {
                Spec::Baked(r, b) => {
                    prop_assert!(d.is_baked());
                    prop_assert_eq!(d.role.word(), *r);
                    prop_assert_eq!(d.data_offset % 16, 0);
                    prop_assert_eq!(blob.baked_bytes(d.index).unwrap(), &b[..]);
                }
                Spec::Runtime(r, size) => {
                    prop_assert!(!d.is_baked());
                    prop_assert_eq!(d.role.word(), *r);
                    prop_assert_eq!(d.size, *size);
                }
            }
        }
        // Deterministic.
        let again = {
            let regions: Vec<RegionSpec<'_>> = specs.iter().map(|s| match s {
                Spec::Baked(r, b) => RegionSpec::Baked { role: Role::from_word(*r), bytes: b },
                Spec::Runtime(r, size) => RegionSpec::Runtime { role: Role::from_word(*r), size: *size },
            }).collect();
            build_pack(&cmd, &regions, Accel::from_word(accel)).unwrap()
        };
        prop_assert_eq!(&again, &bytes);
        // Binds into arena_bytes_required wherever the arena starts (≤ 8 regions).
        if specs.len() <= 8 {
            let need = arena_bytes_required(&blob) as usize;
            for misalign in [0, 1, 7, 15] {
                let (mut buf, start) = common::arena(need, misalign);
                prop_assert!(bind(&blob, &mut buf[start..start + need]).is_ok());
            }
        }
    }

    /// Every byte the spec protects: magic, version and total_bytes by their own checks, the
    /// checksum word and the whole payload by FNV-1a. Words 3–6 (region_count, cmd_offset,
    /// cmd_bytes, accel) are the exception the spec makes — the checksum covers the payload only —
    /// so a flip there can yield another well-formed pack; see the next property. The signed
    /// manifest's sha256 over the whole pack is what catches those.
    #[test]
    fn flipping_any_protected_byte_is_rejected((_c, _s, _a, bytes) in pack(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let i = at.index(bytes.len());
        prop_assume!(!(12..28).contains(&i));
        let mut b = bytes.clone();
        b[i] ^= 1 << bit;
        prop_assert!(Blob::parse(&b).is_err(), "flip at {} accepted", i);
    }

    /// A flip in the unchecksummed header words is either rejected or yields a pack whose every
    /// slice is still inside the buffer: never a panic, never an out-of-bounds view.
    #[test]
    fn flipping_an_unchecksummed_header_word_stays_in_bounds((_c, _s, _a, bytes) in pack(), i in 12usize..28, bit in 0u8..8) {
        let mut b = bytes.clone();
        b[i] ^= 1 << bit;
        if let Ok(blob) = Blob::parse(&b) {
            let h = blob.header();
            prop_assert!(u64::from(h.cmd_offset) + u64::from(h.cmd_bytes) <= b.len() as u64);
            for d in blob.regions() {
                if let Some(bytes) = blob.baked_bytes(d.index) {
                    prop_assert_eq!(bytes.len(), d.size as usize);
                }
            }
        }
    }

    #[test]
    fn stream_validator_agrees_with_parse(
        (_c, _s, _a, bytes) in pack(),
        cuts in proptest::collection::vec(0usize..64, 0..40),
        corrupt in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut b = bytes;
        if let Some((at, v)) = corrupt {
            let i = at.index(b.len());
            b[i] = v;
        }
        if let Some(t) = truncate {
            let n = t.index(b.len());
            b.truncate(n);
        }
        let want = Blob::parse(&b).map(|_| ());
        prop_assert_eq!(stream(&b, &cuts), want);
        // One byte at a time, too.
        prop_assert_eq!(stream(&b, &vec![1; b.len()]), want);
    }
}
