//! Vela's raw output (`--output-format raw`): a `.npz`, i.e. a zip of `.npy` arrays (`np.savez`).
//!
//! | array                                   | `.npy` dtype | becomes                                  |
//! |-----------------------------------------|--------------|------------------------------------------|
//! | `cmd_data`                              | `\|S<n>`, shape () | the driver payload (COP1 header + stream) |
//! | `weight_data`                           | `\|S<n>`, shape () | region 0's bytes                     |
//! | `weight_region`, `scratch_region`       | int64 ()     | checked: 0 and 1, Vela's COP1 convention  |
//! | `scratch_size`, `scratch_fast_size`     | int64 ()     | the sizes of regions 1 and 2              |
//! | `scratch_fast_region`                   | int64 ()     | 2, or 1 from the Python core: see [`scratch_fast`] |
//! | `input_`/`output_` + `shape`            | int64 (n, r) | binding shapes (Vela pads them to rank 6) |
//! | `input_`/`output_` + `elem_size`        | int64 (n,)   | binding dtypes `bits8`… (no type is recorded) |
//! | `input_`/`output_` + `region`, `offset` | int64 (n,)   | where the stream expects each tensor      |
//! | `input_`/`output_` + `quantization`     | object (n,)  | a pickled dict per tensor: `quant_type`, `scale` (float32), `zero_point` (int32); optional, see [`trusted_quantisation`] |
//! | `variable_offset`                       | (k,)         | refused unless empty; optional             |
//!
//! Only what the stream and its regions need is required. Vela 4.x writes no `*_quantization`
//! arrays, Vela 4.0.1's C++ core no `variable_*` arrays either and shapes at their own rank (later
//! versions pad them to 6); the Python core writes `cmd_data` and `weight_data` as `uint8` vectors
//! and names the file `*_vela_sg0.npz`.
//!
//! Byte strings are read as the raw bytes after the `.npy` header (numpy's `.tobytes()`), never as
//! C strings: both the payload and the weights routinely end in zero bytes. The raw format records
//! no tensor names (bindings get empty names) and no element types (see [`Dtype::bits_of_size`]).
use std::io::{Cursor, Read};

use npyz::{DType, NpyFile, TypeChar};
use serde_pickle::{DeOptions, HashableValue, Value};
use zip::{CompressionMethod, ZipArchive, result::ZipError};

use super::extracted::{Extracted, screen};
use super::tflite::per_tensor;
use super::warning::Warning;
use crate::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape};
use crate::{Error, VelaError};

/// Vela's COP1 region numbers.
const WEIGHT_REGION: u32 = 0;
const SCRATCH_REGION: u32 = 1;
const SCRATCH_FAST_REGION: u32 = 2;

/// Reads a Vela raw `.npz`, refusing any member that claims more than `member_limit` bytes.
pub fn extract(bytes: &[u8], member_limit: u64) -> Result<Extracted<'static>, Error> {
    let mut npz = Npz::open(bytes, member_limit)?;
    let payload = byte_string("cmd_data", &npz.required("cmd_data")?)?;
    screen(&payload)?;
    let weights = byte_string("weight_data", &npz.required("weight_data")?)?;
    region(&mut npz, "weight_region", WEIGHT_REGION)?;
    region(&mut npz, "scratch_region", SCRATCH_REGION)?;
    let scratch = size(&mut npz, "scratch_size")?;
    let scratch_fast = scratch_fast(&mut npz, scratch)?;
    if let Some(v) = npz.optional("variable_offset")? {
        let (_, values) = ints("variable_offset", &v)?;
        if !values.is_empty() {
            return Err(Error::Vela(VelaError::NpzVariableTensors {
                count: values.len() as u64,
            }));
        }
    }
    let mut io = Vec::new();
    let mut warnings = Vec::new();
    for (kind, names) in [(IoKind::Input, INPUT), (IoKind::Output, OUTPUT)] {
        io.extend(bindings(
            &mut npz,
            kind,
            &names,
            [scratch, scratch_fast],
            &mut warnings,
        )?);
    }
    distrust_outputs_of_a_wrong_writer(&mut io, &mut warnings);
    Ok(Extracted {
        payload: payload.into(),
        weights: weights.into(),
        scratch,
        scratch_fast,
        io,
        warnings,
    })
}

