//! Errors of Vela import (`vela/`): the `.tflite` and `.npz` Vela writes.
use core::fmt;

/// Vela's output as `vela/` imports it: the `.tflite` and `.npz` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VelaError {
    /// The file is neither a TFLite flatbuffer nor a zip archive.
    UnknownFormat {
        /// The first four bytes, little-endian.
        magic: u32,
    },
    /// The flatbuffers verifier refused the `.tflite` (truncated, garbled).
    TfliteMalformed {
        /// What the verifier found.
        problem: &'static str,
        /// Byte offset in the file where it found it (0 when it does not say).
        position: u64,
    },
    /// The model does not have exactly one subgraph.
    TfliteSubgraphCount {
        /// Subgraphs found.
        count: u32,
    },
    /// An index in the model points past the end of what it indexes.
    TfliteIndexOutOfRange {
        /// What is indexed ("tensor", "operator code", "buffer").
        what: &'static str,
        /// The index found.
        index: i64,
        /// How many there are.
        len: u32,
    },
    /// No `ethos-u` operator: the model was not compiled by Vela.
    NoEthosUOperator {
        /// Operators in the model.
        operators: u32,
    },
    /// A builtin operator was left on the CPU.
    CpuOperator {
        /// Its name ("" when the code is newer than this table).
        op: &'static str,
        /// Its `BuiltinOperator` code.
        code: i32,
    },
    /// A custom operator other than `ethos-u` was left on the CPU. Host-only: its 48-byte name would
    /// otherwise make every `Result` on the device that much larger.
    #[cfg(feature = "std")]
    CpuCustomOperator {
        /// Its custom code (cut to 48 bytes).
        name: crate::io_bindings::Name,
    },
    /// More than one `ethos-u` operator.
    MultipleEthosU {
        /// How many.
        count: u32,
    },
    /// The `ethos-u` operator has fewer than the four fixed inputs (payload, weights, scratch,
    /// scratch_fast).
    EthosUInputs {
        /// Inputs it has.
        count: u32,
    },
    /// A constant input of the `ethos-u` operator (0 payload, 1 weights) has no data.
    TfliteConstantMissing {
        /// The operator input.
        input: u32,
    },
    /// A constant's data lives outside the flatbuffer (the >2 GB layout).
    TfliteExternalBuffer {
        /// The operator input.
        input: u32,
        /// The buffer's `offset` field.
        offset: u64,
    },
    /// A constant's data length disagrees with its tensor's shape.
    TfliteConstantSizeMismatch {
        /// The operator input.
        input: u32,
        /// Bytes of data.
        data_bytes: u64,
        /// Bytes the shape and type describe.
        tensor_bytes: u64,
    },
    /// The `ethos-u` operator's inputs (from 4 on) or outputs are not the model's.
    IoMismatch {
        /// Inputs or outputs.
        kind: crate::io_bindings::IoKind,
        /// First position where they differ.
        position: u32,
        /// The operator's tensor there (-1 when it has none).
        operator_tensor: i64,
        /// The model's tensor there (-1 when it has none).
        model_tensor: i64,
    },
    /// No `OfflineMemoryAllocation` metadata: IO offsets in the arena are unknown.
    TfliteNoOfflineAllocation,
    /// The `OfflineMemoryAllocation` metadata is not Vela's layout.
    TfliteBadOfflineAllocation {
        /// What is wrong.
        problem: &'static str,
        /// The value found.
        value: i64,
    },
    /// An IO tensor has no offset in the scratch arena (offline allocation -1).
    IoNotInArena {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
    },
    /// An IO tensor has more dimensions than a binding stores.
    IoRankTooLarge {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Its rank.
        rank: u64,
    },
    /// An IO tensor's shape has a negative (dynamic) dimension.
    IoNegativeDim {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The dimension.
        dim: i64,
    },
    /// An IO tensor's element type cannot be bound.
    IoUnsupportedDtype {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// TFLite `TensorType` code.
        tflite_type: i8,
    },
    /// An IO tensor's raw-output element size is not 1, 2, 4 or 8.
    IoBadElemSize {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// `elem_size` as stored.
        elem_size: i64,
    },
    /// An IO tensor is larger than a `u32` can say.
    IoTooLarge {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Its size (saturated).
        bytes: u64,
    },
    /// An IO tensor is quantised per channel.
    PerChannelIo {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Number of scales.
        channels: u64,
    },
    /// An IO tensor has a different number of scales and zero points.
    IoQuantisationMismatch {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Scales.
        scales: u64,
        /// Zero points.
        zero_points: u64,
    },
    /// An IO tensor's zero point does not fit an `i32`.
    IoZeroPointRange {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The zero point.
        zero_point: i64,
    },
    /// An IO tensor sits in a region other than scratch (1) or scratch_fast (2).
    IoBadRegion {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The region.
        region: i64,
    },
    /// An IO tensor's bytes run past the end of its region.
    IoOutsideRegion {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The region.
        region: u8,
        /// Offset in the region.
        offset: u64,
        /// Size.
        bytes: u64,
        /// The region's size.
        region_size: u64,
    },
    /// A region (scratch, scratch_fast, weights) is larger than NPU1's `u32` sizes.
    RegionTooLarge {
        /// Region index (BASEP slot).
        region: u32,
        /// Its size.
        bytes: u64,
    },
    /// The payload was compiled for an accelerator other than an Ethos-U55 (an Ethos-U65 or U85):
    /// its command stream is not one an RA8P1's NPU can run.
    NotU55 {
        /// The COP1 config word (product in bits 31:28, log2 MACs per cycle in bits 3:0).
        config: u32,
    },
    /// The `.npz` is not a zip archive this importer can read.
    NpzMalformed {
        /// What is wrong.
        problem: &'static str,
    },
    /// A required array is missing from the `.npz`.
    NpzMissingArray {
        /// The array.
        array: &'static str,
    },
    /// An array is stored compressed.
    NpzCompressedArray {
        /// The array.
        array: &'static str,
    },
    /// A member of the `.npz` claims more bytes than the caller's limit or the archive holds.
    NpzMemberTooLarge {
        /// The array (member `<array>.npy`).
        array: &'static str,
        /// The size its zip entry claims.
        claimed: u64,
        /// The most it may hold.
        limit: u64,
    },
    /// A stored member's claimed size disagrees with the bytes stored for it.
    NpzMemberSizeMismatch {
        /// The array (member `<array>.npy`).
        array: &'static str,
        /// The uncompressed size its zip entry claims.
        claimed: u64,
        /// The bytes actually stored.
        stored: u64,
    },
    /// An array's `.npy` header or contents are not what Vela writes.
    NpzBadArray {
        /// The array.
        array: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
    /// A region number in the `.npz` is not Vela's COP1 convention.
    NpzRegionMismatch {
        /// The array.
        array: &'static str,
        /// The region found.
        found: i64,
        /// The region expected.
        expected: u32,
    },
    /// `scratch_fast_region` is the scratch's own region (1), but its size is not the scratch's:
    /// not the Python core's convention for a fast scratch it does not spill to.
    NpzScratchFastSizeMismatch {
        /// `scratch_fast_size`.
        size: u64,
        /// `scratch_size`.
        scratch: u64,
    },
    /// The per-IO arrays of the `.npz` disagree on the number of inputs (or outputs).
    NpzIoCountMismatch {
        /// The array.
        array: &'static str,
        /// Its length.
        len: u64,
        /// The length of `input_offset` / `output_offset`.
        expected: u64,
    },
    /// The model has variable (stateful) tensors.
    NpzVariableTensors {
        /// How many.
        count: u64,
    },
}

