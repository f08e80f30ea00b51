//! Every malformed `.npub` of the spec's table is refused with 422 and npub-core's own message,
//! and leaves the database and the pack store exactly as they were.
use npub_core::{Blob, fnv};
use reqwest::Method;
use serde_json::Value;

use crate::common::{TestServer, conv1_npub, files_under};

fn put_word(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Recomputes the header checksum, so that only the intended defect remains.
fn reseal(b: &mut [u8]) {
    let sum = fnv::fnv1a32(&b[32..]);
    put_word(b, 28, sum);
}

/// (row of the malformed-input table, the bytes).
fn malformed() -> Vec<(&'static str, Vec<u8>)> {
    let good = conv1_npub();
    let total = good.len() as u32;
    let mut rows = Vec::new();
    let mut with = |name, f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        rows.push((name, b));
    };
    with("buffer shorter than 32 bytes", &|b| b.truncate(20));
    with("wrong magic", &|b| b[0] = b'X');
    with("wrong version", &|b| put_word(b, 4, 2));
    with("total_bytes != real buffer length (truncated)", &|b| {
        b.truncate(b.len() - 16)
    });
    with("total_bytes != real buffer length (padded)", &|b| {
        b.extend_from_slice(&[0; 16])
    });
    with("region_count huge", &|b| put_word(b, 12, u32::MAX));
    with("cmd_bytes = 0", &|b| put_word(b, 20, 0));
    with("cmd_offset + cmd_bytes > total_bytes", &|b| {
        put_word(b, 16, total - 8)
    });
    with("unknown region flags", &|b| {
        put_word(b, 32 + 4, 0x80);
        reseal(b);
    });
    with("BAKED data_offset + size > total_bytes", &|b| {
        put_word(b, 32 + 12, total - 8);
        reseal(b);
    });
    with("bit rot in the payload", &|b| {
        let last = b.len() - 1;
        b[last] ^= 0x01;
    });
    // NPU1 cannot tell a deliberate edit with a recomputed checksum; the command-stream verifier
    // refuses one that makes the stream address memory it must not, or be undecodable.
    with("modified command stream, checksum recomputed", &|b| {
        let cmd = word(b, 16) as usize;
        put_word(b, cmd, 0x0000_03ff); // an opcode the U55 does not define
        reseal(b);
    });
    with("modified scratch size, checksum recomputed", &|b| {
        put_word(b, 32 + 16 + 8, 16); // region 1 shrunk below what the stream writes
        reseal(b);
    });
    rows
}

#[tokio::test]
async fn rejects_every_malformed_npub_with_422_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let before = (
        s.rows("versions").await,
        s.rows("audit").await,
        files_under(dir.path()),
    );
    for (row, bytes) in malformed() {
        let expected = match Blob::parse(&bytes) {
            Err(e) => e.to_string(),
            Ok(blob) => npub_core::cmdstream::verify_blob(&blob)
                .expect_err(row)
                .to_string(),
        };
        let r = s.upload("m", "1.0.0", bytes).await;
        assert_eq!(r.status(), 422, "{row}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "invalid_pack", "{row}");
        assert_eq!(body["detail"], expected, "{row}");
        let after = (
            s.rows("versions").await,
            s.rows("audit").await,
            files_under(dir.path()),
        );
        assert_eq!(after, before, "{row}: something was stored");
    }
    // The store still takes a good pack under the version the bad ones tried.
    assert_eq!(s.upload("m", "1.0.0", conv1_npub()).await.status(), 201);
    s.stop().await;
}

#[tokio::test]
async fn accepts_what_the_table_calls_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let mut unknown_role = conv1_npub();
    put_word(&mut unknown_role, 32 + 16, 99); // region 1's role
    reseal(&mut unknown_role);
    let r = s.upload("m", "role", unknown_role.clone()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    assert_eq!(s.download("m", "role").await, unknown_role);
    s.stop().await;
}

#[tokio::test]
async fn rejects_garbage_and_truncated_vela_files_with_the_importers_message() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.create_model("m").await;
    let tflite =
        std::fs::read(crate::common::fixtures().join("vela_out/u55_256/tflite/conv1_vela.tflite"))
            .unwrap();
    let npz = std::fs::read(crate::common::fixtures().join("vela_out/u55_256/raw/conv1_vela.npz"))
        .unwrap();
    for (what, bytes) in [
        ("truncated tflite", tflite[..tflite.len() / 2].to_vec()),
        ("truncated npz", npz[..npz.len() / 2].to_vec()),
    ] {
        let expected = match npub_core::vela::import(&bytes) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{what}: imported"),
        };
        let r = s.upload("m", "1", bytes).await;
        assert_eq!(r.status(), 422, "{what}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["detail"], expected, "{what}");
    }
    assert_eq!(s.rows("versions").await, 0);
    assert!(files_under(&dir.path().join("packs")).is_empty());
    let r = s
        .req(Method::POST, "/api/v1/models/m/versions/1")
        .body(Vec::new())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "empty body");
    s.stop().await;
}