/// Array names per IO kind: offset (whose length is the count), shape, elem_size, region,
/// quantization.
type IoArrays = [&'static str; 5];
const INPUT: IoArrays = [
    "input_offset",
    "input_shape",
    "input_elem_size",
    "input_region",
    "input_quantization",
];
const OUTPUT: IoArrays = [
    "output_offset",
    "output_shape",
    "output_elem_size",
    "output_region",
    "output_quantization",
];

/// The bindings of one kind. Offsets, shapes, element sizes and regions are where the stream
/// expects each tensor: required, and refused when inconsistent. Quantisation is metadata beside
/// the stream that some Vela versions omit or get wrong: see [`trusted_quantisation`].
fn bindings(
    npz: &mut Npz<'_>,
    kind: IoKind,
    names: &IoArrays,
    region_sizes: [u64; 2],
    warnings: &mut Vec<Warning>,
) -> Result<Vec<IoBinding>, Error> {
    let [offset_name, shape_name, elem_name, region_name, quant_name] = *names;
    let (_, offsets) = ints(offset_name, &npz.required(offset_name)?)?;
    let n = offsets.len();
    let count = |array: &'static str, len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(Error::Vela(VelaError::NpzIoCountMismatch {
                array,
                len: len as u64,
                expected: n as u64,
            }))
        }
    };
    let (shape_dims, shapes) = ints(shape_name, &npz.required(shape_name)?)?;
    // (n, rank): one row per tensor. An empty list is saved as a 1-D empty array.
    let rank = match shape_dims[..] {
        [rows, rank] => {
            count(shape_name, rows as usize)?;
            rank as usize
        }
        _ if n == 0 => 0,
        _ => return Err(bad(shape_name, "not a 2-D array")),
    };
    let (_, elem_sizes) = ints(elem_name, &npz.required(elem_name)?)?;
    count(elem_name, elem_sizes.len())?;
    let (_, regions) = ints(region_name, &npz.required(region_name)?)?;
    count(region_name, regions.len())?;
    let quant = match npz.optional(quant_name)? {
        None => None,
        Some(data) => {
            let quant = quantization(quant_name, &data)?;
            if quant.len() == n {
                Some(quant)
            } else {
                warnings.push(Warning::QuantisationCountMismatch {
                    kind,
                    len: quant.len() as u64,
                    expected: n as u64,
                });
                Some(vec![(Vec::new(), Vec::new()); n])
            }
        }
    };

    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let index = i as u32;
        let row = &shapes[i * rank..(i + 1) * rank];
        let dims = row
            .iter()
            .map(|&d| {
                u32::try_from(d).map_err(|_| {
                    Error::Vela(VelaError::IoNegativeDim {
                        kind,
                        index,
                        dim: d,
                    })
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shape = Shape::new(&dims).ok_or(Error::Vela(VelaError::IoRankTooLarge {
            kind,
            index,
            rank: rank as u64,
        }))?;
        let elem_size = elem_sizes[i];
        let dtype = u32::try_from(elem_size)
            .ok()
            .and_then(Dtype::bits_of_size)
            .ok_or(Error::Vela(VelaError::IoBadElemSize {
                kind,
                index,
                elem_size,
            }))?;
        let bytes = shape
            .elements()
            .and_then(|e| e.checked_mul(u64::from(dtype.size())))
            .unwrap_or(u64::MAX);
        let bytes = u32::try_from(bytes)
            .map_err(|_| Error::Vela(VelaError::IoTooLarge { kind, index, bytes }))?;
        let (region, region_size) = match regions[i] {
            1 => (1u8, region_sizes[0]),
            2 => (2u8, region_sizes[1]),
            other => {
                return Err(Error::Vela(VelaError::IoBadRegion {
                    kind,
                    index,
                    region: other,
                }));
            }
        };
        let offset = u32::try_from(offsets[i])
            .map_err(|_| Error::Vela(VelaError::IoNotInArena { kind, index }))?;
        let end = u64::from(offset) + u64::from(bytes);
        if end > region_size {
            return Err(Error::Vela(VelaError::IoOutsideRegion {
                kind,
                index,
                region,
                offset: u64::from(offset),
                bytes: u64::from(bytes),
                region_size,
            }));
        }
        let (scale, zero_point) =
            trusted_quantisation(kind, index, quant.as_ref().map(|q| &q[i]), warnings);
        out.push(IoBinding {
            kind,
            index,
            name: Name::EMPTY,
            region,
            offset,
            bytes,
            shape,
            dtype,
            scale,
            zero_point,
        });
    }
    Ok(out)
}

/// One tensor's (scale, zero point), or (0.0, 0) and a warning when the file's record of it cannot
/// be trusted: absent (Vela 4.x), per channel (Vela 5.0's C++ core records weight scales for an
/// output), or not a scale and zero point at all. The stream does not depend on it, so it is never a
/// reason to refuse the file.
fn trusted_quantisation(
    kind: IoKind,
    index: u32,
    recorded: Option<&Quant>,
    warnings: &mut Vec<Warning>,
) -> (f32, i32) {
    let Some((scales, zero_points)) = recorded else {
        warnings.push(Warning::QuantisationNotRecorded { kind, index });
        return (0.0, 0);
    };
    match per_tensor(kind, index, scales, zero_points) {
        Ok(q) => q,
        Err(Error::Vela(VelaError::PerChannelIo { channels, .. })) => {
            warnings.push(Warning::QuantisationPerChannel {
                kind,
                index,
                channels,
            });
            (0.0, 0)
        }
        Err(_) => {
            warnings.push(Warning::QuantisationMalformed { kind, index });
            (0.0, 0)
        }
    }
}

/// Vela 5.0's C++ raw writer records an output's quantisation from the operator that produced it
/// rather than from the tensor: per channel (a convolution's weight scales) where that operator is
/// a convolution, and a single wrong scale where it is fully connected (ifm scale × weight scale).
/// Only the first is recognisable, and it names the writer: every other output quantisation in the
/// same file is then unknown too. Inputs are recorded right by every version and are kept.
fn distrust_outputs_of_a_wrong_writer(io: &mut [IoBinding], warnings: &mut Vec<Warning>) {
    let wrong_writer = warnings.iter().any(|w| {
        matches!(
            w,
            Warning::QuantisationPerChannel {
                kind: IoKind::Output,
                ..
            }
        )
    });
    if !wrong_writer {
        return;
    }
    for b in io.iter_mut().filter(|b| b.kind == IoKind::Output) {
        if warnings.iter().all(|w| w.io() != Some((b.kind, b.index))) {
            b.scale = 0.0;
            b.zero_point = 0;
            warnings.push(Warning::QuantisationFromUntrustedWriter {
                kind: b.kind,
                index: b.index,
            });
        }
    }
}

fn bad(array: &'static str, problem: &'static str) -> Error {
    Error::Vela(VelaError::NpzBadArray { array, problem })
}

/// The zip archive.
struct Npz<'b> {
    archive: ZipArchive<Cursor<&'b [u8]>>,
    /// The most bytes any member may hold: the caller's limit, and never more than the archive
    /// itself (a stored member's bytes are inside it).
    member_limit: u64,
}

impl<'b> Npz<'b> {
    /// Opens the archive, after checking every entry count its end records claim against the
    /// bytes there are: the zip crate sizes its entry table from the count of the end record it
    /// settles on (up to `count` x its entry size), so a count must not outgrow the input. Every
    /// candidate it could settle on is checked: each end-of-central-directory signature, and each
    /// zip64 record that ends at a zip64 locator directly followed by such a signature (the only
    /// way the crate reaches one). A count is believable only if that many 46-byte central
    /// headers fit in the archive. One pass over the bytes: a file of signatures costs linear
    /// time, not quadratic.
    fn open(bytes: &'b [u8], member_limit: u64) -> Result<Self, Error> {
        const EOCD: [u8; 4] = 0x0605_4b50u32.to_le_bytes();
        const LOCATOR: [u8; 4] = 0x0706_4b50u32.to_le_bytes();
        const EOCD64: [u8; 4] = 0x0606_4b50u32.to_le_bytes();
        const CENTRAL_HEADER_MIN: u64 = 46;
        let max_entries = bytes.len() as u64 / CENTRAL_HEADER_MIN;
        let le = |at: usize, n: usize| -> Option<u64> {
            let field = bytes.get(at..at.checked_add(n)?)?;
            Some(field.iter().rev().fold(0, |v, &b| (v << 8) | u64::from(b)))
        };
        let at_sig = |at: usize, sig: &[u8; 4]| bytes.get(at..).is_some_and(|t| t.starts_with(sig));
        let too_many = || {
            Error::Vela(VelaError::NpzMalformed {
                problem: "the central directory claims more entries than the archive can hold",
            })
        };
        for i in 0..bytes.len() {
            if at_sig(i, &EOCD) {
                // Entries on this disk and in total (u16 each, at +8 and +10).
                if [i + 8, i + 10]
                    .iter()
                    .any(|&at| le(at, 2).is_some_and(|n| n > max_entries))
                {
                    return Err(too_many());
                }
            } else if at_sig(i, &EOCD64) {
                // The record's size field (+4) counts from +12; where it ends, a locator and an
                // end record must follow for the crate to use it.
                let end = le(i + 4, 8)
                    .and_then(|size| size.checked_add(i as u64 + 12))
                    .and_then(|end| usize::try_from(end).ok());
                let reachable = end.is_some_and(|l| {
                    at_sig(l, &LOCATOR) && l.checked_add(20).is_some_and(|e| at_sig(e, &EOCD))
                });
                // Entries on this disk and in total (u64 each, at +24 and +32).
                if reachable
                    && [i + 24, i + 32]
                        .iter()
                        .any(|&at| le(at, 8).is_none_or(|n| n > max_entries))
                {
                    return Err(too_many());
                }
            }
        }
        let archive = ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)?;
        let member_limit = member_limit.min(bytes.len() as u64);
        Ok(Npz {
            archive,
            member_limit,
        })
    }

    /// The `.npy` file of `array`, if the archive has it. The zip crate checks its CRC-32.
    ///
    /// Nothing is allocated from a size the archive claims: a member is refused unless its
    /// claimed size fits the limit and equals its stored length, and the read itself is capped.
    fn optional(&mut self, array: &'static str) -> Result<Option<Vec<u8>>, Error> {
        let limit = self.member_limit;
        let file = match self.archive.by_name(&format!("{array}.npy")) {
            Ok(f) => f,
            Err(ZipError::FileNotFound) => return Ok(None),
            // The zip crate is built without decompressors: it refuses the method before any
            // size is used. Name the member.
            Err(ZipError::UnsupportedArchive(m)) if m.contains("Compression method") => {
                return Err(Error::Vela(VelaError::NpzCompressedArray { array }));
            }
            Err(e) => return Err(zip_error(e)),
        };
        let claimed = file.size();
        if claimed > limit || file.compressed_size() > limit {
            return Err(Error::Vela(VelaError::NpzMemberTooLarge {
                array,
                claimed: claimed.max(file.compressed_size()),
                limit,
            }));
        }
        if file.compression() != CompressionMethod::Stored {
            return Err(Error::Vela(VelaError::NpzCompressedArray { array }));
        }
        if claimed != file.compressed_size() {
            return Err(Error::Vela(VelaError::NpzMemberSizeMismatch {
                array,
                claimed,
                stored: file.compressed_size(),
            }));
        }
        // `claimed <= limit <= bytes.len()`, so this capacity is backed by real input.
        let mut data = Vec::with_capacity(usize::try_from(claimed).unwrap_or(0));
        file.take(limit.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|_| {
                Error::Vela(VelaError::NpzMalformed {
                    problem: "an entry is truncated or its CRC-32 does not match",
                })
            })?;
        if data.len() as u64 != claimed {
            return Err(Error::Vela(VelaError::NpzMemberSizeMismatch {
                array,
                claimed,
                stored: data.len() as u64,
            }));
        }
        Ok(Some(data))
    }

    fn required(&mut self, array: &'static str) -> Result<Vec<u8>, Error> {
        self.optional(array)?
            .ok_or(Error::Vela(VelaError::NpzMissingArray { array }))
    }
}

