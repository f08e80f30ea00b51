//! The data directory's disk: how much room is left, the reserve uploads may not eat into, and
//! what a full disk answers (507, naming the disk).
//!
//! | Free space on the data dir's filesystem | uploads                          | other writes          |
//! |-----------------------------------------|----------------------------------|-----------------------|
//! | ≥ `--min-free-space` + the upload       | accepted                         | accepted              |
//! | below that                              | 507 before the body is read, or as soon as it crosses the line while it arrives | accepted |
//! | none (`ENOSPC`, `SQLITE_FULL`)          | 507                              | 507, nothing applied  |
//!
//! The reserve keeps the room the database needs to commit (its WAL, a checkpoint): an upload
//! is the one request that can fill a disk by itself, so it is the one refused early. Once space
//! returns, writes work again by themselves: no connection is left inside a failed transaction
//! (`db/tx.rs`).
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::{ApiError, ErrorBody, Full};

/// Default for `--min-free-space`: room for SQLite to commit and checkpoint, and for logs.
pub const DEFAULT_MIN_FREE_SPACE: u64 = 256 * 1024 * 1024;

/// Free and total bytes of a filesystem, as an unprivileged writer sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes this process may still write (`f_bavail`: without the root-only reserve).
    pub free: u64,
    /// The filesystem's size.
    pub total: u64,
}

/// The data directory's disk.
#[derive(Debug)]
pub struct DataDisk {
    dir: PathBuf,
    reserve: u64,
}

impl DataDisk {
    /// The disk holding `dir`, of which uploads leave `reserve` bytes free.
    pub fn new(dir: PathBuf, reserve: u64) -> Self {
        Self { dir, reserve }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `--min-free-space`.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }

    /// Room on the disk now.
    pub fn space(&self) -> io::Result<Space> {
        let st = rustix::fs::statvfs(&self.dir)?;
        Ok(Space {
            free: st.f_bavail.saturating_mul(st.f_frsize),
            total: st.f_blocks.saturating_mul(st.f_frsize),
        })
    }

    /// Whether `incoming` more bytes fit above the reserve. A disk whose space cannot be read is
    /// let through: the write itself then says what is wrong.
    pub fn admit(&self, incoming: u64) -> Result<(), ApiError> {
        let Ok(space) = self.space() else {
            return Ok(());
        };
        if space.free < self.reserve.saturating_add(incoming) {
            return Err(ApiError::InsufficientStorage(Full::Reserve {
                free: space.free,
                incoming,
            }));
        }
        Ok(())
    }

    /// The detail of a 507: which disk, what is free, what to do.
    fn describe(&self, full: Full) -> String {
        let dir = self.dir.display();
        let free = self
            .space()
            .map_or_else(|_| "unknown".into(), |s| format!("{} bytes", s.free));
        match full {
            Full::Reserve { free, incoming } => format!(
                "the disk holding the data directory {dir} has {free} bytes free; {incoming} more \
                 would leave less than --min-free-space ({} bytes), which is kept for the \
                 database; nothing was stored. Free space on that disk (or delete unused \
                 versions) and retry",
                self.reserve
            ),
            Full::LocalDisk => format!(
                "no space left on the disk holding the data directory {dir} ({free} free); \
                 nothing was stored. Free space on that disk and retry: writes resume by \
                 themselves"
            ),
            Full::DatabaseServer => "no space left on the database server's disk; nothing was \
                 stored. Free space there and retry"
                .into(),
        }
    }
}

/// Gives every 507 a detail naming the disk (the error itself does not know the data directory).
pub async fn name_the_disk(
    State(disk): State<Arc<DataDisk>>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    let Some(full) = response.extensions().get::<Full>().copied() else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    let body = axum::Json(ErrorBody {
        error: "insufficient_storage",
        detail: disk.describe(full),
    })
    .into_response();
    let (fresh, body) = body.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    for (name, value) in &fresh.headers {
        parts.headers.insert(name, value.clone());
    }
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_space_of_the_data_dirs_disk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = DataDisk::new(dir.path().to_owned(), 0);
        let space = disk.space().unwrap();
        assert!(space.total > 0 && space.free <= space.total, "{space:?}");
        assert!(disk.admit(0).is_ok());
    }

    #[test]
    fn rejects_an_upload_that_would_eat_into_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let free = DataDisk::new(dir.path().to_owned(), 0)
            .space()
            .unwrap()
            .free;
        let disk = DataDisk::new(dir.path().to_owned(), free);
        let Err(ApiError::InsufficientStorage(Full::Reserve { incoming, .. })) = disk.admit(1)
        else {
            panic!("admitted past the reserve")
        };
        assert_eq!(incoming, 1);
        let detail = disk.describe(Full::Reserve {
            free: 10,
            incoming: 1,
        });
        assert!(
            detail.contains(&dir.path().display().to_string())
                && detail.contains("--min-free-space"),
            "{detail}"
        );
    }
}
