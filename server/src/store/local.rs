//! The embedded default store: files under `<data-dir>/packs/`.
//!
//! | Path                  | Content                                  |
//! |-----------------------|------------------------------------------|
//! | `packs/ab/ab12…ef`    | the pack whose SHA-256 is `ab12…ef`       |
//!
//! Two hex digits of fan-out keep directories small at any realistic fleet's model count.
//!
//! Durability: the staged file was fsynced before it got here; `put` hard-links it into place
//! (atomic on one filesystem: a reader sees the whole pack or no pack, and the staged name keeps
//! the bytes until the upload's row commits) and fsyncs the directory so the new name survives a
//! power cut. A pack file is never written in place, so there is never a partial pack under
//! `packs/`.
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncSeekExt as _;

use super::digest::PackDigest;
use super::pack_store::{Listed, PackReader, PackStore, Put, StoreFuture};
use super::staging::Sealed;

/// Packs as files under one directory.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: Arc<PathBuf>,
}

impl LocalStore {
    /// A store rooted at `root` (which must exist, on the same filesystem as staging).
    pub fn new(root: PathBuf) -> Self {
        Self {
            root: Arc::new(root),
        }
    }

    fn path_of(root: &Path, digest: PackDigest) -> (PathBuf, PathBuf) {
        let hex = digest.hex();
        let dir = root.join(&hex[..2]);
        let file = dir.join(&hex);
        (dir, file)
    }
}

impl PackStore for LocalStore {
    fn put<'a>(&'a self, staged: &'a Sealed) -> StoreFuture<'a, Put> {
        let root = Arc::clone(&self.root);
        let (digest, from) = (staged.digest(), staged.path().to_owned());
        Box::pin(async move { blocking(move || put(&root, digest, &from)).await })
    }

    fn open_from(&self, digest: PackDigest, offset: u64) -> StoreFuture<'_, Option<PackReader>> {
        let (_, path) = Self::path_of(&self.root, digest);
        Box::pin(async move {
            let mut file = match tokio::fs::File::open(&path).await {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let len = file.metadata().await?.len();
            if offset > 0 {
                file.seek(io::SeekFrom::Start(offset)).await?;
            }
            Ok(Some(PackReader {
                len,
                reader: Box::pin(file),
            }))
        })
    }

    fn local_file(&self, digest: PackDigest) -> StoreFuture<'_, Option<File>> {
        let (_, path) = Self::path_of(&self.root, digest);
        Box::pin(async move {
            blocking(move || match File::open(&path) {
                Ok(file) => Ok(Some(file)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            })
            .await
        })
    }

    fn remove(&self, digest: PackDigest) -> StoreFuture<'_, bool> {
        let (dir, path) = Self::path_of(&self.root, digest);
        Box::pin(async move {
            blocking(move || match fs::remove_file(&path) {
                Ok(()) => {
                    File::open(&dir)?.sync_all()?;
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            })
            .await
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<Listed>> {
        let root = Arc::clone(&self.root);
        Box::pin(async move { blocking(move || list(&root)).await })
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        let root = Arc::clone(&self.root);
        Box::pin(async move { blocking(move || fs::read_dir(&*root).map(drop)).await })
    }
}

fn put(root: &Path, digest: PackDigest, staged: &Path) -> io::Result<Put> {
    let (dir, target) = LocalStore::path_of(root, digest);
    if !dir.exists() {
        match fs::create_dir(&dir) {
            Ok(()) => File::open(root)?.sync_all()?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    match fs::hard_link(staged, &target) {
        Ok(()) => {}
        // Same name, same bytes: keep the stored copy.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Put::AlreadyPresent),
        Err(e) => return Err(e),
    }
    if let Err(e) = File::open(&dir).and_then(|d| d.sync_all()) {
        // The name may not be durable: undo, so that the caller's error means "nothing stored".
        let _ = fs::remove_file(&target);
        return Err(e);
    }
    Ok(Put::Created)
}

fn list(root: &Path) -> io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for fan in fs::read_dir(root)? {
        let fan = fan?;
        if !fan.file_type()?.is_dir() {
            continue;
        }
        for entry in fs::read_dir(fan.path())? {
            let entry = entry?;
            let name = entry.file_name();
            match name.to_str().and_then(|n| n.parse::<PackDigest>().ok()) {
                Some(digest) => out.push(Listed {
                    digest,
                    modified: entry.metadata().and_then(|m| m.modified()).ok(),
                }),
                None => tracing::warn!(
                    path = %entry.path().display(),
                    "not a pack name; left alone"
                ),
            }
        }
    }
    out.sort_by_key(|l| l.digest);
    Ok(out)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("pack store task failed: {e}")))?
}
