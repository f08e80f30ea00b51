//! What every pack store is: the [`PackStore`] trait and the values its methods move.
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use tokio::io::AsyncRead;

use super::digest::PackDigest;
use super::staging::Sealed;

/// What a store method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// What [`PackStore::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The pack is new; if the version that was to name it does not commit, it is an orphan
    /// for `gc.rs` to remove.
    Created,
    /// A pack with these bytes was already stored.
    AlreadyPresent,
}

/// A stored pack, opened for reading.
pub struct PackReader {
    /// Its length in bytes (the whole pack's, wherever the reader starts).
    pub len: u64,
    /// Its bytes, from the offset asked for.
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
}

impl fmt::Debug for PackReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackReader")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// One pack in a store's listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub digest: PackDigest,
    /// When it was stored, if the store says.
    pub modified: Option<SystemTime>,
}

/// Where packs live.
pub trait PackStore: Send + Sync + fmt::Debug + 'static {
    /// Stores a sealed (complete, fsynced) staged file under its digest; durable when the
    /// future resolves. The staged file stays where it is (the caller drops it once the version
    /// that names the pack has committed, and can put it again if a removal raced: `gc.rs`). On
    /// error nothing new is left in the store.
    fn put<'a>(&'a self, staged: &'a Sealed) -> StoreFuture<'a, Put>;

    /// The pack named `digest`, or `None` if there is none.
    fn open(&self, digest: PackDigest) -> StoreFuture<'_, Option<PackReader>> {
        self.open_from(digest, 0)
    }

    /// The pack named `digest` read from byte `offset` on (a `Range` download); `len` is still
    /// the whole pack's. An object store would send a ranged GET.
    fn open_from(&self, digest: PackDigest, offset: u64) -> StoreFuture<'_, Option<PackReader>>;

    /// Deletes the pack named `digest`; `false` if there was none.
    fn remove(&self, digest: PackDigest) -> StoreFuture<'_, bool>;

    /// Every stored pack (for the start-up consistency sweep), sorted by digest.
    fn list(&self) -> StoreFuture<'_, Vec<Listed>>;

    /// How old a pack no version names must be before the start-up sweep removes it. Zero for a
    /// store only this server writes (the data-dir lock makes it the only writer, so an orphan
    /// at start is a crash's); a store other replicas share needs a margin, because another
    /// replica's upload is an "orphan" between its put and its commit.
    fn orphan_grace(&self) -> Duration {
        Duration::ZERO
    }

    /// Whether the poll cache keeps assigned packs in memory and serves device downloads from
    /// there (a local disk is as close as memory, and a page-cache copy costs nothing), or the
    /// device route streams them from the store.
    fn serve_from_memory(&self) -> bool {
        true
    }

    /// The pack named `digest` as an open file on this machine's disk, for a store that keeps
    /// packs as files: the device lane (`device/lane.rs`) sends downloads from it with `sendfile`.
    /// `None`: not a local file (an object store), or no such pack.
    fn local_file(&self, digest: PackDigest) -> StoreFuture<'_, Option<std::fs::File>> {
        let _ = digest;
        Box::pin(async { Ok(None) })
    }

    /// A cheap request that succeeds when the store answers (readiness, `/readyz`). The local
    /// store reads its directory; an object store lists at most one key.
    fn probe(&self) -> StoreFuture<'_, ()>;

    /// A URL a device may fetch the pack from itself, without a token (a presigned URL), when the
    /// store hands those out; `None` otherwise. The device route answers `307` to it.
    fn download_url(&self, digest: PackDigest) -> StoreFuture<'_, Option<String>> {
        let _ = digest;
        Box::pin(async { Ok(None) })
    }
}
