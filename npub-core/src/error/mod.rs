//! The crate's one error type, grouped by domain.
//!
//! Every input npub-core rejects has its own variant, and its `Display` names the structure, the field
//! and the numbers involved, so that an operator reading a server's 422 or a device's status report
//! knows exactly what was wrong and where.
//!
//! [`Error`] holds one small enum per domain, each in its own file (as rustls's `Error` holds
//! `InvalidMessage` and `PeerMisbehaved`); `Error`'s `Display` is its domain's, word for word:
//!
//! | variant                | enum                | rejects                                                            |
//! |------------------------|---------------------|--------------------------------------------------------------------|
//! | [`Error::Format`]      | [`FormatError`]     | the NPU1 container: the loader's checks, streaming, binding, building (`format/`) |
//! | [`Error::Cop1`]        | [`Cop1Error`]       | Arm's driver payload, the COP1 header before the stream (`format/cop1.rs`) |
//! | [`Error::Stream`]      | [`StreamError`]     | the Ethos-U55 command stream (`cmdstream/`)                        |
//! | [`Error::Manifest`]    | [`ManifestError`]   | the signed manifest and the pack it names (`manifest/`)            |
//! | [`Error::Key`]         | [`KeyError`]        | a signing key, a key file (`manifest/`, `keypair/`)                   |
//! | [`Error::Keyring`]     | [`KeyringError`]    | the keyring and its root-signed updates (`manifest/`)              |
//! | [`Error::Release`]     | [`ReleaseError`]    | release signatures, their bundle, the release policy and trust (`release/`) |
//! | [`Error::IoBindings`]  | [`IoBindingsError`] | the IO bindings and their JSON form (`io_bindings/`)               |
//! | [`Error::Vela`]        | [`VelaError`]       | Vela's `.tflite` and `.npz` (`vela/`, std)                         |
//!
//! Every type is `Copy` and `no_std`: a device reports an error without allocating. Each domain's
//! enum converts into [`Error`] (`From`), so a function of one domain returns `Err(e.into())`.
//! This file imports nothing of the crate but its own domains.
use core::fmt;

mod cop1;
mod format;
mod io_bindings;
mod key;
mod keyring;
mod manifest;
mod release;
mod stream;
mod vela;

pub use cop1::Cop1Error;
pub use format::FormatError;
pub use io_bindings::IoBindingsError;
pub use key::KeyError;
pub use keyring::KeyringError;
pub use manifest::ManifestError;
pub use release::ReleaseError;
pub use stream::StreamError;
pub use vela::VelaError;

/// Everything npub-core can reject, by domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The NPU1 container.
    Format(FormatError),
    /// Arm's driver payload (COP1).
    Cop1(Cop1Error),
    /// The Ethos-U55 command stream.
    Stream(StreamError),
    /// The signed manifest and the pack it names.
    Manifest(ManifestError),
    /// A signing key or a key file.
    Key(KeyError),
    /// The keyring and its updates.
    Keyring(KeyringError),
    /// Release signatures and the release policy.
    Release(ReleaseError),
    /// The IO bindings.
    IoBindings(IoBindingsError),
    /// Vela's output.
    Vela(VelaError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(e) => e.fmt(f),
            Error::Cop1(e) => e.fmt(f),
            Error::Stream(e) => e.fmt(f),
            Error::Manifest(e) => e.fmt(f),
            Error::Key(e) => e.fmt(f),
            Error::Keyring(e) => e.fmt(f),
            Error::Release(e) => e.fmt(f),
            Error::IoBindings(e) => e.fmt(f),
            Error::Vela(e) => e.fmt(f),
        }
    }
}

// No `source`: the message is the domain's own, and a chain would print it twice.
impl core::error::Error for Error {}

macro_rules! from_domain {
    ($($domain:ident($error:ident)),* $(,)?) => {
        $(
            impl From<$error> for Error {
                fn from(e: $error) -> Self {
                    Error::$domain(e)
                }
            }
        )*
    };
}

from_domain!(
    Format(FormatError),
    Cop1(Cop1Error),
    Stream(StreamError),
    Manifest(ManifestError),
    Key(KeyError),
    Keyring(KeyringError),
    Release(ReleaseError),
    IoBindings(IoBindingsError),
    Vela(VelaError),
);