fn zip_error(e: ZipError) -> Error {
    let problem = match e {
        ZipError::InvalidArchive(_) => "not a valid zip archive (truncated or corrupt)",
        ZipError::UnsupportedArchive(what) => what,
        ZipError::Io(_) => "the archive is truncated",
        _ => "the archive cannot be read",
    };
    Error::Vela(VelaError::NpzMalformed { problem })
}

/// The header of a `.npy` file and the data bytes after it.
fn npy<'d>(array: &'static str, data: &'d [u8]) -> Result<(npyz::NpyHeader, &'d [u8]), Error> {
    let file = NpyFile::new(data).map_err(|_| bad(array, "not a .npy file"))?;
    let header = file.header().clone();
    Ok((header, file.into_inner()))
}

/// A byte string saved as `|S<n>` (shape ()), or a `uint8` vector: its raw bytes.
fn byte_string(array: &'static str, data: &[u8]) -> Result<Vec<u8>, Error> {
    let (header, tail) = npy(array, data)?;
    let DType::Plain(ts) = header.dtype() else {
        return Err(bad(array, "not a byte string"));
    };
    let len = match (ts.type_char(), ts.size_field(), header.shape()) {
        (TypeChar::ByteStr, n, []) => n,
        (TypeChar::Uint, 1, [n]) => *n,
        _ => return Err(bad(array, "not a byte string (|S<n>) or uint8 vector")),
    };
    if tail.len() as u64 != len {
        return Err(bad(array, "its data length disagrees with its header"));
    }
    Ok(tail.to_vec())
}

