//! The proof that a version's pack computes what its source model computes, run at upload when
//! the upload carries its source model (multipart part `source`), and the version's golden
//! vector (`npu_model::golden`), computed for every upload the functional model can run.
//!
//! | step | where                                   | what                                                      |
//! |------|-----------------------------------------|-----------------------------------------------------------|
//! | 1    | the CPU pool (`ops/cpu.rs`)             | load the pack into the functional model (`npu-model`), compute the golden vector and the seeded random input sets |
//! | 2    | a child process, awaited (no thread held) | the source model on those sets with TFLite's reference kernels: the pinned interpreter (`--reference-python`), `ulimit -v` [`Settings::memory_kib`], killed after `--proof-timeout` |
//! | 3    | the CPU pool                            | the functional model on the same sets, compared (`npu_model::prove::compare`) |
//!
//! The CPU pool rather than `spawn_blocking`: the pool exists because a burst of uploads on
//! tokio's growing blocking pool left RSS higher after every burst (issue #31); the proof's
//! model runs are the same kind of work. The functional model's memory is the pack's own regions
//! (bounded by the upload limit) and the pool's size bounds how many run at once. The reference
//! runs are child processes of up to [`Settings::memory_kib`] each: at most [`REFERENCE_RUNS`] run
//! at once ([`Settings::runs`]); an upload that waits longer than `--proof-timeout` for its turn
//! is stored with the proof `not_run` and says so, instead of a burst of proven uploads starting
//! a Python per upload (`--max-uploads`, 16 by default) and taking the host's memory.
//!
//! A proof that cannot run does not refuse the upload: the version is stored with the proof
//! `not_run` and the reason (no interpreter configured, the interpreter missing, the timeout, an
//! operation the functional model does not implement, a reference run that failed). A proof that
//! ran is `bit_exact` or `diverged`; deploying or rolling back to a `diverged` version needs
//! `override_proof: true`, and the override is in the audit entry ([`gate`]).
use std::path::{Path, PathBuf};
use std::time::Duration;

use npu_model::golden::{self, Golden};
use npu_model::prove::{self, Report, TensorSet};
use npu_model::reference::{self, Workdir};
use npub_core::io_bindings::{self, IoBinding};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::db::Conn;
use crate::http::error::ApiError;
use crate::ops::cpu::CpuPool;

/// Seeded random input sets a proof compares on, unless `--proof-inputs` says otherwise.
pub const DEFAULT_INPUTS: u32 = 5;
/// How long the reference run may take, unless `--proof-timeout` says otherwise: the 1 MB-class
/// model takes seconds on five inputs.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Reference runs (child processes) at once, whatever the number of uploads in flight.
pub const REFERENCE_RUNS: usize = 2;
/// The seed of a proof's random inputs: fixed, so that a proof can be run again and agree.
pub const SEED: u64 = 1;

/// How the server runs proofs (`--reference-python`, `--proof-timeout`, `--proof-inputs`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Python interpreter with tflite-runtime 2.14; `None`: proofs are not run.
    pub python: Option<PathBuf>,
    /// How long the reference run may take before it is killed.
    pub timeout: Duration,
    /// Seeded random input sets.
    pub inputs: u32,
    /// Virtual memory the reference run may map, in KiB.
    pub memory_kib: u64,
    /// Where the reference runs' work directories go (the staging directory).
    pub workdir: PathBuf,
    /// Turns to run a reference child ([`REFERENCE_RUNS`] permits).
    pub runs: std::sync::Arc<tokio::sync::Semaphore>,
}

/// A proof's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every output matched on every input.
    BitExact,
    /// An output differed somewhere.
    Diverged,
    /// The proof could not run (the reason is beside it).
    NotRun,
}

impl Status {
    /// The name stored in `versions.proof_status` and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BitExact => "bit_exact",
            Self::Diverged => "diverged",
            Self::NotRun => "not_run",
        }
    }
}

