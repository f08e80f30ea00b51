//! The C sources of `tests/c/` (the shared checks, `agent_test.c`) cross-compiled with Debian's
//! `arm-none-eabi-gcc` for the Cortex-M55, linked with this crate's `thumbv8m.main-none-eabihf`
//! static library, and run under QEMU `mps3-an547` with semihosting: the C toolchain and the Rust
//! library agree on the ABI on target. The manifests and packs come from a real npub server (in
//! memory in the image: the firmware has no network here; `fw/` covers that).
//!
//! `arm-none-eabi-gcc` (with newlib) and `qemu-system-arm` are required: without them this test
//! fails, it never passes vacuously (`.ci/run` installs both).
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{LiveServer, crate_dir, run, write_data_c};

const TARGET: &str = "thumbv8m.main-none-eabihf";
/// QEMU runs the whole check in a few seconds; a firmware stuck in a loop is stopped after this.
const QEMU_LIMIT: Duration = Duration::from_secs(300);

/// Builds the library for the target as a firmware would (release, `compact-sha`, no `std`).
fn target_staticlib() -> PathBuf {
    let workspace = crate_dir().join("../..");
    run(Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["build", "--release", "-p", "npub-agent", "--target", TARGET])
        .args(["--no-default-features", "--features", "compact-sha"]));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let lib = target_dir.join(TARGET).join("release/libnpub_agent.a");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

fn cross_compile(data: &Path, lib: &Path, elf: &Path) -> String {
    let c = crate_dir().join("tests/c");
    let qemu = c.join("qemu");
    run(Command::new("arm-none-eabi-gcc")
        .args(["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"])
        .args(["-std=c99", "-Os", "-g", "-Wall", "-Wextra", "-Werror"])
        .args(["-ffunction-sections", "-fdata-sections"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(&c)
        .arg(c.join("agent_test.c"))
        .arg(qemu.join("main.c"))
        .arg(qemu.join("startup.c"))
        .arg(data)
        .arg(lib)
        .arg("-T")
        .arg(qemu.join("an547.ld"))
        .args(["-nostartfiles", "--specs=rdimon.specs", "-Wl,--gc-sections"])
        .args(["-lc", "-lrdimon", "-lm", "-o"])
        .arg(elf));
    run(Command::new("arm-none-eabi-size").arg(elf))
}

/// Runs `elf` on the board until it exits (semihosting), or fails after [`QEMU_LIMIT`].
fn run_on_qemu(elf: &Path) -> (bool, String) {
    let mut child = Command::new("qemu-system-arm")
        .args(["-machine", "mps3-an547", "-nographic", "-monitor", "none"])
        .args(["-semihosting-config", "enable=on,target=native"])
        .arg("-kernel")
        .arg(elf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qemu-system-arm runs (CI installs it)");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > QEMU_LIMIT {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (status.is_some_and(|s| s.success()), text)
}

#[test]
fn the_c_sources_run_the_agent_on_a_cortex_m55_under_qemu() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let served = fleet.deploy_two_versions();
    fleet.stop();
    let data = dir.path().join("data.c");
    write_data_c(&served, &data);
    let elf = dir.path().join("agent_test.elf");
    let size = cross_compile(&data, &target_staticlib(), &elf);
    println!("{size}");
    let (exited, out) = run_on_qemu(&elf);
    println!("{out}");
    assert!(exited, "QEMU did not exit cleanly:\n{out}");
    assert!(
        out.contains("npub-agent C test on Cortex-M55 (QEMU mps3-an547)"),
        "{out}"
    );
    assert!(out.contains("installed (memory transport): slot"), "{out}");
    assert!(out.contains("driver payload in the arena"), "{out}");
    assert!(out.contains("power cuts:"), "{out}");
    assert!(out.contains("PASSED: 0 failures"), "{out}");
}
