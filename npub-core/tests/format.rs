//! NPU1 container: one test per row of the spec's malformed-input table (ten rejected, three accepted
//! by design), the wrap-around variants of every `offset + size`, binding, and the worked example.
mod common;

use common::*;
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{
    Accel, Blob, BoundRegion, Error, FormatError, Role, StreamValidator, arena_bytes_required,
    arena_bytes_required_aligned, bind,
};

fn parse_err(b: &[u8]) -> Error {
    Blob::parse(b).expect_err("malformed pack was accepted")
}

#[test]
fn accepts_a_built_pack() {
    let b = small_pack();
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(blob.region_count(), 3);
    assert_eq!(blob.command_stream(), &(0..40u8).collect::<Vec<_>>()[..]);
    assert_eq!(blob.accel(), Accel::EthosU55_256);
    assert_eq!(blob.header().cmd_offset % 16, 0);
    assert_eq!(blob.region(0).unwrap().data_offset % 16, 0);
}

// ----- the ten rejected rows ------------------------------------------------------------------------

#[test]
fn rejects_buffer_shorter_than_header() {
    let b = small_pack();
    for len in 0..32 {
        assert_eq!(
            parse_err(&b[..len]),
            Error::Format(FormatError::TooShort { len: len as u64 })
        );
    }
}

#[test]
fn rejects_wrong_magic() {
    let mut b = small_pack();
    b[3] = b'2'; // "NPU2"
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::BadMagic { found: 0x3255_504E })
    );
    // Byte-swapped magic: a big-endian writer.
    let mut b = small_pack();
    set(&mut b, 0, 0x4E50_5531);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::BadMagic { found: 0x4E50_5531 })
    );
}

#[test]
fn rejects_wrong_version() {
    for v in [0, 2, u32::MAX] {
        let mut b = small_pack();
        set(&mut b, 4, v);
        assert_eq!(
            parse_err(&b),
            Error::Format(FormatError::UnsupportedVersion { found: v })
        );
    }
}

#[test]
fn rejects_total_bytes_different_from_buffer_length() {
    let b = small_pack();
    let total = word(&b, 2);
    // Truncated buffer: the header still claims the full length.
    let cut = &b[..b.len() - 1];
    assert_eq!(
        parse_err(cut),
        Error::Format(FormatError::TotalBytesMismatch {
            total_bytes: total,
            actual: u64::from(total) - 1
        })
    );
    // Padded buffer.
    let mut padded = b.clone();
    padded.push(0);
    assert_eq!(
        parse_err(&padded),
        Error::Format(FormatError::TotalBytesMismatch {
            total_bytes: total,
            actual: u64::from(total) + 1
        })
    );
    // Header lies.
    let mut lie = b.clone();
    set(&mut lie, 8, total - 16);
    assert!(matches!(
        parse_err(&lie),
        Error::Format(FormatError::TotalBytesMismatch { .. })
    ));
}

#[test]
fn rejects_huge_region_count() {
    let mut b = small_pack();
    let total = word(&b, 2);
    set(&mut b, 12, 1_000_000);
    reseal(&mut b);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::RegionTableOutOfBounds {
            region_count: 1_000_000,
            table_end: 32 + 16_000_000,
            total_bytes: total
        })
    );
}

#[test]
fn rejects_region_count_whose_table_size_wraps_u32() {
    // 16 × 0x1000_0000 = 2^32: a 32-bit multiply would make the table 0 bytes long.
    let mut b = small_pack();
    set(&mut b, 12, 0x1000_0000);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::RegionTableOutOfBounds { table_end, .. }) if table_end == 32 + (1u64 << 32)
    ));
    let mut b = small_pack();
    set(&mut b, 12, u32::MAX);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::RegionTableOutOfBounds { .. })
    ));
}

#[test]
fn rejects_empty_command_stream() {
    let mut b = small_pack();
    set(&mut b, 20, 0);
    reseal(&mut b);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::EmptyCommandStream)
    );
}

