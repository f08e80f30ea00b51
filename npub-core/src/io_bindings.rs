//! IO bindings: where a pack's inputs and outputs live, and how to read them.
//!
//! A default (COP1) Vela command stream addresses the model's inputs and outputs *inside* the scratch
//! region (BASEP1) at offsets Vela chose, so no NPU1 region descriptor can say where an input is. The
//! bindings travel beside the blob: as a JSON file for people and tools (`OUT.io.json`, see
//! `docs/io-bindings.md`), and in the canonical binary encoding below, which the signed manifest
//! digests ([`digest`]) and which a device reads in place ([`IoBindings::parse`]) to know where to
//! write its inputs before the NPU runs and where to read its outputs after.
//!
//! ## Canonical encoding (version 1)
//!
//! All fields little-endian. A header, then `count` fixed-size records; nothing else.
//!
//! | Offset | Size | Field          | Meaning                                                       |
//! |--------|------|----------------|---------------------------------------------------------------|
//! | 0      | 4    | `magic`        | [`MAGIC`] = `0x4F49504E`, bytes `4e 50 49 4f` ("NPIO")        |
//! | 4      | 4    | `version`      | [`VERSION`] = 1                                               |
//! | 8      | 4    | `count`        | records that follow, at most [`MAX_BINDINGS`]                 |
//! | 12     | 4    | `record_bytes` | [`RECORD_BYTES`] = 96; any other value is rejected            |
//! | 16     | 96 × count | records | inputs first, then outputs, each in index order 0, 1, 2 …    |
//!
//! A record ([`RECORD_BYTES`] = 96 bytes):
//!
//! | Offset | Size | Field        | Meaning                                                          |
//! |--------|------|--------------|------------------------------------------------------------------|
//! | 0      | 1    | `kind`       | 0 input, 1 output ([`IoKind`])                                   |
//! | 1      | 1    | `dtype`      | element type code ([`Dtype`])                                    |
//! | 2      | 1    | `rank`       | 0..=[`MAX_RANK`]                                                 |
//! | 3      | 1    | `region`     | the region (BASEP slot) holding the tensor, `< 8`                |
//! | 4      | 4    | `index`      | the model's input (or output) number                             |
//! | 8      | 4    | `offset`     | byte offset of the tensor inside the region                      |
//! | 12     | 4    | `bytes`      | tensor size: product of `shape` × element size                   |
//! | 16     | 24   | `shape`      | [`MAX_RANK`] × `u32`, the first `rank` used, the rest 0           |
//! | 40     | 4    | `scale`      | `f32` quantisation scale; 0.0 = not quantised                     |
//! | 44     | 4    | `zero_point` | `i32` quantisation zero point; 0 when not quantised               |
//! | 48     | 48   | `name`       | UTF-8, zero-padded, no NUL inside; at most [`NAME_BYTES`] bytes   |
//!
//! **Canonical** means one byte string per set of bindings, so equal bindings give equal digests:
//! the parser rejects unused shape slots or name bytes that are not zero, a NUL inside a name,
//! records out of order, a `bytes` that disagrees with `shape` × element size, a negative, NaN,
//! infinite or negative-zero scale, and a zero point without a scale.
//!
//! **Quantisation is per tensor.** TFLite quantises activations (and so every input and output of an
//! `ethos-u` operator) per tensor; only constant weights are quantised per channel. An IO tensor with
//! per-channel parameters is refused at import rather than silently reduced to its first channel, which
//! would make the application scale every other channel wrongly.
//!
//! **Names** longer than [`NAME_BYTES`] are cut at import at the last UTF-8 character boundary that
//! fits. The name is informational: a binding is identified by `kind` and `index`, which are the
//! positions TFLite Micro's `input(i)` / `output(i)` use.
use core::fmt;

use crate::Error;
use crate::format::le::word;

