//! CPU-bound work (validating an upload, importing a Vela model) on a fixed set of threads.
//!
//! Why not `spawn_blocking`: tokio's blocking pool grows to hundreds of threads under a burst
//! of uploads, and glibc gives each thread that allocates its own malloc arena. A 16 MiB buffer
//! freed in one arena is not reused by another, and is seldom given back to the system, so
//! every burst left RSS higher than the one before (issue #31: 17 → 331 MiB over ten bursts of
//! 64 uploads). Here the same few threads do every validation: what their allocations leave
//! behind is bounded by the pool's size, not by how many threads a burst ever woke. The pool's
//! size is also how many uploads are held in memory at once (one per CPU): the others wait,
//! their bodies on disk.
use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed pool of threads for CPU-bound jobs. The threads end when the pool (every clone of
/// its `Arc`) is dropped.
#[derive(Debug)]
pub struct CpuPool {
    jobs: Mutex<mpsc::Sender<Job>>,
    threads: usize,
}

/// The job could not run to its end (it panicked; the panic was logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobFailed;

impl std::fmt::Display for JobFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a CPU-bound job panicked")
    }
}

impl std::error::Error for JobFailed {}

impl CpuPool {
    /// A pool of `threads` threads (at least one).
    pub fn new(threads: usize) -> Arc<Self> {
        let threads = threads.max(1);
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..threads {
            let rx = Arc::clone(&rx);
            std::thread::Builder::new()
                .name(format!("npub-cpu-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take one job, never while it runs.
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(poisoned) => poisoned.into_inner().recv(),
                        };
                        let Ok(job) = job else { return };
                        job();
                    }
                })
                .expect("spawning a CPU pool thread");
        }
        Arc::new(Self {
            jobs: Mutex::new(tx),
            threads,
        })
    }

    /// How many threads run jobs.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `job` on one of the pool's threads, after the jobs queued before it.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, JobFailed> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let wrapped: Job =
            Box::new(
                move || match std::panic::catch_unwind(AssertUnwindSafe(job)) {
                    Ok(value) => {
                        let _ = tx.send(value);
                    }
                    Err(_) => tracing::error!("a CPU-bound job panicked"),
                },
            );
        let sent = match self.jobs.lock() {
            Ok(jobs) => jobs.send(wrapped),
            Err(poisoned) => poisoned.into_inner().send(wrapped),
        };
        sent.map_err(|_| JobFailed)?;
        rx.await.map_err(|_| JobFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_on_its_own_threads_and_survives_a_panicking_one() {
        let pool = CpuPool::new(2);
        let name = pool
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("npub-cpu-"));
        assert_eq!(pool.run(|| -> u8 { panic!("boom") }).await, Err(JobFailed));
        // Both threads still take jobs.
        let mut jobs = tokio::task::JoinSet::new();
        for i in 0..8u32 {
            let pool = Arc::clone(&pool);
            jobs.spawn(async move { pool.run(move || i * 2).await.unwrap() });
        }
        let mut results = jobs.join_all().await;
        results.sort_unstable();
        assert_eq!(results, (0..8).map(|i| i * 2).collect::<Vec<_>>());
    }
}
