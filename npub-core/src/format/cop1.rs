//! The COP1 driver payload: the `ethos-u` operator's input 0 (Vela's `cmd_data`).
//!
//! Arm's Ethos-U core driver walks this payload as a list of "driver actions" before it points the
//! NPU's QBASE at the command stream. Little-endian 32-bit words:
//!
//! | Byte  | Content                                                                                   |
//! |-------|-------------------------------------------------------------------------------------------|
//! | 0     | `"COP1"` (`"COP2"` is Regor's `--cop-format COP2`, which the core driver does not accept)   |
//! | 4     | tag: byte 0 = `0x01` (optimizer config); u16 at bytes 2-3 = release \| patch << 4          |
//! | 8     | config word: bits 3:0 log2(MACs/cycle), 7:4 command-stream version, 15:8 SHRAM KiB, 31:28 product |
//! | 12    | ID word (architecture version), e.g. `0x10066001`                                         |
//! | 16..  | NOP tags (byte 0 = `0x05`): padding so that the stream starts 16-byte aligned             |
//! | next  | tag byte 0 = `0x02` (command stream): length in **words** = byte 1 << 16 \| u16 at bytes 2-3 |
//! | next  | the command stream, exactly to the end of the payload                                    |
//!
//! Only NOPs may stand between the config and the stream: the driver's other actions (register
//! reads, SHRAM dumps) are debugging aids Vela does not emit, and a pack has no way to honour them.
//! Bytes after the stream are refused too: the driver would try to run them as further actions.
//!
//! ## The payload in place, inside NPU1 version 1
//!
//! `ethosu_invoke_v3()` takes the whole payload, header and stream in one buffer. NPU1 keeps the
//! stream alone, but locates it by `cmd_offset` rather than by adjacency and lets the producer pad
//! before it, the padding being payload bytes that the FNV-1a checksum (and the manifest's
//! SHA-256) cover. So `npub pack` ([`super::build::build_pack_for_driver`]) writes the payload's
//! header into that padding, ending exactly at `cmd_offset`:
//!
//! ```text
//! | 0      | 32               | …  | cmd_offset − H            | cmd_offset        | …
//! | header | region table     | 0s | COP1 header (H bytes)     | command stream    | baked regions
//! ```
//!
//! Nothing of NPU1 changes: the header, the table, `cmd_offset`/`cmd_bytes` and the loader's checks
//! are those of any pack, and a loader that ignores the padding loses nothing. A device finds the
//! header with [`driver_payload`], and hands `[cmd_offset − H, cmd_offset + cmd_bytes)` to the
//! driver where it lies, in flash.
use crate::format::le::word;
use crate::format::{Accel, HEADER_BYTES, Header, REGION_DESC_BYTES};
use crate::{Cop1Error, Error};

/// `"COP1"` as a little-endian word.
pub const COP1_MAGIC: u32 = u32::from_le_bytes(*b"COP1");
/// `"COP2"` as a little-endian word: Regor's extended header, refused.
pub const COP2_MAGIC: u32 = u32::from_le_bytes(*b"COP2");
/// Magic, config tag, config word, ID word.
pub const FIXED_HEADER_BYTES: usize = 16;

/// Driver-action tag ids (byte 0 of a tag word).
mod tag {
    pub const CONFIG: u8 = 0x01;
    pub const CMD_STREAM: u8 = 0x02;
    pub const NOP: u8 = 0x05;
}

/// What the payload header says, kept for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cop1Info {
    /// Optimizer release (config tag, bits 3:0 of its parameter).
    pub release: u8,
    /// Optimizer patch (config tag, bits 15:4 of its parameter).
    pub patch: u16,
    /// The config word (accelerator configuration).
    pub config: u32,
    /// The ID word (architecture version the stream was built for).
    pub id: u32,
    /// Byte offset of the command stream inside the payload.
    pub cmd_offset: u32,
    /// Command-stream length in 32-bit words.
    pub cmd_words: u32,
}

