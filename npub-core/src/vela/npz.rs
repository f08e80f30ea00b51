//! Vela's raw output (`--output-format raw`): a `.npz`, i.e. a zip of `.npy` arrays (`np.savez`).
//!
//! | array                                   | `.npy` dtype | becomes                                  |
//! |-----------------------------------------|--------------|------------------------------------------|
//! | `cmd_data`                              | `\|S<n>`, shape () | the driver payload (COP1 header + stream) |
//! | `weight_data`                           | `\|S<n>`, shape () | region 0's bytes                     |
//! | `weight_region`, `scratch_region`       | int64 ()     | checked: 0 and 1, Vela's COP1 convention  |
//! | `scratch_size`, `scratch_fast_size`     | int64 ()     | the sizes of regions 1 and 2              |
//! | `scratch_fast_region`                   | int64 ()     | checked to be 2 when `scratch_fast_size` > 0 |
//! | `input_`/`output_` + `shape`            | int64 (n, r) | binding shapes (Vela pads them to rank 6) |
//! | `input_`/`output_` + `elem_size`        | int64 (n,)   | binding dtypes `bits8`… (no type is recorded) |
//! | `input_`/`output_` + `region`, `offset` | int64 (n,)   | where the stream expects each tensor      |
//! | `input_`/`output_` + `quantization`     | object (n,)  | a pickled dict per tensor: `quant_type`, `scale` (float32), `zero_point` (int32) |
//! | `variable_offset`                       | (k,)         | refused unless empty                      |
//!
//! Byte strings are read as the raw bytes after the `.npy` header (numpy's `.tobytes()`), never as
//! C strings: both the payload and the weights routinely end in zero bytes. The raw format records
//! no tensor names (bindings get empty names) and no element types (see [`Dtype::bits_of_size`]).
use std::io::{Cursor, Read};

use npyz::{DType, NpyFile, TypeChar};
use serde_pickle::{DeOptions, HashableValue, Value};
use zip::{CompressionMethod, ZipArchive, result::ZipError};

use super::Extracted;
use super::tflite::per_tensor;
use crate::Error;
use crate::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape};

/// Vela's COP1 region numbers.
const WEIGHT_REGION: u32 = 0;
const SCRATCH_REGION: u32 = 1;
const SCRATCH_FAST_REGION: u32 = 2;