/// The proof as stored (`versions.proof`) and shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Proof {
    /// `bit_exact`, `diverged` or `not_run`.
    pub status: String,
    /// Why it was not run (`not_run` only).
    pub reason: Option<String>,
    /// One line per output: "bit-exact on N/N" or where it diverges; or "not run: reason".
    pub summary: String,
    /// `npu_model::prove::Report`: per output, how many inputs matched and the first divergence
    /// (input set, element, values, the NPU operation and its command offset).
    #[schema(value_type = Option<Object>)]
    pub report: Option<serde_json::Value>,
}

impl Proof {
    fn not_run(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Proof {
            status: Status::NotRun.as_str().into(),
            summary: format!("not run: {reason}"),
            reason: Some(reason),
            report: None,
        }
    }

    fn of(report: &Report) -> Self {
        let status = if report.bit_exact() {
            Status::BitExact
        } else {
            Status::Diverged
        };
        Proof {
            status: status.as_str().into(),
            reason: None,
            summary: report.to_string().trim_end().to_owned(),
            report: serde_json::to_value(report).ok(),
        }
    }
}

/// The golden vector as shown.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GoldenInfo {
    /// Bytes of the golden input (every model input, in order, concatenated).
    pub input_bytes: u64,
    /// SHA-256 of the golden input.
    pub input_sha256: String,
    /// SHA-256 of the outputs the functional model computes for it: what a device's self-test
    /// must reproduce.
    pub output_sha256: String,
    /// SHA-256 of the self-test record (`GET …/selftest`, "NPS1"): what a release signature's
    /// `selftest_digest` names (`npub release sign --selftest`).
    pub selftest_sha256: Option<String>,
}

impl GoldenInfo {
    /// The shown form of a stored golden vector.
    pub fn of(input: &[u8], output_sha256: &str) -> Self {
        GoldenInfo {
            input_bytes: input.len() as u64,
            input_sha256: crate::store::to_hex(&golden::output_digest(&[input])),
            output_sha256: output_sha256.to_owned(),
            selftest_sha256: selftest_record(input, output_sha256)
                .map(|r| crate::store::to_hex(&golden::output_digest(&[r]))),
        }
    }
}

/// The self-test record ("NPS1", `npub_core::release::SelfTest`) of a stored golden vector;
/// `None` when the digest is not 64 hex digits or the input is too large for a record.
pub fn selftest_record(input: &[u8], output_sha256: &str) -> Option<Vec<u8>> {
    let mut digest = [0u8; 32];
    if output_sha256.len() != 64 {
        return None;
    }
    for (i, d) in digest.iter_mut().enumerate() {
        *d = u8::from_str_radix(output_sha256.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    npub_core::release::encode_selftest(input, &digest)
}

/// Documents a self-test record's body ("NPS1", `npub_core::release::SelfTest`): bytes, not
/// JSON. Served to operators (`GET …/versions/{v}/selftest`) and to devices
/// (`GET /api/v1/device/packs/{sha256}/selftest`).
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)]
pub struct SelfTestRecord(Vec<u8>);

/// SHA-256 of the self-test record of a stored golden vector (`golden_input`, `golden_sha256`
/// columns): what a version-2 manifest and a release signature name. `None` when the version
/// has no golden vector (or it makes no record).
pub fn selftest_digest(input: Option<&[u8]>, output_sha256: Option<&str>) -> Option<[u8; 32]> {
    let record = selftest_record(input?, output_sha256?)?;
    Some(npub_core::manifest::sha256(&record))
}

/// What an upload's proof step found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The proof, when the upload carried its source model.
    pub proof: Option<Proof>,
    /// The golden vector, when the functional model runs the pack.
    pub golden: Option<Golden>,
    /// Why there is no golden vector (logged).
    pub no_golden: Option<String>,
}

/// What the CPU pool prepares from the pack.
struct Prepared {
    io: Vec<IoBinding>,
    golden: Result<Golden, String>,
}

