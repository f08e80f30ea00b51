//! Safe, verified reads of the TFLite flatbuffer (`schema.fbs`, file identifier `TFL3`).
//!
//! There is no flatc here and npub-core forbids `unsafe`, while the `flatbuffers` crate's
//! `Table::get` and `Vector::new` are `unsafe` (they trust a verified buffer). So the crate's
//! *verifier* does the work, through its safe API:
//!
//! 1. [`Fb::new`] runs the crate's `Verifier` over every table, vector and string this importer
//!    will read — the same `visit_table` / `visit_field` walk flatc's generated `Verifiable` impls
//!    do, written for the handful of TFLite tables below, with their documented field ids.
//! 2. Reads then locate fields with the verifier's `visit_table(..).deref(field)` (the crate's vtable
//!    lookup, bounds-checked), and read vectors and strings with the crate's verified
//!    `flatbuffers::root` on the field's position.
//!
//! What is left to this file is one rule of the format: a `uoffset` at position `p` points to
//! `p + value` (to reach tables inside vectors of tables), and little-endian scalar reads.
//!
//! Field ids, in declaration order in TensorFlow's `tensorflow/lite/schema/schema.fbs` (the vtable
//! slot of field *n* is `4 + 2n`):
//!
//! | table                    | field ids used                                                          |
//! |--------------------------|-------------------------------------------------------------------------|
//! | `Model`                  | 1 `operator_codes`, 2 `subgraphs`, 4 `buffers`, 6 `metadata`             |
//! | `OperatorCode`           | 0 `deprecated_builtin_code: byte`, 1 `custom_code`, 3 `builtin_code: int` |
//! | `SubGraph`               | 0 `tensors`, 1 `inputs`, 2 `outputs`, 3 `operators`                      |
//! | `Tensor`                 | 0 `shape`, 1 `type: TensorType (byte)`, 2 `buffer: uint`, 3 `name`, 4 `quantization` |
//! | `QuantizationParameters` | 2 `scale: [float]`, 3 `zero_point: [long]`                               |
//! | `Operator`               | 0 `opcode_index: uint`, 1 `inputs`, 2 `outputs`                          |
//! | `Buffer`                 | 0 `data: [ubyte]`, 1 `offset: ulong`, 2 `size: ulong`                     |
//! | `Metadata`               | 0 `name`, 1 `buffer: uint`                                               |
use flatbuffers::{
    Follow, ForwardsUOffset, InvalidFlatbuffer, TableVerifier, VOffsetT, Vector, Verifiable,
    Verifier, VerifierOptions, field_index_to_field_offset,
};

use crate::{Error, VelaError};

/// TFLite's file identifier, bytes 4..8 of the file.
pub const FILE_IDENTIFIER: &str = "TFL3";

/// Field ids of the tables read (see the module table).
pub mod id {
    #![allow(missing_docs)]
    pub const MODEL_OPERATOR_CODES: u16 = 1;
    pub const MODEL_SUBGRAPHS: u16 = 2;
    pub const MODEL_BUFFERS: u16 = 4;
    pub const MODEL_METADATA: u16 = 6;
    pub const OPCODE_DEPRECATED_BUILTIN: u16 = 0;
    pub const OPCODE_CUSTOM_CODE: u16 = 1;
    pub const OPCODE_BUILTIN: u16 = 3;
    pub const SUBGRAPH_TENSORS: u16 = 0;
    pub const SUBGRAPH_INPUTS: u16 = 1;
    pub const SUBGRAPH_OUTPUTS: u16 = 2;
    pub const SUBGRAPH_OPERATORS: u16 = 3;
    pub const TENSOR_SHAPE: u16 = 0;
    pub const TENSOR_TYPE: u16 = 1;
    pub const TENSOR_BUFFER: u16 = 2;
    pub const TENSOR_NAME: u16 = 3;
    pub const TENSOR_QUANTIZATION: u16 = 4;
    pub const QUANT_SCALE: u16 = 2;
    pub const QUANT_ZERO_POINT: u16 = 3;
    pub const OPERATOR_OPCODE_INDEX: u16 = 0;
    pub const OPERATOR_INPUTS: u16 = 1;
    pub const OPERATOR_OUTPUTS: u16 = 2;
    pub const BUFFER_DATA: u16 = 0;
    pub const BUFFER_OFFSET: u16 = 1;
    pub const BUFFER_SIZE: u16 = 2;
    pub const METADATA_NAME: u16 = 0;
    pub const METADATA_BUFFER: u16 = 1;
}