#[test]
fn rejects_command_stream_past_total_bytes() {
    let mut b = small_pack();
    let total = word(&b, 2);
    let off = word(&b, 4);
    set(&mut b, 20, total - off + 1);
    reseal(&mut b);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::CommandStreamOutOfBounds {
            cmd_offset: off,
            cmd_bytes: total - off + 1,
            total_bytes: total
        })
    );
    let mut b = small_pack();
    set(&mut b, 16, total);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::CommandStreamOutOfBounds { .. })
    ));
}

#[test]
fn rejects_command_stream_whose_end_wraps_u32() {
    // 0xFFFF_FFF0 + 0x20 wraps to 0x10 in 32 bits, which would pass a naive check.
    let mut b = small_pack();
    set(&mut b, 16, 0xFFFF_FFF0);
    set(&mut b, 20, 0x20);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::CommandStreamOutOfBounds { .. })
    ));
    let mut b = small_pack();
    set(&mut b, 16, 0x40);
    set(&mut b, 20, u32::MAX);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::CommandStreamOutOfBounds { .. })
    ));
}

#[test]
fn rejects_baked_region_past_total_bytes() {
    let mut b = small_pack();
    let total = word(&b, 2);
    let size = word(&b, desc(0, 2) / 4);
    let off = word(&b, desc(0, 3) / 4);
    set(&mut b, desc(0, 2), size + 1);
    reseal(&mut b);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::BakedRegionOutOfBounds {
            region: 0,
            data_offset: off,
            size: size + 1,
            total_bytes: total
        })
    );
    let mut b = small_pack();
    set(&mut b, desc(0, 3), total);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::BakedRegionOutOfBounds { region: 0, .. })
    ));
}

#[test]
fn rejects_baked_region_whose_end_wraps_u32() {
    let mut b = small_pack();
    set(&mut b, desc(0, 3), 0xFFFF_FF00);
    set(&mut b, desc(0, 2), 0x200);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::BakedRegionOutOfBounds { .. })
    ));
    let mut b = small_pack();
    set(&mut b, desc(0, 3), 64);
    set(&mut b, desc(0, 2), u32::MAX);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::BakedRegionOutOfBounds { .. })
    ));
}

#[test]
fn rejects_baked_flag_on_a_runtime_descriptor_with_garbage_offset() {
    // Region 1 is RUNTIME with data_offset 0 (unused); setting BAKED with a hostile size makes the
    // offset meaningful, and the bound applies.
    let mut b = small_pack();
    set(&mut b, desc(1, 1), 1);
    set(&mut b, desc(1, 2), 0x7FFF_FFFF);
    reseal(&mut b);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::BakedRegionOutOfBounds { region: 1, .. })
    ));
}

#[test]
fn rejects_runtime_region_larger_than_the_arena() {
    let b = small_pack();
    let blob = Blob::parse(&b).unwrap();
    let (mut buf, start) = arena(999, 0);
    assert_eq!(
        bind(&blob, &mut buf[start..start + 999]).unwrap_err(),
        Error::Format(FormatError::ArenaTooSmall {
            region: 1,
            size: 1000,
            offset: 0,
            arena_len: 999
        })
    );
}

#[test]
fn rejects_runtime_region_that_only_overflows_after_alignment() {
    // 1000 bytes fit an aligned 1000-byte arena, but not one starting 1 byte past a boundary: the
    // region's base is pushed 15 bytes in.
    let b = small_pack();
    let blob = Blob::parse(&b).unwrap();
    let (mut buf, start) = arena(1000, 1);
    assert_eq!(
        bind(&blob, &mut buf[start..start + 1000]).unwrap_err(),
        Error::Format(FormatError::ArenaTooSmall {
            region: 1,
            size: 1000,
            offset: 15,
            arena_len: 1000
        })
    );
}

#[test]
fn rejects_runtime_region_whose_size_is_hostile() {
    let mut b = small_pack();
    set(&mut b, desc(1, 2), u32::MAX);
    reseal(&mut b);
    let blob = Blob::parse(&b).unwrap(); // RUNTIME sizes are the arena's business, not the blob's
    let (mut buf, start) = arena(4096, 0);
    assert!(matches!(
        bind(&blob, &mut buf[start..start + 4096]),
        Err(Error::Format(FormatError::ArenaTooSmall {
            region: 1,
            size: u32::MAX,
            ..
        }))
    ));
}

