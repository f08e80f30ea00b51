//! Packs written by an independent NPU1 writer (`tests/data/npu1/gen.py`, Python, from the spec's
//! text): every valid one is accepted and binds; every malformed one is rejected with the variant its
//! file name states. Also: every fuzz-corpus file goes through the parsers without a panic.
mod common;

use std::path::{Path, PathBuf};

use npub_core::{Blob, Error, FormatError, StreamValidator, arena_bytes_required, bind};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/npu1")
}

/// The name of an error's variant within its domain, as `Debug` spells it
/// (`Stream(Truncated { .. })` → `Truncated`).
fn variant(e: &Error) -> String {
    let s = format!("{e:?}");
    let inner = s.split_once('(').map_or(s.as_str(), |(_, inner)| inner);
    inner
        .split([' ', '{', '(', ')'])
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn accepts_every_valid_pack_of_the_independent_writer() {
    let mut n = 0;
    for path in files(&data_dir()) {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !(name.starts_with("accept_") || name.starts_with("arena_")) {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let blob = Blob::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        if blob.region_count() <= 8 {
            let need = arena_bytes_required(&blob) as usize;
            let (mut buf, start) = common::arena(need, 3);
            bind(&blob, &mut buf[start..start + need]).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} valid packs found");
}

#[test]
fn rejects_every_malformed_pack_of_the_independent_writer_with_its_variant() {
    let mut n = 0;
    for path in files(&data_dir()) {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(rest) = name.strip_prefix("reject_") else {
            continue;
        };
        let want = rest.trim_end_matches(".npub").split('_').next().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let err = Blob::parse(&bytes).expect_err(&name);
        assert_eq!(variant(&err), want, "{name}: {err}");
        // The message names the structure at fault.
        let msg = err.to_string();
        assert!(
            msg.starts_with("NPU1") || msg.starts_with("region"),
            "{msg}"
        );
        n += 1;
    }
    assert!(n >= 10, "only {n} malformed packs found");
}

#[test]
fn rejects_binding_into_an_arena_smaller_than_stated() {
    for path in files(&data_dir()) {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(rest) = name.strip_prefix("arena_") else {
            continue;
        };
        let limit: usize = rest.split('_').next().unwrap().parse().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let blob = Blob::parse(&bytes).unwrap();
        let (mut buf, start) = common::arena(limit, 0);
        let err = bind(&blob, &mut buf[start..start + limit]).unwrap_err();
        assert!(
            matches!(err, Error::Format(FormatError::ArenaTooSmall { .. })),
            "{name}: {err}"
        );
    }
}

#[test]
fn every_fuzz_corpus_file_parses_without_panicking() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut n = 0;
    for dir in files_and_dirs(&corpus) {
        for path in files(&dir) {
            let bytes = std::fs::read(&path).unwrap();
            for skip in 0..3.min(bytes.len() + 1) {
                let data = &bytes[skip..];
                let parsed = Blob::parse(data).map(|_| ());
                let mut v = StreamValidator::new(data.len() as u32);
                let streamed = v.feed(data).and_then(|()| v.finish().map(|_| ()));
                assert_eq!(parsed, streamed, "{}", path.display());
            }
            n += 1;
        }
    }
    assert!(n > 0, "empty corpus");
}

fn files_and_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}