fn slot(field_id: u16) -> VOffsetT {
    field_index_to_field_offset(field_id)
}

/// Maps the crate's verifier error to ours: what is wrong, and where.
fn malformed(e: InvalidFlatbuffer) -> Error {
    let (problem, position) = match e {
        InvalidFlatbuffer::MissingRequiredField { .. } => ("a required field is missing", 0),
        InvalidFlatbuffer::InconsistentUnion { .. } => ("a union's type and value disagree", 0),
        InvalidFlatbuffer::Utf8Error { range, .. } => ("a string is not UTF-8", range.start),
        InvalidFlatbuffer::MissingNullTerminator { range, .. } => {
            ("a string has no NUL terminator", range.start)
        }
        InvalidFlatbuffer::Unaligned { position, .. } => ("a field is misaligned", position),
        InvalidFlatbuffer::RangeOutOfBounds { range, .. } => (
            "an offset or length points past the end of the file",
            range.start,
        ),
        InvalidFlatbuffer::SignedOffsetOutOfBounds { position, .. } => {
            ("a table's vtable offset points outside the file", position)
        }
        InvalidFlatbuffer::TooManyTables => ("more tables than the verifier allows", 0),
        InvalidFlatbuffer::ApparentSizeTooLarge => {
            ("the structure's apparent size is too large", 0)
        }
        InvalidFlatbuffer::DepthLimitReached => ("tables nest deeper than the verifier allows", 0),
    };
    Error::Vela(VelaError::TfliteMalformed {
        problem,
        position: position as u64,
    })
}

// ----- the verification walk (what flatc's generated `Verifiable` impls would do) -----------------

macro_rules! table_verifier {
    ($name:ident, |$t:ident| $body:expr) => {
        /// Verifier marker for the TFLite table of the same name (fields this importer reads).
        pub struct $name;
        impl Verifiable for $name {
            fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
                let $t = v.visit_table(pos)?;
                let t: TableVerifier<'_, '_, '_> = $body;
                t.finish();
                Ok(())
            }
        }
    };
}

type Tables<T> = ForwardsUOffset<Vector<'static, ForwardsUOffset<T>>>;
type Scalars<T> = ForwardsUOffset<Vector<'static, T>>;
type Str = ForwardsUOffset<&'static str>;

table_verifier!(Model, |t| t
    .visit_field::<Tables<OperatorCode>>("operator_codes", slot(id::MODEL_OPERATOR_CODES), false)?
    .visit_field::<Tables<SubGraph>>("subgraphs", slot(id::MODEL_SUBGRAPHS), false)?
    .visit_field::<Tables<Buffer>>("buffers", slot(id::MODEL_BUFFERS), false)?
    .visit_field::<Tables<Metadata>>(
        "metadata",
        slot(id::MODEL_METADATA),
        false
    )?);

table_verifier!(OperatorCode, |t| t
    .visit_field::<i8>(
        "deprecated_builtin_code",
        slot(id::OPCODE_DEPRECATED_BUILTIN),
        false
    )?
    .visit_field::<Str>("custom_code", slot(id::OPCODE_CUSTOM_CODE), false)?
    .visit_field::<i32>("builtin_code", slot(id::OPCODE_BUILTIN), false)?);

table_verifier!(SubGraph, |t| t
    .visit_field::<Tables<Tensor>>("tensors", slot(id::SUBGRAPH_TENSORS), false)?
    .visit_field::<Scalars<i32>>("inputs", slot(id::SUBGRAPH_INPUTS), false)?
    .visit_field::<Scalars<i32>>("outputs", slot(id::SUBGRAPH_OUTPUTS), false)?
    .visit_field::<Tables<Operator>>(
        "operators",
        slot(id::SUBGRAPH_OPERATORS),
        false
    )?);