/// An int64 array: its shape and values. An empty array of any dtype is accepted (numpy saves an
/// empty Python list as float64).
fn ints(array: &'static str, data: &[u8]) -> Result<(Vec<u64>, Vec<i64>), Error> {
    let file = NpyFile::new(data).map_err(|_| bad(array, "not a .npy file"))?;
    let shape = file.shape().to_vec();
    if file.len() == 0 {
        return Ok((shape, Vec::new()));
    }
    let values = file
        .into_vec::<i64>()
        .map_err(|_| bad(array, "not an int64 array"))?;
    Ok((shape, values))
}

fn size(npz: &mut Npz<'_>, array: &'static str) -> Result<u64, Error> {
    let (_, v) = ints(array, &npz.required(array)?)?;
    match v[..] {
        [s] => u64::try_from(s).map_err(|_| bad(array, "negative size")),
        _ => Err(bad(array, "not a scalar")),
    }
}

fn region(npz: &mut Npz<'_>, array: &'static str, expected: u32) -> Result<(), Error> {
    match scalar(npz, array)? {
        r if r == i64::from(expected) => Ok(()),
        found => Err(Error::Vela(VelaError::NpzRegionMismatch {
            array,
            found,
            expected,
        })),
    }
}

fn scalar(npz: &mut Npz<'_>, array: &'static str) -> Result<i64, Error> {
    let (_, v) = ints(array, &npz.required(array)?)?;
    match v[..] {
        [x] => Ok(x),
        _ => Err(bad(array, "not a scalar")),
    }
}

