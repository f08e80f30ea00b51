//! The magic, version, sizes and limits of release signatures and bundles (the tables on
//! `ReleaseView`, `layout.rs`, and `Bundle`, `bundle.rs`), and of the release trust a device
//! keeps. A leaf: the records' code and the errors that quote these numbers import them, and they
//! import nothing.

/// Bytes `4e 50 52 31`: a hexdump reads "NPR1" forwards, like the manifest's "NPM1".
pub const RELEASE_MAGIC: u32 = 0x3152_504E;
/// Bumped on any layout change; there is no dual-version verifier.
pub const RELEASE_VERSION: u32 = 1;
/// Bytes of a release signature covered by its signature: everything before it.
pub const RELEASE_SIGNED_BYTES: usize = 224;
/// A whole version-1 release signature.
pub const RELEASE_BYTES: usize = RELEASE_SIGNED_BYTES + 64;

/// Bytes `4e 50 52 42`: "NPRB", a bundle of release signatures.
pub const BUNDLE_MAGIC: u32 = 0x4252_504E;
/// Bumped on any layout change.
pub const BUNDLE_VERSION: u32 = 1;
/// The bundle's header, before its signatures.
pub const BUNDLE_HEADER_BYTES: usize = 16;
/// Signatures one bundle may carry. A policy names at most [`MAX_POLICY_KEYS`] keys, so no
/// policy ever needs more valid signatures than this; four keep the largest bundle, which a
/// device receives into RAM, at [`MAX_BUNDLE_BYTES`].
pub const MAX_BUNDLE_SIGNATURES: usize = 4;
/// The largest bundle: 1,168 bytes. A device's receive buffer for it is this size, and a server
/// refuses anything longer.
pub const MAX_BUNDLE_BYTES: usize = BUNDLE_HEADER_BYTES + MAX_BUNDLE_SIGNATURES * RELEASE_BYTES;

/// Release keys one policy names (its *n*): four key ids are what fits in a 144-byte keyring
/// update beside the model id (`update.rs`); "two of three", "three of four" fit.
pub const MAX_POLICY_KEYS: usize = 4;
/// Bytes of a policy's own encoding, in a keyring update and in a device's flash
/// (`ReleasePolicy::encode`).
pub const POLICY_BYTES: usize = 44;

/// Release keys a device's trust holds, trusted and revoked (a revoked key keeps its entry for
/// good, as in the signing keyring): a team of four signers rotated once.
pub const DEVICE_RELEASE_KEYS: usize = 8;
/// Per-model policies a device's trust holds, the default policy included.
pub const DEVICE_RELEASE_POLICIES: usize = 8;

/// The actions of a root-signed keyring update (the 144-byte NPK1 record) that change release
/// keys and policies; 1 to 3 change signing keys (`update.rs` has the table).
pub const RELEASE_ACTIONS: core::ops::RangeInclusive<u32> = 4..=8;

/// Bytes `4e 50 53 31`: "NPS1".
pub const SELFTEST_MAGIC: u32 = 0x3153_504E;
/// Bumped on any layout change.
pub const SELFTEST_VERSION: u32 = 1;
/// The record's fixed part, before the input.
pub const SELFTEST_HEADER_BYTES: usize = 48;
/// The largest golden input: a microcontroller model's inputs (an image, a window of audio
/// features) are tens of KiB; 4 MiB is the largest arena an RA8P1 gives the NPU.
pub const MAX_SELFTEST_INPUT_BYTES: u32 = 4 * 1024 * 1024;
