//! The encoding's constants and the field types of a record: what a binding is made of, with no
//! judgement of a whole record (that is `encoding.rs`'s). Imports nothing of the crate but the
//! base-pointer count, so errors and Vela import name these types without a circle.
use core::fmt;

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
    pub(super) fn from_padded(field: &[u8]) -> Option<Name> {
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
    pub(super) dims: [u32; MAX_RANK],
    pub(super) rank: u8,
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
