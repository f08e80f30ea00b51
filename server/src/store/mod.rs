//! The pack store: immutable packs named by the SHA-256 of their bytes.
//!
//! Content addressing gives deduplication for free (two versions with the same bytes share one
//! file) and makes a stored pack self-verifying. Uploads are first staged on local disk
//! ([`staging`]) and handed to the store only once validated and fsynced.
//!
//! ## Growth path: S3-compatible object storage
//! The server talks to packs only through [`PackStore`] (`Arc<dyn PackStore>` in the state), and
//! every method is async and moves whole objects, which is what an object store offers. An
//! `S3Store` would implement `put` as a PUT of the staged file to `packs/<sha256>` (followed by
//! deleting the staged file), `open` as a GET streamed into a [`PackReader`], `remove` as DELETE
//! and `list` as a paginated LIST; staging stays on local disk. Not implemented: the local store
//! is the embedded default.
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::AsyncRead;

mod digest;
mod local;
pub mod staging;

pub use digest::{NotADigest, PackDigest, to_hex};
pub use local::LocalStore;
pub use staging::{Sealed, StagedFile, Staging};

/// What a store method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// What [`PackStore::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The pack is new; removing it again is the caller's job if its transaction fails.
    Created,
    /// A pack with these bytes was already stored; the staged copy was discarded.
    AlreadyPresent,
}

/// A stored pack, opened for reading.
pub struct PackReader {
    /// Its length in bytes.
    pub len: u64,
    /// Its bytes.
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
}

impl fmt::Debug for PackReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackReader")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Where packs live.
pub trait PackStore: Send + Sync + fmt::Debug + 'static {
    /// Takes a sealed (complete, fsynced) staged file and stores it under its digest; durable
    /// when the future resolves. On error nothing new is left in the store.
    fn put(&self, staged: Sealed) -> StoreFuture<'_, Put>;

    /// The pack named `digest`, or `None` if there is none.
    fn open(&self, digest: PackDigest) -> StoreFuture<'_, Option<PackReader>>;

    /// Deletes the pack named `digest`; `false` if there was none.
    fn remove(&self, digest: PackDigest) -> StoreFuture<'_, bool>;

    /// Every stored pack's digest (for the start-up consistency sweep).
    fn list(&self) -> StoreFuture<'_, Vec<PackDigest>>;
}
