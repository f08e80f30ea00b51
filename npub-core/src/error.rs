//! The crate's one error type.
//!
//! Every input npub-core rejects has its own variant, and its `Display` names the structure, the field
//! and the numbers involved, so that an operator reading a server's 422 or a device's status report
//! knows exactly what was wrong and where.
//!
//! The type is `Copy` and `no_std`: a device reports it without allocating.
use core::fmt;

use crate::manifest::{KeyId, Sha256Prefix};

/// Everything npub-core can reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    // ----- NPU1 container (format/) -----------------------------------------------------------
    /// Check 1: fewer bytes than the 32-byte header.
    TooShort {
        /// Bytes available.
        len: u64,
    },
    /// Check 2: word 0 is not `0x3155504E`.
    BadMagic {
        /// The word found.
        found: u32,
    },
    /// Check 3: word 1 is not 1. Unknown revisions are never best-effort parsed.
    UnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// Check 4: `total_bytes` disagrees with the real length of the buffer (or, streaming, with the
    /// length the caller expects).
    TotalBytesMismatch {
        /// Word 2 as stored.
        total_bytes: u32,
        /// The real length.
        actual: u64,
    },
    /// Check 5: the region table `[32, 32 + 16 × region_count)` runs past `total_bytes`.
    RegionTableOutOfBounds {
        /// Word 3 as stored.
        region_count: u32,
        /// `32 + 16 × region_count`, computed without wrapping.
        table_end: u64,
        /// Word 2.
        total_bytes: u32,
    },
    /// Check 6: `cmd_bytes` is 0: the NPU would be pointed at an empty stream.
    EmptyCommandStream,
    /// Check 7: `[cmd_offset, cmd_offset + cmd_bytes)` runs past `total_bytes`.
    CommandStreamOutOfBounds {
        /// Word 4.
        cmd_offset: u32,
        /// Word 5.
        cmd_bytes: u32,
        /// Word 2.
        total_bytes: u32,
    },
    /// Check 8: a descriptor sets flag bits version 1 does not define.
    UnknownRegionFlags {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// The flags word.
        flags: u32,
    },
    /// Check 8: a BAKED descriptor's `[data_offset, data_offset + size)` runs past `total_bytes`.
    BakedRegionOutOfBounds {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// Word 3 of the descriptor.
        data_offset: u32,
        /// Word 2 of the descriptor.
        size: u32,
        /// Header word 2.
        total_bytes: u32,
    },
    /// Check 9: the payload's FNV-1a differs from the header's `checksum` (bit rot, a torn write).
    ChecksumMismatch {
        /// Header word 7.
        stored: u32,
        /// FNV-1a 32 of bytes `32..total_bytes`.
        computed: u32,
    },
    /// Check 10 (bind): more regions than the Ethos-U55 has base pointers.
    TooManyRegions {
        /// `region_count`.
        region_count: u32,
        /// Base pointers available ([`crate::format::MAX_BASE_POINTERS`]).
        max: u32,
    },
    /// Check 11 (bind): a RUNTIME region does not fit what remains of the arena after alignment.
    ArenaTooSmall {
        /// Descriptor index (BASEP slot).
        region: u32,
        /// The region's size.
        size: u32,
        /// Where in the arena the region would start, after 16-byte alignment of its real address.
        offset: u64,
        /// The arena's length.
        arena_len: u64,
    },
    /// Streaming: more bytes arrived than the blob's expected length.
    StreamOverrun {
        /// The length the validator was told to expect.
        expected: u32,
    },
    /// Building: the blob would be larger than a `u32` can describe.
    PackTooLarge {
        /// The length it would have had.
        bytes: u64,
    },

    // ----- Ethos-U55 command stream (cmdstream/) ------------------------------------------------
    /// The stream is longer than 32-bit offsets can address (NPU1's `cmd_bytes` is a `u32`).
    CmdStreamTooLong {
        /// Bytes given.
        len: u64,
    },
    /// The stream is not a whole number of 32-bit words.
    CmdNotWordAligned {
        /// Bytes given.
        len: u64,
    },
    /// A command word sets must-be-zero bits 13:10.
    CmdMustBeZero {
        /// Byte offset of the command.
        offset: u32,
        /// The word.
        word: u32,
    },
    /// A command's payload size (bits 15:14) is neither 0 (cmd0) nor 1 (cmd1).
    CmdPayloadSize {
        /// Byte offset of the command.
        offset: u32,
        /// The word.
        word: u32,
        /// The payload size field.
        size: u8,
    },
    /// An opcode the Ethos-U55 does not define in its space.
    CmdUnknownOpcode {
        /// Byte offset of the command.
        offset: u32,
        /// Bits 9:0.
        opcode: u16,
        /// True for the cmd1 space (payload size 1).
        cmd1: bool,
    },
    /// A cmd1's param (address bits 47:32) is not 0 on the 32-bit Ethos-U55 (for a stride: neither 0
    /// nor the sign extension of a negative value).
    CmdAddressHigh {
        /// Byte offset of the command.
        offset: u32,
        /// The register it writes.
        reg: crate::cmdstream::Reg,
        /// Bits 31:16.
        param: u16,
        /// The data word.
        data: u32,
    },
    /// The stream ends between a cmd1 and its data word.
    CmdTruncated {
        /// Byte offset of the command.
        offset: u32,
        /// The register it would write.
        reg: crate::cmdstream::Reg,
    },
    /// The stream ends without `NPU_OP_STOP` (cut short, or not a whole stream).
    CmdNoStop {
        /// Bytes given.
        len: u64,
    },
    /// Bytes follow `NPU_OP_STOP`; the NPU would never run them, so the stream is not what it seems.
    CmdDataAfterStop {
        /// Byte offset of the STOP.
        offset: u32,
        /// Bytes after it.
        trailing: u32,
    },
    /// An operation reads a register the stream never set: its value would be whatever the previous
    /// job left behind.
    CmdUnsetRegister {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The register.
        reg: crate::cmdstream::Reg,
    },
    /// A register an operation reads holds a value the Ethos-U55 does not define, or this checker
    /// does not model (2-D/3-D DMA).
    CmdInvalidRegister {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The register.
        reg: crate::cmdstream::Reg,
        /// Its value.
        value: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An operation's param (pooling or elementwise mode, DMA channel and mode) is not one the
    /// Ethos-U55 defines.
    CmdBadOperationParam {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// Bits 31:16.
        param: u16,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An operand lies in a region the pack has no descriptor for.
    CmdRegionMissing {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The operand.
        operand: crate::cmdstream::Operand,
        /// The region (BASEP index) it names.
        region: u8,
        /// Descriptors the pack has.
        regions: u32,
    },
    /// An operand's byte range does not lie inside its region (or SHRAM).
    CmdOutOfRange {
        /// Byte offset of the operation.
        offset: u32,
        /// The operation.
        op: crate::cmdstream::Operation,
        /// The operand.
        operand: crate::cmdstream::Operand,
        /// First byte (negative with negative strides).
        start: i64,
        /// One past the last byte.
        end: i64,
        /// The region or SHRAM.
        target: crate::cmdstream::Target,
        /// Its size in bytes.
        size: u32,
    },

    // ----- signed manifests and keys (manifest/, keys/) ------------------------------------------
    /// A manifest is not exactly [`crate::manifest::MANIFEST_BYTES`] long (truncated, or with
    /// trailing data a signature would not cover).
    ManifestWrongLength {
        /// Bytes given.
        len: u64,
    },
    /// Manifest bytes 0..4 are not "NPM1".
    ManifestBadMagic {
        /// The little-endian word found.
        found: u32,
    },
    /// Manifest `version` is not [`crate::manifest::MANIFEST_VERSION`].
    ManifestUnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// The manifest's `key_id` names no key in the device's keyring (arbitrary installation).
    ManifestUnknownKey {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// The manifest is signed by a key the keyring has revoked (key compromise).
    ManifestKeyRevoked {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// The ed25519 signature does not verify under the named key (forged, garbled or unsigned).
    ManifestBadSignature {
        /// The `key_id` field.
        key_id: KeyId,
    },
    /// A text field (`model_name`, `model_version`) is empty.
    ManifestTextEmpty {
        /// Which field.
        field: &'static str,
    },
    /// A text field does not fit its fixed width (signing side).
    ManifestTextTooLong {
        /// Which field.
        field: &'static str,
        /// Its UTF-8 length.
        len: u32,
        /// The field's width.
        max: u32,
    },
    /// A text field is not valid UTF-8.
    ManifestTextNotUtf8 {
        /// Which field.
        field: &'static str,
        /// Offset of the first bad byte within the field.
        offset: u32,
    },
    /// A text field holds a control character (it would be printed in logs and terminals).
    ManifestTextControlChar {
        /// Which field.
        field: &'static str,
        /// Offset of the character within the field.
        offset: u32,
    },
    /// A text field has a non-zero byte after its zero padding began.
    ManifestTextBadPadding {
        /// Which field.
        field: &'static str,
        /// Offset of the non-zero byte within the field.
        offset: u32,
    },
    /// `sequence` is 0; deployments count from 1, so that a fresh device (last accepted 0) takes
    /// the first one.
    ManifestSequenceZero,
    /// `hw_class` is 0, which is reserved and never names hardware (there is no "any").
    ManifestHardwareClassZero,
    /// `accel` is 0 (unspecified): a manifest must say which configuration the stream needs.
    ManifestAccelUnspecified,
    /// `pack_len` is shorter than an NPU1 header.
    ManifestPackTooShort {
        /// The `pack_len` field.
        len: u32,
    },
    /// `expires_at` is set but not after `issued_at`.
    ManifestBadExpiry {
        /// The `issued_at` field.
        issued_at: u64,
        /// The `expires_at` field.
        expires_at: u64,
    },
    /// `sequence` is not strictly above the last one the device accepted (rollback or replay).
    ManifestReplayed {
        /// The manifest's `sequence`.
        sequence: u64,
        /// The last sequence the device accepted.
        last: u64,
    },
    /// The manifest is for another hardware class.
    ManifestWrongHardware {
        /// The manifest's `hw_class`.
        manifest: u32,
        /// The device's hardware class.
        device: u32,
    },
    /// The manifest is for another accelerator configuration.
    ManifestWrongAccel {
        /// The manifest's `accel` word.
        manifest: u32,
        /// The device's accelerator word.
        device: u32,
    },
    /// The pack the manifest describes does not fit the device's slot.
    ManifestPackTooLarge {
        /// The `pack_len` field.
        len: u32,
        /// The slot's size in bytes.
        slot: u32,
    },
    /// The manifest has expired (freeze attack: an old manifest served past its lifetime).
    ManifestExpired {
        /// The `expires_at` field (unix seconds).
        expires_at: u64,
        /// The device's time (unix seconds).
        now: u64,
    },
    /// More pack bytes arrived than the manifest states (endless data); nothing past the stated
    /// length is hashed or kept.
    PackLongerThanManifest {
        /// The manifest's `pack_len`.
        expected: u32,
        /// Bytes received, counting the chunk that overran.
        received: u64,
    },
    /// The pack's own NPU1 header says it is `pack_total_bytes` long, but the manifest describes a
    /// pack of `manifest_pack_len` bytes: the manifest is for another pack (mix and match).
    PackLengthDiffersFromManifest {
        /// Word 2 (`total_bytes`) of the pack's header.
        pack_total_bytes: u32,
        /// The manifest's `pack_len`.
        manifest_pack_len: u32,
    },
    /// The pack ended before the manifest's length.
    PackShorterThanManifest {
        /// The manifest's `pack_len`.
        expected: u32,
        /// Bytes received.
        received: u64,
    },
    /// The pack's SHA-256 differs from the manifest's (wrong software, mix-and-match).
    PackHashMismatch {
        /// First bytes of the manifest's `pack_sha256`.
        manifest: Sha256Prefix,
        /// First bytes of the SHA-256 of the bytes received.
        computed: Sha256Prefix,
    },
    /// The pack's NPU1 header checksum (word 7) differs from the manifest's `pack_checksum`.
    PackChecksumMismatch {
        /// The manifest's `pack_checksum`.
        manifest: u32,
        /// Word 7 of the pack's header.
        pack: u32,
    },
    /// The IO bindings delivered with a pack are not the ones its manifest's `io_digest` names
    /// (all zeros on either side: no bindings).
    ManifestIoDigestMismatch {
        /// First bytes of the manifest's `io_digest`.
        manifest: Sha256Prefix,
        /// First bytes of the digest of the bindings given (zeros: none given).
        computed: Sha256Prefix,
    },
    /// A public key is not a valid compressed Edwards point.
    KeyInvalid {
        /// Its key id.
        key_id: KeyId,
    },
    /// A public key has small order: any signature "verifies" under it.
    KeyWeak {
        /// Its key id.
        key_id: KeyId,
    },
    /// The keyring has no free entry (revoked keys keep theirs, so that they stay revoked).
    KeyringFull {
        /// The keyring's capacity.
        capacity: u32,
    },
    /// The keyring already holds a key with this id.
    KeyringDuplicate {
        /// The key id.
        key_id: KeyId,
    },
    /// The keyring holds no key with this id (a revocation names an unknown key).
    KeyringUnknownKey {
        /// The key id.
        key_id: KeyId,
    },
    /// The key was revoked: revocation is permanent, it can be neither re-added nor re-revoked.
    KeyringKeyRevoked {
        /// The key id.
        key_id: KeyId,
    },
    /// A keyring-update record is not exactly [`crate::manifest::ROTATION_BYTES`] long.
    RotationWrongLength {
        /// Bytes given.
        len: u64,
    },
    /// Keyring-update bytes 0..4 are not "NPK1".
    RotationBadMagic {
        /// The little-endian word found.
        found: u32,
    },
    /// Keyring-update `version` is not [`crate::manifest::ROTATION_VERSION`].
    RotationUnsupportedVersion {
        /// The word found.
        found: u32,
    },
    /// The keyring update is signed by a key that is not one of the device's root keys.
    RotationUnknownRootKey {
        /// The record's `root_key_id`.
        key_id: KeyId,
    },
    /// The keyring update's signature does not verify under the named root key.
    RotationBadSignature {
        /// The record's `root_key_id`.
        key_id: KeyId,
    },
    /// The keyring update's `sequence` is not above the last one applied (replayed update).
    RotationReplayed {
        /// The record's `sequence`.
        sequence: u64,
        /// The keyring's last applied update sequence.
        last: u64,
    },
    /// The keyring update's `action` is not 1 (add), 2 (revoke) or 3 (replace).
    RotationBadAction {
        /// The word found.
        action: u32,
    },
    /// A keyring-update field the action does not use is not all zeros.
    RotationUnusedFieldNotZero {
        /// Which field.
        field: &'static str,
    },
    /// A private key file is readable or writable by group or others.
    KeyFileTooOpen {
        /// Its permission bits.
        mode: u32,
    },
    /// A key file is not in the expected format.
    KeyFileBadFormat {
        /// "secret" or "public".
        kind: &'static str,
        /// What is wrong.
        problem: &'static str,
    },

    // ----- Vela import (vela/, std) --------------------------------------------------------------
    /// The file is neither a TFLite flatbuffer nor a zip archive.
    VelaUnknownFormat {
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
    VelaNoEthosUOperator {
        /// Operators in the model.
        operators: u32,
    },
    /// A builtin operator was left on the CPU.
    VelaCpuOperator {
        /// Its name ("" when the code is newer than this table).
        op: &'static str,
        /// Its `BuiltinOperator` code.
        code: i32,
    },
    /// A custom operator other than `ethos-u` was left on the CPU. Host-only: its 48-byte name would
    /// otherwise make every `Result` on the device that much larger.
    #[cfg(feature = "std")]
    VelaCpuCustomOperator {
        /// Its custom code (cut to 48 bytes).
        name: crate::io_bindings::Name,
    },
    /// More than one `ethos-u` operator.
    VelaMultipleEthosU {
        /// How many.
        count: u32,
    },
    /// The `ethos-u` operator has fewer than the four fixed inputs (payload, weights, scratch,
    /// scratch_fast).
    VelaEthosUInputs {
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
    VelaIoMismatch {
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
    VelaIoNotInArena {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
    },
    /// An IO tensor has more dimensions than a binding stores.
    VelaIoRankTooLarge {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Its rank.
        rank: u64,
    },
    /// An IO tensor's shape has a negative (dynamic) dimension.
    VelaIoNegativeDim {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The dimension.
        dim: i64,
    },
    /// An IO tensor's element type cannot be bound.
    VelaIoUnsupportedDtype {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// TFLite `TensorType` code.
        tflite_type: i8,
    },
    /// An IO tensor's raw-output element size is not 1, 2, 4 or 8.
    VelaIoBadElemSize {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// `elem_size` as stored.
        elem_size: i64,
    },
    /// An IO tensor is larger than a `u32` can say.
    VelaIoTooLarge {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Its size (saturated).
        bytes: u64,
    },
    /// An IO tensor is quantised per channel.
    VelaPerChannelIo {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// Number of scales.
        channels: u64,
    },
    /// An IO tensor has a different number of scales and zero points.
    VelaIoQuantisationMismatch {
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
    VelaIoZeroPointRange {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The zero point.
        zero_point: i64,
    },
    /// An IO tensor sits in a region other than scratch (1) or scratch_fast (2).
    VelaIoBadRegion {
        /// Input or output.
        kind: crate::io_bindings::IoKind,
        /// Its index.
        index: u32,
        /// The region.
        region: i64,
    },
    /// An IO tensor's bytes run past the end of its region.
    VelaIoOutsideRegion {
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
    VelaRegionTooLarge {
        /// Region index (BASEP slot).
        region: u32,
        /// Its size.
        bytes: u64,
    },
    /// The driver payload is shorter than its 16-byte fixed header.
    Cop1TooShort {
        /// Payload bytes.
        len: u64,
    },
    /// The driver payload is not a whole number of 32-bit words.
    Cop1NotWords {
        /// Payload bytes.
        len: u64,
    },
    /// The driver payload does not start with "COP1".
    Cop1BadMagic {
        /// The first word.
        found: u32,
    },
    /// A COP2 payload (Regor's `--cop-format COP2`, which `--separate-io-regions` forces).
    Cop2Payload,
    /// The payload was compiled for an accelerator other than an Ethos-U55 (an Ethos-U65 or U85):
    /// its command stream is not one an RA8P1's NPU can run.
    VelaNotU55 {
        /// The COP1 config word (product in bits 31:28, log2 MACs per cycle in bits 3:0).
        config: u32,
    },
    /// Word 1 of the payload is not the optimizer-config tag (0x01).
    Cop1MissingConfig {
        /// The word found.
        tag: u32,
    },
    /// A driver action other than NOP before the command stream.
    Cop1UnsupportedTag {
        /// Byte offset in the payload.
        offset: u32,
        /// The tag word.
        tag: u32,
    },
    /// The payload ends without a command-stream tag.
    Cop1NoCommandStream {
        /// Payload bytes.
        len: u64,
    },
    /// The command stream's length runs past the payload.
    Cop1StreamPastPayload {
        /// Where the stream starts in the payload.
        offset: u32,
        /// Its length in words, from the tag.
        words: u32,
        /// Payload bytes.
        payload_bytes: u64,
    },
    /// Bytes follow the command stream.
    Cop1TrailingBytes {
        /// Where the stream ends.
        end: u64,
        /// Payload bytes.
        payload_bytes: u64,
    },
    /// The command-stream tag says 0 words.
    Cop1EmptyCommandStream,
    /// A config word no Vela writes.
    Cop1BadConfig {
        /// The config word.
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

    // IO bindings (io_bindings.rs; no_std): the canonical encoding and its JSON form.
    /// Shorter than the 16-byte header.
    IoBindingsTooShort {
        /// Bytes available.
        len: u64,
    },
    /// Not "NPIO".
    IoBindingsBadMagic {
        /// The first word.
        found: u32,
    },
    /// A version this reader does not know.
    IoBindingsUnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A record size other than 96.
    IoBindingsBadRecordSize {
        /// The size found.
        found: u32,
    },
    /// More bindings than [`crate::io_bindings::MAX_BINDINGS`].
    IoBindingsTooMany {
        /// The count.
        count: u32,
        /// The limit.
        max: u32,
    },
    /// The length is not header + count × 96.
    IoBindingsLengthMismatch {
        /// The count in the header.
        count: u32,
        /// The length it implies.
        expected: u64,
        /// The real length.
        actual: u64,
    },
    /// A `kind` byte other than 0 or 1.
    IoBindingBadKind {
        /// Record number.
        record: u32,
        /// The byte.
        kind: u8,
    },
    /// An unknown dtype code.
    IoBindingUnknownDtype {
        /// Record number.
        record: u32,
        /// The code.
        code: u8,
    },
    /// Rank above [`crate::io_bindings::MAX_RANK`].
    IoBindingRankTooLarge {
        /// Record number.
        record: u32,
        /// The rank.
        rank: u8,
        /// The limit.
        max: u8,
    },
    /// A region the Ethos-U55 has no base pointer for.
    IoBindingRegionOutOfRange {
        /// Record number.
        record: u32,
        /// The region.
        region: u8,
    },
    /// Padding that is not zero, or a name that is not clean UTF-8.
    IoBindingNotCanonical {
        /// Record number.
        record: u32,
        /// Which field.
        field: &'static str,
    },
    /// `bytes` disagrees with shape × element size.
    IoBindingBytesMismatch {
        /// Record number.
        record: u32,
        /// `bytes` as stored.
        bytes: u32,
        /// What shape and dtype give (saturated).
        expected: u64,
    },
    /// A scale that is NaN, infinite, negative or negative zero.
    IoBindingBadScale {
        /// Record number.
        record: u32,
        /// The `f32` bits.
        bits: u32,
    },
    /// A zero point without a scale.
    IoBindingZeroPointWithoutScale {
        /// Record number.
        record: u32,
        /// The zero point.
        zero_point: i32,
    },
    /// Records not in the order inputs 0.., outputs 0...
    IoBindingOutOfOrder {
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
    IoBindingRegionMissing {
        /// Record number.
        record: u32,
        /// The region.
        region: u8,
        /// The pack's region count.
        region_count: u32,
    },
    /// A binding runs past the end of its region in the pack.
    IoBindingOutsideRegion {
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
    IoBindingsJsonSyntax {
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: u64,
    },
    /// A JSON field has a value the encoding cannot hold.
    IoBindingsJsonField {
        /// Binding number (`u32::MAX` for the document's own fields).
        binding: u32,
        /// The field.
        field: &'static str,
    },
    /// The JSON's `sha256` is not the digest of the bindings it lists.
    IoBindingsJsonDigestMismatch,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            // ----- NPU1 container ----------------------------------------------------------------
            Error::TooShort { len } => write!(
                f,
                "NPU1 header: the buffer is {len} bytes, shorter than the 32-byte header"
            ),
            Error::BadMagic { found } => write!(
                f,
                "NPU1 header: magic is {found:#010x}, expected 0x3155504e (\"NPU1\"): not an NPU1 pack"
            ),
            Error::UnsupportedVersion { found } => write!(
                f,
                "NPU1 header: version is {found}, this loader reads only version 1"
            ),
            Error::TotalBytesMismatch {
                total_bytes,
                actual,
            } => write!(
                f,
                "NPU1 header: total_bytes is {total_bytes} but the pack is {actual} bytes long \
                 (truncated or padded?)"
            ),
            Error::RegionTableOutOfBounds {
                region_count,
                table_end,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: region_count {region_count} needs a region table [32, {table_end}), \
                 which runs past total_bytes {total_bytes}"
            ),
            Error::EmptyCommandStream => {
                f.write_str("NPU1 header: cmd_bytes is 0; the command stream must not be empty")
            }
            Error::CommandStreamOutOfBounds {
                cmd_offset,
                cmd_bytes,
                total_bytes,
            } => write!(
                f,
                "NPU1 header: command stream [{cmd_offset}, {}) (cmd_offset {cmd_offset} + cmd_bytes \
                 {cmd_bytes}) runs past total_bytes {total_bytes}",
                u64::from(cmd_offset) + u64::from(cmd_bytes)
            ),
            Error::UnknownRegionFlags { region, flags } => write!(
                f,
                "region {region}: flags {flags:#010x} set bits other than BAKED (0x1), which \
                 version 1 does not define"
            ),
            Error::BakedRegionOutOfBounds {
                region,
                data_offset,
                size,
                total_bytes,
            } => write!(
                f,
                "region {region}: baked data [{data_offset}, {}) (data_offset {data_offset} + size \
                 {size}) runs past total_bytes {total_bytes}",
                u64::from(data_offset) + u64::from(size)
            ),
            Error::ChecksumMismatch { stored, computed } => write!(
                f,
                "NPU1 payload: FNV-1a of bytes 32.. is {computed:#010x} but the header's checksum is \
                 {stored:#010x} (corrupted in transit or in flash)"
            ),
            Error::TooManyRegions { region_count, max } => write!(
                f,
                "NPU1 region table: {region_count} regions, but the Ethos-U55 has only {max} base \
                 pointers (BASEP0..BASEP{})",
                max.saturating_sub(1)
            ),
            Error::ArenaTooSmall {
                region,
                size,
                offset,
                arena_len,
            } => write!(
                f,
                "region {region}: runtime size {size} at arena offset {offset} (after 16-byte \
                 alignment) needs {} bytes, but the arena is {arena_len} bytes",
                offset + u64::from(size)
            ),
            Error::StreamOverrun { expected } => write!(
                f,
                "NPU1 stream: more bytes arrived than the expected {expected}"
            ),
            Error::PackTooLarge { bytes } => write!(
                f,
                "NPU1 builder: the pack would be {bytes} bytes, more than total_bytes (u32) can say"
            ),
            // ----- Ethos-U55 command stream ----------------------------------------------------------
            Error::CmdStreamTooLong { len } => write!(
                f,
                "command stream: {len} bytes, more than 32-bit offsets can address"
            ),
            Error::CmdNotWordAligned { len } => write!(
                f,
                "command stream: {len} bytes is not a whole number of 32-bit words ({} trailing \
                 bytes)",
                len % 4
            ),
            Error::CmdMustBeZero { offset, word } => write!(
                f,
                "command stream @{offset:#06x}: word {word:#010x} sets must-be-zero bits 13:10"
            ),
            Error::CmdPayloadSize { offset, word, size } => write!(
                f,
                "command stream @{offset:#06x}: word {word:#010x} has payload size {size}; \
                 Ethos-U55 commands have 0 (cmd0) or 1 (cmd1)"
            ),
            Error::CmdUnknownOpcode {
                offset,
                opcode,
                cmd1,
            } => write!(
                f,
                "command stream @{offset:#06x}: unknown {} opcode {opcode:#05x}",
                if cmd1 { "cmd1" } else { "cmd0" }
            ),
            Error::CmdAddressHigh {
                offset,
                reg,
                param,
                data,
            } => write!(
                f,
                "command stream @{offset:#06x} {reg}: address-high param {param:#06x} (data \
                 {data:#010x}) must be 0 on the 32-bit Ethos-U55"
            ),
            Error::CmdTruncated { offset, reg } => write!(
                f,
                "command stream @{offset:#06x} {reg}: the stream ends before this cmd1's data word"
            ),
            Error::CmdNoStop { len } => write!(
                f,
                "command stream: ends after {len} bytes without NPU_OP_STOP"
            ),
            Error::CmdDataAfterStop { offset, trailing } => write!(
                f,
                "command stream @{offset:#06x}: {trailing} bytes follow NPU_OP_STOP"
            ),
            Error::CmdUnsetRegister { offset, op, reg } => write!(
                f,
                "command stream @{offset:#06x} {op}: reads {reg}, which the stream never set \
                 (it would hold whatever the previous job left)"
            ),
            Error::CmdInvalidRegister {
                offset,
                op,
                reg,
                value,
                problem,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {reg} = {value:#x}: {problem}"
            ),
            Error::CmdBadOperationParam {
                offset,
                op,
                param,
                problem,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: param {param}: {problem}"
            ),
            Error::CmdRegionMissing {
                offset,
                op,
                operand,
                region,
                regions,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {operand} is in region {region}, which has no \
                 descriptor (the pack has {regions})"
            ),
            Error::CmdOutOfRange {
                offset,
                op,
                operand,
                start,
                end,
                target,
                size,
            } => write!(
                f,
                "command stream @{offset:#06x} {op}: {operand} [{start}, {end}) outside {target} \
                 ({size} bytes)"
            ),

            // ----- signed manifests and keys ---------------------------------------------------------
            Error::ManifestWrongLength { len } => write!(
                f,
                "manifest: {len} bytes, but a version-1 manifest is exactly {} bytes",
                crate::manifest::MANIFEST_BYTES
            ),
            Error::ManifestBadMagic { found } => write!(
                f,
                "manifest: magic is {found:#010x}, expected {:#010x} (\"NPM1\"): not an npub manifest",
                crate::manifest::MANIFEST_MAGIC
            ),
            Error::ManifestUnsupportedVersion { found } => write!(
                f,
                "manifest: version is {found}, this verifier reads only version {}",
                crate::manifest::MANIFEST_VERSION
            ),
            Error::ManifestUnknownKey { key_id } => write!(
                f,
                "manifest: key_id {key_id} is not in the keyring; refusing a manifest from an \
                 unknown signer"
            ),
            Error::ManifestKeyRevoked { key_id } => write!(
                f,
                "manifest: key_id {key_id} has been revoked; refusing its signature"
            ),
            Error::ManifestBadSignature { key_id } => write!(
                f,
                "manifest: the ed25519 signature does not verify under key {key_id} \
                 (forged, garbled or unsigned)"
            ),
            Error::ManifestTextEmpty { field } => write!(f, "manifest: {field} is empty"),
            Error::ManifestTextTooLong { field, len, max } => write!(
                f,
                "manifest: {field} is {len} bytes of UTF-8, more than the field's {max}"
            ),
            Error::ManifestTextNotUtf8 { field, offset } => write!(
                f,
                "manifest: {field} is not valid UTF-8 (bad byte at offset {offset} of the field)"
            ),
            Error::ManifestTextControlChar { field, offset } => write!(
                f,
                "manifest: {field} holds a control character at offset {offset} of the field"
            ),
            Error::ManifestTextBadPadding { field, offset } => write!(
                f,
                "manifest: {field} has a non-zero byte at offset {offset}, after its zero \
                 padding began"
            ),
            Error::ManifestSequenceZero => f.write_str(
                "manifest: sequence is 0; deployment sequences start at 1",
            ),
            Error::ManifestHardwareClassZero => f.write_str(
                "manifest: hw_class is 0, which is reserved and names no hardware",
            ),
            Error::ManifestAccelUnspecified => f.write_str(
                "manifest: accel is 0 (unspecified); a manifest must name the accelerator \
                 configuration its command stream was compiled for",
            ),
            Error::ManifestPackTooShort { len } => write!(
                f,
                "manifest: pack_len {len} is shorter than the 32-byte NPU1 header"
            ),
            Error::ManifestBadExpiry {
                issued_at,
                expires_at,
            } => write!(
                f,
                "manifest: expires_at {expires_at} is not after issued_at {issued_at}"
            ),
            Error::ManifestReplayed { sequence, last } => write!(
                f,
                "manifest: sequence {sequence} is not above the last accepted sequence {last} \
                 (replayed or rolled-back manifest)"
            ),
            Error::ManifestWrongHardware { manifest, device } => write!(
                f,
                "manifest: hw_class is {manifest} but this device's hardware class is {device}"
            ),
            Error::ManifestWrongAccel { manifest, device } => write!(
                f,
                "manifest: accel is {} (word {manifest}) but this device's NPU is {} (word {device})",
                crate::Accel::from_word(manifest),
                crate::Accel::from_word(device)
            ),
            Error::ManifestPackTooLarge { len, slot } => write!(
                f,
                "manifest: pack_len {len} is larger than the device's {slot}-byte slot"
            ),
            Error::ManifestExpired { expires_at, now } => write!(
                f,
                "manifest: expired at {expires_at} (unix seconds); the device's time is {now}"
            ),
            Error::PackLongerThanManifest { expected, received } => write!(
                f,
                "pack: {received} bytes arrived but the manifest's pack_len is {expected}; \
                 download aborted"
            ),
            Error::PackLengthDiffersFromManifest {
                pack_total_bytes,
                manifest_pack_len,
            } => write!(
                f,
                "pack: the pack is {pack_total_bytes} bytes (its NPU1 total_bytes), but the \
                 manifest describes a pack of {manifest_pack_len} bytes: this manifest is for \
                 another pack"
            ),
            Error::PackShorterThanManifest { expected, received } => write!(
                f,
                "pack: the stream ended after {received} bytes, but the manifest's pack_len is \
                 {expected}"
            ),
            Error::PackHashMismatch { manifest, computed } => write!(
                f,
                "pack: SHA-256 is {computed}… but the manifest's pack_sha256 is {manifest}… \
                 (not the pack this manifest was signed for)"
            ),
            Error::PackChecksumMismatch { manifest, pack } => write!(
                f,
                "pack: NPU1 header checksum (word 7) is {pack:#010x} but the manifest's \
                 pack_checksum is {manifest:#010x}"
            ),
            Error::ManifestIoDigestMismatch { manifest, computed } => write!(
                f,
                "manifest: io_digest is {manifest}… but the IO bindings given digest to \
                 {computed}… (0000… = none)"
            ),
            Error::KeyInvalid { key_id } => write!(
                f,
                "key {key_id}: the public key is not a valid ed25519 point"
            ),
            Error::KeyWeak { key_id } => write!(
                f,
                "key {key_id}: the public key has small order; signatures under it mean nothing"
            ),
            Error::KeyringFull { capacity } => write!(
                f,
                "keyring: all {capacity} entries are in use (revoked keys keep theirs)"
            ),
            Error::KeyringDuplicate { key_id } => {
                write!(f, "keyring: key {key_id} is already present")
            }
            Error::KeyringUnknownKey { key_id } => {
                write!(f, "keyring: no key {key_id} to revoke")
            }
            Error::KeyringKeyRevoked { key_id } => write!(
                f,
                "keyring: key {key_id} was revoked, and revocation is permanent"
            ),
            Error::RotationWrongLength { len } => write!(
                f,
                "keyring update: {len} bytes, but a version-1 record is exactly {} bytes",
                crate::manifest::ROTATION_BYTES
            ),
            Error::RotationBadMagic { found } => write!(
                f,
                "keyring update: magic is {found:#010x}, expected {:#010x} (\"NPK1\")",
                crate::manifest::ROTATION_MAGIC
            ),
            Error::RotationUnsupportedVersion { found } => write!(
                f,
                "keyring update: version is {found}, this verifier reads only version {}",
                crate::manifest::ROTATION_VERSION
            ),
            Error::RotationUnknownRootKey { key_id } => write!(
                f,
                "keyring update: root_key_id {key_id} is not one of this device's root keys"
            ),
            Error::RotationBadSignature { key_id } => write!(
                f,
                "keyring update: the ed25519 signature does not verify under root key {key_id}"
            ),
            Error::RotationReplayed { sequence, last } => write!(
                f,
                "keyring update: sequence {sequence} is not above the last applied update {last}"
            ),
            Error::RotationBadAction { action } => write!(
                f,
                "keyring update: action {action} is not 1 (add), 2 (revoke) or 3 (replace)"
            ),
            Error::RotationUnusedFieldNotZero { field } => write!(
                f,
                "keyring update: {field} must be all zeros for this action"
            ),
            Error::KeyFileTooOpen { mode } => write!(
                f,
                "private key file: mode {mode:04o} lets group or others access it; \
                 `chmod 600` it (and consider the key leaked)"
            ),
            Error::KeyFileBadFormat { kind, problem } => {
                write!(f, "{kind} key file: {problem}")
            }

            // ----- Vela import -----------------------------------------------------------------------
            Error::VelaUnknownFormat { magic } => write!(
                f,
                "Vela output: the file starts with {magic:#010x}; expected Vela's optimised .tflite \
                 (file identifier \"TFL3\" at bytes 4..8) or its raw .npz (a zip, from \
                 `--output-format raw`)"
            ),
            Error::TfliteMalformed { problem, position } => write!(
                f,
                "TFLite flatbuffer: {problem} (byte {position}); the file is truncated or corrupt: \
                 use the *_vela.tflite exactly as Vela wrote it"
            ),
            Error::TfliteSubgraphCount { count } => write!(
                f,
                "TFLite model: {count} subgraphs, expected exactly 1; control flow (WHILE, IF) runs \
                 on the CPU: remove it from the model before compiling with Vela"
            ),
            Error::TfliteIndexOutOfRange { what, index, len } => write!(
                f,
                "TFLite model: {what} index {index} is out of range (there are {len}); the file is \
                 corrupt"
            ),
            Error::VelaNoEthosUOperator { operators } => write!(
                f,
                "TFLite model: no ethos-u operator among its {operators} operators: this is not \
                 Vela output; compile it with `vela --accelerator-config ethos-u55-256 MODEL.tflite` \
                 and pack the *_vela.tflite"
            ),
            Error::VelaCpuOperator { op, code } => {
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
            Error::VelaCpuCustomOperator { name } => write!(
                f,
                "TFLite model: custom operator \"{name}\" was left on the CPU by Vela, and a pack runs \
                 only the NPU part; remove it from the model (do its work in application code) and \
                 recompile"
            ),
            Error::VelaMultipleEthosU { count } => write!(
                f,
                "TFLite model: {count} ethos-u operators, expected exactly 1; Vela splits the network \
                 where operators run on the CPU: make every operator NPU-supported and recompile"
            ),
            Error::VelaEthosUInputs { count } => write!(
                f,
                "ethos-u operator: {count} inputs, expected at least 4 (payload, read_only weights, \
                 scratch, scratch_fast); recompile without `--separate-io-regions`"
            ),
            Error::TfliteConstantMissing { input } => write!(
                f,
                "ethos-u operator input {input} ({}) has no data in the file; use the *_vela.tflite \
                 exactly as Vela wrote it",
                if input == 0 { "driver payload" } else { "read_only weights" }
            ),
            Error::TfliteExternalBuffer { input, offset } => write!(
                f,
                "ethos-u operator input {input}: its data is stored outside the flatbuffer (offset \
                 {offset}), a layout for models over 2 GB that no microcontroller pack can hold"
            ),
            Error::TfliteConstantSizeMismatch {
                input,
                data_bytes,
                tensor_bytes,
            } => write!(
                f,
                "ethos-u operator input {input}: {data_bytes} bytes of data but its tensor describes \
                 {tensor_bytes}; the file is corrupt"
            ),
            Error::VelaIoMismatch {
                kind,
                position,
                operator_tensor,
                model_tensor,
            } => write!(
                f,
                "ethos-u operator: its {kind} {position} is tensor {operator_tensor} but the model's is \
                 tensor {model_tensor}; the NPU part must take all of the model's {kind}s in order: \
                 make every operator NPU-supported and recompile"
            ),
            Error::TfliteNoOfflineAllocation => f.write_str(
                "TFLite model: no OfflineMemoryAllocation metadata, so the inputs' and outputs' \
                 offsets in the scratch arena are unknown; use Vela's *_vela.tflite (or its raw .npz) \
                 unmodified",
            ),
            Error::TfliteBadOfflineAllocation { problem, value } => write!(
                f,
                "OfflineMemoryAllocation metadata: {problem} ({value}); expected Vela's \
                 [version 0, subgraphs 1, tensor count, offset per tensor]"
            ),
            Error::VelaIoNotInArena { kind, index } => write!(
                f,
                "{kind} {index}: OfflineMemoryAllocation gives it no offset in the scratch arena (-1); \
                 recompile without `--separate-io-regions`"
            ),
            Error::VelaIoRankTooLarge { kind, index, rank } => write!(
                f,
                "{kind} {index}: rank {rank}, more than the {} dimensions an IO binding holds; \
                 reshape it in the model",
                crate::io_bindings::MAX_RANK
            ),
            Error::VelaIoNegativeDim { kind, index, dim } => write!(
                f,
                "{kind} {index}: dimension {dim} is dynamic; give the model fixed input shapes \
                 before compiling"
            ),
            Error::VelaIoUnsupportedDtype {
                kind,
                index,
                tflite_type,
            } => write!(
                f,
                "{kind} {index}: TFLite element type {tflite_type} cannot be bound (supported: \
                 int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, bool)"
            ),
            Error::VelaIoBadElemSize {
                kind,
                index,
                elem_size,
            } => write!(
                f,
                "{kind} {index}: elem_size {elem_size} in the raw output, expected 1, 2, 4 or 8"
            ),
            Error::VelaIoTooLarge { kind, index, bytes } => write!(
                f,
                "{kind} {index}: {bytes} bytes, more than NPU1's u32 sizes can describe"
            ),
            Error::VelaPerChannelIo {
                kind,
                index,
                channels,
            } => write!(
                f,
                "{kind} {index}: quantised per channel ({channels} scales); IO bindings carry one \
                 scale and zero point: quantise model inputs and outputs per tensor"
            ),
            Error::VelaIoQuantisationMismatch {
                kind,
                index,
                scales,
                zero_points,
            } => write!(
                f,
                "{kind} {index}: {scales} quantisation scales but {zero_points} zero points; the \
                 model's quantisation parameters are corrupt"
            ),
            Error::VelaIoZeroPointRange {
                kind,
                index,
                zero_point,
            } => write!(
                f,
                "{kind} {index}: zero point {zero_point} does not fit 32 bits; the model's \
                 quantisation parameters are corrupt"
            ),
            Error::VelaIoBadRegion {
                kind,
                index,
                region,
            } => write!(
                f,
                "{kind} {index}: in region {region}, but a COP1 stream keeps inputs and outputs in \
                 scratch (1) or scratch_fast (2); recompile without `--separate-io-regions`"
            ),
            Error::VelaIoOutsideRegion {
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
            Error::VelaRegionTooLarge { region, bytes } => write!(
                f,
                "region {region}: {bytes} bytes, more than NPU1's u32 sizes can describe"
            ),
            Error::Cop1TooShort { len } => write!(
                f,
                "driver payload: {len} bytes, shorter than the 16-byte COP1 header"
            ),
            Error::Cop1NotWords { len } => write!(
                f,
                "driver payload: {len} bytes, not a whole number of 32-bit words"
            ),
            Error::Cop1BadMagic { found } => write!(
                f,
                "driver payload: starts with {found:#010x}, not \"COP1\"; this is not an Ethos-U \
                 command stream from Vela"
            ),
            Error::Cop2Payload => f.write_str(
                "driver payload: COP2 header (Vela's `--cop-format COP2`, which \
                 `--separate-io-regions` forces), which Arm's Ethos-U core driver does not accept; \
                 recompile without `--cop-format COP2` and without `--separate-io-regions`",
            ),
            Error::VelaNotU55 { config } => {
                f.write_str("driver payload: compiled for ")?;
                write_target(f, config)?;
                write!(
                    f,
                    " (config word {config:#010x}), but an RA8P1's NPU is an Ethos-U55 and cannot \
                     run it; recompile with `--accelerator-config ethos-u55-{{32,64,128,256}}`"
                )
            }
            Error::Cop1MissingConfig { tag } => write!(
                f,
                "driver payload: word 1 is {tag:#010x}, not the optimizer-config tag (byte 0 = 0x01)"
            ),
            Error::Cop1UnsupportedTag { offset, tag } => write!(
                f,
                "driver payload: driver action {tag:#010x} at byte {offset} is not a NOP or the \
                 command stream; recompile without debugging options"
            ),
            Error::Cop1NoCommandStream { len } => write!(
                f,
                "driver payload: no command-stream tag (0x02) in its {len} bytes"
            ),
            Error::Cop1StreamPastPayload {
                offset,
                words,
                payload_bytes,
            } => write!(
                f,
                "driver payload: command stream of {words} words at byte {offset} ends at {}, past \
                 the payload's {payload_bytes} bytes",
                u64::from(offset) + 4 * u64::from(words)
            ),
            Error::Cop1TrailingBytes { end, payload_bytes } => write!(
                f,
                "driver payload: the command stream ends at byte {end} but the payload has \
                 {payload_bytes}; trailing driver actions are not supported"
            ),
            Error::Cop1EmptyCommandStream => {
                f.write_str("driver payload: the command-stream tag says 0 words")
            }
            Error::Cop1BadConfig { config } => write!(
                f,
                "driver payload: config word {config:#010x} describes no Ethos-U (SHRAM size 0)"
            ),
            Error::NpzMalformed { problem } => write!(
                f,
                "Vela raw output (.npz): {problem}; use the *_vela.npz exactly as Vela wrote it"
            ),
            Error::NpzMissingArray { array } => write!(
                f,
                "Vela raw output (.npz): no array `{array}`, which the command stream or its regions \
                 need; this is not Vela's raw output (`vela --output-format raw`, Vela 4.0 or later)"
            ),
            Error::NpzCompressedArray { array } => write!(
                f,
                "Vela raw output (.npz): array `{array}` is compressed; Vela writes stored entries \
                 (np.savez): repack without compression or use Vela's file"
            ),
            Error::NpzMemberTooLarge {
                array,
                claimed,
                limit,
            } => write!(
                f,
                "Vela raw output (.npz): member `{array}.npy` claims {claimed} bytes, more than \
                 the {limit} it may hold; use the *_vela.npz exactly as Vela wrote it"
            ),
            Error::NpzMemberSizeMismatch {
                array,
                claimed,
                stored,
            } => write!(
                f,
                "Vela raw output (.npz): member `{array}.npy` claims {claimed} bytes but {stored} \
                 are stored; use the *_vela.npz exactly as Vela wrote it"
            ),
            Error::NpzBadArray { array, problem } => write!(
                f,
                "Vela raw output (.npz): array `{array}`: {problem}"
            ),
            Error::NpzRegionMismatch {
                array,
                found,
                expected,
            } => write!(
                f,
                "Vela raw output (.npz): `{array}` is {found}, but a COP1 stream uses region \
                 {expected} for it; recompile without `--separate-io-regions` or custom region maps"
            ),
            Error::NpzScratchFastSizeMismatch { size, scratch } => write!(
                f,
                "Vela raw output (.npz): `scratch_fast_region` is 1, the scratch's own region (Vela's \
                 Python core, not spilling), but `scratch_fast_size` is {size}, not the scratch's \
                 {scratch}; use the *_vela.npz exactly as Vela wrote it"
            ),
            Error::NpzIoCountMismatch {
                array,
                len,
                expected,
            } => write!(
                f,
                "Vela raw output (.npz): `{array}` has {len} entries but there are {expected} \
                 tensors of its kind"
            ),
            Error::NpzVariableTensors { count } => write!(
                f,
                "Vela raw output (.npz): {count} variable (stateful) tensors, whose state a pack \
                 cannot carry between inferences; remove them from the model"
            ),
            Error::IoBindingsTooShort { len } => write!(
                f,
                "IO bindings: {len} bytes, shorter than the 16-byte header"
            ),
            Error::IoBindingsBadMagic { found } => write!(
                f,
                "IO bindings: magic {found:#010x}, expected 0x4f49504e (\"NPIO\")"
            ),
            Error::IoBindingsUnsupportedVersion { found } => write!(
                f,
                "IO bindings: version {found}, this reader knows only version 1"
            ),
            Error::IoBindingsBadRecordSize { found } => write!(
                f,
                "IO bindings: record size {found}, version 1 records are 96 bytes"
            ),
            Error::IoBindingsTooMany { count, max } => write!(
                f,
                "IO bindings: {count} bindings, more than the {max} allowed"
            ),
            Error::IoBindingsLengthMismatch {
                count,
                expected,
                actual,
            } => write!(
                f,
                "IO bindings: {count} records need {expected} bytes but there are {actual}"
            ),
            Error::IoBindingBadKind { record, kind } => write!(
                f,
                "IO binding {record}: kind {kind}, expected 0 (input) or 1 (output)"
            ),
            Error::IoBindingUnknownDtype { record, code } => {
                write!(f, "IO binding {record}: unknown dtype code {code:#04x}")
            }
            Error::IoBindingRankTooLarge { record, rank, max } => {
                write!(f, "IO binding {record}: rank {rank}, more than {max}")
            }
            Error::IoBindingRegionOutOfRange { record, region } => write!(
                f,
                "IO binding {record}: region {region}, but the Ethos-U55 has base pointers 0..7 only"
            ),
            Error::IoBindingNotCanonical { record, field } => write!(
                f,
                "IO binding {record}: {field} is not in canonical form (non-zero padding, or a name \
                 that is not UTF-8 or holds a NUL)"
            ),
            Error::IoBindingBytesMismatch {
                record,
                bytes,
                expected,
            } => write!(
                f,
                "IO binding {record}: bytes is {bytes} but shape × element size is {expected}"
            ),
            Error::IoBindingBadScale { record, bits } => write!(
                f,
                "IO binding {record}: scale {} (bits {bits:#010x}) is not 0 or a positive finite \
                 number",
                f32::from_bits(bits)
            ),
            Error::IoBindingZeroPointWithoutScale { record, zero_point } => write!(
                f,
                "IO binding {record}: zero point {zero_point} with scale 0 (not quantised)"
            ),
            Error::IoBindingOutOfOrder {
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
            Error::IoBindingRegionMissing {
                record,
                region,
                region_count,
            } => write!(
                f,
                "IO binding {record}: region {region}, but the pack has {region_count} regions"
            ),
            Error::IoBindingOutsideRegion {
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
            Error::IoBindingsJsonSyntax { line, column } => write!(
                f,
                "IO bindings JSON: not valid at line {line}, column {column}"
            ),
            Error::IoBindingsJsonField { binding, field } => {
                if binding == u32::MAX {
                    write!(f, "IO bindings JSON: field `{field}` has an unexpected value")
                } else {
                    write!(
                        f,
                        "IO bindings JSON: binding {binding}: field `{field}` has a value the \
                         encoding cannot hold"
                    )
                }
            }
            Error::IoBindingsJsonDigestMismatch => f.write_str(
                "IO bindings JSON: `sha256` is not the digest of the bindings listed (edited by \
                 hand?); regenerate it with `npub pack`",
            ),
        }
    }
}

impl core::error::Error for Error {}

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
