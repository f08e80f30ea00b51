//! The magic, version and sizes of the two signed records: a manifest (the table on
//! `ManifestView`, `layout.rs`) and a keyring update (the table on `KeyringUpdate`,
//! `rotation.rs`). A leaf: the records' code and the errors that quote these numbers import them,
//! and they import nothing.

/// Bytes `4e 50 4d 31`: a hexdump reads "NPM1" forwards, like NPU1's magic.
pub const MANIFEST_MAGIC: u32 = 0x314D_504E;
/// Bumped on any layout change; there is no dual-version verifier.
pub const MANIFEST_VERSION: u32 = 1;
/// Bytes covered by the signature: everything before it.
pub const SIGNED_BYTES: usize = 216;
/// An ed25519 signature.
pub const SIGNATURE_BYTES: usize = 64;
/// A whole version-1 manifest.
pub const MANIFEST_BYTES: usize = SIGNED_BYTES + SIGNATURE_BYTES;
/// Bytes `4e 50 4b 31`: "NPK1".
pub const ROTATION_MAGIC: u32 = 0x314B_504E;
/// Bumped on any layout change.
pub const ROTATION_VERSION: u32 = 1;
/// Bytes covered by the signature.
pub const ROTATION_SIGNED_BYTES: usize = 80;
/// A whole version-1 keyring update.
pub const ROTATION_BYTES: usize = ROTATION_SIGNED_BYTES + 64;