#[test]
fn rejects_bit_rot_in_the_payload() {
    let good = small_pack();
    let stored = word(&good, 7);
    for at in [32, 48, 70, good.len() - 1] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        match parse_err(&b) {
            Error::Format(FormatError::ChecksumMismatch {
                stored: s,
                computed,
            }) => {
                assert_eq!(s, stored);
                assert_ne!(computed, stored);
            }
            // A flip in the region table may trip a structural check first; that is a rejection too.
            other if at < 80 => assert!(
                matches!(
                    other,
                    Error::Format(FormatError::UnknownRegionFlags { .. })
                        | Error::Format(FormatError::BakedRegionOutOfBounds { .. })
                ),
                "{other}"
            ),
            other => panic!("unexpected {other}"),
        }
    }
    // A flip in the checksum word itself.
    let mut b = good.clone();
    b[28] ^= 1;
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::ChecksumMismatch { .. })
    ));
}

// ----- beyond the table: decisions where the spec is silent ------------------------------------------

#[test]
fn rejects_unknown_region_flags() {
    let mut b = small_pack();
    set(&mut b, desc(2, 1), 0x8000_0000);
    reseal(&mut b);
    assert_eq!(
        parse_err(&b),
        Error::Format(FormatError::UnknownRegionFlags {
            region: 2,
            flags: 0x8000_0000
        })
    );
}

#[test]
fn rejects_binding_more_than_eight_regions() {
    let cmd = [1u8; 16];
    let specs: Vec<RegionSpec<'_>> = (0..9)
        .map(|_| RegionSpec::Runtime {
            role: Role::Scratch,
            size: 16,
        })
        .collect();
    let b = build_pack(&cmd, &specs, Accel::EthosU55_256).unwrap();
    let blob = Blob::parse(&b).expect("nine regions are a valid NPU1 pack");
    let (mut buf, start) = arena(1024, 0);
    let err = bind(&blob, &mut buf[start..start + 1024]).unwrap_err();
    assert_eq!(
        err,
        Error::Format(FormatError::TooManyRegions {
            region_count: 9,
            max: 8
        })
    );
    assert!(err.to_string().contains("BASEP0..BASEP7"), "{err}");
}

#[test]
fn rejects_empty_command_stream_when_building() {
    assert_eq!(
        build_pack(&[], &[], Accel::Unspecified).unwrap_err(),
        Error::Format(FormatError::EmptyCommandStream)
    );
}

#[test]
fn checks_run_in_the_spec_order() {
    // Everything wrong at once: each fix reveals the next check.
    let mut b = small_pack();
    set(&mut b, 0, 0);
    set(&mut b, 4, 9);
    set(&mut b, 8, 1);
    set(&mut b, 12, u32::MAX);
    set(&mut b, 20, 0);
    set(&mut b, desc(0, 1), 6);
    b[40 + 32] ^= 1;
    let total = b.len() as u32;
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::BadMagic { .. })
    ));
    set(&mut b, 0, npub_core::format::MAGIC);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::UnsupportedVersion { .. })
    ));
    set(&mut b, 4, 1);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::TotalBytesMismatch { .. })
    ));
    set(&mut b, 8, total);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::RegionTableOutOfBounds { .. })
    ));
    set(&mut b, 12, 3);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::EmptyCommandStream)
    ));
    set(&mut b, 20, 40);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::UnknownRegionFlags { .. })
    ));
    set(&mut b, desc(0, 1), 1);
    assert!(matches!(
        parse_err(&b),
        Error::Format(FormatError::ChecksumMismatch { .. })
    ));
}

// ----- the three rows accepted by design -------------------------------------------------------------

#[test]
fn accepts_unknown_role() {
    let mut b = small_pack();
    set(&mut b, desc(1, 0), 77);
    reseal(&mut b);
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(blob.region(1).unwrap().role, Role::Unknown(77));
    // Binding is by index: the unknown-role region is carved exactly like a scratch region.
    let (mut buf, start) = arena(2048, 0);
    let job = bind(&blob, &mut buf[start..start + 2048]).unwrap();
    assert!(matches!(job.region(1), Some(BoundRegion::Runtime(r)) if r.len() == 1000));
}

