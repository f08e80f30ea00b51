//! The on-target proof: builds `fw/` for `thumbv8m.main-none-eabihf` and runs it on QEMU's
//! Cortex-M55 machine (`mps3-an547`). The firmware installs a real pack into an emulated OSPI NOR,
//! re-validates it, binds it, reboots, binds it again, and exits 0 only if all of that worked.
//!
//! QEMU is required: without `qemu-system-arm` this test fails (CI installs it), it never passes
//! by skipping.
use std::path::PathBuf;
use std::process::Command;

const QEMU: &str = "qemu-system-arm";

#[test]
fn the_agent_installs_and_binds_a_pack_on_a_cortex_m55() {
    match Command::new(QEMU).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "{QEMU} is not installed: run `apt-get update && apt-get install -y qemu-system-arm` \
             (CI's .ci/run installs it); this test cannot be skipped"
        ),
    }
    let fw = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fw"));
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fw");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .current_dir(&fw)
        .args(["build", "--release", "--target-dir"])
        .arg(&target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("running cargo for fw/");
    assert!(build.success(), "building fw/ failed");
    let elf = target_dir.join("thumbv8m.main-none-eabihf/release/device-agent-fw");

    let run = Command::new(QEMU)
        .args([
            "-M",
            "mps3-an547",
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
        ])
        .arg("-kernel")
        .arg(&elf)
        .output()
        .expect("running qemu-system-arm");
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(
        run.status.success(),
        "the firmware failed under QEMU: {}",
        run.status
    );
    assert!(stdout.contains("rebooted: slot A re-validated and bound"));
    assert!(stdout.trim_end().ends_with("PASS"));
}
