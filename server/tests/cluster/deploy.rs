//! `deploy/`: what cannot run here (containers) is at least checked for what it says. The
//! compose file parses as YAML and holds the topology (two replicas on PostgreSQL and a bucket,
//! behind the proxy), every `NPUB_*` variable it sets is one the server reads, the proxy's
//! upstream names both replicas, and the image runs as non-root with a health check on the
//! server's health route.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The compose file as JSON, through Python's YAML parser (PyYAML; `.ci/run` installs
/// python3, Debian's python3 has PyYAML only with python3-yaml).
fn compose() -> Option<serde_json::Value> {
    let out = Command::new("python3")
        .arg("-c")
        .arg("import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))")
        .arg(deploy().join("compose.yaml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'yaml'") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "PyYAML missing"
        );
        eprintln!("SKIPPED: python3's yaml module is missing (apt-get install python3-yaml)");
        return None;
    }
    assert!(
        out.status.success(),
        "compose.yaml does not parse: {stderr}"
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The `env = "NPUB_…"` names of the server's configuration.
fn server_variables() -> BTreeSet<String> {
    let config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config.rs"))
            .unwrap();
    config
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn compose_holds_two_replicas_on_postgres_and_s3_behind_the_proxy() {
    let Some(compose) = compose() else {
        return;
    };
    let services = compose["services"].as_object().unwrap();
    for name in ["postgres", "minio", "replica-a", "replica-b", "proxy"] {
        assert!(services.contains_key(name), "no service {name}: {compose}");
    }
    let known = server_variables();
    for replica in ["replica-a", "replica-b"] {
        let env = services[replica]["environment"].as_object().unwrap();
        let url = env["NPUB_DATABASE_URL"].as_str().unwrap();
        assert!(url.starts_with("postgres://"), "{replica}: {url}");
        assert!(url.contains("@postgres:"), "{replica}: {url}");
        let store = env["NPUB_PACK_STORE"].as_str().unwrap();
        assert!(store.starts_with("s3://"), "{replica}: {store}");
        for name in env.keys().filter(|k| k.starts_with("NPUB_")) {
            assert!(
                known.contains(name),
                "{replica}: the server reads no {name} ({known:?})"
            );
        }
        assert!(env.contains_key("AWS_ENDPOINT"), "{replica}: {env:?}");
        // Readiness decides whether a replica is healthy for compose (the image's own check
        // is liveness).
        let check = services[replica]["healthcheck"]["test"].to_string();
        assert!(
            check.contains("http://127.0.0.1:8080/readyz"),
            "{replica}: {check}"
        );
    }
    let nginx = std::fs::read_to_string(deploy().join("nginx.conf")).unwrap();
    for upstream in ["server replica-a:8080", "server replica-b:8080"] {
        assert!(nginx.contains(upstream), "nginx.conf has no `{upstream}`");
    }
    assert_eq!(
        services["proxy"]["volumes"][0],
        "./nginx.conf:/etc/nginx/nginx.conf:ro"
    );
}

#[test]
fn containerfile_runs_unprivileged_with_liveness_and_pinnable_images() {
    let file = std::fs::read_to_string(deploy().join("Containerfile")).unwrap();
    assert!(file.matches("\nFROM ").count() >= 2, "not multi-stage");
    let user = file
        .lines()
        .rfind(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(!user.contains("root") && !user.contains(" 0"), "{user}");
    let health = file
        .split("\nHEALTHCHECK ")
        .nth(1)
        .expect("a HEALTHCHECK")
        .split("\nENTRYPOINT")
        .next()
        .unwrap();
    assert!(health.contains("http://127.0.0.1:8080/livez"), "{health}");
    // Every base image comes from a build argument, which deploy/pin-images.sh fills with a
    // fully qualified name and a digest.
    for from in file.lines().filter(|l| l.starts_with("FROM ")) {
        let image = from.split_whitespace().nth(1).unwrap();
        assert!(
            image.starts_with("${") && image.ends_with('}'),
            "{from}: not a build argument"
        );
        let arg = &image[2..image.len() - 1];
        assert!(
            file.contains(&format!("\nARG {arg}=")),
            "{arg} has no default"
        );
        let pin = std::fs::read_to_string(deploy().join("pin-images.sh")).unwrap();
        assert!(pin.contains(arg), "pin-images.sh does not pin {arg}");
    }
    let ignore = std::fs::read_to_string(deploy().join("../.containerignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "target/"), "{ignore}");
    let routes =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops/health.rs"))
            .unwrap();
    for path in ["/livez", "/readyz", "/healthz"] {
        assert!(
            routes.contains(&format!("path = \"{path}\"")),
            "the health route {path} moved"
        );
    }
}

#[test]
fn the_environment_file_names_every_variable_the_server_reads() {
    let env = std::fs::read_to_string(deploy().join("npub-server.env")).unwrap();
    let missing: Vec<String> = server_variables()
        .into_iter()
        .filter(|v| !env.contains(&format!("{v}=")))
        .collect();
    assert!(
        missing.is_empty(),
        "deploy/npub-server.env does not document {missing:?}"
    );
}
