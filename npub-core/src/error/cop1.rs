//! Errors of Arm's driver payload (`format/cop1.rs`): the COP1 header Vela writes before the command stream.
use core::fmt;

/// Arm's driver payload (COP1), as `format/cop1.rs` parses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cop1Error {
    /// The driver payload is shorter than its 16-byte fixed header.
    TooShort {
        /// Payload bytes.
        len: u64,
    },
    /// The driver payload is not a whole number of 32-bit words.
    NotWords {
        /// Payload bytes.
        len: u64,
    },
    /// The driver payload does not start with "COP1".
    BadMagic {
        /// The first word.
        found: u32,
    },
    /// A COP2 payload (Regor's `--cop-format COP2`, which `--separate-io-regions` forces).
    Cop2,
    /// Word 1 of the payload is not the optimizer-config tag (0x01).
    MissingConfig {
        /// The word found.
        tag: u32,
    },
    /// A driver action other than NOP before the command stream.
    UnsupportedTag {
        /// Byte offset in the payload.
        offset: u32,
        /// The tag word.
        tag: u32,
    },
    /// The payload ends without a command-stream tag.
    NoCommandStream {
        /// Payload bytes.
        len: u64,
    },
    /// The command stream's length runs past the payload.
    StreamPastPayload {
        /// Where the stream starts in the payload.
        offset: u32,
        /// Its length in words, from the tag.
        words: u32,
        /// Payload bytes.
        payload_bytes: u64,
    },
    /// Bytes follow the command stream.
    TrailingBytes {
        /// Where the stream ends.
        end: u64,
        /// Payload bytes.
        payload_bytes: u64,
    },
    /// The command-stream tag says 0 words.
    EmptyCommandStream,
    /// A config word no Vela writes.
    BadConfig {
        /// The config word.
        config: u32,
    },
}

impl fmt::Display for Cop1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(
                f,
                "driver payload: {len} bytes, shorter than the 16-byte COP1 header"
            ),
            Self::NotWords { len } => write!(
                f,
                "driver payload: {len} bytes, not a whole number of 32-bit words"
            ),
            Self::BadMagic { found } => write!(
                f,
                "driver payload: starts with {found:#010x}, not \"COP1\"; this is not an Ethos-U \
                 command stream from Vela"
            ),
            Self::Cop2 => f.write_str(
                "driver payload: COP2 header (Vela's `--cop-format COP2`, which \
                 `--separate-io-regions` forces), which Arm's Ethos-U core driver does not accept; \
                 recompile without `--cop-format COP2` and without `--separate-io-regions`",
            ),
            Self::MissingConfig { tag } => write!(
                f,
                "driver payload: word 1 is {tag:#010x}, not the optimizer-config tag (byte 0 = 0x01)"
            ),
            Self::UnsupportedTag { offset, tag } => write!(
                f,
                "driver payload: driver action {tag:#010x} at byte {offset} is not a NOP or the \
                 command stream; recompile without debugging options"
            ),
            Self::NoCommandStream { len } => write!(
                f,
                "driver payload: no command-stream tag (0x02) in its {len} bytes"
            ),
            Self::StreamPastPayload {
                offset,
                words,
                payload_bytes,
            } => write!(
                f,
                "driver payload: command stream of {words} words at byte {offset} ends at {}, past \
                 the payload's {payload_bytes} bytes",
                u64::from(offset) + 4 * u64::from(words)
            ),
            Self::TrailingBytes { end, payload_bytes } => write!(
                f,
                "driver payload: the command stream ends at byte {end} but the payload has \
                 {payload_bytes}; trailing driver actions are not supported"
            ),
            Self::EmptyCommandStream => {
                f.write_str("driver payload: the command-stream tag says 0 words")
            }
            Self::BadConfig { config } => write!(
                f,
                "driver payload: config word {config:#010x} describes no Ethos-U (SHRAM size 0)"
            ),
        }
    }
}

impl core::error::Error for Cop1Error {}