#[test]
fn accepts_overlapping_baked_regions() {
    let cmd = [9u8; 32];
    let w = [5u8; 64];
    let mut b = build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &w,
            },
            RegionSpec::Baked {
                role: Role::Other,
                bytes: &w,
            },
        ],
        Accel::EthosU55_128,
    )
    .unwrap();
    // Point region 1 into the middle of region 0 (and the command stream).
    let inside = word(&b, desc(0, 3) / 4) - 8;
    set(&mut b, desc(1, 3), inside);
    reseal(&mut b);
    let blob = Blob::parse(&b).unwrap();
    let (mut buf, start) = arena(0, 0);
    let job = bind(&blob, &mut buf[start..start]).unwrap();
    assert_eq!(
        job.region(1).unwrap().address() + 8,
        job.region(0).unwrap().address()
    );
}

#[test]
fn accepts_modified_payload_with_recomputed_checksum() {
    // FNV-1a is corruption detection, not authenticity: this is the signed manifest's job.
    let mut b = small_pack();
    let cmd_at = word(&b, 4) as usize;
    b[cmd_at] = 0xEE;
    reseal(&mut b);
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(blob.command_stream()[0], 0xEE);
}

#[test]
fn accepts_runtime_descriptor_with_arbitrary_data_offset() {
    let mut b = small_pack();
    set(&mut b, desc(1, 3), 0xDEAD_BEEF);
    reseal(&mut b);
    Blob::parse(&b).unwrap();
}

#[test]
fn accepts_zero_regions() {
    let b = build_pack(&[0u8; 4], &[], Accel::Unspecified).unwrap();
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(arena_bytes_required(&blob), 0);
    let job = bind(&blob, &mut []).unwrap();
    assert_eq!(job.region_count(), 0);
}

#[test]
fn accepts_unknown_accel_word() {
    let mut b = small_pack();
    set(&mut b, 24, 0xABCD);
    // accel is in the header, which the checksum does not cover.
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(blob.accel(), Accel::Unknown(0xABCD));
}

// ----- binding -----------------------------------------------------------------------------------

#[test]
fn binds_baked_in_place_and_runtime_aligned_for_every_arena_start() {
    let b = small_pack();
    let blob = Blob::parse(&b).unwrap();
    let need = arena_bytes_required(&blob) as usize;
    // 1000 bytes of scratch, then the zero-size region's base aligned up to 1008.
    assert_eq!(arena_bytes_required_aligned(&blob), 1008);
    assert_eq!(need, 1008 + 15);
    for misalign in 0..16 {
        let (mut buf, start) = arena(need, misalign);
        let arena_addr = buf[start..].as_ptr() as usize;
        let job = bind(&blob, &mut buf[start..start + need]).unwrap();
        // Baked: a pointer into the blob, never a copy.
        let weights = job.region(0).unwrap();
        assert!(weights.is_baked());
        assert_eq!(
            weights.address(),
            b.as_ptr() as usize + word(&b, desc(0, 3) / 4) as usize
        );
        assert_eq!(
            job.command_stream().as_ptr(),
            blob.command_stream().as_ptr()
        );
        // Runtime: aligned to 16 by real address, inside the arena.
        for i in [1, 2] {
            let r = job.region(i).unwrap();
            assert!(!r.is_baked());
            assert_eq!(r.address() % 16, 0, "misalign {misalign}, region {i}");
            assert!(r.address() >= arena_addr && r.address() + r.len() <= arena_addr + need);
        }
        assert_eq!(job.base_addresses()[3..], [0; 5]);
    }
}

