//! Errors of the IO bindings (`io_bindings/`): the canonical encoding and its JSON form.
use core::fmt;

/// The IO bindings: the canonical encoding and its JSON form (`io_bindings/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoBindingsError {
    /// Shorter than the 16-byte header.
    TooShort {
        /// Bytes available.
        len: u64,
    },
    /// Not "NPIO".
    BadMagic {
        /// The first word.
        found: u32,
    },
    /// A version this reader does not know.
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A record size other than 96.
    BadRecordSize {
        /// The size found.
        found: u32,
    },
    /// More bindings than [`crate::io_bindings::MAX_BINDINGS`].
    TooMany {
        /// The count.
        count: u32,
        /// The limit.
        max: u32,
    },
    /// The length is not header + count × 96.
    LengthMismatch {
        /// The count in the header.
        count: u32,
        /// The length it implies.
        expected: u64,
        /// The real length.
        actual: u64,
    },
    /// A `kind` byte other than 0 or 1.
    BadKind {
        /// Record number.
        record: u32,
        /// The byte.
        kind: u8,
    },
    /// An unknown dtype code.
    UnknownDtype {
        /// Record number.
        record: u32,
        /// The code.
        code: u8,
    },
    /// Rank above [`crate::io_bindings::MAX_RANK`].
    RankTooLarge {
        /// Record number.
        record: u32,
        /// The rank.
        rank: u8,
        /// The limit.
        max: u8,
    },
    /// A region the Ethos-U55 has no base pointer for.
    RegionOutOfRange {
        /// Record number.
        record: u32,
        /// The region.
        region: u8,
    },
    /// Padding that is not zero, or a name that is not clean UTF-8.
    NotCanonical {
        /// Record number.
        record: u32,
        /// Which field.
        field: &'static str,
    },
    /// `bytes` disagrees with shape × element size.
    BytesMismatch {
        /// Record number.
        record: u32,
        /// `bytes` as stored.
        bytes: u32,
        /// What shape and dtype give (saturated).
        expected: u64,
    },
    /// A scale that is NaN, infinite, negative or negative zero.
    BadScale {
        /// Record number.
        record: u32,
        /// The `f32` bits.
        bits: u32,
    },
    /// A zero point without a scale.
    ZeroPointWithoutScale {
        /// Record number.
        record: u32,
        /// The zero point.
        zero_point: i32,
    },
    /// Records not in the order inputs 0.., outputs 0...
    OutOfOrder {
        /// Record number.
        record: u32,
        /// Its kind.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The kind expected there.
        expected_kind: crate::io_bindings::IoKind,
        /// The index expected there.
        expected_index: u32,
    },
    /// A binding names a region the pack does not have.
    RegionMissing {
        /// Record number.
        record: u32,
        /// The region.
        region: u8,
        /// The pack's region count.
        region_count: u32,
    },
    /// A binding runs past the end of its region in the pack.
    OutsideRegion {
        /// Record number.
        record: u32,
        /// The region.
        region: u8,
        /// Offset.
        offset: u32,
        /// Size.
        bytes: u32,
        /// The region's size in the pack.
        region_size: u32,
    },
    /// The JSON form does not parse.
    JsonSyntax {
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: u64,
    },
    /// A JSON field has a value the encoding cannot hold.
    JsonField {
        /// Binding number (`u32::MAX` for the document's own fields).
        binding: u32,
        /// The field.
        field: &'static str,
    },
    /// The JSON's `sha256` is not the digest of the bindings it lists.
    JsonDigestMismatch,
}

impl fmt::Display for IoBindingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(
                f,
                "IO bindings: {len} bytes, shorter than the 16-byte header"
            ),
            Self::BadMagic { found } => write!(
                f,
                "IO bindings: magic {found:#010x}, expected 0x4f49504e (\"NPIO\")"
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "IO bindings: version {found}, this reader knows only version 1"
            ),
            Self::BadRecordSize { found } => write!(
                f,
                "IO bindings: record size {found}, version 1 records are 96 bytes"
            ),
            Self::TooMany { count, max } => write!(
                f,
                "IO bindings: {count} bindings, more than the {max} allowed"
            ),
            Self::LengthMismatch {
                count,
                expected,
                actual,
            } => write!(
                f,
                "IO bindings: {count} records need {expected} bytes but there are {actual}"
            ),
            Self::BadKind { record, kind } => write!(
                f,
                "IO binding {record}: kind {kind}, expected 0 (input) or 1 (output)"
            ),
            Self::UnknownDtype { record, code } => {
                write!(f, "IO binding {record}: unknown dtype code {code:#04x}")
            }
            Self::RankTooLarge { record, rank, max } => {
                write!(f, "IO binding {record}: rank {rank}, more than {max}")
            }
            Self::RegionOutOfRange { record, region } => write!(
                f,
                "IO binding {record}: region {region}, but the Ethos-U55 has base pointers 0..7 only"
            ),
            Self::NotCanonical { record, field } => write!(
                f,
                "IO binding {record}: {field} is not in canonical form (non-zero padding, or a name \
                 that is not UTF-8 or holds a NUL)"
            ),
            Self::BytesMismatch {
                record,
                bytes,
                expected,
            } => write!(
                f,
                "IO binding {record}: bytes is {bytes} but shape × element size is {expected}"
            ),
            // The value itself with `std` only: formatting an `f32` links about 8 KB of code a
            // device has no room for; its bits say the same.
            #[cfg(feature = "std")]
            Self::BadScale { record, bits } => write!(
                f,
                "IO binding {record}: scale {} (bits {bits:#010x}) is not 0 or a positive finite \
                 number",
                f32::from_bits(bits)
            ),
            #[cfg(not(feature = "std"))]
            Self::BadScale { record, bits } => write!(
                f,
                "IO binding {record}: scale bits {bits:#010x} are not 0 or a positive finite \
                 number"
            ),
            Self::ZeroPointWithoutScale { record, zero_point } => write!(
                f,
                "IO binding {record}: zero point {zero_point} with scale 0 (not quantised)"
            ),
            Self::OutOfOrder {
                record,
                kind,
                index,
                expected_kind,
                expected_index,
            } => write!(
                f,
                "IO binding {record}: {kind} {index} where {expected_kind} {expected_index} belongs \
                 (inputs 0.. come first, then outputs 0..)"
            ),
            Self::RegionMissing {
                record,
                region,
                region_count,
            } => write!(
                f,
                "IO binding {record}: region {region}, but the pack has {region_count} regions"
            ),
            Self::OutsideRegion {
                record,
                region,
                offset,
                bytes,
                region_size,
            } => write!(
                f,
                "IO binding {record}: [{offset}, {}) runs past region {region}'s {region_size} \
                 bytes in the pack",
                u64::from(offset) + u64::from(bytes)
            ),
            Self::JsonSyntax { line, column } => write!(
                f,
                "IO bindings JSON: not valid at line {line}, column {column}"
            ),
            Self::JsonField { binding, field } => {
                if binding == u32::MAX {
                    write!(
                        f,
                        "IO bindings JSON: field `{field}` has an unexpected value"
                    )
                } else {
                    write!(
                        f,
                        "IO bindings JSON: binding {binding}: field `{field}` has a value the \
                         encoding cannot hold"
                    )
                }
            }
            Self::JsonDigestMismatch => f.write_str(
                "IO bindings JSON: `sha256` is not the digest of the bindings listed (edited by \
                 hand?); regenerate it with `npub pack`",
            ),
        }
    }
}

impl core::error::Error for IoBindingsError {}
