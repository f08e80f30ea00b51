//! The canonical encoding (the table in the module docs): one record ([`IoBinding`]), a whole set
//! parsed in place ([`IoBindings`]), its digest, and building one.

use super::fields::{
    Dtype, HEADER_BYTES, IoKind, MAGIC, MAX_BINDINGS, MAX_RANK, MAX_REGION, Name, RECORD_BYTES,
    Shape, VERSION,
};
use crate::format::le::word;
use crate::{Error, IoBindingsError};

/// One model input or output: where its bytes are and how to interpret them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoBinding {
    /// Input or output.
    pub kind: IoKind,
    /// The model's input (or output) number.
    pub index: u32,
    /// The tensor's name (informational, at most [`NAME_BYTES`](super::NAME_BYTES)).
    pub name: Name,
    /// The region (BASEP slot) that holds it: 1, the scratch arena, for COP1 streams.
    pub region: u8,
    /// Byte offset inside the region.
    pub offset: u32,
    /// Size in bytes: elements × element size.
    pub bytes: u32,
    /// Dimensions.
    pub shape: Shape,
    /// Element type.
    pub dtype: Dtype,
    /// Quantisation scale (real = scale × (q − zero_point)); 0.0 when not quantised.
    pub scale: f32,
    /// Quantisation zero point; 0 when not quantised.
    pub zero_point: i32,
}

impl IoBinding {
    /// The record's bytes.
    pub fn to_record(&self) -> [u8; RECORD_BYTES] {
        let mut r = [0u8; RECORD_BYTES];
        r[0] = self.kind.code();
        r[1] = self.dtype.code();
        r[2] = self.shape.rank;
        r[3] = self.region;
        r[4..8].copy_from_slice(&self.index.to_le_bytes());
        r[8..12].copy_from_slice(&self.offset.to_le_bytes());
        r[12..16].copy_from_slice(&self.bytes.to_le_bytes());
        for (i, d) in self.shape.dims.iter().enumerate() {
            r[16 + 4 * i..20 + 4 * i].copy_from_slice(&d.to_le_bytes());
        }
        r[40..44].copy_from_slice(&self.scale.to_bits().to_le_bytes());
        r[44..48].copy_from_slice(&self.zero_point.to_le_bytes());
        r[48..].copy_from_slice(self.name.padded());
        r
    }

    /// Decodes and checks one record (number `record` in its set, for error messages).
    fn from_record(record: u32, r: &[u8]) -> Result<IoBinding, Error> {
        let w = |at: usize| word(r, at).unwrap_or(0);
        let kind = IoKind::from_code(r[0]).ok_or(Error::IoBindings(IoBindingsError::BadKind {
            record,
            kind: r[0],
        }))?;
        let dtype =
            Dtype::from_code(r[1]).ok_or(Error::IoBindings(IoBindingsError::UnknownDtype {
                record,
                code: r[1],
            }))?;
        let rank = r[2];
        if usize::from(rank) > MAX_RANK {
            return Err(Error::IoBindings(IoBindingsError::RankTooLarge {
                record,
                rank,
                max: MAX_RANK as u8,
            }));
        }
        let region = r[3];
        if region >= MAX_REGION {
            return Err(Error::IoBindings(IoBindingsError::RegionOutOfRange {
                record,
                region,
            }));
        }
        let mut dims = [0u32; MAX_RANK];
        for (i, d) in dims.iter_mut().enumerate() {
            *d = w(16 + 4 * i);
        }
        if dims[usize::from(rank)..].iter().any(|&d| d != 0) {
            return Err(Error::IoBindings(IoBindingsError::NotCanonical {
                record,
                field: "shape slots past rank",
            }));
        }
        let shape = Shape { dims, rank };
        let bytes = w(12);
        let expected = shape
            .elements()
            .and_then(|n| n.checked_mul(u64::from(dtype.size())));
        if expected != Some(u64::from(bytes)) {
            return Err(Error::IoBindings(IoBindingsError::BytesMismatch {
                record,
                bytes,
                expected: expected.unwrap_or(u64::MAX),
            }));
        }
        let scale = f32::from_bits(w(40));
        let zero_point = w(44) as i32;
        check_quantisation(record, scale, zero_point)?;
        let name = Name::from_padded(&r[48..]).ok_or(Error::IoBindings(
            IoBindingsError::NotCanonical {
                record,
                field: "name",
            },
        ))?;
        Ok(IoBinding {
            kind,
            index: w(4),
            name,
            region,
            offset: w(8),
            bytes,
            shape,
            dtype,
            scale,
            zero_point,
        })
    }