impl fmt::Display for VelaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::UnknownFormat { magic } => write!(
                f,
                "Vela output: the file starts with {magic:#010x}; expected Vela's optimised .tflite \
                 (file identifier \"TFL3\" at bytes 4..8) or its raw .npz (a zip, from \
                 `--output-format raw`)"
            ),
            Self::TfliteMalformed { problem, position } => write!(
                f,
                "TFLite flatbuffer: {problem} (byte {position}); the file is truncated or corrupt: \
                 use the *_vela.tflite exactly as Vela wrote it"
            ),
            Self::TfliteSubgraphCount { count } => write!(
                f,
                "TFLite model: {count} subgraphs, expected exactly 1; control flow (WHILE, IF) runs \
                 on the CPU: remove it from the model before compiling with Vela"
            ),
            Self::TfliteIndexOutOfRange { what, index, len } => write!(
                f,
                "TFLite model: {what} index {index} is out of range (there are {len}); the file is \
                 corrupt"
            ),
            Self::NoEthosUOperator { operators } => write!(
                f,
                "TFLite model: no ethos-u operator among its {operators} operators: this is not \
                 Vela output; compile it with `vela --accelerator-config ethos-u55-256 MODEL.tflite` \
                 and pack the *_vela.tflite"
            ),
            Self::CpuOperator { op, code } => {
                if op.is_empty() {
                    write!(f, "TFLite model: builtin operator {code}")?;
                } else {
                    write!(f, "TFLite model: operator {op}")?;
                }
                write!(
                    f,
                    " was left on the CPU by Vela, and a pack runs only the NPU part; change the model \
                     so that every operator is supported by the Ethos-U (int8/int16 quantised, see \
                     Vela's SUPPORTED_OPS.md and its per-operator warnings) and recompile"
                )
            }
            #[cfg(feature = "std")]
            Self::CpuCustomOperator { name } => write!(
                f,
                "TFLite model: custom operator \"{name}\" was left on the CPU by Vela, and a pack runs \
                 only the NPU part; remove it from the model (do its work in application code) and \
                 recompile"
            ),
            Self::MultipleEthosU { count } => write!(
                f,
                "TFLite model: {count} ethos-u operators, expected exactly 1; Vela splits the network \
                 where operators run on the CPU: make every operator NPU-supported and recompile"
            ),
            Self::EthosUInputs { count } => write!(
                f,
                "ethos-u operator: {count} inputs, expected at least 4 (payload, read_only weights, \
                 scratch, scratch_fast); recompile without `--separate-io-regions`"
            ),
            Self::TfliteConstantMissing { input } => write!(
                f,
                "ethos-u operator input {input} ({}) has no data in the file; use the *_vela.tflite \
                 exactly as Vela wrote it",
                if input == 0 { "driver payload" } else { "read_only weights" }
            ),
            Self::TfliteExternalBuffer { input, offset } => write!(
                f,
                "ethos-u operator input {input}: its data is stored outside the flatbuffer (offset \
                 {offset}), a layout for models over 2 GB that no microcontroller pack can hold"
            ),
            Self::TfliteConstantSizeMismatch {
                input,
                data_bytes,
                tensor_bytes,
            } => write!(
                f,
                "ethos-u operator input {input}: {data_bytes} bytes of data but its tensor describes \
                 {tensor_bytes}; the file is corrupt"
            ),
            Self::IoMismatch {
                kind,
                position,
                operator_tensor,
                model_tensor,
            } => write!(
                f,
                "ethos-u operator: its {kind}s are not the model's (at position {position} it has \
                 tensor {operator_tensor}, the model tensor {model_tensor}): the NPU part must take \
                 every one of the model's {kind}s, so an operator between them runs on the CPU: \
                 make every operator NPU-supported and recompile"
            ),
            Self::TfliteNoOfflineAllocation => f.write_str(
                "TFLite model: no OfflineMemoryAllocation metadata, so the inputs' and outputs' \
                 offsets in the scratch arena are unknown; use Vela's *_vela.tflite (or its raw .npz) \
                 unmodified",
            ),
            Self::TfliteBadOfflineAllocation { problem, value } => write!(
                f,
                "OfflineMemoryAllocation metadata: {problem} ({value}); expected Vela's \
                 [version 0, subgraphs 1, tensor count, offset per tensor]"
            ),
            Self::IoNotInArena { kind, index } => write!(
                f,
                "{kind} {index}: OfflineMemoryAllocation gives it no offset in the scratch arena (-1); \
                 recompile without `--separate-io-regions`"
            ),
            Self::IoRankTooLarge { kind, index, rank } => write!(
                f,
                "{kind} {index}: rank {rank}, more than the {} dimensions an IO binding holds; \
                 reshape it in the model",
                crate::io_bindings::MAX_RANK
            ),
            Self::IoNegativeDim { kind, index, dim } => write!(
                f,
                "{kind} {index}: dimension {dim} is dynamic; give the model fixed input shapes \
                 before compiling"
            ),
            Self::IoUnsupportedDtype {
                kind,
                index,
                tflite_type,
            } => write!(
                f,
                "{kind} {index}: TFLite element type {tflite_type} cannot be bound (supported: \
                 int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, bool)"
            ),
            Self::IoBadElemSize {
                kind,
                index,
                elem_size,
            } => write!(
                f,
                "{kind} {index}: elem_size {elem_size} in the raw output, expected 1, 2, 4 or 8"
            ),
            Self::IoTooLarge { kind, index, bytes } => write!(
                f,
                "{kind} {index}: {bytes} bytes, more than NPU1's u32 sizes can describe"
            ),
            Self::PerChannelIo {
                kind,
                index,
                channels,
            } => write!(
                f,
                "{kind} {index}: quantised per channel ({channels} scales); IO bindings carry one \
                 scale and zero point: quantise model inputs and outputs per tensor"
            ),
            Self::IoQuantisationMismatch {
                kind,
                index,
                scales,
                zero_points,
            } => write!(
                f,
                "{kind} {index}: {scales} quantisation scales but {zero_points} zero points; the \
                 model's quantisation parameters are corrupt"
            ),
            Self::IoZeroPointRange {
                kind,
                index,
                zero_point,
            } => write!(
                f,
                "{kind} {index}: zero point {zero_point} does not fit 32 bits; the model's \
                 quantisation parameters are corrupt"
            ),
            Self::IoBadRegion {
                kind,
                index,
                region,
            } => write!(
                f,
                "{kind} {index}: in region {region}, but a COP1 stream keeps inputs and outputs in \
                 scratch (1) or scratch_fast (2); recompile without `--separate-io-regions`"
            ),
            Self::IoOutsideRegion {
                kind,
                index,
                region,
                offset,
                bytes,
                region_size,
            } => write!(
                f,
                "{kind} {index}: [{offset}, {}) runs past region {region}'s {region_size} bytes; the \
                 Vela output is inconsistent",
                offset.saturating_add(bytes)
            ),
            Self::RegionTooLarge { region, bytes } => write!(
                f,
                "region {region}: {bytes} bytes, more than NPU1's u32 sizes can describe"
            ),
            Self::NotU55 { config } => {
                f.write_str("driver payload: compiled for ")?;
                write_target(f, config)?;
                write!(
                    f,
                    " (config word {config:#010x}), but an RA8P1's NPU is an Ethos-U55 and cannot \
                     run it; recompile with `--accelerator-config ethos-u55-{{32,64,128,256}}`"
                )
            }
            Self::NpzMalformed { problem } => write!(
                f,
                "Vela raw output (.npz): {problem}; use the *_vela.npz exactly as Vela wrote it"
            ),
            Self::NpzMissingArray { array } => write!(
                f,
                "Vela raw output (.npz): no array `{array}`, which the command stream or its regions \
                 need; this is not Vela's raw output (`vela --output-format raw`, Vela 4.0 or later)"
            ),
            Self::NpzCompressedArray { array } => write!(
                f,
                "Vela raw output (.npz): array `{array}` is compressed; Vela writes stored entries \
                 (np.savez): repack without compression or use Vela's file"
            ),
            Self::NpzMemberTooLarge {
                array,
                claimed,
                limit,
            } => write!(
                f,
                "Vela raw output (.npz): member `{array}.npy` claims {claimed} bytes, more than \
                 the {limit} it may hold; use the *_vela.npz exactly as Vela wrote it"
            ),
            Self::NpzMemberSizeMismatch {
                array,
                claimed,
                stored,
            } => write!(
                f,
                "Vela raw output (.npz): member `{array}.npy` claims {claimed} bytes but {stored} \
                 are stored; use the *_vela.npz exactly as Vela wrote it"
            ),
            Self::NpzBadArray { array, problem } => write!(
                f,
                "Vela raw output (.npz): array `{array}`: {problem}"
            ),
            Self::NpzRegionMismatch {
                array,
                found,
                expected,
            } => write!(
                f,
                "Vela raw output (.npz): `{array}` is {found}, but a COP1 stream uses region \
                 {expected} for it; recompile without `--separate-io-regions` or custom region maps"
            ),
            Self::NpzScratchFastSizeMismatch { size, scratch } => write!(
                f,
                "Vela raw output (.npz): `scratch_fast_region` is 1, the scratch's own region (Vela's \
                 Python core, not spilling), but `scratch_fast_size` is {size}, not the scratch's \
                 {scratch}; use the *_vela.npz exactly as Vela wrote it"
            ),
            Self::NpzIoCountMismatch {
                array,
                len,
                expected,
            } => write!(
                f,
                "Vela raw output (.npz): `{array}` has {len} entries but there are {expected} \
                 tensors of its kind"
            ),
            Self::NpzVariableTensors { count } => write!(
                f,
                "Vela raw output (.npz): {count} variable (stateful) tensors, whose state a pack \
                 cannot carry between inferences; remove them from the model"
            ),
        }
    }
}

impl core::error::Error for VelaError {}

/// The accelerator a COP1 config word names, as Vela spells it in `--accelerator-config`
/// (`Ethos-U65-256`): the product in bits 31:28 (0 U55, 1 U65, 2 U85), MACs per cycle as the log2
/// in bits 3:0.
fn write_target(f: &mut fmt::Formatter<'_>, config: u32) -> fmt::Result {
    let macs = 1u32.checked_shl(config & 0xF).unwrap_or(0);
    match config >> 28 {
        0 => write!(f, "an Ethos-U55-{macs} configuration Vela does not write"),
        1 => write!(f, "Ethos-U65-{macs}"),
        2 => write!(f, "Ethos-U85-{macs}"),
        product => write!(f, "an accelerator of unknown product {product}"),
    }
}