#[test]
fn arena_bytes_required_is_enough_and_tight_when_aligned() {
    let specs = [
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: 17,
        },
        RegionSpec::Runtime {
            role: Role::Scratch,
            size: 1,
        },
        RegionSpec::Runtime {
            role: Role::Input,
            size: 32,
        },
    ];
    let b = build_pack(&[1; 8], &specs, Accel::EthosU55_64).unwrap();
    let blob = Blob::parse(&b).unwrap();
    // 17 → pad to 32, 1 → pad to 48, 32 → 80.
    assert_eq!(arena_bytes_required_aligned(&blob), 80);
    let (mut buf, start) = arena(80, 0);
    bind(&blob, &mut buf[start..start + 80]).unwrap();
    let (mut buf, start) = arena(79, 0);
    assert!(bind(&blob, &mut buf[start..start + 79]).is_err());
    for misalign in 0..16 {
        let need = arena_bytes_required(&blob) as usize;
        let (mut buf, start) = arena(need, misalign);
        bind(&blob, &mut buf[start..start + need]).unwrap();
    }
}

// ----- the seed's worked example ---------------------------------------------------------------------

/// The spec's annotated example: 2 regions, command stream at 96 (800 bytes), baked weights of
/// 1,179,648 bytes at 896, runtime scratch of 262,144 bytes, total 0x124000.
fn worked_example() -> Vec<u8> {
    let total = 0x124000usize;
    let mut b = vec![0u8; total];
    let words = [0x3155_504E, 1, total as u32, 2, 96, 800, 0, 0];
    for (i, w) in words.iter().enumerate() {
        set(&mut b, i * 4, *w);
    }
    let descs = [[0, 1, 1_179_648, 896], [1, 0, 262_144, 0]];
    for (i, d) in descs.iter().enumerate() {
        for (j, w) in d.iter().enumerate() {
            set(&mut b, desc(i, j), *w);
        }
    }
    for (i, byte) in b[96..896].iter_mut().enumerate() {
        *byte = i as u8;
    }
    for (i, byte) in b[896..896 + 1_179_648].iter_mut().enumerate() {
        *byte = (i % 251) as u8;
    }
    reseal(&mut b);
    b
}

#[test]
fn worked_example_header_matches_the_spec_byte_for_byte() {
    let b = worked_example();
    let spec_hex: [u8; 28] = [
        0x4E, 0x50, 0x55, 0x31, // magic
        0x01, 0x00, 0x00, 0x00, // version
        0x00, 0x40, 0x12, 0x00, // total_bytes
        0x02, 0x00, 0x00, 0x00, // region_count
        0x60, 0x00, 0x00, 0x00, // cmd_offset
        0x20, 0x03, 0x00, 0x00, // cmd_bytes
        0x00, 0x00, 0x00, 0x00, // accel
    ];
    assert_eq!(&b[..28], &spec_hex);
    assert_eq!(&b[..4], b"NPU1");
}

#[test]
fn worked_example_cross_checks_hold() {
    let b = worked_example();
    let total = b.len() as u64;
    assert!(32 + 2 * 16 <= total);
    assert!(96 + 800 <= total);
    assert!(896 + 1_179_648 <= total);
    let blob = Blob::parse(&b).unwrap();
    assert_eq!(blob.command_stream().len(), 800);
    assert_eq!(blob.baked_bytes(0).unwrap().len(), 1_179_648);
    assert_eq!(blob.accel(), Accel::Unspecified);
    // Resident SRAM is the scratch arena only: the weights stay in flash.
    assert_eq!(arena_bytes_required_aligned(&blob), 262_144);
    assert_eq!(arena_bytes_required(&blob), 262_144 + 15);
    let (mut buf, start) = arena(262_144, 0);
    let job = bind(&blob, &mut buf[start..start + 262_144]).unwrap();
    assert_eq!(job.region(1).unwrap().len(), 262_144);
    assert_eq!(job.region(0).unwrap().address(), b.as_ptr() as usize + 896);
}

// ----- streaming -----------------------------------------------------------------------------------

fn stream(b: &[u8], expected: u32, chunk: usize) -> Result<(), Error> {
    let mut v = StreamValidator::new(expected);
    for c in b.chunks(chunk.max(1)) {
        v.feed(c)?;
    }
    v.finish().map(|_| ())
}

