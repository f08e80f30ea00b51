//! `npub inspect` and `npub verify`, run as the real binary on the independent writer's packs.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn npub(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npub"))
        .args(args)
        .output()
        .expect("run npub")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../npub-core/tests/data/npu1")
        .join(name)
}

fn all(prefix: &str) -> Vec<PathBuf> {
    let dir = data("");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".npub"))
        })
        .collect();
    v.sort();
    v
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn verify_accepts_every_valid_pack() {
    let packs = all("accept_");
    assert!(packs.len() >= 10);
    for p in packs {
        // The independent writer's command streams are arbitrary bytes, not Ethos-U streams.
        let out = npub(&["verify", "--format-only", p.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            p.display(),
            text(&out.stderr)
        );
    }
}

#[test]
fn verify_rejects_every_malformed_pack_with_the_loaders_message() {
    let packs = all("reject_");
    assert!(packs.len() >= 10);
    for p in packs {
        let out = npub(&["verify", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", p.display());
        let err = text(&out.stderr);
        assert!(
            err.starts_with("npub: NPU1") || err.starts_with("npub: region"),
            "{err}"
        );
    }
}

#[test]
fn verify_checks_the_arena_when_asked() {
    let p = data("arena_4095_base.npub");
    let p = p.to_str().unwrap();
    let out = npub(&["verify", "--format-only", p, "--arena", "4095"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("region 1: runtime size 4096"),
        "{}",
        text(&out.stderr)
    );
    // 4096 + 15: enough wherever the arena starts.
    let out = npub(&["verify", "--format-only", p, "--arena", "4111", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"command_stream":"not checked","valid":true}"#
    );
}

#[test]
fn verify_accepts_both_arena_sizes_inspect_reports() {
    // Each size `npub inspect` names comes with the `npub verify` flags that accept it: the
    // smaller, aligned one used to be advised and then refused.
    let p = data("arena_4095_base.npub");
    let p = p.to_str().unwrap();
    let shown = text(&npub(&["inspect", p]).stdout);
    assert!(
        shown.contains("(npub verify --arena 4111)")
            && shown.contains("4096 if the arena is 16-byte aligned")
            && shown.contains("(npub verify --arena 4096 --arena-aligned)"),
        "{shown}"
    );
    for args in [
        &["--arena", "4111"][..],
        &["--arena", "4096", "--arena-aligned"][..],
    ] {
        let out = npub(&[&["verify", "--format-only", p][..], args].concat());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Aligned or not, one byte less does not fit.
    for args in [
        &["--arena", "4110"][..],
        &["--arena", "4095", "--arena-aligned"][..],
    ] {
        let out = npub(&[&["verify", "--format-only", p][..], args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
    // --arena-aligned alone is a usage error, not a silent no-op.
    assert_eq!(
        npub(&["verify", p, "--arena-aligned"]).status.code(),
        Some(2)
    );
}

#[test]
fn verify_reports_json_on_rejection() {
    let p = data("reject_EmptyCommandStream.npub");
    let out = npub(&["verify", p.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert!(v["error"].as_str().unwrap().contains("cmd_bytes is 0"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(npub(&["verify"]).status.code(), Some(2));
    assert_eq!(
        npub(&["verify", "/nonexistent/x.npub"]).status.code(),
        Some(2)
    );
    assert_eq!(npub(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn inspect_shows_the_annotated_header_and_regions() {
    let p = data("accept_base.npub");
    let out = npub(&["inspect", p.to_str().unwrap()]);
    // A valid container whose stream is not an Ethos-U stream: shown, and refused (exit 1).
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("| 0-3   | 4E 50 55 31 | magic"), "{s}");
    assert!(s.contains("\"NPU1\""), "{s}");
    assert!(s.contains("ethos-u55-256"), "{s}");
    assert!(s.contains("BAKED") && s.contains("RUNTIME"), "{s}");
    assert!(s.contains("Arena: 4111 bytes"), "{s}");
    assert!(s.contains("Checksum:") && s.contains(": ok"), "{s}");
}

#[test]
fn inspect_json_has_regions_arena_and_checksum() {
    let p = data("accept_base.npub");
    let out = npub(&["inspect", "--json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["regions"].as_array().unwrap().len(), 3);
    assert_eq!(v["regions"][0]["role"], "weights");
    assert_eq!(v["arena_bytes"], 4111);
    assert_eq!(v["checksum"]["ok"], true);
    assert_eq!(v["header"][0]["hex"], "4E 50 55 31");
}

#[test]
fn inspect_still_shows_a_rejected_pack_and_says_why() {
    let p = data("reject_ChecksumMismatch_bitrot.npub");
    let out = npub(&["inspect", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    assert!(s.contains("MISMATCH") && s.contains("INVALID"), "{s}");
    assert!(text(&out.stderr).contains("FNV-1a"));
}

/// A real Vela compilation packed by `npub pack` into a temp dir: (dir, pack path).
fn real_pack() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite");
    let out = dir.path().join("small_net.npub");
    let o = npub(&["pack", src.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    (dir, out)
}

#[test]
fn verify_runs_the_command_stream_verifier_on_real_vela_output() {
    let (_dir, pack) = real_pack();
    let p = pack.to_str().unwrap();
    let out = npub(&["verify", p, "--arena", "19439"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Grow the weight length of the first CONV's WEIGHT_LENGTH command by 16 and reseal the checksum:
    // a valid container whose stream reads past region 0.
    let mut bytes = std::fs::read(&pack).unwrap();
    let cmd_at = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let cmd_len = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
    let mut at = cmd_at;
    let mut grown = false;
    while at + 8 <= cmd_at + cmd_len {
        let w = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let long = w & 0x4000 != 0;
        if long && w & 0x3ff == 0x021 {
            let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            bytes[at + 4..at + 8].copy_from_slice(&(len + 16).to_le_bytes());
            grown = true;
            break;
        }
        at += if long { 8 } else { 4 };
    }
    assert!(grown, "no WEIGHT_LENGTH command found");
    let sum = npub_core::fnv::fnv1a32(&bytes[32..]);
    bytes[28..32].copy_from_slice(&sum.to_le_bytes());
    let bad = pack.with_file_name("grown.npub");
    std::fs::write(&bad, &bytes).unwrap();
    let out = npub(&["verify", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("command stream @0x") && err.contains("WEIGHT"),
        "{err}"
    );
    let out = npub(&["verify", "--format-only", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn inspect_shows_io_bindings_and_the_command_stream_summary_of_a_real_pack() {
    let (_dir, pack) = real_pack();
    let out = npub(&["inspect", pack.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("IO bindings"), "{s}");
    assert!(s.contains("input") && s.contains("output"), "{s}");
    assert!(
        s.contains("Command stream:") && s.contains("region 0 [0, 134976)"),
        "{s}"
    );
    assert!(s.contains("region 1 [0, 19424)"), "{s}");
    let out = npub(&["inspect", "--json", pack.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["io"]["bindings"][0]["offset"], 8192);
    assert_eq!(v["command_stream"]["regions_used"], 3);
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn verify_checks_only_the_container_when_accel_names_no_ethos_u_configuration() {
    // accel 0xBEEF: informational, names nothing; the stream is arbitrary bytes.
    let p = data("accept_accel_unknown.npub");
    let p = p.to_str().unwrap();
    let out = npub(&["verify", p, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not verified"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains(r#""command_stream":"not checked""#));
    // --commands forces the verifier, which refuses a stream that is not an Ethos-U stream.
    let out = npub(&["verify", p, "--commands"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("command stream @0x"),
        "{}",
        text(&out.stderr)
    );
    // The two flags contradict each other.
    assert_eq!(
        npub(&["verify", p, "--commands", "--format-only"])
            .status
            .code(),
        Some(2)
    );
}