/// `"NPIO"` read as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"NPIO");
/// Encoding version. A change of layout bumps it; there is no best-effort reading of others.
pub const VERSION: u32 = 1;
/// Header size: magic, version, count, record size.
pub const HEADER_BYTES: usize = 16;
/// Size of one record, stored in the header so that a reader from a later version fails loudly.
pub const RECORD_BYTES: usize = 96;
/// Bytes reserved for a name. TFLite names of model inputs and outputs are usually short
/// (`serving_default_input:0` is 23); long fused names are cut at import (see the module docs).
pub const NAME_BYTES: usize = 48;
/// Highest rank stored. Vela pads every raw-output shape to rank 6 and TFLite's reference kernels
/// stop at 6 dimensions, so a larger rank cannot come from a model the NPU runs.
pub const MAX_RANK: usize = 6;
/// Most bindings in one set. Bounds the device's parse; a model with more inputs and outputs than
/// this is not a model for a microcontroller NPU.
pub const MAX_BINDINGS: u32 = 64;
/// Regions a binding may name: the Ethos-U55's base pointers BASEP0..BASEP7.
pub const MAX_REGION: u8 = crate::format::MAX_BASE_POINTERS as u8;

/// Whether a binding is a model input or a model output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// Written by the application before inference (and clobbered by it: outputs may overlap).
    Input,
    /// Read by the application after inference.
    Output,
}

impl IoKind {
    /// The record's `kind` byte.
    pub const fn code(self) -> u8 {
        match self {
            IoKind::Input => 0,
            IoKind::Output => 1,
        }
    }

    /// Decodes a `kind` byte.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(IoKind::Input),
            1 => Some(IoKind::Output),
            _ => None,
        }
    }

    /// `"input"` or `"output"`.
    pub const fn name(self) -> &'static str {
        match self {
            IoKind::Input => "input",
            IoKind::Output => "output",
        }
    }
}

impl fmt::Display for IoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element type of an IO tensor.
///
/// | code | dtype      | bytes | from                                                        |
/// |------|------------|-------|-------------------------------------------------------------|
/// | 1    | `int8`     | 1     | TFLite `INT8`                                               |
/// | 2    | `uint8`    | 1     | TFLite `UINT8`                                              |
/// | 3    | `int16`    | 2     | TFLite `INT16`                                              |
/// | 4    | `uint16`   | 2     | TFLite `UINT16`                                             |
/// | 5    | `int32`    | 4     | TFLite `INT32`                                              |
/// | 6    | `uint32`   | 4     | TFLite `UINT32`                                             |
/// | 7    | `int64`    | 8     | TFLite `INT64`                                              |
/// | 8    | `float16`  | 2     | TFLite `FLOAT16`                                            |
/// | 9    | `float32`  | 4     | TFLite `FLOAT32`                                            |
/// | 10   | `bool`     | 1     | TFLite `BOOL`                                               |
/// | 0x81 | `bits8`    | 1     | Vela's raw `.npz`: an element size with no type recorded    |
/// | 0x82 | `bits16`   | 2     | idem                                                        |
/// | 0x84 | `bits32`   | 4     | idem                                                        |
/// | 0x88 | `bits64`   | 8     | idem                                                        |
///
/// The `bits*` codes exist because Vela's raw output stores only `elem_size`: whether an 8-bit
/// input is `int8` or `uint8` is not in the file. Import the `.tflite` to get the real type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Dtype {
    Int8,
    Uint8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float16,
    Float32,
    Bool,
    Bits8,
    Bits16,
    Bits32,
    Bits64,
}

impl Dtype {
    /// Every dtype, in code order.
    pub const ALL: [Dtype; 14] = [
        Dtype::Int8,
        Dtype::Uint8,
        Dtype::Int16,
        Dtype::Uint16,
        Dtype::Int32,
        Dtype::Uint32,
        Dtype::Int64,
        Dtype::Float16,
        Dtype::Float32,
        Dtype::Bool,
        Dtype::Bits8,
        Dtype::Bits16,
        Dtype::Bits32,
        Dtype::Bits64,
    ];