/// A checked payload: its header and the command stream it carries.
#[derive(Debug, Clone, Copy)]
pub struct Cop1<'a> {
    /// Header fields.
    pub info: Cop1Info,
    /// The accelerator the config word names.
    pub accel: Accel,
    /// The raw command stream (what QBASE points at), without the header.
    pub stream: &'a [u8],
}

/// Parses and checks a COP1 payload.
pub fn parse(payload: &[u8]) -> Result<Cop1<'_>, Error> {
    let len = payload.len() as u64;
    if payload.len() < FIXED_HEADER_BYTES {
        return Err(Error::Cop1(Cop1Error::TooShort { len }));
    }
    if payload.len() % 4 != 0 {
        return Err(Error::Cop1(Cop1Error::NotWords { len }));
    }
    let w = |at: usize| word(payload, at).unwrap_or(0);
    match w(0) {
        COP1_MAGIC => {}
        COP2_MAGIC => return Err(Error::Cop1(Cop1Error::Cop2)),
        found => return Err(Error::Cop1(Cop1Error::BadMagic { found })),
    }
    let config_tag = w(4);
    if config_tag & 0xFF != u32::from(tag::CONFIG) {
        return Err(Error::Cop1(Cop1Error::MissingConfig { tag: config_tag }));
    }
    let param = config_tag >> 16;
    let config = w(8);
    let mut pos = FIXED_HEADER_BYTES;
    loop {
        let Some(t) = word(payload, pos) else {
            return Err(Error::Cop1(Cop1Error::NoCommandStream { len }));
        };
        match (t & 0xFF) as u8 {
            tag::NOP => pos += 4,
            tag::CMD_STREAM => {
                let words = (((t >> 8) & 0xFF) << 16) | (t >> 16);
                let start = pos + 4;
                let end = start as u64 + 4 * u64::from(words);
                if end > len {
                    return Err(Error::Cop1(Cop1Error::StreamPastPayload {
                        offset: start as u32,
                        words,
                        payload_bytes: len,
                    }));
                }
                if end != len {
                    return Err(Error::Cop1(Cop1Error::TrailingBytes {
                        end,
                        payload_bytes: len,
                    }));
                }
                if words == 0 {
                    return Err(Error::Cop1(Cop1Error::EmptyCommandStream));
                }
                return Ok(Cop1 {
                    info: Cop1Info {
                        release: (param & 0xF) as u8,
                        patch: (param >> 4) as u16,
                        config,
                        id: w(12),
                        cmd_offset: start as u32,
                        cmd_words: words,
                    },
                    accel: accel_from_config(config)?,
                    stream: &payload[start..],
                });
            }
            _ => {
                return Err(Error::Cop1(Cop1Error::UnsupportedTag {
                    offset: pos as u32,
                    tag: t,
                }));
            }
        }
    }
}

/// The shortest header before a stream: magic, config tag, config word, ID word, stream tag.
pub const MIN_HEAD_BYTES: u32 = FIXED_HEADER_BYTES as u32 + 4;
/// The longest header [`driver_payload`] looks for: the fixed 16 bytes, up to 11 NOPs and the
/// stream tag. Vela pads with at most 3 NOPs (to align the stream to 16 bytes).
pub const MAX_HEAD_BYTES: u32 = 64;

