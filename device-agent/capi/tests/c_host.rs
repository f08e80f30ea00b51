//! The C program (`tests/c/`), built with the host's gcc under AddressSanitizer and
//! UndefinedBehaviorSanitizer and linked with this crate's static library, pulls a deployment
//! from a real npub server on loopback over a POSIX socket, installs, binds and prints the job;
//! then (memory transport, the server's own manifests and packs) the bad calls, a failed
//! self-test, and a power cut at every flash operation of one upgrade. Over TLS
//! (`NPUB_TRANSPORT_TLS_STREAM`): the C program's own TLS stack (OpenSSL on the host, standing in
//! for the mbedTLS of an FSP build) behind the same four stream callbacks installs from a server
//! started with a certificate, and refuses it under another CA.
mod common;

/// The server tests' certificates (a CA, server certificates), made in the test.
#[path = "../../../server/tests/tls/certs.rs"]
mod certs;

use std::path::PathBuf;
use std::process::Command;

use common::{LiveServer, crate_dir, run, write_data_c};

/// Builds the library the C program links (the host's, `std`, debug as this test), in a target
/// directory of its own: the `cargo test` running this holds the lock on its own while tests run,
/// and `cargo test` builds only the rlib there anyway.
fn staticlib() -> PathBuf {
    let workspace = crate_dir().join("../..");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("c-host");
    run(Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["build", "-p", "npub-agent", "--target-dir"])
        .arg(&target_dir));
    let lib = target_dir.join("debug/libnpub_agent.a");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

/// The C program (`agent_test.c`, `host_main.c`, the served packs in `data.c`) built in `dir`.
fn host_program(dir: &std::path::Path, served: &common::Served) -> PathBuf {
    let data = dir.join("data.c");
    write_data_c(served, &data);
    let c = crate_dir().join("tests/c");
    let exe = dir.join("host_test");
    run(Command::new("gcc")
        .args(["-std=c99", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .args([
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer",
        ])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(&c)
        .arg(c.join("agent_test.c"))
        .arg(c.join("host_main.c"))
        .arg(&data)
        .arg(staticlib())
        .args(["-lssl", "-lcrypto", "-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe));
    exe
}

#[test]
fn a_c_program_installs_from_a_real_server_and_survives_every_power_cut() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = LiveServer::start(&dir.path().join("server"));
    let served = fleet.deploy_two_versions();
    let exe = host_program(dir.path(), &served);
    let out = run(Command::new(&exe)
        .arg(&fleet.url)
        .arg(&served.token)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        .env("UBSAN_OPTIONS", "print_stacktrace=1"));
    println!("{out}");
    assert!(out.contains("installed from the server: slot"), "{out}");
    assert!(out.contains("driver payload in the arena"), "{out}");
    assert!(out.contains("PASSED: 0 failures"), "{out}");
    // The server saw the C device install the pack.
    fleet.stop();
}

#[test]
fn a_c_program_installs_over_its_own_tls_stream_and_refuses_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs::Ca::new("npub test CA");
    let (cert, key) = ca
        .server(&["localhost", "127.0.0.1"], certs::Validity::Now)
        .write(dir.path(), "server");
    let fleet = LiveServer::start_tls(&dir.path().join("server"), &cert, &key);
    assert!(
        fleet.device_url.starts_with("https://"),
        "{}",
        fleet.device_url
    );
    let served = fleet.deploy_two_versions();
    let exe = host_program(dir.path(), &served);
    let ca_file = ca.write(dir.path(), "ca");
    let other = certs::Ca::new("another CA").write(dir.path(), "other-ca");
    let out = run(Command::new(&exe)
        .arg("--tls")
        .arg(&fleet.device_url)
        .arg(&served.token)
        .arg(&ca_file)
        .arg(&other)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        .env("UBSAN_OPTIONS", "print_stacktrace=1"));
    println!("{out}");
    assert!(out.contains("installed over TLS: slot"), "{out}");
    assert!(out.contains("tls: 1 handshakes"), "{out}");
    assert!(
        out.contains("under another CA: ") && out.contains("TLS: the server's certificate"),
        "{out}"
    );
    assert!(out.contains("PASSED: 0 failures"), "{out}");
    fleet.stop();
}
