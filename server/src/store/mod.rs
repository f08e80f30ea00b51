//! The pack store: immutable packs named by the SHA-256 of their bytes.
//!
//! Content addressing gives deduplication for free (two versions with the same bytes share one
//! file) and makes a stored pack self-verifying. Uploads are first staged on local disk
//! ([`staging`]) and handed to the store only once validated and fsynced.
//!
//! ## Where packs live
//! | `--pack-store`          | Store         | Downloads                                                  |
//! |-------------------------|---------------|------------------------------------------------------------|
//! | (unset)                 | [`LocalStore`]: `<data-dir>/packs/` | from the poll cache's memory                |
//! | `s3://bucket/prefix`    | [`S3Store`]: objects `prefix/<sha256>` in an S3-compatible bucket | streamed from the bucket (ranged GET), or a `307` to a presigned URL with `--presign-downloads` |
//!
//! The server talks to packs only through [`PackStore`] (`Arc<dyn PackStore>` in the state), and
//! every method is async and moves whole objects, which is what an object store offers. Staging
//! stays on local disk for both: an upload is validated and fsynced there before the store sees
//! it, so a store only ever receives packs that passed.
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use tokio::io::AsyncRead;

mod digest;
mod local;
mod s3;
mod s3_http;
pub mod staging;

pub use digest::{NotADigest, PackDigest, from_hex, to_hex};
pub use local::LocalStore;
pub use s3::{S3Settings, S3Store};
pub use staging::{Sealed, StagedFile, Staging};

/// The store `--pack-store` names (`spec`), or the local one under `local_root`; `presign` and
/// `overrides` apply to an `s3://` store. The error says what is wrong with the setting.
pub fn open(
    spec: Option<&str>,
    local_root: std::path::PathBuf,
    presign: bool,
    overrides: &[(String, String)],
) -> Result<std::sync::Arc<dyn PackStore>, String> {
    match spec {
        None | Some("") if presign => Err(
            "--presign-downloads needs an s3:// --pack-store: a local store has no URL to sign"
                .into(),
        ),
        None | Some("") => Ok(std::sync::Arc::new(LocalStore::new(local_root))),
        Some(url) => Ok(std::sync::Arc::new(S3Store::open(&S3Settings {
            url: url.to_owned(),
            overrides: overrides.to_vec(),
            presign,
        })?)),
    }
}

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
    /// Takes a sealed (complete, fsynced) staged file and stores it under its digest; durable
    /// when the future resolves. On error nothing new is left in the store.
    fn put(&self, staged: Sealed) -> StoreFuture<'_, Put>;

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
    /// packs as files: the device lane (`conn/lane.rs`) sends downloads from it with `sendfile`.
    /// `None`: not a local file (an object store), or no such pack.
    fn local_file(&self, digest: PackDigest) -> StoreFuture<'_, Option<std::fs::File>> {
        let _ = digest;
        Box::pin(async { Ok(None) })
    }

    /// A URL a device may fetch the pack from itself, without a token (a presigned URL), when the
    /// store hands those out; `None` otherwise. The device route answers `307` to it.
    fn download_url(&self, digest: PackDigest) -> StoreFuture<'_, Option<String>> {
        let _ = digest;
        Box::pin(async { Ok(None) })
    }
}
