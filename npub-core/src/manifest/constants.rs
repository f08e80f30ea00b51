//! The magic, version and sizes of the two signed records: a manifest (the table on
//! `ManifestView`, `layout.rs`) and a keyring update (the table on `KeyringUpdate`,
//! `rotation.rs`). A leaf: the records' code and the errors that quote these numbers import them,
//! and they import nothing.

/// Bytes `4e 50 4d 31`: a hexdump reads "NPM1" forwards, like NPU1's magic.
pub const MANIFEST_MAGIC: u32 = 0x314D_504E;
/// The version-1 layout: no self-test. Still read and still signed for a version without one.
pub const MANIFEST_VERSION: u32 = 1;
/// The version-2 layout: version 1's fields, then the self-test's digest, then the signature.
/// Signed for a version that has a self-test record ("NPS1").
pub const MANIFEST_VERSION_2: u32 = 2;
/// Bytes covered by a version-1 signature: everything before it.
pub const SIGNED_BYTES: usize = 216;
/// An ed25519 signature.
pub const SIGNATURE_BYTES: usize = 64;
/// A whole version-1 manifest.
pub const MANIFEST_BYTES: usize = SIGNED_BYTES + SIGNATURE_BYTES;
/// Width of a version-2 manifest's `selftest_digest`: a SHA-256.
pub const SELFTEST_DIGEST_BYTES: usize = 32;
/// Bytes covered by a version-2 signature: version 1's signed bytes and `selftest_digest`.
pub const SIGNED_BYTES_V2: usize = SIGNED_BYTES + SELFTEST_DIGEST_BYTES;
/// A whole version-2 manifest.
pub const MANIFEST_V2_BYTES: usize = SIGNED_BYTES_V2 + SIGNATURE_BYTES;
/// The longest manifest of any version: what a device's receive buffer holds.
pub const MANIFEST_MAX_BYTES: usize = MANIFEST_V2_BYTES;
/// Bytes `4e 50 4b 31`: "NPK1".
pub const ROTATION_MAGIC: u32 = 0x314B_504E;
/// Bumped on any layout change.
pub const ROTATION_VERSION: u32 = 1;
/// Bytes covered by the signature.
pub const ROTATION_SIGNED_BYTES: usize = 80;
/// A whole version-1 keyring update.
pub const ROTATION_BYTES: usize = ROTATION_SIGNED_BYTES + 64;
