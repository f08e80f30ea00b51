//! The COP1 driver payload in place (`format::cop1`): `npub pack` writes the payload's header into
//! the padding before the command stream so that a device hands Arm's driver the payload where it
//! lies. NPU1 itself must not notice: the same header fields but `cmd_offset`, the same stream,
//! regions and baked bytes, every loader check as before, and the header covered by the checksum.
use std::path::{Path, PathBuf};

use npub_core::format::build::{RegionSpec, build_pack, build_pack_for_driver};
use npub_core::format::cop1::{self, driver_payload};
use npub_core::format::{HEADER_BYTES, REGION_DESC_BYTES};
use npub_core::{Accel, Blob, Cop1Error, Error, FormatError, Role, StreamValidator, vela};

fn fixtures() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela"
    ))
    .to_path_buf()
}

/// Every u55_256 case: its Vela `.tflite` and the driver payload Vela wrote (`payload.bin`).
fn cases() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for name in ["conv1", "small_net", "two_io"] {
        let tflite = fixtures().join(format!("vela_out/u55_256/tflite/{name}_vela.tflite"));
        let payload = fixtures().join(format!("cases/{name}_u55_256/payload.bin"));
        out.push((
            name.to_owned(),
            std::fs::read(tflite).unwrap(),
            std::fs::read(payload).unwrap(),
        ));
    }
    out
}

#[test]
fn imported_packs_hold_the_vela_payload_in_one_piece_before_the_stream() {
    for (name, tflite, payload) in cases() {
        let pack = vela::import(&tflite).unwrap().pack;
        let blob = Blob::parse(&pack).unwrap();
        let h = blob.header();
        let (offset, bytes) = driver_payload(&pack, &h).unwrap_or_else(|| panic!("{name}"));
        // Byte for byte what Vela handed the driver, ending where the stream ends.
        assert_eq!(
            &pack[offset as usize..(offset + bytes) as usize],
            &payload[..],
            "{name}"
        );
        assert_eq!(offset + bytes, h.cmd_offset + h.cmd_bytes, "{name}");
        assert_eq!(
            h.cmd_offset % 16,
            0,
            "{name}: the stream stays 16-byte aligned"
        );
        assert_eq!(offset % 4, 0, "{name}: the driver walks words");
        let table_end = HEADER_BYTES + REGION_DESC_BYTES * h.region_count;
        assert!(
            offset >= table_end,
            "{name}: the header is after the region table"
        );
        assert_eq!(
            cop1::parse(&payload).unwrap().stream,
            blob.command_stream(),
            "{name}"
        );
    }
}

#[test]
fn the_loader_checks_are_those_of_a_pack_without_the_header() {
    for (name, tflite, payload) in cases() {
        let with = vela::import(&tflite).unwrap().pack;
        let p = cop1::parse(&payload).unwrap();
        let head = &payload[..p.info.cmd_offset as usize];
        let a = Blob::parse(&with).unwrap();
        let weights = a.baked_bytes(0).unwrap().to_vec();
        let regions = [
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: a.region(1).unwrap().size,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: a.region(2).unwrap().size,
            },
        ];
        assert_eq!(
            build_pack_for_driver(head, p.stream, &regions, p.accel).unwrap(),
            with
        );
        let without = build_pack(p.stream, &regions, p.accel).unwrap();
        let b = Blob::parse(&without).unwrap();
        assert_eq!(
            driver_payload(&without, &b.header()),
            None,
            "{name}: no header, none found"
        );

        // The same pack to a loader: header words but cmd_offset (and what follows from it),
        // the stream, every region, its baked bytes; the stream verifies the same.
        let (ha, hb) = (a.header(), b.header());
        assert_eq!(
            (
                ha.magic,
                ha.version,
                ha.region_count,
                ha.cmd_bytes,
                ha.accel
            ),
            (
                hb.magic,
                hb.version,
                hb.region_count,
                hb.cmd_bytes,
                hb.accel
            )
        );
        assert!(ha.cmd_offset > hb.cmd_offset);
        assert_eq!(a.command_stream(), b.command_stream());
        for i in 0..ha.region_count {
            let (ra, rb) = (a.region(i).unwrap(), b.region(i).unwrap());
            assert_eq!(
                (ra.role, ra.flags, ra.size),
                (rb.role, rb.flags, rb.size),
                "{name}: {i}"
            );
            assert_eq!(a.baked_bytes(i), b.baked_bytes(i), "{name}: region {i}");
        }
        assert_eq!(
            npub_core::cmdstream::verify_blob(&a).map(|s| s.commands),
            npub_core::cmdstream::verify_blob(&b).map(|s| s.commands)
        );
        // The streaming loader takes it in any pieces, as the device's download does.
        let mut v = StreamValidator::new(with.len() as u32);
        for piece in with.chunks(512) {
            v.feed(piece).unwrap();
        }
        v.finish().unwrap();

        // The header is payload: covered by the checksum like any padding.
        let off = driver_payload(&with, &ha).unwrap().0 as usize;
        let mut flipped = with.clone();
        flipped[off + 9] ^= 0x10;
        assert!(
            matches!(
                Blob::parse(&flipped),
                Err(Error::Format(FormatError::ChecksumMismatch { .. }))
            ),
            "{name}: {:?}",
            Blob::parse(&flipped).err()
        );
    }
}

#[test]
fn a_header_that_disagrees_with_the_pack_is_not_offered() {
    let (_, _, payload) = &cases()[0];
    let p = cop1::parse(payload).unwrap();
    let head = &payload[..p.info.cmd_offset as usize];
    let regions = [RegionSpec::Runtime {
        role: Role::Scratch,
        size: 64,
    }];
    // The header names an Ethos-U55-256; a pack that says U55-128 gets no payload (the driver
    // would refuse the config on that NPU anyway).
    let pack = build_pack_for_driver(head, p.stream, &regions, Accel::EthosU55_128).unwrap();
    assert_eq!(
        driver_payload(&pack, &Blob::parse(&pack).unwrap().header()),
        None
    );
    // A stream tag that does not cover exactly the pack's stream: none either.
    let mut short = head.to_vec();
    let tag = short.len() - 4;
    short[tag + 2] = short[tag + 2].wrapping_sub(1);
    let pack = build_pack_for_driver(&short, p.stream, &regions, p.accel).unwrap();
    assert_eq!(
        driver_payload(&pack, &Blob::parse(&pack).unwrap().header()),
        None
    );
    // The unspecified accel word (informational) takes any header.
    let pack = build_pack_for_driver(head, p.stream, &regions, Accel::Unspecified).unwrap();
    assert!(driver_payload(&pack, &Blob::parse(&pack).unwrap().header()).is_some());
}

#[test]
fn rejects_a_driver_header_that_is_not_whole_words() {
    let regions = [RegionSpec::Runtime {
        role: Role::Scratch,
        size: 16,
    }];
    assert_eq!(
        build_pack_for_driver(&[0; 6], &[0; 16], &regions, Accel::EthosU55_256).unwrap_err(),
        Error::Cop1(Cop1Error::NotWords { len: 6 })
    );
}
