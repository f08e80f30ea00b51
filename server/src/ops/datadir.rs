//! The data directory: what lives where, and the lock that keeps a second server out.
//!
//! | Path           | What                                                              |
//! |----------------|-------------------------------------------------------------------|
//! | `npub.db`      | SQLite database (WAL: also `npub.db-wal`, `npub.db-shm`)          |
//! | `packs/aa/<sha256>` | packs, named by the SHA-256 of their bytes, fanned out by the first two hex digits |
//! | `tmp/`         | uploads being received; emptied at every start                    |
//! | `keys/`        | the manifest signing key (`signing.key`, 0600) and retired keys    |
//! | `lock`         | `flock`ed while a server runs on this directory (for servers before #11) |
//!
//! The whole directory is created 0700: it holds the signing key and the token hashes.
//!
//! ## One server per directory
//! A server holds an exclusive `flock` on the data directory itself for as long as it runs (the
//! OS drops it when the process ends, however it ends). Locking only the `lock` file could be
//! bypassed by deleting the file: the next server would create and lock a new one beside the
//! running server. The directory cannot be deleted or replaced while it holds the server's
//! files. The `lock` file is still locked too, so that an older server refuses to start beside
//! this one.
use std::fs::{self, File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The data directory's paths, and its lock for as long as this value lives.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    /// The directory and the `lock` file, both `flock`ed until this value is dropped.
    _locks: [File; 2],
}

impl DataDir {
    /// Creates the directory tree if missing and takes the lock.
    ///
    /// Fails if another process holds the lock: two servers on one directory would sweep each
    /// other's uploads in progress and race on the database.
    pub fn open(root: &Path) -> io::Result<Self> {
        create_private_dir(root)?;
        let root = fs::canonicalize(root)?;
        let in_use = || {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is in use by another npub-server", root.display()),
            )
        };
        let dir = File::open(&root)?;
        lock(&dir).map_err(|e| e.unwrap_or_else(in_use))?;
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root.join("lock"))?;
        lock(&file).map_err(|e| e.unwrap_or_else(in_use))?;
        for sub in ["packs", "tmp", "keys"] {
            create_private_dir(&root.join(sub))?;
        }
        Ok(Self {
            root,
            _locks: [dir, file],
        })
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

/// Takes an exclusive `flock` without waiting: `Err(None)` when another process holds it.
fn lock(file: &File) -> Result<(), Option<io::Error>> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(None),
        Err(TryLockError::Error(e)) => Err(Some(e)),
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
