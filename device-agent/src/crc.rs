//! CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) for journal records.
//!
//! A journal record is 128 bytes and written a handful of times per install, so speed does not
//! matter and size does: a 16-entry nibble table (64 bytes of `.rodata`) instead of the usual
//! 1 KiB byte table. CRC-32 detects every burst error up to 32 bits and every torn write that
//! leaves a record partly programmed or partly erased, short of a 1-in-2³² collision.

/// CRC-32 of `x` for each nibble value: the table for a four-bits-at-a-time update.
const NIBBLE_TABLE: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (the one zlib and Ethernet use) of `bytes`.
#[inline(never)]
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        c = (c >> 4) ^ NIBBLE_TABLE[(c & 0xF) as usize];
        c = (c >> 4) ^ NIBBLE_TABLE[(c & 0xF) as usize];
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::crc32;

    #[test]
    fn matches_the_standard_check_value() {
        // The catalogue's check value for CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }
}