/// Reads a Vela raw `.npz`, refusing any member that claims more than `member_limit` bytes.
pub fn extract(bytes: &[u8], member_limit: u64) -> Result<Extracted<'static>, Error> {
    let mut npz = Npz::open(bytes, member_limit)?;
    let payload = byte_string("cmd_data", &npz.required("cmd_data")?)?;
    let weights = byte_string("weight_data", &npz.required("weight_data")?)?;
    region(&mut npz, "weight_region", WEIGHT_REGION)?;
    region(&mut npz, "scratch_region", SCRATCH_REGION)?;
    let scratch = size(&mut npz, "scratch_size")?;
    let scratch_fast = size(&mut npz, "scratch_fast_size")?;
    if scratch_fast > 0 {
        region(&mut npz, "scratch_fast_region", SCRATCH_FAST_REGION)?;
    }
    if let Some(v) = npz.optional("variable_offset")? {
        let (_, values) = ints("variable_offset", &v)?;
        if !values.is_empty() {
            return Err(Error::NpzVariableTensors {
                count: values.len() as u64,
            });
        }
    }
    let mut io = Vec::new();
    for (kind, names) in [(IoKind::Input, INPUT), (IoKind::Output, OUTPUT)] {
        io.extend(bindings(&mut npz, kind, &names, [scratch, scratch_fast])?);
    }
    Ok(Extracted {
        payload: payload.into(),
        weights: weights.into(),
        scratch,
        scratch_fast,
        io,
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

fn bindings(
    npz: &mut Npz<'_>,
    kind: IoKind,
    names: &IoArrays,
    region_sizes: [u64; 2],
) -> Result<Vec<IoBinding>, Error> {
    let [offset_name, shape_name, elem_name, region_name, quant_name] = *names;
    let (_, offsets) = ints(offset_name, &npz.required(offset_name)?)?;
    let n = offsets.len();
    let count = |array: &'static str, len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(Error::NpzIoCountMismatch {
                array,
                len: len as u64,
                expected: n as u64,
            })
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
    let quant = quantization(quant_name, &npz.required(quant_name)?)?;
    count(quant_name, quant.len())?;

    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let index = i as u32;
        let row = &shapes[i * rank..(i + 1) * rank];
        let dims = row
            .iter()
            .map(|&d| {
                u32::try_from(d).map_err(|_| Error::VelaIoNegativeDim {
                    kind,
                    index,
                    dim: d,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shape = Shape::new(&dims).ok_or(Error::VelaIoRankTooLarge {
            kind,
            index,
            rank: rank as u64,
        })?;
        let elem_size = elem_sizes[i];
        let dtype = u32::try_from(elem_size)
            .ok()
            .and_then(Dtype::bits_of_size)
            .ok_or(Error::VelaIoBadElemSize {
                kind,
                index,
                elem_size,
            })?;
        let bytes = shape
            .elements()
            .and_then(|e| e.checked_mul(u64::from(dtype.size())))
            .unwrap_or(u64::MAX);
        let bytes =
            u32::try_from(bytes).map_err(|_| Error::VelaIoTooLarge { kind, index, bytes })?;
        let (region, region_size) = match regions[i] {
            1 => (1u8, region_sizes[0]),
            2 => (2u8, region_sizes[1]),
            other => {
                return Err(Error::VelaIoBadRegion {
                    kind,
                    index,
                    region: other,
                });
            }
        };
        let offset =
            u32::try_from(offsets[i]).map_err(|_| Error::VelaIoNotInArena { kind, index })?;
        let end = u64::from(offset) + u64::from(bytes);
        if end > region_size {
            return Err(Error::VelaIoOutsideRegion {
                kind,
                index,
                region,
                offset: u64::from(offset),
                bytes: u64::from(bytes),
                region_size,
            });
        }
        let (scales, zero_points) = &quant[i];
        let (scale, zero_point) = per_tensor(kind, index, scales, zero_points)?;
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

fn bad(array: &'static str, problem: &'static str) -> Error {
    Error::NpzBadArray { array, problem }
}

/// The zip archive.
struct Npz<'b> {
    archive: ZipArchive<Cursor<&'b [u8]>>,
    /// The most bytes any member may hold: the caller's limit, and never more than the archive
    /// itself (a stored member's bytes are inside it).
    member_limit: u64,
}

impl<'b> Npz<'b> {
    fn open(bytes: &'b [u8], member_limit: u64) -> Result<Self, Error> {
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
                return Err(Error::NpzCompressedArray { array });
            }
            Err(e) => return Err(zip_error(e)),
        };
        let claimed = file.size();
        if claimed > limit || file.compressed_size() > limit {
            return Err(Error::NpzMemberTooLarge {
                array,
                claimed: claimed.max(file.compressed_size()),
                limit,
            });
        }
        if file.compression() != CompressionMethod::Stored {
            return Err(Error::NpzCompressedArray { array });
        }
        if claimed != file.compressed_size() {
            return Err(Error::NpzMemberSizeMismatch {
                array,
                claimed,
                stored: file.compressed_size(),
            });
        }
        // `claimed <= limit <= bytes.len()`, so this capacity is backed by real input.
        let mut data = Vec::with_capacity(usize::try_from(claimed).unwrap_or(0));
        file.take(limit.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|_| Error::NpzMalformed {
                problem: "an entry is truncated or its CRC-32 does not match",
            })?;
        if data.len() as u64 != claimed {
            return Err(Error::NpzMemberSizeMismatch {
                array,
                claimed,
                stored: data.len() as u64,
            });
        }
        Ok(Some(data))
    }

    fn required(&mut self, array: &'static str) -> Result<Vec<u8>, Error> {
        self.optional(array)?
            .ok_or(Error::NpzMissingArray { array })
    }
}

fn zip_error(e: ZipError) -> Error {
    let problem = match e {
        ZipError::InvalidArchive(_) => "not a valid zip archive (truncated or corrupt)",
        ZipError::UnsupportedArchive(what) => what,
        ZipError::Io(_) => "the archive is truncated",
        _ => "the archive cannot be read",
    };
    Error::NpzMalformed { problem }
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
    let (_, v) = ints(array, &npz.required(array)?)?;
    match v[..] {
        [r] if r == i64::from(expected) => Ok(()),
        [found] => Err(Error::NpzRegionMismatch {
            array,
            found,
            expected,
        }),
        _ => Err(bad(array, "not a scalar")),
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
