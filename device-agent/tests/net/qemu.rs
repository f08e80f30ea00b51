//! The firmware under QEMU, as a test drives it: built once per test binary, started through
//! `fw/run-qemu.sh` on a flash file, its console read line by line, killed with SIGKILL.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use device_agent::{Agent, Arena, Booted, Error, RecordingNpu, State};

use super::RamNor;

pub const QEMU: &str = "qemu-system-arm";
/// The firmware's slot size (its `--slot-kib` default) and XIP window (`fw/memory.x`).
pub const SLOT_BYTES: u32 = 1280 * 1024;
pub const XIP_BASE: u32 = 0x6000_0000;

fn fw_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fw"))
}

/// Fails, never skips, without QEMU.
pub fn require_qemu() {
    match Command::new(QEMU).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "{QEMU} is not installed: run `apt-get update && apt-get install -y qemu-system-arm` \
             (CI's .ci/run installs it); this test cannot be skipped"
        ),
    }
}

/// The firmware image, built (once per test binary) for thumbv8m.main-none-eabihf.
pub fn firmware() -> &'static Path {
    static ELF: OnceLock<PathBuf> = OnceLock::new();
    ELF.get_or_init(|| {
        require_qemu();
        let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fw");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let build = Command::new(cargo)
            .current_dir(fw_dir())
            .args(["build", "--release", "--locked", "--target-dir"])
            .arg(&target_dir)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("running cargo for fw/");
        assert!(build.success(), "building fw/ failed");
        target_dir.join("thumbv8m.main-none-eabihf/release/device-agent-fw")
    })
}

/// One boot of the firmware.
pub struct Run {
    child: Child,
    lines: Receiver<String>,
    /// Every line so far.
    pub log: Vec<String>,
    pub started: Instant,
}

impl Run {
    /// `fw/run-qemu.sh` with `args` (and `--server URL --token T --trust F --flash F` among them).
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(fw_dir().join("run-qemu.sh"))
            .args(args)
            .env("NPUB_FW_ELF", firmware())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting run-qemu.sh");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            log: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Reads lines until one satisfies `want` (returned), the firmware exits (`None`), or
    /// `timeout` passes (panics: the firmware hangs).
    pub fn until(
        &mut self,
        timeout: Duration,
        mut want: impl FnMut(&str) -> bool,
    ) -> Option<String> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    println!("    | {line}");
                    self.log.push(line.clone());
                    if want(&line) {
                        return Some(line);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!(
                        "the firmware printed nothing wanted within {timeout:?}:\n{}",
                        self.log.join("\n")
                    );
                }
            }
        }
    }

    /// A power cut: SIGKILL, then reaps QEMU.
    pub fn kill(mut self) -> Vec<String> {
        self.child.kill().unwrap();
        let _ = self.child.wait();
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
        self.log
    }

    /// Lets the firmware finish; its exit status and console.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        self.until(timeout, |_| false);
        let status = self.child.wait().unwrap();
        (status, self.log)
    }
}

/// The firmware's arguments for `fleet`-style servers.
pub fn args<'a>(url: &'a str, token: &'a str, trust: &'a str, flash: &'a str) -> Vec<&'a str> {
    vec![
        "--server", url, "--token", token, "--trust", trust, "--flash", flash, "--once",
    ]
}

/// The agent core over a copy of the flash file, as the firmware lays it out.
pub fn agent_on(flash: &Path) -> Agent<RamNor> {
    let layout = super::layout(SLOT_BYTES, XIP_BASE);
    let mut bytes = std::fs::read(flash).unwrap();
    bytes.resize(layout.end() as usize, 0xFF);
    Agent::open(RamNor(bytes), layout, super::device()).unwrap()
}

/// The journal in the flash file.
pub fn state_of(flash: &Path) -> State {
    *agent_on(flash).state()
}

/// What a boot on (a copy of) the flash file binds.
pub fn boot_of(flash: &Path) -> Result<Booted, Error> {
    let mut agent = agent_on(flash);
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 256 * 1024];
    let mut arena = Arena {
        bytes: &mut mem,
        bus_address: 0x6080_0000,
    };
    agent.boot(&mut npu, &mut arena)
}

/// The active slot's first `len` bytes in the flash file.
pub fn active_bytes(flash: &Path, len: usize) -> Vec<u8> {
    let agent = agent_on(flash);
    let slot = agent.state().active().expect("a slot is active");
    let start = agent.layout().slot(slot) as usize;
    std::fs::read(flash).unwrap()[start..start + len].to_vec()
}

/// The stack budget of one `Agent::poll` on the device (issue #12: ≤ 8 KiB), its own frame and
/// the transport's included. Issue 37's golden self-test measured 8,556 B on its own branch (the
/// 312-byte manifest buffers, the install's job with its self-test record, the record's fetch),
/// but on main with npub-tls's link (its TLS paths out of line) the deepest poll is 7,752 B:
/// the budget stays 8 KiB.
pub const POLL_STACK_BUDGET: usize = 8 * 1024;

/// Asserts that every install the firmware logged (`download: …; stack N B`, the painted depth of
/// the `Agent::poll` that made it) stayed within [`POLL_STACK_BUDGET`], and that there was one.
pub fn assert_poll_stack_within_budget(log: &str) {
    let depths: Vec<usize> = log
        .lines()
        .filter(|l| l.starts_with("download: "))
        .filter_map(|l| {
            l.rsplit_once("; stack ")?
                .1
                .strip_suffix(" B")?
                .parse()
                .ok()
        })
        .collect();
    assert!(!depths.is_empty(), "no poll's stack figure in: {log}");
    for depth in depths {
        assert!(
            depth <= POLL_STACK_BUDGET,
            "Agent::poll went {depth} B deep, over its {POLL_STACK_BUDGET} B budget: {log}"
        );
    }
}