/// The size of region 2 (scratch_fast), as the `.tflite` of the same compilation gives it (the
/// size of the `ethos-u` operator's input 3, which TFLite Micro binds at BASEP2).
///
/// | core writing the `.npz`  | memory mode                 | `scratch_fast_region` | `scratch_fast_size` | region 2 |
/// |--------------------------|-----------------------------|-----------------------|---------------------|----------|
/// | C++ (Regor)              | any                         | 0 or 2                | 0                   | 0        |
/// | Python                   | `Dedicated_Sram` (spilling) | 2                     | n                   | n        |
/// | Python (Vela 4.x's default, 5.x's `--debug-force-legacy-core`) | `Shared_Sram`, `Sram_Only` | 1 | the scratch's size | that size |
///
/// In the last row the Python core, which spills to a fast memory only in `Dedicated_Sram`,
/// addresses its fast scratch through region 1 (its `get_region` maps `Scratch_fast` to the scratch
/// when not spilling) and records that region; its tensor is still operator input 3, a tensor of
/// the scratch's size that TFLite Micro binds at BASEP2, and that its `.tflite` declares. So it is
/// region 2 here too, with that size, and both forms give one pack. Region 1 with any other size is
/// not that convention, and refused.
fn scratch_fast(npz: &mut Npz<'_>, scratch: u64) -> Result<u64, Error> {
    let size = size(npz, "scratch_fast_size")?;
    if size == 0 {
        return Ok(0);
    }
    match scalar(npz, "scratch_fast_region")? {
        r if r == i64::from(SCRATCH_FAST_REGION) => Ok(size),
        r if r == i64::from(SCRATCH_REGION) && size == scratch => Ok(size),
        r if r == i64::from(SCRATCH_REGION) => {
            Err(Error::Vela(VelaError::NpzScratchFastSizeMismatch {
                size,
                scratch,
            }))
        }
        found => Err(Error::Vela(VelaError::NpzRegionMismatch {
            array: "scratch_fast_region",
            found,
            expected: SCRATCH_FAST_REGION,
        })),
    }
}