    /// The exclusive end of the tensor inside its region.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.bytes)
    }
}

/// A scale is 0.0 (not quantised) or positive and finite; without a scale there is no zero point.
fn check_quantisation(record: u32, scale: f32, zero_point: i32) -> Result<(), Error> {
    let bits = scale.to_bits();
    // `-0.0 == 0.0`, but its bits differ: refuse it so that one binding has one encoding.
    if !scale.is_finite() || scale < 0.0 || bits == (-0.0f32).to_bits() {
        return Err(Error::IoBindings(IoBindingsError::BadScale {
            record,
            bits,
        }));
    }
    if bits == 0 && zero_point != 0 {
        return Err(Error::IoBindings(IoBindingsError::ZeroPointWithoutScale {
            record,
            zero_point,
        }));
    }
    Ok(())
}

/// A checked, zero-copy view of a canonical encoding.
#[derive(Debug, Clone, Copy)]
pub struct IoBindings<'a> {
    records: &'a [u8],
    count: u32,
}

impl<'a> IoBindings<'a> {
    /// Checks a whole canonical encoding (header, every record, the order) without allocating.
    /// Consumes exactly `bytes`: trailing data is an error.
    pub fn parse(bytes: &'a [u8]) -> Result<IoBindings<'a>, Error> {
        if bytes.len() < HEADER_BYTES {
            return Err(Error::IoBindings(IoBindingsError::TooShort {
                len: bytes.len() as u64,
            }));
        }
        let w = |at: usize| word(bytes, at).unwrap_or(0);
        if w(0) != MAGIC {
            return Err(Error::IoBindings(IoBindingsError::BadMagic { found: w(0) }));
        }
        if w(4) != VERSION {
            return Err(Error::IoBindings(IoBindingsError::UnsupportedVersion {
                found: w(4),
            }));
        }
        if w(12) != RECORD_BYTES as u32 {
            return Err(Error::IoBindings(IoBindingsError::BadRecordSize {
                found: w(12),
            }));
        }
        let count = w(8);
        if count > MAX_BINDINGS {
            return Err(Error::IoBindings(IoBindingsError::TooMany {
                count,
                max: MAX_BINDINGS,
            }));
        }
        let expected = HEADER_BYTES as u64 + RECORD_BYTES as u64 * u64::from(count);
        if bytes.len() as u64 != expected {
            return Err(Error::IoBindings(IoBindingsError::LengthMismatch {
                count,
                expected,
                actual: bytes.len() as u64,
            }));
        }
        let view = IoBindings {
            records: &bytes[HEADER_BYTES..],
            count,
        };
        let mut next = (IoKind::Input, 0u32);
        for (record, b) in view.iter_unchecked().enumerate() {
            let b = b?;
            let record = record as u32;
            // Inputs 0, 1, … then outputs 0, 1, …: the only order, so the encoding is canonical.
            if b.kind == IoKind::Output && next.0 == IoKind::Input {
                next = (IoKind::Output, 0);
            }
            if (b.kind, b.index) != next {
                return Err(Error::IoBindings(IoBindingsError::OutOfOrder {
                    record,
                    kind: b.kind,
                    index: b.index,
                    expected_kind: next.0,
                    expected_index: next.1,
                }));
            }
            next.1 += 1;
        }
        Ok(view)
    }

    /// Number of bindings.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Binding `i` (records were all checked by [`Self::parse`]).
    pub fn get(&self, i: usize) -> Option<IoBinding> {
        let start = i.checked_mul(RECORD_BYTES)?;
        let r = self.records.get(start..start.checked_add(RECORD_BYTES)?)?;
        IoBinding::from_record(i as u32, r).ok()
    }

    /// The bindings, in order.
    pub fn iter(&self) -> impl Iterator<Item = IoBinding> + 'a {
        self.iter_unchecked().filter_map(Result::ok)
    }

    /// The binding for input (or output) `index`.
    pub fn find(&self, kind: IoKind, index: u32) -> Option<IoBinding> {
        self.iter().find(|b| b.kind == kind && b.index == index)
    }