/// Runs the proof step of an upload: `pack` is the staged pack file, `io_json` its bindings'
/// JSON (if any), `source` the staged source model (if one was sent).
pub async fn run(
    cpu: &CpuPool,
    settings: &Settings,
    pack: &Path,
    io_json: Option<&str>,
    source: Option<&Path>,
) -> Outcome {
    let Some(io_json) = io_json else {
        let why = "the version has no IO bindings (the functional model needs them; send an `io` \
                   part with a .npub)";
        return Outcome {
            proof: source.map(|_| Proof::not_run(why)),
            golden: None,
            no_golden: Some(why.into()),
        };
    };
    let prepared = {
        let (pack, io_json) = (pack.to_owned(), io_json.to_owned());
        within(settings, cpu.run(move || prepare(&pack, &io_json))).await
    };
    let prepared = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(why)) => {
            return Outcome {
                proof: source.map(|_| Proof::not_run(why.clone())),
                golden: None,
                no_golden: Some(why),
            };
        }
        Err(e) => {
            let why = format!("the functional model failed: {e}");
            return Outcome {
                proof: source.map(|_| Proof::not_run(why.clone())),
                golden: None,
                no_golden: Some(why),
            };
        }
    };
    let (golden, no_golden) = match prepared.golden {
        Ok(g) => (Some(g), None),
        Err(why) => (None, Some(why)),
    };
    let proof = match source {
        None => None,
        Some(_) if golden.is_none() => no_golden.clone().map(Proof::not_run),
        Some(source) => Some(prove_against(cpu, settings, pack, prepared.io, source).await),
    };
    Outcome {
        proof,
        golden,
        no_golden,
    }
}

/// Step 1: the bindings and the golden vector.
fn prepare(pack_path: &Path, io_json: &str) -> Result<Prepared, String> {
    let pack = std::fs::read(pack_path).map_err(|e| format!("reading the pack: {e}"))?;
    let (io, _) = io_bindings::from_json(io_json).map_err(|e| format!("IO bindings: {e}"))?;
    let golden = npu_model::Model::load(&pack, &io)
        .and_then(|m| golden::compute(&m, &io))
        .map_err(|e| format!("the functional model cannot run this pack: {e}"));
    Ok(Prepared { io, golden })
}

/// Steps 2 and 3.
async fn prove_against(
    cpu: &CpuPool,
    settings: &Settings,
    pack: &Path,
    io: Vec<IoBinding>,
    source: &Path,
) -> Proof {
    let Some(python) = &settings.python else {
        return Proof::not_run(
            "no reference interpreter is configured (--reference-python: a Python with \
             tflite-runtime 2.14 and numpy < 2)",
        );
    };
    if !python.exists() {
        return Proof::not_run(format!(
            "the reference interpreter {} does not exist",
            python.display()
        ));
    }
    let sets = prove::random_inputs(&io, settings.inputs, SEED);
    let reference = match reference_run(settings, python, source, &sets).await {
        Ok(outputs) => outputs,
        Err(why) => return Proof::not_run(why),
    };
    let pack = pack.to_owned();
    let compared = within(
        settings,
        cpu.run(move || {
            let bytes = std::fs::read(&pack).map_err(|e| format!("reading the pack: {e}"))?;
            prove::compare(&bytes, &io, &sets, &reference, SEED)
                .map_err(|e| format!("the functional model cannot run this pack: {e}"))
        }),
    )
    .await;
    match compared {
        Ok(Ok(report)) => Proof::of(&report),
        Ok(Err(why)) => Proof::not_run(why),
        Err(e) => Proof::not_run(format!("the functional model failed: {e}")),
    }
}

