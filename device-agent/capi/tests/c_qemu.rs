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

/// Builds the library for the target as a firmware would (release with `opt-level = "s"`, LTO
/// and one codegen unit, as the README's size figures are taken; `compact-sha`, no `std`).
fn target_staticlib() -> PathBuf {
    let workspace = crate_dir().join("../..");
    run(Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "s")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .args(["build", "--release", "-p", "npub-agent", "--target", TARGET])
        .args(["--no-default-features", "--features", "compact-sha"]));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let lib = target_dir.join(TARGET).join("release/libnpub_agent.a");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

/// The README's text.
fn readme() -> String {
    std::fs::read_to_string(crate_dir().join("../README.md")).unwrap()
}

/// The compiler flags the README tells a firmware to link the library with (the `-m…` words of
/// its "link it with" line): the image is built with exactly these, so a flag the GCC of
/// `.ci/run` refuses fails this test.
fn readme_link_flags() -> Vec<String> {
    let text = readme();
    let line = text
        .lines()
        .find(|l| l.contains("libnpub_agent.a; link it with"))
        .expect("the README's build line for the C library");
    let flags: Vec<String> = line
        .split_once("link it with")
        .unwrap()
        .1
        .split_whitespace()
        .take_while(|w| w.starts_with("-m"))
        .map(str::to_owned)
        .collect();
    assert!(
        flags.iter().any(|f| f.starts_with("-mcpu=")),
        "no -mcpu in: {line}"
    );
    flags
}

/// The `.text` input sections of `libnpub_agent.a` that the link kept, summed from the GNU ld
/// map: what the library costs in the image.
fn library_text_bytes(map: &str) -> u64 {
    let mut section = String::new();
    let mut total = 0;
    // Past the list of what `--gc-sections` discarded.
    let kept = map
        .split_once("Linker script and memory map")
        .expect("a GNU ld map")
        .1;
    for line in kept.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with(' ') && words.first().is_some_and(|w| w.starts_with('.')) {
            section = words[0].to_owned();
        }
        let Some(path) = words.last() else { continue };
        if !path.contains("libnpub_agent.a(") || !section.starts_with(".text") {
            continue;
        }
        // `[.section] 0xADDRESS 0xSIZE path`
        let n = words.len();
        if n >= 3
            && let Some(size) = words[n - 2].strip_prefix("0x")
            && words[n - 3].starts_with("0x")
        {
            total += u64::from_str_radix(size, 16).unwrap();
        }
    }
    total
}

/// The figure the README gives for the library's `.text` ("the library's `.text` is N B").
fn readme_library_text() -> u64 {
    let text = readme().replace('\n', " ");
    let at = text
        .find("the library's `.text` is ")
        .expect("the README's C library size");
    let digits: String = text[at + "the library's `.text` is ".len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

fn cross_compile(data: &Path, lib: &Path, elf: &Path) -> String {
    let c = crate_dir().join("tests/c");
    let qemu = c.join("qemu");
    run(Command::new("arm-none-eabi-gcc")
        .args(readme_link_flags())
        .arg("-mthumb")
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
        .arg(format!("-Wl,-Map={}", elf.with_extension("map").display()))
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
    // The README's figure for the library is this build's, within 2 %.
    let map = std::fs::read_to_string(elf.with_extension("map")).unwrap();
    let (measured, stated) = (library_text_bytes(&map), readme_library_text());
    println!("libnpub_agent.a in the image: .text {measured} B (README: {stated} B)");
    let off = measured.abs_diff(stated) as f64 / measured as f64;
    assert!(
        off <= 0.02,
        "the README says the library's .text is {stated} B, the image holds {measured} B \
         ({:.1} % off): update device-agent/README.md",
        off * 100.0
    );
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