    fn iter_unchecked(&self) -> impl Iterator<Item = Result<IoBinding, Error>> + 'a {
        let records = self.records;
        records
            .chunks_exact(RECORD_BYTES)
            .enumerate()
            .map(|(i, r)| IoBinding::from_record(i as u32, r))
    }

    /// Checks every binding against the regions of `blob`: its region exists and
    /// `[offset, offset + bytes)` lies inside that region's size.
    pub fn check_against(&self, blob: &crate::Blob<'_>) -> Result<(), Error> {
        for (record, b) in self.iter().enumerate() {
            let record = record as u32;
            let region = blob.region(u32::from(b.region)).ok_or(Error::IoBindings(
                IoBindingsError::RegionMissing {
                    record,
                    region: b.region,
                    region_count: blob.region_count(),
                },
            ))?;
            if b.end() > u64::from(region.size) {
                return Err(Error::IoBindings(IoBindingsError::OutsideRegion {
                    record,
                    region: b.region,
                    offset: b.offset,
                    bytes: b.bytes,
                    region_size: region.size,
                }));
            }
        }
        Ok(())
    }
}

/// SHA-256 of a canonical encoding: the value the signed manifest carries. The caller passes the
/// bytes it will ship; run [`IoBindings::parse`] on them first to know they are canonical.
pub fn digest(canonical: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(canonical).into()
}