/// A CPU-pool job's answer, or why there is none: it panicked, or it took longer than
/// `--proof-timeout` (the upload goes on without it; the job itself runs to its end on its pool
/// thread, since a thread cannot be stopped from outside, and its answer is dropped).
async fn within<T>(
    settings: &Settings,
    job: impl std::future::Future<Output = Result<Result<T, String>, crate::ops::cpu::JobFailed>>,
) -> Result<Result<T, String>, String> {
    match tokio::time::timeout(settings.timeout, job).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Ok(Err(format!(
            "the functional model took longer than {} s (--proof-timeout)",
            settings.timeout.as_secs()
        ))),
    }
}

/// The source model's outputs on `sets`, from a child process that is killed when the timeout
/// passes (or when this future is dropped).
async fn reference_run(
    settings: &Settings,
    python: &Path,
    source: &Path,
    sets: &[TensorSet],
) -> Result<Vec<TensorSet>, String> {
    // Its turn first, waited for no longer than the run itself may take.
    let _turn = match tokio::time::timeout(settings.timeout, settings.runs.acquire()).await {
        Ok(Ok(permit)) => permit,
        Ok(Err(_)) => return Err("the server is stopping".into()),
        Err(_) => {
            return Err(format!(
                "{REFERENCE_RUNS} reference runs of other uploads took every turn for {} s \
                 (--proof-timeout); not run",
                settings.timeout.as_secs()
            ));
        }
    };
    let dir = Workdir::prepare(&settings.workdir, sets).map_err(|e| e.to_string())?;
    let command = dir
        .command(python, source, settings.memory_kib)
        .map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    let status = match tokio::time::timeout(settings.timeout, child.wait()).await {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(format!("waiting for the reference run: {e}")),
        Err(_) => {
            let _ = child.kill().await;
            return Err(format!(
                "the reference run took longer than {} s (--proof-timeout) and was stopped",
                settings.timeout.as_secs()
            ));
        }
    };
    if !status.success() {
        return Err(format!(
            "the reference run of the source model {}",
            reference::failure(status, &dir.stderr())
        ));
    }
    dir.outputs().map_err(|e| e.to_string())
}

/// 409 when the version `version_id` has a diverged proof and `override_proof` is not set; with
/// it, `Ok(Some(summary))` for the audit entry. `Ok(None)`: nothing to override.
pub async fn gate(
    conn: &mut Conn,
    model: &str,
    version: &str,
    version_id: i64,
    override_proof: bool,
) -> Result<Option<String>, ApiError> {
    let row: Option<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT proof_status, proof FROM versions WHERE id = $1")
            .bind(version_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((Some(status), proof)) = row else {
        return Ok(None);
    };
    if status != Status::Diverged.as_str() {
        return Ok(None);
    }
    let summary = proof
        .as_deref()
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .and_then(|p| p["summary"].as_str().map(str::to_owned))
        .unwrap_or_default();
    if override_proof {
        return Ok(Some(summary));
    }
    Err(ApiError::Conflict(format!(
        "model {model:?} version {version:?} does not compute what its source model computes \
         (its proof diverged: {}); deploy it anyway with \"override_proof\": true (audited)",
        summary.replace('\n', "; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every turn taken: the run waits no longer than `--proof-timeout`, starts nothing, and says
    /// why (the upload is stored with the proof not run).
    #[tokio::test]
    async fn rejects_a_reference_run_when_every_turn_stays_taken() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            python: None,
            timeout: Duration::from_millis(200),
            inputs: 1,
            memory_kib: 1 << 20,
            workdir: dir.path().to_owned(),
            runs: std::sync::Arc::new(tokio::sync::Semaphore::new(REFERENCE_RUNS)),
        };
        let _all = settings
            .runs
            .clone()
            .acquire_many_owned(REFERENCE_RUNS as u32)
            .await
            .unwrap();
        // An interpreter that does not exist: reaching the spawn would say so instead.
        let python = dir.path().join("no-such-python");
        let why = reference_run(&settings, &python, &dir.path().join("m.tflite"), &[])
            .await
            .unwrap_err();
        assert!(why.contains("took every turn"), "{why}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing was prepared"
        );
    }
}
