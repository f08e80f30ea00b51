//! `npub prove PACK --source MODEL.tflite [--inputs N] [--input FILE…]`: proof that a pack
//! computes what its source model computes.
//!
//! The source (pre-Vela) model runs with TFLite's reference kernels (`OpResolverType.BUILTIN_REF`,
//! in a pinned Python interpreter: tflite-runtime 2.14, numpy < 2), the pack through the Ethos-U55
//! functional model, on N seeded random input sets plus the user's own (`--input`, one file per
//! model input, in order, per set). Per output it reports "bit-exact on N/N" or where it diverges:
//! the first differing element, the largest absolute difference, and the NPU operation (and its
//! command offset) that wrote that element. Exit 0 when every output is bit-exact, 1 when one
//! diverges or the pack cannot be run, 2 on usage errors (including a missing interpreter).
//!
//! The interpreter is `--python`, else `$NPUB_REFERENCE_PYTHON`, else `/work/venvs/tflite/bin/python`
//! if it exists.
use std::path::{Path, PathBuf};

use npu_model::prove::{self, TensorSet};
use npu_model::reference;
use npub_core::io_bindings::IoKind;

use super::run::load_bindings;
use super::{Failure, read_file};

/// Where `.ci/run` and the docs put the pinned interpreter.
const DEFAULT_PYTHON: &str = "/work/venvs/tflite/bin/python";
/// How to make it.
const HOW_TO_INSTALL: &str = "create it with: python3.11 -m venv VENV && \
     VENV/bin/pip install 'tflite-runtime==2.14' 'numpy<2', then pass --python VENV/bin/python \
     or set NPUB_REFERENCE_PYTHON";

/// Arguments of `npub prove`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// The model Vela compiled the pack from (the `.tflite` before Vela).
    #[arg(long)]
    source: PathBuf,
    /// Seeded random input sets to compare on.
    #[arg(long = "inputs", default_value_t = 10)]
    n: u32,
    /// The seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A user input set: one file per model input, in order; repeat for each input of each set.
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// The IO bindings (default: PACK.io.json beside the pack).
    #[arg(long = "io", value_name = "FILE")]
    io: Option<PathBuf>,
    /// The Python interpreter with tflite-runtime 2.14.
    #[arg(long, env = "NPUB_REFERENCE_PYTHON")]
    python: Option<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long = "json", value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `npub prove`.
pub fn run(args: Args) -> Result<(), Failure> {
    let pack = read_file(&args.pack)?;
    let io = load_bindings(&args.pack, args.io.as_deref())?;
    let n_inputs = io.iter().filter(|b| b.kind == IoKind::Input).count();
    let mut sets = prove::random_inputs(&io, args.n, args.seed);
    if n_inputs > 0 && args.inputs.len() % n_inputs != 0 {
        return Err(Failure::Usage(format!(
            "{} --input file(s) given; the model has {n_inputs} input(s) per set",
            args.inputs.len()
        )));
    }
    for chunk in args.inputs.chunks(n_inputs.max(1)) {
        sets.push(
            chunk
                .iter()
                .map(|p| read_file(p))
                .collect::<Result<_, _>>()?,
        );
    }
    let python = interpreter(args.python.as_deref())?;
    let reference = reference_outputs(&python, &args.source, &sets)?;
    let report = prove::compare(&pack, &io, &sets, &reference, args.seed)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", args.pack.display())))?;
    print!("{report}");
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    }
    if report.bit_exact() {
        Ok(())
    } else {
        Err(Failure::Rejected(format!(
            "{} does not compute what {} computes",
            args.pack.display(),
            args.source.display()
        )))
    }
}

fn interpreter(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None if Path::new(DEFAULT_PYTHON).exists() => PathBuf::from(DEFAULT_PYTHON),
        None => {
            return Err(Failure::Usage(format!(
                "no reference interpreter: {HOW_TO_INSTALL}"
            )));
        }
    };
    if !path.exists() {
        return Err(Failure::Usage(format!(
            "reference interpreter {} does not exist: {HOW_TO_INSTALL}",
            path.display()
        )));
    }
    Ok(path)
}

/// Runs the source model on every set with the reference kernels.
fn reference_outputs(
    python: &Path,
    source: &Path,
    sets: &[TensorSet],
) -> Result<Vec<TensorSet>, Failure> {
    match reference::run_blocking(python, source, sets) {
        Err(e) => Err(Failure::Usage(e.to_string())),
        Ok(Ok(outputs)) => Ok(outputs),
        Ok(Err(why)) => {
            let hint = if why.contains("No module named") || why.starts_with("cannot run") {
                format!("; {HOW_TO_INSTALL}")
            } else {
                String::new()
            };
            Err(Failure::Usage(format!(
                "the reference run of {} failed: {why}{hint}",
                source.display()
            )))
        }
    }
}
