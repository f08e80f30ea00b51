//! The C program (`tests/c/`), built with the host's gcc under AddressSanitizer and
//! UndefinedBehaviorSanitizer and linked with this crate's static library, pulls a deployment
//! from a real npub server on loopback over a POSIX socket, installs, binds and prints the job;
//! then (memory transport, the server's own manifests and packs) the bad calls, a failed
//! self-test, and a power cut at every flash operation of one upgrade. Over TLS
//! (`NPUB_TRANSPORT_TLS_STREAM`): the C program's own TLS stack (OpenSSL on the host, standing in
//! for the mbedTLS of an FSP build) behind the same four stream callbacks installs from a server
//! started with a certificate, and refuses it under another CA. With presigned downloads (issue 35
//! point 4: the server over TLS with `--presign-downloads` and its packs in a real bucket, s3s-fs
//! behind a TLS front): the pack comes through `connect_anonymous` hops, the device's client
//! certificate and token never reach the bucket; without `connect_anonymous` the hop is refused.
mod common;

#[path = "common/bucket_front.rs"]
mod bucket_front;

/// A real S3 server on loopback (s3s-fs), shared with the server's tests.
#[path = "../../../server/tests/s3/bucket.rs"]
mod bucket;

/// The server tests' certificates (a CA, server certificates), made in the test.
#[path = "../../../server/tests/tls/certs.rs"]
mod certs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

/// The CA of the presigned tests (the server's, the bucket front's and the device's
/// certificates), made once per test binary. The server's S3 client trusts the system's roots,
/// which `SSL_CERT_FILE` replaces with this CA, so that it reaches the bucket through its front.
fn pki() -> &'static (certs::Ca, PathBuf) {
    static PKI: OnceLock<(certs::Ca, PathBuf)> = OnceLock::new();
    PKI.get_or_init(|| {
        let ca = certs::Ca::new("npub presign CA");
        let dir = tempfile::tempdir().unwrap().keep();
        let file = ca.write(&dir, "ca");
        // SAFETY: every test of this binary calls `pki()` first, before it starts any thread or
        // server of its own, so no other thread of this process reads the environment meanwhile
        // (the others wait on this `OnceLock`).
        unsafe { std::env::set_var("SSL_CERT_FILE", &file) };
        (ca, file)
    })
}

/// A bucket (s3s-fs) behind a TLS front, and an npub server over TLS that keeps its packs there,
/// presigns downloads and takes device client certificates from the same CA; two versions
/// deployed to device "c-1". Returns them with what was served, and the device's client
/// certificate and key files.
struct Presigned {
    _s3: bucket::S3Server,
    front: bucket_front::BucketFront,
    fleet: LiveServer,
    served: common::Served,
    client: (PathBuf, PathBuf),
}

fn presigned(dir: &Path) -> Presigned {
    let (ca, _) = pki();
    let s3 = bucket::S3Server::start(&dir.join("s3"))
        .expect("s3s-fs is installed (.ci/run installs it)");
    let names = ["localhost", "127.0.0.1"];
    let leaf = ca.server(&names, certs::Validity::Now);
    let front =
        bucket_front::BucketFront::start(&s3.endpoint, &leaf.cert_pem, &leaf.key_pem, &ca.pem);
    let settings = s3.settings_via(&front.url);
    let (cert, key) = ca.server(&names, certs::Validity::Now).write(dir, "server");
    let client_ca = ca.write(dir, "client-ca");
    let mut fleet = LiveServer::start_with(&dir.join("server"), |c| {
        c.tls_cert = Some(cert);
        c.tls_key = Some(key);
        c.client_ca = Some(client_ca);
        c.admin_listen = Some("127.0.0.1:0".parse().unwrap());
        c.pack_store = Some(format!("s3://{}/packs", bucket::BUCKET));
        c.presign_downloads = true;
        c.aws_overrides = settings;
    });
    fleet.bucket_root = Some(dir.join("s3"));
    let served = fleet.deploy_two_versions();
    let client = ca.device("c-1", certs::Validity::Now).write(dir, "c-1");
    Presigned {
        _s3: s3,
        front,
        fleet,
        served,
        client,
    }
}

#[test]
fn a_c_program_installs_from_a_real_server_and_survives_every_power_cut() {
    pki();
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
    pki();
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

/// The C program against a presigning server: `mode` is `--presigned` or
/// `--presigned-without-anonymous`.
fn run_presigned(p: &Presigned, dir: &Path, mode: &str) -> String {
    let exe = host_program(dir, &p.served);
    run(Command::new(&exe)
        .arg(mode)
        .arg(&p.fleet.device_url)
        .arg(&p.served.token)
        .arg(&pki().1)
        .arg(&p.client.0)
        .arg(&p.client.1)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        .env("UBSAN_OPTIONS", "print_stacktrace=1"))
}

#[test]
fn a_c_program_follows_a_presigned_redirect_through_connect_anonymous() {
    pki();
    let dir = tempfile::tempdir().unwrap();
    let p = presigned(dir.path());
    assert!(
        p.fleet.device_url.starts_with("https://"),
        "{}",
        p.fleet.device_url
    );
    let out = run_presigned(&p, dir.path(), "--presigned");
    println!("{out}");
    assert!(
        out.contains("installed through presigned hops: slot"),
        "{out}"
    );
    assert!(out.contains("PASSED: 0 failures"), "{out}");
    // What reached the object store side. The server's own requests (SigV4, with its S3
    // credentials in `Authorization`) pass the same front; the device's connections are those
    // that open with a presigned GET (its signature in the query, which the server never sends).
    let sent = p.front.sent();
    let device: Vec<&String> = sent
        .iter()
        .filter(|c| c.starts_with("GET ") && c.lines().next().unwrap().contains("X-Amz-Signature="))
        .collect();
    let anonymous: usize = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("tls: ")?
                .split_once(" anonymous")?
                .0
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .expect("the C program's handshake counts");
    assert!(
        !device.is_empty() && device.len() == anonymous,
        "every connect_anonymous handshake opened a presigned GET at the bucket's TLS front \
         ({anonymous} handshakes): {sent:?}"
    );
    for c in &device {
        assert!(
            !c.to_ascii_lowercase().contains("\r\nauthorization:"),
            "an Authorization header reached the bucket from the device: {c}"
        );
    }
    for c in &sent {
        assert!(
            !c.contains(&p.served.token),
            "the device token reached the bucket: {c}"
        );
    }
    assert_eq!(
        p.front.client_certs(),
        0,
        "a client certificate reached the bucket"
    );
    let gets = device.len();
    println!(
        "bucket front: {} connections, {gets} presigned GETs, no token, no client certificate",
        p.front.accepted()
    );
    p.fleet.stop();
}

#[test]
fn rejects_a_presigned_https_hop_without_connect_anonymous() {
    pki();
    let dir = tempfile::tempdir().unwrap();
    let p = presigned(dir.path());
    let before = p.front.accepted();
    let out = run_presigned(&p, dir.path(), "--presigned-without-anonymous");
    println!("{out}");
    assert!(
        out.contains("hop without connect_anonymous: npub_agent_poll")
            && out.contains("stream.connect_anonymous, which is NULL"),
        "{out}"
    );
    assert!(out.contains("PASSED: 0 failures"), "{out}");
    assert_eq!(
        p.front.accepted(),
        before,
        "no connection reached the bucket"
    );
    p.fleet.stop();
}