/// Where the driver payload lies in a pack whose producer put its COP1 header right before the
/// command stream (module docs): `(offset, bytes)` of the payload in `pack`, `None` when the pack
/// carries none.
///
/// The header is the nearest one that ends at `cmd_offset` and starts after the region table: for
/// each start from `cmd_offset − 20` down to `cmd_offset − 64` (4-byte steps), the bytes from there
/// to the end of the stream must [`parse`] as a COP1 payload whose stream is exactly the pack's,
/// and its config word must name the pack's `accel` when that is a known configuration. `header`
/// must be the pack's own (as [`crate::Blob::parse`] checked it), so every offset is in bounds.
pub fn driver_payload(pack: &[u8], header: &Header) -> Option<(u32, u32)> {
    let table_end =
        u64::from(HEADER_BYTES) + u64::from(REGION_DESC_BYTES) * u64::from(header.region_count);
    let cmd = u64::from(header.cmd_offset);
    let end = cmd + u64::from(header.cmd_bytes);
    if end > pack.len() as u64 {
        return None;
    }
    let mut head = u64::from(MIN_HEAD_BYTES);
    while head <= u64::from(MAX_HEAD_BYTES) && head + table_end <= cmd {
        let start = cmd - head;
        if let Ok(p) = parse(&pack[start as usize..end as usize]) {
            let agrees = match Accel::from_word(header.accel) {
                Accel::Unspecified | Accel::Unknown(_) => true,
                named => named == p.accel,
            };
            if u64::from(p.info.cmd_offset) == head && agrees {
                return Some((start as u32, (end - start) as u32));
            }
        }
        head += 4;
    }
    None
}

