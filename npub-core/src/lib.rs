//! # npub-core
//!
//! The NPU1 container (`.npub`) that carries an Arm Vela command stream, its region table and the
//! baked weights to an Ethos-U55, bit-exact to `NPU1-format.txt`; the static check of the Ethos-U55
//! command stream; the signed manifest that lives *outside* NPU1; and the release signatures that
//! say who released a pack.
//!
//! The device path — [`Blob::parse`], [`bind`], [`StreamValidator`], the command-stream verifier and
//! manifest verification, the release check — is `no_std` and never allocates. Building packs needs `alloc`; Vela
//! import, signing and key files need `std`.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod cmdstream;
pub mod error;
pub mod fnv;
pub mod format;
#[cfg(feature = "std")]
pub mod inspect;
pub mod io_bindings;
#[cfg(feature = "std")]
pub mod keypair;
/// The old path of [`keypair`], kept while the server (issue 32, the lead's half) still imports it.
#[cfg(feature = "std")]
#[doc(hidden)]
pub use keypair as keys;
pub mod manifest;
pub mod release;
#[cfg(feature = "std")]
pub mod vela;

pub use error::{
    Cop1Error, Error, FormatError, IoBindingsError, KeyError, KeyringError, ManifestError,
    ReleaseError, StreamError, VelaError,
};
pub use format::{
    Accel, Blob, BoundRegion, Header, Job, RegionDesc, Role, StreamValidator, arena_bytes_required,
    arena_bytes_required_aligned, bind,
};