#[test]
fn stream_validator_agrees_with_parse_on_every_case_above() {
    let mut cases = vec![small_pack(), worked_example()];
    let mut m = small_pack();
    set(&mut m, desc(0, 2), 9999);
    cases.push(m.clone());
    reseal(&mut m);
    cases.push(m);
    let mut m = small_pack();
    set(&mut m, 12, 0x1000_0000);
    cases.push(m);
    cases.push(small_pack()[..20].to_vec());
    for b in &cases {
        let want = Blob::parse(b).map(|_| ());
        for chunk in [1, 3, 16, 4096, usize::MAX] {
            assert_eq!(stream(b, b.len() as u32, chunk), want, "chunk {chunk}");
        }
    }
}

#[test]
fn rejects_bad_magic_after_four_bytes() {
    let mut b = small_pack();
    b[0] = b'X';
    let mut v = StreamValidator::new(b.len() as u32);
    v.feed(&b[..3]).unwrap();
    assert!(matches!(
        v.feed(&b[3..4]),
        Err(Error::Format(FormatError::BadMagic { .. }))
    ));
}

#[test]
fn rejects_unexpected_total_bytes_after_twelve_bytes() {
    let b = small_pack();
    let mut v = StreamValidator::new(b.len() as u32 + 1);
    v.feed(&b[..11]).unwrap();
    assert_eq!(
        v.feed(&b[11..12]),
        Err(Error::Format(FormatError::TotalBytesMismatch {
            total_bytes: b.len() as u32,
            actual: b.len() as u64 + 1
        }))
    );
    // And it stays failed.
    assert!(v.feed(&b[12..]).is_err());
}

#[test]
fn rejects_bad_descriptor_as_soon_as_it_arrives() {
    let mut b = small_pack();
    set(&mut b, desc(0, 2), 0xFFFF_0000);
    let mut v = StreamValidator::new(b.len() as u32);
    v.feed(&b[..desc(0, 3) + 3]).unwrap();
    assert!(matches!(
        v.feed(&b[desc(0, 3) + 3..desc(0, 3) + 4]),
        Err(Error::Format(FormatError::BakedRegionOutOfBounds {
            region: 0,
            ..
        }))
    ));
}

#[test]
fn rejects_bytes_past_the_expected_length() {
    let b = small_pack();
    let mut v = StreamValidator::new(b.len() as u32);
    v.feed(&b).unwrap();
    assert_eq!(
        v.feed(&[0]),
        Err(Error::Format(FormatError::StreamOverrun {
            expected: b.len() as u32
        }))
    );
}

#[test]
fn rejects_stream_that_stops_short() {
    let b = small_pack();
    let mut v = StreamValidator::new(b.len() as u32);
    v.feed(&b[..100]).unwrap();
    assert_eq!(
        v.finish(),
        Err(Error::Format(FormatError::TotalBytesMismatch {
            total_bytes: b.len() as u32,
            actual: 100
        }))
    );
}

#[test]
fn parse_prehashed_agrees_with_parse() {
    let b = small_pack();
    let fnv = npub_core::fnv::fnv1a32(&b[32..]);
    assert_eq!(
        Blob::parse_prehashed(&b, fnv).unwrap().header(),
        Blob::parse(&b).unwrap().header()
    );
    assert!(matches!(
        Blob::parse_prehashed(&b, fnv ^ 1),
        Err(Error::Format(FormatError::ChecksumMismatch { .. }))
    ));
    // Structural checks still come first.
    let mut bad = b.clone();
    set(&mut bad, 20, 0);
    assert!(matches!(
        Blob::parse_prehashed(&bad, fnv),
        Err(Error::Format(FormatError::EmptyCommandStream))
    ));
}

#[test]
fn structure_only_stream_agrees_with_parse_structure() {
    let good = small_pack();
    let mut rotten = good.clone();
    *rotten.last_mut().unwrap() ^= 1;
    let mut hostile = good.clone();
    set(&mut hostile, desc(0, 2), 0xFFFF_0000);
    for b in [&good, &rotten, &hostile] {
        let mut v = StreamValidator::structure_only(b.len() as u32);
        let verdict = b
            .chunks(7)
            .try_for_each(|c| v.feed(c))
            .and_then(|()| v.finish());
        assert_eq!(verdict, Blob::parse_structure(b));
    }
}
