//! Running the source (pre-Vela) model with TFLite's reference kernels, in a pinned Python
//! interpreter (tflite-runtime 2.14, numpy < 2), for the proof.
//!
//! The work is split so that a blocking caller (the CLI) and an asynchronous one (the server,
//! which must not hold a thread while Python runs) share everything but the wait:
//!
//! | step | function                | what                                                          |
//! |------|-------------------------|---------------------------------------------------------------|
//! | 1    | [`Workdir::prepare`]     | a fresh directory: `reference.py` and `set-K/input-I.bin`     |
//! | 2    | [`Workdir::command`]     | the command, bounded in memory (`ulimit -v`) and to one thread |
//! | 3    | the caller              | runs it (the server with a timeout, killing it when it passes) |
//! | 4    | [`Workdir::outputs`]     | `set-K/output-J.bin`, in the model's output order             |
//!
//! The directory is removed when the [`Workdir`] is dropped.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::prove::TensorSet;

/// The reference runner (`npu-model/reference/reference.py`), written into each work directory.
pub const REFERENCE_PY: &str = include_str!("../reference/reference.py");

/// Virtual memory a reference run may map, in KiB, unless the caller says otherwise: the
/// interpreter, numpy and a 1 MB-class model with its tensors take well under 400 MiB; a model
/// that needs more than this is not one a microcontroller runs.
pub const DEFAULT_MEMORY_KIB: u64 = 2 * 1024 * 1024;

/// What went wrong around a reference run (the run's own failure is [`failure`]'s).
#[derive(Debug)]
pub enum ReferenceError {
    /// The work directory or one of its files could not be written or read.
    Io {
        /// Which file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

impl core::fmt::Display for ReferenceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for ReferenceError {}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReferenceError + '_ {
    move |error| ReferenceError::Io {
        path: path.to_owned(),
        error,
    }
}

/// A reference run's directory, removed when dropped.
#[derive(Debug)]
pub struct Workdir {
    root: PathBuf,
    sets: usize,
}

impl Workdir {
    /// Makes a fresh directory under `parent` holding the runner and every input set.
    pub fn prepare(parent: &Path, sets: &[TensorSet]) -> Result<Workdir, ReferenceError> {
        let root = unique_dir(parent)?;
        let dir = Workdir {
            root,
            sets: sets.len(),
        };
        let script = dir.script();
        std::fs::write(&script, REFERENCE_PY).map_err(io(&script))?;
        for (k, set) in sets.iter().enumerate() {
            let d = dir.set_dir(k);
            std::fs::create_dir(&d).map_err(io(&d))?;
            for (i, bytes) in set.iter().enumerate() {
                let p = d.join(format!("input-{i}.bin"));
                std::fs::write(&p, bytes).map_err(io(&p))?;
            }
        }
        Ok(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    fn script(&self) -> PathBuf {
        self.root.join("reference.py")
    }

    fn set_dir(&self, k: usize) -> PathBuf {
        self.root.join(format!("set-{k}"))
    }

    /// Where the run's standard error goes (read by [`failure`]).
    pub fn stderr_path(&self) -> PathBuf {
        self.root.join("stderr.txt")
    }

    /// The command that runs `source` on every set with `python`: under `sh`'s `ulimit -v
    /// memory_kib` (no `unsafe` `pre_exec` needed), numpy's and TFLite's thread pools at one
    /// thread, standard output discarded and standard error into [`Self::stderr_path`] (a file,
    /// so that a chatty run can never block on a full pipe).
    pub fn command(
        &self,
        python: &Path,
        source: &Path,
        memory_kib: u64,
    ) -> Result<Command, ReferenceError> {
        let err = self.stderr_path();
        let stderr = std::fs::File::create(&err).map_err(io(&err))?;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("ulimit -v {memory_kib} && exec \"$0\" \"$@\""))
            .arg(python)
            .arg(self.script())
            .arg(source)
            .arg(&self.root)
            .env("OMP_NUM_THREADS", "1")
            .env("OPENBLAS_NUM_THREADS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        Ok(cmd)
    }

    /// What the run wrote to standard error, trimmed (at most 4 KiB of its end).
    pub fn stderr(&self) -> String {
        let text = std::fs::read(self.stderr_path()).unwrap_or_default();
        let tail = &text[text.len().saturating_sub(4096)..];
        String::from_utf8_lossy(tail).trim().to_owned()
    }

    /// The outputs the run wrote: per set, `output-0.bin`, `output-1.bin`, … until one is
    /// missing.
    pub fn outputs(&self) -> Result<Vec<TensorSet>, ReferenceError> {
        let mut all = Vec::with_capacity(self.sets);
        for k in 0..self.sets {
            let d = self.set_dir(k);
            let mut outs = Vec::new();
            for j in 0.. {
                let p = d.join(format!("output-{j}.bin"));
                if !p.exists() {
                    break;
                }
                outs.push(std::fs::read(&p).map_err(io(&p))?);
            }
            all.push(outs);
        }
        Ok(all)
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Why a run that exited with `status` failed, in words, from its standard error: a missing
/// module says the venv is not the pinned one.
pub fn failure(status: std::process::ExitStatus, stderr: &str) -> String {
    let what = match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal (out of memory?)".to_owned(),
    };
    if stderr.is_empty() {
        what
    } else {
        format!("{what}: {stderr}")
    }
}

/// Runs `source` on every set with `python` and waits (for the CLI): the outputs, or why not.
pub fn run_blocking(
    python: &Path,
    source: &Path,
    sets: &[TensorSet],
) -> Result<Result<Vec<TensorSet>, String>, ReferenceError> {
    let dir = Workdir::prepare(&std::env::temp_dir(), sets)?;
    let status = match dir.command(python, source, DEFAULT_MEMORY_KIB)?.status() {
        Ok(s) => s,
        Err(e) => return Ok(Err(format!("cannot run {}: {e}", python.display()))),
    };
    if !status.success() {
        return Ok(Err(failure(status, &dir.stderr())));
    }
    dir.outputs().map(Ok)
}

/// A directory under `parent` that did not exist before.
fn unique_dir(parent: &Path) -> Result<PathBuf, ReferenceError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = parent.join(format!("npub-reference-{}-{nanos}-{n}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&p)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_fails_says_why_from_its_stderr() {
        let dir = Workdir::prepare(&std::env::temp_dir(), &[vec![vec![1, 2, 3]]]).unwrap();
        let input = dir.path().join("set-0/input-0.bin");
        assert_eq!(std::fs::read(&input).unwrap(), [1, 2, 3]);
        // `false` stands in for a Python that cannot import tflite_runtime.
        let mut cmd = dir
            .command(
                Path::new("/bin/false"),
                Path::new("m.tflite"),
                DEFAULT_MEMORY_KIB,
            )
            .unwrap();
        let status = cmd.status().unwrap();
        assert_eq!(failure(status, &dir.stderr()), "exited with status 1");
        assert!(dir.outputs().unwrap()[0].is_empty());
        let root = dir.path().to_owned();
        drop(dir);
        assert!(!root.exists(), "the work directory is removed");
    }
}
