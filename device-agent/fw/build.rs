//! Puts memory.x where cortex-m-rt's link.x looks for it.
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    println!("cargo::rerun-if-changed=memory.x");
    std::fs::copy(dir.join("memory.x"), out.join("memory.x")).unwrap();
    println!("cargo::rustc-link-search={}", out.display());
}
