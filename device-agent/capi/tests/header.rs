//! `include/npub_agent.h` is what cbindgen generates from this crate (regenerated into memory and
//! compared; `NPUB_BLESS=1` rewrites it), and it compiles clean as C99 and as C++17 with
//! `-Wall -Wextra -Werror -pedantic`.
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let path = crate_dir().join("include/npub_agent.h");
    let fresh = generate();
    if std::env::var_os("NPUB_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale: run `NPUB_BLESS=1 cargo test -p npub-agent --test header` and commit it",
        path.display()
    );
}

fn compile(compiler: &str, std: &str, dir: &Path) {
    let src = dir.join(if compiler == "g++" { "h.cpp" } else { "h.c" });
    std::fs::write(
        &src,
        "#include \"npub_agent.h\"\nint main(void) { return npub_agent_abi_ok() != NPUB_OK; }\n",
    )
    .unwrap();
    let out = Command::new(compiler)
        .args([
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            "-I",
        ])
        .arg(crate_dir().join("include"))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {std}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_header_compiles_as_c99_and_cpp17_with_every_warning_an_error() {
    let dir = tempfile::tempdir().unwrap();
    compile("gcc", "-std=c99", dir.path());
    compile("g++", "-std=c++17", dir.path());
}