table_verifier!(Tensor, |t| t
    .visit_field::<Scalars<i32>>("shape", slot(id::TENSOR_SHAPE), false)?
    .visit_field::<i8>("type", slot(id::TENSOR_TYPE), false)?
    .visit_field::<u32>("buffer", slot(id::TENSOR_BUFFER), false)?
    .visit_field::<Str>("name", slot(id::TENSOR_NAME), false)?
    .visit_field::<ForwardsUOffset<Quantization>>(
        "quantization",
        slot(id::TENSOR_QUANTIZATION),
        false
    )?);

table_verifier!(Quantization, |t| t
    .visit_field::<Scalars<f32>>("scale", slot(id::QUANT_SCALE), false)?
    .visit_field::<Scalars<i64>>(
        "zero_point",
        slot(id::QUANT_ZERO_POINT),
        false
    )?);

table_verifier!(Operator, |t| t
    .visit_field::<u32>("opcode_index", slot(id::OPERATOR_OPCODE_INDEX), false)?
    .visit_field::<Scalars<i32>>("inputs", slot(id::OPERATOR_INPUTS), false)?
    .visit_field::<Scalars<i32>>(
        "outputs",
        slot(id::OPERATOR_OUTPUTS),
        false
    )?);

table_verifier!(Buffer, |t| t
    .visit_field::<Scalars<u8>>("data", slot(id::BUFFER_DATA), false)?
    .visit_field::<u64>("offset", slot(id::BUFFER_OFFSET), false)?
    .visit_field::<u64>("size", slot(id::BUFFER_SIZE), false)?);

table_verifier!(Metadata, |t| t
    .visit_field::<Str>("name", slot(id::METADATA_NAME), false)?
    .visit_field::<u32>("buffer", slot(id::METADATA_BUFFER), false)?);

// ----- reads --------------------------------------------------------------------------------------

/// A verified TFLite flatbuffer. Positions (`usize`) are absolute byte offsets of tables.
pub struct Fb<'b> {
    buf: &'b [u8],
    opts: VerifierOptions,
}

impl<'b> Fb<'b> {
    /// True when `bytes` carries TFLite's file identifier.
    pub fn is_tflite(bytes: &[u8]) -> bool {
        // The crate's check asserts on short input; 8 bytes = root offset + identifier.
        bytes.len() >= 8 && flatbuffers::buffer_has_identifier(bytes, FILE_IDENTIFIER, false)
    }

    /// Verifies the whole model (every field this importer reads).
    pub fn new(buf: &'b [u8]) -> Result<Self, Error> {
        if !Self::is_tflite(buf) {
            return Err(Error::Vela(VelaError::TfliteMalformed {
                problem: "no TFL3 file identifier at bytes 4..8",
                position: 4,
            }));
        }
        let opts = VerifierOptions::default();
        let mut v = Verifier::new(&opts, buf);
        <ForwardsUOffset<Model>>::run_verifier(&mut v, 0).map_err(malformed)?;
        Ok(Fb { buf, opts })
    }

    /// Position of the root table (`Model`).
    pub fn root(&self) -> Result<usize, Error> {
        self.follow(0)
    }

    /// Position of field `field_id` of the table at `table`, if present.
    fn field(&self, table: usize, field_id: u16) -> Result<Option<usize>, Error> {
        let mut v = Verifier::new(&self.opts, self.buf);
        let mut t = v.visit_table(table).map_err(malformed)?;
        t.deref(slot(field_id)).map_err(malformed)
    }

    /// The target of the `uoffset` stored at `pos`.
    fn follow(&self, pos: usize) -> Result<usize, Error> {
        let mut v = Verifier::new(&self.opts, self.buf);
        let off = v.get_uoffset(pos).map_err(malformed)?;
        pos.checked_add(off as usize)
            .ok_or(Error::Vela(VelaError::TfliteMalformed {
                problem: "an offset overflows",
                position: pos as u64,
            }))
    }

    fn bytes<const N: usize>(&self, pos: usize) -> Result<[u8; N], Error> {
        pos.checked_add(N)
            .and_then(|end| self.buf.get(pos..end))
            .and_then(|s| s.try_into().ok())
            .ok_or(Error::Vela(VelaError::TfliteMalformed {
                problem: "a scalar field runs past the end of the file",
                position: pos as u64,
            }))
    }

    /// A `uint` field, or `default` when absent.
    pub fn u32(&self, table: usize, field_id: u16, default: u32) -> Result<u32, Error> {
        match self.field(table, field_id)? {
            Some(p) => Ok(u32::from_le_bytes(self.bytes(p)?)),
            None => Ok(default),
        }
    }