/// One tensor's quantisation vectors: scales and zero points (empty when not quantised).
type Quant = (Vec<f32>, Vec<i64>);

/// Scales and zero points of each tensor, from an object array of pickled dicts.
///
/// `np.save` pickles an object array as `numpy.ndarray` reconstructed and then given the state
/// tuple `(1, shape, dtype, fortran, [items])`; each numeric array inside an item has the same state
/// with its raw little-endian bytes last. serde-pickle keeps those state tuples (it stands the
/// numpy classes in for opaque objects), which is all that is needed: Vela's raw writer always
/// stores `scale` as float32 and `zero_point` as int32.
fn quantization(array: &'static str, data: &[u8]) -> Result<Vec<Quant>, Error> {
    let (header, tail) = npy(array, data)?;
    if !header.uses_pickled_array() {
        return Err(bad(array, "not an object array"));
    }
    // numpy's classes are referenced again from the memo for the second item on; serde-pickle
    // resolves such references to `None` only with this option (their state tuples are kept).
    let options = DeOptions::new().replace_unresolved_globals();
    let value = serde_pickle::value_from_slice(tail, options)
        .map_err(|_| bad(array, "its pickle cannot be read"))?;
    let items = match array_state(&value) {
        Some(Value::List(items)) => items,
        _ => return Err(bad(array, "not a pickled numpy object array")),
    };
    items
        .iter()
        .map(|item| {
            let Value::Dict(d) = item else {
                return Err(bad(array, "an entry is not a dict"));
            };
            let get = |k: &str| d.get(&HashableValue::String(k.into()));
            let quant_type = match get("quant_type") {
                Some(Value::String(s)) => s.as_str(),
                _ => return Err(bad(array, "an entry has no quant_type")),
            };
            if quant_type == "none" {
                return Ok((Vec::new(), Vec::new()));
            }
            let raw = |k| match get(k).and_then(array_state) {
                Some(Value::Bytes(b)) if b.len() % 4 == 0 => Ok(b.chunks_exact(4)),
                _ => Err(bad(
                    array,
                    "an entry's scale or zero_point is not a numeric array",
                )),
            };
            let scales = raw("scale")?
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let zero_points = raw("zero_point")?
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            Ok((scales, zero_points))
        })
        .collect()
}

/// The data member (last element) of a pickled ndarray's state tuple.
fn array_state(v: &Value) -> Option<&Value> {
    match v {
        Value::Tuple(state) if state.len() == 5 => state.last(),
        _ => None,
    }
}
