//! `.npz` archives whose size claims lie: the first 16 bytes of the input are a size claim and a
//! member limit; the rest is a zip (the corpus holds real Vela `.npz` files) whose every local
//! header, central-directory entry and zip64 extra field is rewritten to claim that size before
//! the importer sees it. The importer must refuse or accept without panicking and without
//! allocating from the claim (libFuzzer's `-rss_limit_mb` and `-malloc_limit_mb` catch that).
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_core::vela;

/// Local file header, central-directory entry, zip64 end-of-central-directory record.
const LOCAL: [u8; 4] = *b"PK\x03\x04";
const CENTRAL: [u8; 4] = *b"PK\x01\x02";
const ZIP64_EOCD: [u8; 4] = *b"PK\x06\x06";

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((head, zip)) = data.split_first_chunk::<16>() else {
        return;
    };
    let claim = u64::from_le_bytes(head[..8].try_into().unwrap());
    let limit = u64::from_le_bytes(head[8..].try_into().unwrap()) % (1 << 26);
    let mode = claim & 3;
    let mut zip = zip.to_vec();
    let mut i = 0;
    while i + 4 <= zip.len() {
        let sig: [u8; 4] = zip[i..i + 4].try_into().unwrap();
        let claim32 = (claim as u32).to_le_bytes();
        match sig {
            // sizes at 18 (compressed) and 22 (uncompressed)
            LOCAL if mode != 1 => {
                put(&mut zip, i + 18, &claim32);
                put(&mut zip, i + 22, &claim32);
            }
            // sizes at 20 and 24; entry count and offsets in the zip64 record
            CENTRAL if mode != 2 => {
                put(&mut zip, i + 20, &claim32);
                put(&mut zip, i + 24, &claim32);
            }
            ZIP64_EOCD => {
                put(&mut zip, i + 24, &claim.to_le_bytes());
                put(&mut zip, i + 32, &claim.to_le_bytes());
                put(&mut zip, i + 40, &claim.to_le_bytes());
            }
            _ => {}
        }
        // zip64 extra fields (tag 0x0001): both sizes
        if zip[i..i + 2] == [0x01, 0x00] && mode == 3 {
            put(&mut zip, i + 4, &claim.to_le_bytes());
            put(&mut zip, i + 12, &claim.to_le_bytes());
        }
        i += 1;
    }
    let _ = vela::import_limited(&zip, limit);
});