/// Encodes bindings canonically (feature `alloc`). The result is parsed back before it is returned,
/// so a set that is out of order or not representable is an error here, not on the device.
#[cfg(feature = "alloc")]
pub fn encode(bindings: &[IoBinding]) -> Result<alloc::vec::Vec<u8>, Error> {
    let count = u32::try_from(bindings.len())
        .ok()
        .filter(|&c| c <= MAX_BINDINGS)
        .ok_or(Error::IoBindings(IoBindingsError::TooMany {
            count: u32::try_from(bindings.len()).unwrap_or(u32::MAX),
            max: MAX_BINDINGS,
        }))?;
    let mut out = alloc::vec::Vec::with_capacity(HEADER_BYTES + RECORD_BYTES * bindings.len());
    for w in [MAGIC, VERSION, count, RECORD_BYTES as u32] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for b in bindings {
        out.extend_from_slice(&b.to_record());
    }
    IoBindings::parse(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(kind: IoKind, index: u32) -> IoBinding {
        IoBinding {
            kind,
            index,
            name: Name::truncated("input"),
            region: 1,
            offset: 512,
            bytes: 192,
            shape: Shape::new(&[1, 8, 8, 3]).unwrap(),
            dtype: Dtype::Int8,
            scale: 0.0078125,
            zero_point: 0,
        }
    }

    fn two() -> Vec<u8> {
        encode(&[binding(IoKind::Input, 0), binding(IoKind::Output, 0)]).unwrap()
    }

    #[test]
    fn round_trips() {
        let bytes = two();
        assert_eq!(bytes.len(), HEADER_BYTES + 2 * RECORD_BYTES);
        let view = IoBindings::parse(&bytes).unwrap();
        assert_eq!(view.len(), 2);
        assert_eq!(view.get(0), Some(binding(IoKind::Input, 0)));
        assert_eq!(
            view.find(IoKind::Output, 0),
            Some(binding(IoKind::Output, 0))
        );
        assert_eq!(&bytes[..4], b"NPIO");
    }

    #[test]
    fn names_are_cut_at_a_character_boundary() {
        let long = "é".repeat(30); // 60 bytes, 2 per character
        let n = Name::truncated(&long);
        assert_eq!(n.as_str().len(), 48);
        let odd = format!("a{long}");
        assert_eq!(Name::truncated(&odd).as_str().len(), 47);
        assert_eq!(Name::truncated("a\0b").as_str(), "a");
    }

    #[test]
    fn rejects_truncated() {
        let bytes = two();
        assert_eq!(
            IoBindings::parse(&bytes[..bytes.len() - 1]).unwrap_err(),
            Error::IoBindings(IoBindingsError::LengthMismatch {
                count: 2,
                expected: 208,
                actual: 207
            })
        );
        assert_eq!(
            IoBindings::parse(&bytes[..3]).unwrap_err(),
            Error::IoBindings(IoBindingsError::TooShort { len: 3 })
        );
    }

    #[test]
    fn rejects_bad_header() {
        let mut bytes = two();
        bytes[0] = b'X';
        assert!(matches!(
            IoBindings::parse(&bytes),
            Err(Error::IoBindings(IoBindingsError::BadMagic { .. }))
        ));
        let mut bytes = two();
        bytes[4] = 2;
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindings(IoBindingsError::UnsupportedVersion { found: 2 })
        );
        let mut bytes = two();
        bytes[12] = 97;
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindings(IoBindingsError::BadRecordSize { found: 97 })
        );
        let mut bytes = two();
        bytes[8..12].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindings(IoBindingsError::TooMany {
                count: 1000,
                max: MAX_BINDINGS
            })
        );
    }

    #[test]
    fn rejects_non_canonical_records() {
        let rec = HEADER_BYTES;
        let cases: [(usize, u8, Error); 7] = [
            (
                rec,
                7,
                Error::IoBindings(IoBindingsError::BadKind { record: 0, kind: 7 }),
            ),
            (
                rec + 1,
                99,
                Error::IoBindings(IoBindingsError::UnknownDtype {
                    record: 0,
                    code: 99,
                }),
            ),
            (
                rec + 2,
                7,
                Error::IoBindings(IoBindingsError::RankTooLarge {
                    record: 0,
                    rank: 7,
                    max: 6,
                }),
            ),
            (
                rec + 3,
                8,
                Error::IoBindings(IoBindingsError::RegionOutOfRange {
                    record: 0,
                    region: 8,
                }),
            ),
            (
                rec + 32,
                1,
                Error::IoBindings(IoBindingsError::NotCanonical {
                    record: 0,
                    field: "shape slots past rank",
                }),
            ),
            (
                rec + 95,
                b'x',
                Error::IoBindings(IoBindingsError::NotCanonical {
                    record: 0,
                    field: "name",
                }),
            ),
            (
                rec + 12,
                0,
                Error::IoBindings(IoBindingsError::BytesMismatch {
                    record: 0,
                    bytes: 0,
                    expected: 192,
                }),
            ),
        ];
        for (at, value, want) in cases {
            let mut bytes = two();
            bytes[at] = value;
            assert_eq!(
                IoBindings::parse(&bytes).unwrap_err(),
                want,
                "byte {at} = {value}"
            );
        }
    }

    #[test]
    fn rejects_bad_quantisation() {
        for (scale, zp) in [(f32::NAN, 0), (-1.0, 0), (-0.0, 0), (f32::INFINITY, 0)] {
            let mut b = binding(IoKind::Input, 0);
            b.scale = scale;
            b.zero_point = zp;
            assert!(matches!(
                encode(&[b]),
                Err(Error::IoBindings(IoBindingsError::BadScale {
                    record: 0,
                    ..
                }))
            ));
        }
        let mut b = binding(IoKind::Input, 0);
        b.scale = 0.0;
        b.zero_point = 3;
        assert_eq!(
            encode(&[b]).unwrap_err(),
            Error::IoBindings(IoBindingsError::ZeroPointWithoutScale {
                record: 0,
                zero_point: 3
            })
        );
    }

    #[test]
    fn rejects_out_of_order() {
        let err = encode(&[binding(IoKind::Output, 0), binding(IoKind::Input, 0)]).unwrap_err();
        assert_eq!(
            err,
            Error::IoBindings(IoBindingsError::OutOfOrder {
                record: 1,
                kind: IoKind::Input,
                index: 0,
                expected_kind: IoKind::Output,
                expected_index: 1
            })
        );
        let err = encode(&[binding(IoKind::Input, 1)]).unwrap_err();
        assert!(matches!(
            err,
            Error::IoBindings(IoBindingsError::OutOfOrder {
                record: 0,
                index: 1,
                ..
            })
        ));
    }

    #[test]
    fn digest_is_sha256_of_the_encoding() {
        // SHA-256 of the empty string, a published test vector.
        assert_eq!(digest(b"")[..4], [0xe3, 0xb0, 0xc4, 0x42],);
        let bytes = two();
        assert_eq!(digest(&bytes), digest(&bytes.clone()));
        let mut other = bytes.clone();
        other[HEADER_BYTES + 8] ^= 1;
        assert_ne!(digest(&bytes), digest(&other));
    }
}