/// The accelerator a COP1 config word describes.
///
/// The product (bits 31:28) and MACs per cycle (bits 3:0, log2) name the configuration; the SHRAM
/// size (bits 15:8, KiB) and command-stream version (bits 7:4) must then be what Vela (3.10 to 5.2) writes for
/// it, because the command-stream verifier sizes SHRAM from the configuration. Anything else is
/// kept as [`Accel::Unknown`] with the config word.
///
/// | product | log2 MACs | MACs | SHRAM  | config word  | `Accel`         |
/// |---------|-----------|-----:|-------:|--------------|-----------------|
/// | 0 (U55) | 5         |   32 | 16 KiB | `0x00001005` | `EthosU55_32`   |
/// | 0 (U55) | 6         |   64 | 16 KiB | `0x00001006` | `EthosU55_64`   |
/// | 0 (U55) | 7         |  128 | 24 KiB | `0x00001807` | `EthosU55_128`  |
/// | 0 (U55) | 8         |  256 | 48 KiB | `0x00003008` | `EthosU55_256`  |
/// | 1 (U65) | 8         |  256 | 48 KiB | `0x10003008` | `EthosU65_256`  |
/// | 1 (U65) | 9         |  512 | 96 KiB | `0x10006009` | `EthosU65_512`  |
///
/// A config word below 7 would be stored as a named NPU1 `accel` word and read back as the wrong
/// configuration; Vela cannot write one (its SHRAM field is never 0), so it is refused.
pub fn accel_from_config(config: u32) -> Result<Accel, Error> {
    let product = config >> 28;
    let log2_macs = config & 0xF;
    let version = (config >> 4) & 0xF;
    let shram_kib = (config >> 8) & 0xFF;
    let named = match (product, log2_macs) {
        (0, 5) => Some((Accel::EthosU55_32, 16)),
        (0, 6) => Some((Accel::EthosU55_64, 16)),
        (0, 7) => Some((Accel::EthosU55_128, 24)),
        (0, 8) => Some((Accel::EthosU55_256, 48)),
        (1, 8) => Some((Accel::EthosU65_256, 48)),
        (1, 9) => Some((Accel::EthosU65_512, 96)),
        _ => None,
    };
    match named {
        Some((accel, kib)) if shram_kib == kib && version == 0 => Ok(accel),
        _ if config <= Accel::EthosU65_512.word() => {
            Err(Error::Cop1(Cop1Error::BadConfig { config }))
        }
        _ => Ok(Accel::Unknown(config)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// COP1 header + NOPs + stream tag for `words` words, then `words` zero words.
    fn payload(words: u32) -> Vec<u8> {
        let mut p = Vec::new();
        for w in [COP1_MAGIC, 0x0010_0001, 0x3008, 0x1006_6001, 5, 5, 5] {
            p.extend_from_slice(&w.to_le_bytes());
        }
        let t = 0x02 | ((words >> 16) & 0xFF) << 8 | (words & 0xFFFF) << 16;
        p.extend_from_slice(&t.to_le_bytes());
        p.resize(p.len() + 4 * words as usize, 0);
        p
    }

    #[test]
    fn parses_a_minimal_payload() {
        let p = payload(3);
        let c = parse(&p).unwrap();
        assert_eq!(c.info.cmd_offset, 32);
        assert_eq!(c.info.cmd_words, 3);
        assert_eq!((c.info.release, c.info.patch), (0, 1));
        assert_eq!(c.accel, Accel::EthosU55_256);
        assert_eq!(c.stream.len(), 12);
    }

    #[test]
    fn length_uses_the_high_byte() {
        let words = 0x1_0002;
        let p = payload(words);
        let c = parse(&p).unwrap();
        assert_eq!(c.info.cmd_words, words);
    }

    #[test]
    fn rejects_cop2() {
        let mut p = payload(1);
        p[3] = b'2';
        assert_eq!(parse(&p).unwrap_err(), Error::Cop1(Cop1Error::Cop2));
    }

    #[test]
    fn rejects_stream_past_payload() {
        let mut p = payload(2);
        p.truncate(p.len() - 4);
        assert_eq!(
            parse(&p).unwrap_err(),
            Error::Cop1(Cop1Error::StreamPastPayload {
                offset: 32,
                words: 2,
                payload_bytes: 36
            })
        );
    }

    #[test]
    fn rejects_trailing_bytes_unknown_tags_and_no_stream() {
        let mut p = payload(1);
        p.extend_from_slice(&[0; 4]);
        assert_eq!(
            parse(&p).unwrap_err(),
            Error::Cop1(Cop1Error::TrailingBytes {
                end: 36,
                payload_bytes: 40
            })
        );
        let mut p = payload(1);
        p[16] = 0x04; // DumpSHRAM
        assert_eq!(
            parse(&p).unwrap_err(),
            Error::Cop1(Cop1Error::UnsupportedTag { offset: 16, tag: 4 })
        );
        assert_eq!(
            parse(&payload(1)[..28]).unwrap_err(),
            Error::Cop1(Cop1Error::NoCommandStream { len: 28 })
        );
        assert_eq!(
            parse(&payload(0)).unwrap_err(),
            Error::Cop1(Cop1Error::EmptyCommandStream)
        );
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            parse(&[0; 8]).unwrap_err(),
            Error::Cop1(Cop1Error::TooShort { len: 8 })
        );
        assert_eq!(
            parse(&payload(1)[..34]).unwrap_err(),
            Error::Cop1(Cop1Error::NotWords { len: 34 })
        );
        let mut p = payload(1);
        p[0] = b'X';
        assert!(matches!(
            parse(&p),
            Err(Error::Cop1(Cop1Error::BadMagic { .. }))
        ));
        let mut p = payload(1);
        p[4] = 0x05;
        assert_eq!(
            parse(&p).unwrap_err(),
            Error::Cop1(Cop1Error::MissingConfig { tag: 0x0010_0005 })
        );
    }

    #[test]
    fn config_words() {
        assert_eq!(accel_from_config(0x3008), Ok(Accel::EthosU55_256));
        assert_eq!(accel_from_config(0x1807), Ok(Accel::EthosU55_128));
        assert_eq!(accel_from_config(0x1005), Ok(Accel::EthosU55_32));
        assert_eq!(accel_from_config(0x1006), Ok(Accel::EthosU55_64));
        assert_eq!(accel_from_config(0x1000_3008), Ok(Accel::EthosU65_256));
        assert_eq!(accel_from_config(0x1000_6009), Ok(Accel::EthosU65_512));
        // Right MACs, wrong SHRAM: not a configuration Vela writes.
        assert_eq!(accel_from_config(0x2008), Ok(Accel::Unknown(0x2008)));
        // A product this code does not know.
        assert_eq!(
            accel_from_config(0x2000_3008),
            Ok(Accel::Unknown(0x2000_3008))
        );
        assert_eq!(
            accel_from_config(0x5),
            Err(Error::Cop1(Cop1Error::BadConfig { config: 5 }))
        );
    }
}
