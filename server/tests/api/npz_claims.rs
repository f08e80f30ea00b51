//! A crafted `.npz` cannot take the server down (issue #11 point 1): a member whose zip entry
//! claims 2^40 bytes, or an end record claiming 2^34 entries, is refused with 422 and the server
//! keeps serving. Run against the real binary, so that an abort shows as a dead server rather
//! than a dead test process.
use reqwest::StatusCode;
use serde_json::Value;

use crate::binary::{Running, spawn};
use crate::common::{ADMIN, fixtures};

fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}
fn le32(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}
fn le64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// CRC-32 (IEEE): the zip must look genuine up to its size claim.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A one-member stored zip (`cmd_data.npy`, 7 kB) whose central directory claims `claimed`
/// uncompressed bytes through a zip64 extra field.
fn member_claiming(claimed: u64) -> Vec<u8> {
    let name = b"cmd_data.npy";
    let data: Vec<u8> = (0..7000u32).map(|i| (i * 7) as u8).collect();
    let crc = crc32(&data);
    let mut z = Vec::new();
    z.extend(le32(0x0403_4b50));
    z.extend(le16(20));
    z.extend([0; 4]); // flags, method: stored
    z.extend([0; 4]); // time, date
    z.extend(le32(crc));
    z.extend(le32(data.len() as u32));
    z.extend(le32(data.len() as u32));
    z.extend(le16(name.len() as u16));
    z.extend(le16(0));
    z.extend(name);
    z.extend(&data);
    let cd_start = z.len();
    z.extend(le32(0x0201_4b50));
    z.extend(le16(45));
    z.extend(le16(45));
    z.extend([0; 4]); // flags, method: stored
    z.extend([0; 4]);
    z.extend(le32(crc));
    z.extend(le32(u32::MAX)); // compressed: in the zip64 field
    z.extend(le32(u32::MAX)); // uncompressed: in the zip64 field
    z.extend(le16(name.len() as u16));
    z.extend(le16(20)); // extra length
    z.extend([0; 10]);
    z.extend(le32(0)); // local header offset
    z.extend(name);
    z.extend([0x01, 0x00]);
    z.extend(le16(16));
    z.extend(le64(claimed));
    z.extend(le64(data.len() as u64));
    let cd_len = z.len() - cd_start;
    z.extend(le32(0x0605_4b50));
    z.extend([0; 4]);
    z.extend(le16(1));
    z.extend(le16(1));
    z.extend(le32(cd_len as u32));
    z.extend(le32(cd_start as u32));
    z.extend(le16(0));
    z
}

/// A real Vela `.npz` whose (32-bit) end record claims 65535 entries.
fn plain_entries_claiming_65535() -> Vec<u8> {
    let mut z = std::fs::read(fixtures().join("vela_out/u55_256/raw/conv1_vela.npz")).unwrap();
    let eocd = z.len() - 22;
    z[eocd + 8..eocd + 12].copy_from_slice(&[0xFF; 4]);
    z
}

/// A real Vela `.npz` whose end record is made zip64, claiming `entries` entries with a central
/// directory at 2^40.
fn entries_claiming(entries: u64) -> Vec<u8> {
    let real = std::fs::read(fixtures().join("vela_out/u55_256/raw/conv1_vela.npz")).unwrap();
    let eocd = real.len() - 22;
    assert_eq!(
        real[eocd..eocd + 4],
        le32(0x0605_4b50),
        "a fixture without a comment"
    );
    let mut z = real[..eocd].to_vec();
    let record = z.len() as u64;
    z.extend(le32(0x0606_4b50));
    z.extend(le64(44)); // record size after this field
    z.extend(le16(45));
    z.extend(le16(45));
    z.extend(le32(0));
    z.extend(le32(0));
    z.extend(le64(entries));
    z.extend(le64(entries));
    z.extend(le64(1 << 20)); // central directory size
    z.extend(le64(1 << 40)); // central directory offset
    z.extend(le32(0x0706_4b50));
    z.extend(le32(0));
    z.extend(le64(record));
    z.extend(le32(1));
    z.extend(le32(0x0605_4b50));
    z.extend([0; 4]);
    z.extend(le16(u16::MAX));
    z.extend(le16(u16::MAX));
    z.extend(le32(u32::MAX));
    z.extend(le32(u32::MAX));
    z.extend(le16(0));
    z
}

async fn upload_and_check_alive(server: &Running, body: Vec<u8>) -> (StatusCode, String) {
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/api/v1/models", server.url))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"name": "m"}))
        .send()
        .await
        .unwrap();
    assert!(matches!(r.status().as_u16(), 201 | 409));
    let r = http
        .post(format!("{}/api/v1/models/m/versions/1", server.url))
        .bearer_auth(ADMIN)
        .body(body)
        .send()
        .await
        .expect("the server answered the upload");
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap_or_default().to_owned();
    let health = http
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .expect("the server is still there");
    assert_eq!(health.status(), 200);
    (status, detail)
}

#[tokio::test]
async fn survives_an_npz_member_claiming_2_pow_40_bytes_with_422_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn(dir.path(), &[], None).await;
    let (status, detail) = upload_and_check_alive(&server, member_claiming(1 << 40)).await;
    assert_eq!(status, 422, "{detail}");
    assert!(detail.contains("`cmd_data.npy`"), "{detail}");
    server.stop().await;
}

#[tokio::test]
async fn survives_npz_end_records_claiming_more_entries_than_fit_with_422() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn(dir.path(), &[], None).await;
    for crafted in [entries_claiming(1 << 34), plain_entries_claiming_65535()] {
        let (status, detail) = upload_and_check_alive(&server, crafted).await;
        assert_eq!(status, 422, "{detail}");
        assert!(detail.contains("claims more entries"), "{detail}");
    }
    // The real file, untouched, still imports.
    let real = std::fs::read(fixtures().join("vela_out/u55_256/raw/conv1_vela.npz")).unwrap();
    let (status, _) = upload_and_check_alive(&server, real).await;
    assert_eq!(status, 201);
    server.stop().await;
}