    /// The record's `dtype` byte.
    pub const fn code(self) -> u8 {
        match self {
            Dtype::Int8 => 1,
            Dtype::Uint8 => 2,
            Dtype::Int16 => 3,
            Dtype::Uint16 => 4,
            Dtype::Int32 => 5,
            Dtype::Uint32 => 6,
            Dtype::Int64 => 7,
            Dtype::Float16 => 8,
            Dtype::Float32 => 9,
            Dtype::Bool => 10,
            Dtype::Bits8 => 0x81,
            Dtype::Bits16 => 0x82,
            Dtype::Bits32 => 0x84,
            Dtype::Bits64 => 0x88,
        }
    }

    /// Decodes a `dtype` byte.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            Dtype::Int8 | Dtype::Uint8 | Dtype::Bool | Dtype::Bits8 => 1,
            Dtype::Int16 | Dtype::Uint16 | Dtype::Float16 | Dtype::Bits16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float32 | Dtype::Bits32 => 4,
            Dtype::Int64 | Dtype::Bits64 => 8,
        }
    }

    /// The name used in the JSON form (`"int8"`, `"bits8"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Int8 => "int8",
            Dtype::Uint8 => "uint8",
            Dtype::Int16 => "int16",
            Dtype::Uint16 => "uint16",
            Dtype::Int32 => "int32",
            Dtype::Uint32 => "uint32",
            Dtype::Int64 => "int64",
            Dtype::Float16 => "float16",
            Dtype::Float32 => "float32",
            Dtype::Bool => "bool",
            Dtype::Bits8 => "bits8",
            Dtype::Bits16 => "bits16",
            Dtype::Bits32 => "bits32",
            Dtype::Bits64 => "bits64",
        }
    }

    /// The dtype named `name` in the JSON form.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The `bits*` dtype of an element size, for sources that record only the size.
    pub const fn bits_of_size(size: u32) -> Option<Self> {
        match size {
            1 => Some(Dtype::Bits8),
            2 => Some(Dtype::Bits16),
            4 => Some(Dtype::Bits32),
            8 => Some(Dtype::Bits64),
            _ => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A short UTF-8 name stored inline (at most [`NAME_BYTES`]), so that bindings and errors stay
/// `Copy` and need no allocator.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    bytes: [u8; NAME_BYTES],
    len: u8,
}

impl Name {
    /// The empty name.
    pub const EMPTY: Name = Name {
        bytes: [0; NAME_BYTES],
        len: 0,
    };

    /// `s` cut to at most [`NAME_BYTES`] bytes at a character boundary, with any NUL cut off too
    /// (a NUL would end the name in the canonical encoding).
    pub fn truncated(s: &str) -> Name {
        let s = s.split('\0').next().unwrap_or("");
        let mut end = s.len().min(NAME_BYTES);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0; NAME_BYTES];
        bytes[..end].copy_from_slice(&s.as_bytes()[..end]);
        Name {
            bytes,
            len: end as u8,
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Every constructor stores whole UTF-8 characters; the fallback is unreachable.
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// The zero-padded bytes as stored in a record.
    pub const fn padded(&self) -> &[u8; NAME_BYTES] {
        &self.bytes
    }

    /// Decodes a record's name field; `None` unless canonical (UTF-8, no NUL inside, zero padding).
    fn from_padded(field: &[u8]) -> Option<Name> {
        let field: &[u8; NAME_BYTES] = field.try_into().ok()?;
        let len = field.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
        if field[len..].iter().any(|&b| b != 0) {
            return None;
        }
        core::str::from_utf8(&field[..len]).ok()?;
        Some(Name {
            bytes: *field,
            len: len as u8,
        })
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tensor shape of rank at most [`MAX_RANK`], stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [u32; MAX_RANK],
    rank: u8,
}

impl Shape {
    /// The shape with these dimensions, or `None` if there are more than [`MAX_RANK`].
    pub fn new(dims: &[u32]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut all = [0; MAX_RANK];
        all[..dims.len()].copy_from_slice(dims);
        Some(Shape {
            dims: all,
            rank: dims.len() as u8,
        })
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u32] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Number of elements (1 for rank 0), or `None` if it overflows `u64`.
    pub fn elements(&self) -> Option<u64> {
        self.dims()
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.dims(), f)
    }
}

/// One model input or output: where its bytes are and how to interpret them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoBinding {
    /// Input or output.
    pub kind: IoKind,
    /// The model's input (or output) number.
    pub index: u32,
    /// The tensor's name (informational, at most [`NAME_BYTES`]).
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
        let kind = IoKind::from_code(r[0]).ok_or(Error::IoBindingBadKind { record, kind: r[0] })?;
        let dtype =
            Dtype::from_code(r[1]).ok_or(Error::IoBindingUnknownDtype { record, code: r[1] })?;
        let rank = r[2];
        if usize::from(rank) > MAX_RANK {
            return Err(Error::IoBindingRankTooLarge {
                record,
                rank,
                max: MAX_RANK as u8,
            });
        }
        let region = r[3];
        if region >= MAX_REGION {
            return Err(Error::IoBindingRegionOutOfRange { record, region });
        }
        let mut dims = [0u32; MAX_RANK];
        for (i, d) in dims.iter_mut().enumerate() {
            *d = w(16 + 4 * i);
        }
        if dims[usize::from(rank)..].iter().any(|&d| d != 0) {
            return Err(Error::IoBindingNotCanonical {
                record,
                field: "shape slots past rank",
            });
        }
        let shape = Shape { dims, rank };
        let bytes = w(12);
        let expected = shape
            .elements()
            .and_then(|n| n.checked_mul(u64::from(dtype.size())));
        if expected != Some(u64::from(bytes)) {
            return Err(Error::IoBindingBytesMismatch {
                record,
                bytes,
                expected: expected.unwrap_or(u64::MAX),
            });
        }
        let scale = f32::from_bits(w(40));
        let zero_point = w(44) as i32;
        check_quantisation(record, scale, zero_point)?;
        let name = Name::from_padded(&r[48..]).ok_or(Error::IoBindingNotCanonical {
            record,
            field: "name",
        })?;
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
        return Err(Error::IoBindingBadScale { record, bits });
    }
    if bits == 0 && zero_point != 0 {
        return Err(Error::IoBindingZeroPointWithoutScale { record, zero_point });
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
            return Err(Error::IoBindingsTooShort {
                len: bytes.len() as u64,
            });
        }
        let w = |at: usize| word(bytes, at).unwrap_or(0);
        if w(0) != MAGIC {
            return Err(Error::IoBindingsBadMagic { found: w(0) });
        }
        if w(4) != VERSION {
            return Err(Error::IoBindingsUnsupportedVersion { found: w(4) });
        }
        if w(12) != RECORD_BYTES as u32 {
            return Err(Error::IoBindingsBadRecordSize { found: w(12) });
        }
        let count = w(8);
        if count > MAX_BINDINGS {
            return Err(Error::IoBindingsTooMany {
                count,
                max: MAX_BINDINGS,
            });
        }
        let expected = HEADER_BYTES as u64 + RECORD_BYTES as u64 * u64::from(count);
        if bytes.len() as u64 != expected {
            return Err(Error::IoBindingsLengthMismatch {
                count,
                expected,
                actual: bytes.len() as u64,
            });
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
                return Err(Error::IoBindingOutOfOrder {
                    record,
                    kind: b.kind,
                    index: b.index,
                    expected_kind: next.0,
                    expected_index: next.1,
                });
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
            let region = blob
                .region(u32::from(b.region))
                .ok_or(Error::IoBindingRegionMissing {
                    record,
                    region: b.region,
                    region_count: blob.region_count(),
                })?;
            if b.end() > u64::from(region.size) {
                return Err(Error::IoBindingOutsideRegion {
                    record,
                    region: b.region,
                    offset: b.offset,
                    bytes: b.bytes,
                    region_size: region.size,
                });
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
        .ok_or(Error::IoBindingsTooMany {
            count: u32::try_from(bindings.len()).unwrap_or(u32::MAX),
            max: MAX_BINDINGS,
        })?;
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

#[cfg(feature = "std")]
mod json;
#[cfg(feature = "std")]
pub use json::{IoBindingsJson, JSON_FORMAT, from_json, to_json};

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
            Error::IoBindingsLengthMismatch {
                count: 2,
                expected: 208,
                actual: 207
            }
        );
        assert_eq!(
            IoBindings::parse(&bytes[..3]).unwrap_err(),
            Error::IoBindingsTooShort { len: 3 }
        );
    }

    #[test]
    fn rejects_bad_header() {
        let mut bytes = two();
        bytes[0] = b'X';
        assert!(matches!(
            IoBindings::parse(&bytes),
            Err(Error::IoBindingsBadMagic { .. })
        ));
        let mut bytes = two();
        bytes[4] = 2;
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindingsUnsupportedVersion { found: 2 }
        );
        let mut bytes = two();
        bytes[12] = 97;
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindingsBadRecordSize { found: 97 }
        );
        let mut bytes = two();
        bytes[8..12].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            IoBindings::parse(&bytes).unwrap_err(),
            Error::IoBindingsTooMany {
                count: 1000,
                max: MAX_BINDINGS
            }
        );
    }

    #[test]
    fn rejects_non_canonical_records() {
        let rec = HEADER_BYTES;
        let cases: [(usize, u8, Error); 7] = [
            (rec, 7, Error::IoBindingBadKind { record: 0, kind: 7 }),
            (
                rec + 1,
                99,
                Error::IoBindingUnknownDtype {
                    record: 0,
                    code: 99,
                },
            ),
            (
                rec + 2,
                7,
                Error::IoBindingRankTooLarge {
                    record: 0,
                    rank: 7,
                    max: 6,
                },
            ),
            (
                rec + 3,
                8,
                Error::IoBindingRegionOutOfRange {
                    record: 0,
                    region: 8,
                },
            ),
            (
                rec + 32,
                1,
                Error::IoBindingNotCanonical {
                    record: 0,
                    field: "shape slots past rank",
                },
            ),
            (
                rec + 95,
                b'x',
                Error::IoBindingNotCanonical {
                    record: 0,
                    field: "name",
                },
            ),
            (
                rec + 12,
                0,
                Error::IoBindingBytesMismatch {
                    record: 0,
                    bytes: 0,
                    expected: 192,
                },
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
                Err(Error::IoBindingBadScale { record: 0, .. })
            ));
        }
        let mut b = binding(IoKind::Input, 0);
        b.scale = 0.0;
        b.zero_point = 3;
        assert_eq!(
            encode(&[b]).unwrap_err(),
            Error::IoBindingZeroPointWithoutScale {
                record: 0,
                zero_point: 3
            }
        );
    }

    #[test]
    fn rejects_out_of_order() {
        let err = encode(&[binding(IoKind::Output, 0), binding(IoKind::Input, 0)]).unwrap_err();
        assert_eq!(
            err,
            Error::IoBindingOutOfOrder {
                record: 1,
                kind: IoKind::Input,
                index: 0,
                expected_kind: IoKind::Output,
                expected_index: 1
            }
        );
        let err = encode(&[binding(IoKind::Input, 1)]).unwrap_err();
        assert!(matches!(
            err,
            Error::IoBindingOutOfOrder {
                record: 0,
                index: 1,
                ..
            }
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
