//! Every call to a pack store is bounded in time: a store that accepts connections and never
//! answers must fail the request that waits on it, not hold it (and whatever it holds) forever.
//!
//! | call            | bound                                                                 |
//! |-----------------|-----------------------------------------------------------------------|
//! | `put`           | `--store-timeout` for every started 8 MiB of the pack (a part of a multipart upload) |
//! | `open_from`     | `--store-timeout` until the object's first bytes can be read; the body is then paced by its reader, each frame bounded by the HTTP client (`s3_http`) |
//! | everything else | `--store-timeout`                                                      |
//!
//! A call past its bound fails with `ErrorKind::TimedOut`; callers answer 503 with `Retry-After`
//! (`ApiError::store`), never 500.
use std::fs::File;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::digest::PackDigest;
use super::pack_store::{Listed, PackReader, PackStore, Put, StoreFuture};
use super::staging::Sealed;

/// Default for `--store-timeout`.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// How many bytes of a put one `--store-timeout` covers.
const PUT_BYTES_PER_BOUND: u64 = 8 * 1024 * 1024;

/// A store whose every call is bounded.
#[derive(Debug)]
pub struct Timed {
    inner: Arc<dyn PackStore>,
    limit: Duration,
}

impl Timed {
    /// `inner`, each call bounded by `limit`.
    pub fn new(inner: Arc<dyn PackStore>, limit: Duration) -> Self {
        Self { inner, limit }
    }
}

/// `call`, or a `TimedOut` error naming `what` once `limit` has passed.
async fn bounded<T>(
    limit: Duration,
    what: &'static str,
    call: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the pack store did not finish {what} within {} s (--store-timeout)",
                limit.as_secs_f64()
            ),
        )),
    }
}

impl PackStore for Timed {
    fn put<'a>(&'a self, staged: &'a Sealed) -> StoreFuture<'a, Put> {
        let parts = staged.len().div_ceil(PUT_BYTES_PER_BOUND).max(1);
        let limit = self
            .limit
            .saturating_mul(u32::try_from(parts).unwrap_or(u32::MAX));
        Box::pin(bounded(limit, "storing a pack", self.inner.put(staged)))
    }

    fn open_from(&self, digest: PackDigest, offset: u64) -> StoreFuture<'_, Option<PackReader>> {
        Box::pin(bounded(
            self.limit,
            "opening a pack",
            self.inner.open_from(digest, offset),
        ))
    }

    fn remove(&self, digest: PackDigest) -> StoreFuture<'_, bool> {
        Box::pin(bounded(
            self.limit,
            "removing a pack",
            self.inner.remove(digest),
        ))
    }

    fn list(&self) -> StoreFuture<'_, Vec<Listed>> {
        Box::pin(bounded(self.limit, "listing packs", self.inner.list()))
    }

    fn orphan_grace(&self) -> Duration {
        self.inner.orphan_grace()
    }

    fn serve_from_memory(&self) -> bool {
        self.inner.serve_from_memory()
    }

    fn local_file(&self, digest: PackDigest) -> StoreFuture<'_, Option<File>> {
        Box::pin(bounded(
            self.limit,
            "opening a pack file",
            self.inner.local_file(digest),
        ))
    }

    fn download_url(&self, digest: PackDigest) -> StoreFuture<'_, Option<String>> {
        Box::pin(bounded(
            self.limit,
            "presigning a download",
            self.inner.download_url(digest),
        ))
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(bounded(self.limit, "answering a probe", self.inner.probe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose every call hangs.
    #[derive(Debug)]
    struct Frozen;

    impl PackStore for Frozen {
        fn put<'a>(&'a self, _: &'a Sealed) -> StoreFuture<'a, Put> {
            Box::pin(std::future::pending())
        }
        fn open_from(&self, _: PackDigest, _: u64) -> StoreFuture<'_, Option<PackReader>> {
            Box::pin(std::future::pending())
        }
        fn remove(&self, _: PackDigest) -> StoreFuture<'_, bool> {
            Box::pin(std::future::pending())
        }
        fn list(&self) -> StoreFuture<'_, Vec<Listed>> {
            Box::pin(std::future::pending())
        }
        fn probe(&self) -> StoreFuture<'_, ()> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rejects_a_store_that_never_answers_once_the_bound_is_over() {
        let timed = Timed::new(Arc::new(Frozen), Duration::from_secs(2));
        let digest: PackDigest = "00".repeat(32).parse().unwrap();
        let started = tokio::time::Instant::now();
        let e = timed.list().await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("--store-timeout"), "{e}");
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(timed.remove(digest).await.is_err());
        assert!(timed.open(digest).await.is_err());
        assert!(timed.probe().await.is_err());
    }
}