    /// An `int` field, or `default` when absent.
    pub fn i32(&self, table: usize, field_id: u16, default: i32) -> Result<i32, Error> {
        match self.field(table, field_id)? {
            Some(p) => Ok(i32::from_le_bytes(self.bytes(p)?)),
            None => Ok(default),
        }
    }

    /// A `byte` field, or `default` when absent.
    pub fn i8(&self, table: usize, field_id: u16, default: i8) -> Result<i8, Error> {
        match self.field(table, field_id)? {
            Some(p) => Ok(i8::from_le_bytes(self.bytes(p)?)),
            None => Ok(default),
        }
    }

    /// A `ulong` field, or `default` when absent.
    pub fn u64(&self, table: usize, field_id: u16, default: u64) -> Result<u64, Error> {
        match self.field(table, field_id)? {
            Some(p) => Ok(u64::from_le_bytes(self.bytes(p)?)),
            None => Ok(default),
        }
    }

    /// Position of the sub-table in field `field_id`, if present.
    pub fn table(&self, table: usize, field_id: u16) -> Result<Option<usize>, Error> {
        self.field(table, field_id)?
            .map(|p| self.follow(p))
            .transpose()
    }

    /// Positions of the tables of a vector-of-tables field (empty when absent).
    pub fn tables(&self, table: usize, field_id: u16) -> Result<Vec<usize>, Error> {
        let Some(p) = self.field(table, field_id)? else {
            return Ok(Vec::new());
        };
        // Elements of a vector of tables are 4-byte uoffsets: read its length as a `[uint]`.
        let len = self.read_root::<Vector<'b, u32>>(p)?.len();
        // The vector's length word sits at its target; element i is the uoffset at +4 + 4i.
        let first = self.follow(p)?.checked_add(4);
        (0..len)
            .map(|i| {
                first
                    .and_then(|f| f.checked_add(4 * i))
                    .ok_or(Error::Vela(VelaError::TfliteMalformed {
                        problem: "an offset overflows",
                        position: p as u64,
                    }))
                    .and_then(|e| self.follow(e))
            })
            .collect()
    }

    /// A vector-of-scalars field, if present.
    pub fn vector<T>(&self, table: usize, field_id: u16) -> Result<Option<Vector<'b, T>>, Error>
    where
        T: Follow<'b> + 'b,
        Vector<'b, T>: Verifiable,
    {
        self.field(table, field_id)?
            .map(|p| self.read_root::<Vector<'b, T>>(p))
            .transpose()
    }

    /// A string field, if present.
    pub fn string(&self, table: usize, field_id: u16) -> Result<Option<&'b str>, Error> {
        self.field(table, field_id)?
            .map(|p| self.read_root::<&'b str>(p))
            .transpose()
    }

    /// Reads the object the `uoffset` at `pos` points to with the crate's verified `root`.
    ///
    /// Offsets are relative, so `root` works on the tail of the file starting at the field. But the
    /// verifier checks alignment against the start of the slice it is given, so the slice must
    /// start 8-aligned relative to the file for 8-byte elements (`zero_point: [long]`) to verify as
    /// they do in the whole file: a field at 4 mod 8 is read with `size_prefixed_root` from 4 bytes
    /// earlier (the size prefix it skips is never read).
    fn read_root<T>(&self, pos: usize) -> Result<T::Inner, Error>
    where
        T: Follow<'b> + Verifiable + 'b,
    {
        let misaligned = Error::Vela(VelaError::TfliteMalformed {
            problem: "an offset field is misaligned",
            position: pos as u64,
        });
        let r = match pos % 8 {
            0 => flatbuffers::root::<T>(self.buf.get(pos..).ok_or(misaligned)?),
            4 => flatbuffers::size_prefixed_root::<T>(self.buf.get(pos - 4..).ok_or(misaligned)?),
            _ => return Err(misaligned),
        };
        r.map_err(|e| match malformed(e) {
            // Positions in the sub-slice are relative to it; report the field instead.
            Error::Vela(VelaError::TfliteMalformed { problem, .. }) => {
                Error::Vela(VelaError::TfliteMalformed {
                    problem,
                    position: pos as u64,
                })
            }
            other => other,
        })
    }
}
