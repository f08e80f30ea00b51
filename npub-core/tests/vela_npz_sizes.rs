//! The `.npz` reader against zip entries whose sizes lie (issue #11): nothing may be allocated
//! from a size an archive claims, and every refusal names the member.
use npub_core::vela;
use npub_core::{Error, VelaError};

/// CRC-32 (IEEE), bit by bit: the tests' zips must look genuine up to their size claims.
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

/// The sizes one header (local or central) claims for the member.
#[derive(Clone, Copy)]
enum Claim {
    /// 32-bit fields: uncompressed, compressed.
    Plain(u32, u32),
    /// 0xFFFFFFFF in both fields and a zip64 extra field: uncompressed, compressed.
    Zip64(u64, u64),
}

impl Claim {
    fn fields(self) -> (u32, u32, Vec<u8>) {
        match self {
            Claim::Plain(u, c) => (u, c, Vec::new()),
            Claim::Zip64(u, c) => {
                let mut extra = vec![0x01, 0x00, 16, 0];
                extra.extend_from_slice(&u.to_le_bytes());
                extra.extend_from_slice(&c.to_le_bytes());
                (u32::MAX, u32::MAX, extra)
            }
        }
    }
}

/// A one-member zip (`<name>`, `data` as stored bytes, `method` 0 stored / 8 deflated) whose
/// local header and central directory claim what they are told.
fn zip(name: &str, data: &[u8], method: u16, local: Claim, central: Claim) -> Vec<u8> {
    let crc = crc32(data);
    let mut z = Vec::new();
    let (lu, lc, lextra) = local.fields();
    z.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    z.extend_from_slice(&45u16.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.extend_from_slice(&method.to_le_bytes());
    z.extend_from_slice(&[0; 4]);
    z.extend_from_slice(&crc.to_le_bytes());
    z.extend_from_slice(&lc.to_le_bytes());
    z.extend_from_slice(&lu.to_le_bytes());
    z.extend_from_slice(&(name.len() as u16).to_le_bytes());
    z.extend_from_slice(&(lextra.len() as u16).to_le_bytes());
    z.extend_from_slice(name.as_bytes());
    z.extend_from_slice(&lextra);
    z.extend_from_slice(data);
    let cd_start = z.len();
    let (cu, cc, cextra) = central.fields();
    z.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
    z.extend_from_slice(&45u16.to_le_bytes());
    z.extend_from_slice(&45u16.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.extend_from_slice(&method.to_le_bytes());
    z.extend_from_slice(&[0; 4]);
    z.extend_from_slice(&crc.to_le_bytes());
    z.extend_from_slice(&cc.to_le_bytes());
    z.extend_from_slice(&cu.to_le_bytes());
    z.extend_from_slice(&(name.len() as u16).to_le_bytes());
    z.extend_from_slice(&(cextra.len() as u16).to_le_bytes());
    z.extend_from_slice(&[0; 10]); // comment len, disk, internal attrs, external attrs
    z.extend_from_slice(&0u32.to_le_bytes()); // local header offset
    z.extend_from_slice(name.as_bytes());
    z.extend_from_slice(&cextra);
    let cd_len = z.len() - cd_start;
    z.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    z.extend_from_slice(&[0; 4]);
    z.extend_from_slice(&1u16.to_le_bytes());
    z.extend_from_slice(&1u16.to_le_bytes());
    z.extend_from_slice(&(cd_len as u32).to_le_bytes());
    z.extend_from_slice(&(cd_start as u32).to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z
}

/// 7 kB of member bytes, like the attack's file.
fn body() -> Vec<u8> {
    (0..7000u32).map(|i| (i * 7) as u8).collect()
}

fn assert_too_large(bytes: &[u8]) {
    match vela::import(bytes) {
        Err(e @ Error::Vela(VelaError::NpzMemberTooLarge { array, .. })) => {
            assert_eq!(array, "cmd_data");
            assert!(e.to_string().contains("cmd_data.npy"), "{e}");
        }
        other => panic!("expected NpzMemberTooLarge, got {other:?}"),
    }
}

/// A deflated member is refused before its size is used, naming the member.
fn assert_refused_naming_member(bytes: &[u8]) {
    match vela::import(bytes) {
        Err(
            e @ (Error::Vela(VelaError::NpzMemberTooLarge { .. })
            | Error::Vela(VelaError::NpzCompressedArray { .. })),
        ) => {
            assert!(e.to_string().contains("cmd_data"), "{e}");
        }
        other => panic!("expected a refusal naming cmd_data, got {other:?}"),
    }
}

#[test]
fn rejects_stored_member_with_zip64_claim_of_2_pow_40() {
    let d = body();
    let n = d.len() as u64;
    let claim = Claim::Zip64(1 << 40, n);
    assert_too_large(&zip("cmd_data.npy", &d, 0, claim, claim));
}

#[test]
fn rejects_stored_member_with_32_bit_claim_of_0xfffffff0() {
    let d = body();
    let claim = Claim::Plain(0xFFFF_FFF0, d.len() as u32);
    assert_too_large(&zip("cmd_data.npy", &d, 0, claim, claim));
}

#[test]
fn rejects_deflated_member_with_zip64_claim_of_2_pow_40() {
    let d = body();
    let claim = Claim::Zip64(1 << 40, d.len() as u64);
    assert_refused_naming_member(&zip("cmd_data.npy", &d, 8, claim, claim));
}

#[test]
fn rejects_deflated_member_with_32_bit_claim_of_0xfffffff0() {
    let d = body();
    let claim = Claim::Plain(0xFFFF_FFF0, d.len() as u32);
    assert_refused_naming_member(&zip("cmd_data.npy", &d, 8, claim, claim));
}

#[test]
fn rejects_central_directory_claim_the_local_header_does_not_make() {
    let d = body();
    let n = d.len() as u32;
    let local = Claim::Plain(n, n);
    assert_too_large(&zip(
        "cmd_data.npy",
        &d,
        0,
        local,
        Claim::Plain(0xFFFF_FFF0, n),
    ));
    assert_too_large(&zip(
        "cmd_data.npy",
        &d,
        0,
        local,
        Claim::Zip64(1 << 40, u64::from(n)),
    ));
}

#[test]
fn rejects_local_header_claim_the_central_directory_does_not_make() {
    // The central directory is honest, the local header lies: whatever the reader decides, it
    // must refuse (the bytes are no .npy) without allocating the claim.
    let d = body();
    let n = d.len() as u32;
    for local in [Claim::Plain(0xFFFF_FFF0, n), Claim::Zip64(1 << 40, 1 << 40)] {
        let z = zip("cmd_data.npy", &d, 0, local, Claim::Plain(n, n));
        assert!(vela::import(&z).is_err());
    }
}

#[test]
fn rejects_stored_member_whose_claimed_size_is_not_its_stored_length() {
    let d = body();
    let n = d.len() as u32;
    let claim = Claim::Plain(n - 100, n);
    match vela::import(&zip("cmd_data.npy", &d, 0, claim, claim)) {
        Err(e @ Error::Vela(VelaError::NpzMemberSizeMismatch { array, .. })) => {
            assert_eq!(array, "cmd_data");
            assert!(e.to_string().contains("cmd_data.npy"), "{e}");
        }
        other => panic!("expected NpzMemberSizeMismatch, got {other:?}"),
    }
}

#[test]
fn rejects_member_over_the_callers_limit() {
    let d = body();
    let n = d.len() as u32;
    let claim = Claim::Plain(n, n);
    let z = zip("cmd_data.npy", &d, 0, claim, claim);
    match vela::import_limited(&z, 1000) {
        Err(Error::Vela(VelaError::NpzMemberTooLarge {
            array: "cmd_data",
            claimed,
            limit: 1000,
        })) => assert_eq!(claimed, u64::from(n)),
        other => panic!("expected NpzMemberTooLarge, got {other:?}"),
    }
}
