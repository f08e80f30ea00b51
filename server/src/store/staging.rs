//! Upload staging: bodies are streamed into a file under `<data-dir>/tmp/`, hashed as they go,
//! and fsynced before anything else looks at them.
//!
//! A [`StagedFile`] deletes its file when dropped unless the pack store has taken it, so every
//! early return — a rejected pack, a client that hangs up, a 409 — leaves `tmp/` as it was. A
//! crash (SIGKILL, power cut) cannot run destructors: [`Staging::sweep`] empties `tmp/` at the
//! next start, before the server accepts any request.
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use tokio::fs::File;
use tokio::io::AsyncWriteExt;

use super::digest::PackDigest;

/// The most of an upload's bytes held in memory on their way to its staged file.
const WRITE_BUFFER_MAX: usize = 64 * 1024;

/// The staging directory.
#[derive(Debug, Clone)]
pub struct Staging {
    dir: PathBuf,
}

impl Staging {
    /// Staging in `dir` (which must exist, on the same filesystem as a local pack store so that
    /// handing a file over is a rename).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Removes everything in the staging directory: uploads a crash interrupted. Only call this
    /// while no upload can be in progress (at start, under the data-dir lock).
    pub fn sweep(&self) -> io::Result<usize> {
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
            removed += 1;
        }
        Ok(removed)
    }

    /// A new empty staged file with a random name.
    pub async fn create(&self, purpose: &str) -> io::Result<StagedFile> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|e| io::Error::other(e.to_string()))?;
        let path = self
            .dir
            .join(format!("{purpose}-{}", super::digest::to_hex(&nonce)));
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        // tokio copies each write into a buffer of its own for the blocking thread, by default up
        // to 2 MiB an upload; a body arrives in far smaller chunks anyway.
        file.set_max_buf_size(WRITE_BUFFER_MAX);
        Ok(StagedFile {
            guard: RemoveOnDrop(Some(path)),
            file: Some(file),
            hasher: Sha256::new(),
            len: 0,
        })
    }
}

/// Deletes the path when dropped, unless disarmed.
#[derive(Debug)]
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take()
            && let Err(e) = std::fs::remove_file(&path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove staged file");
        }
    }
}

/// A file being written under `tmp/`, hashed as it is written.
#[derive(Debug)]
pub struct StagedFile {
    guard: RemoveOnDrop,
    file: Option<File>,
    hasher: Sha256,
    len: u64,
}

impl StagedFile {
    /// Appends `chunk`.
    pub async fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        let file = self.file.as_mut().ok_or_else(closed)?;
        file.write_all(chunk).await?;
        self.hasher.update(chunk);
        self.len += chunk.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Flushes and fsyncs the file, closing it: from here its bytes are durable and final.
    pub async fn finish(mut self) -> io::Result<Sealed> {
        let mut file = self.file.take().ok_or_else(closed)?;
        file.flush().await?;
        file.sync_all().await?;
        drop(file);
        Ok(Sealed {
            guard: self.guard,
            digest: PackDigest::finish(self.hasher),
            len: self.len,
        })
    }
}

fn closed() -> io::Error {
    io::Error::other("staged file already finished")
}

/// A complete, fsynced staged file with its digest and length. Deleted when dropped (a local
/// store keeps its own hard link to the bytes).
#[derive(Debug)]
pub struct Sealed {
    guard: RemoveOnDrop,
    digest: PackDigest,
    len: u64,
}

impl Sealed {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        self.guard
            .0
            .as_deref()
            .expect("a sealed file has its path until dropped")
    }

    /// SHA-256 of the contents.
    pub fn digest(&self) -> PackDigest {
        self.digest
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
