//! The data directory: what lives where, and the lock that keeps a second server out.
//!
//! | Path           | What                                                              |
//! |----------------|-------------------------------------------------------------------|
//! | `npub.db`      | SQLite database (WAL: also `npub.db-wal`, `npub.db-shm`)          |
//! | `packs/aa/<sha256>` | packs, named by the SHA-256 of their bytes, fanned out by the first two hex digits |
//! | `tmp/`         | uploads being received; emptied at every start                    |
//! | `keys/`        | the manifest signing key (`signing.key`, 0600) and retired keys    |
//! | `lock`         | held (advisory lock) while a server runs on this directory        |
//!
//! The whole directory is created 0700: it holds the signing key and the token hashes.
use std::fs::{self, File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The data directory's paths, and its lock for as long as this value lives.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates the directory tree if missing and takes the lock.
    ///
    /// Fails if another process holds the lock: two servers on one directory would sweep each
    /// other's uploads in progress and race on the database.
    pub fn open(root: &Path) -> io::Result<Self> {
        create_private_dir(root)?;
        let root = fs::canonicalize(root)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root.join("lock"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is in use by another npub-server", root.display()),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        for sub in ["packs", "tmp", "keys"] {
            create_private_dir(&root.join(sub))?;
        }
        Ok(Self { root, _lock: lock })
    }

    /// The directory itself (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The SQLite database file.
    pub fn database(&self) -> PathBuf {
        self.root.join("npub.db")
    }

    /// The pack store's root.
    pub fn packs(&self) -> PathBuf {
        self.root.join("packs")
    }

    /// Upload staging.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Signing keys.
    pub fn keys(&self) -> PathBuf {
        self.root.join("keys")
    }
}

fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}
