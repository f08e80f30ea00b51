//! The static Ethos-U55 command-stream verifier: proves, before the NPU runs a stream, that every
//! byte it reads or writes lies inside the region (or the SHRAM) it names.
//!
//! FNV-1a catches accidents and a signature proves who built a pack, but neither says what the
//! stream does. A stream is a list of register writes followed by operations, so the byte range of
//! every operand of every operation can be computed from the register file at that point. This runs
//! on the host (`npub verify`), on the server at upload, and on the device before binding: `no_std`,
//! no allocation, O(1) memory (a fixed register file), one pass.
//!
//! ## Encoding (little-endian 32-bit words)
//!
//! | word | bits  | field                                                                           |
//! |------|-------|---------------------------------------------------------------------------------|
//! | 0    | 9:0   | opcode; cmd0 and cmd1 are separate spaces                                       |
//! | 0    | 13:10 | must be zero                                                                    |
//! | 0    | 15:14 | payload size: 0 = cmd0, 1 = cmd1; 2 and 3 are rejected                          |
//! | 0    | 31:16 | param: the value (cmd0); address bits 47:32, 0 on U55 (address cmd1); the shift (`*_SCALE`) |
//! | 1    | 31:0  | cmd1 only: the value                                                            |
//!
//! cmd0 opcodes below 0x100 are operations (STOP, IRQ, CONV, DEPTHWISE, POOL, ELEMENTWISE,
//! DMA_START, DMA_WAIT, KERNEL_WAIT, PMU_MASK); the other known ones write registers
//! ([`Reg`] lists them all).
//!
//! ## What is checked, in stream order, stopping at the first failure
//!
//! | check                                                         | error                     |
//! |---------------------------------------------------------------|---------------------------|
//! | the stream fits `u32` offsets                                  | `StreamError::TooLong`        |
//! | the stream is whole words                                      | `StreamError::NotWordAligned`       |
//! | per command: bits 13:10 zero                                   | `StreamError::MustBeZero`           |
//! | payload size 0 or 1                                            | `StreamError::PayloadSize`          |
//! | opcode known in its space                                      | `StreamError::UnknownOpcode`        |
//! | cmd1 has its data word                                         | `StreamError::Truncated`            |
//! | address/length params 0; stride params 0 or sign extension     | `StreamError::AddressHigh`          |
//! | per operation: its param (pooling/elementwise mode, DMA channel and mode) is defined | `StreamError::BadOperationParam` |
//! | then operand by operand (IFM, IFM2, WEIGHT, SCALE, OFM; DMA src, dst): every register that decides its address was set … | `StreamError::UnsetRegister` |
//! | … holds a value the U55 defines (region ≤ 7, element size, layout, upscale, 1-D DMA) | `StreamError::InvalidRegister` |
//! | … its region has a descriptor                                  | `StreamError::RegionMissing`        |
//! | … its `[start, end)` lies in `[0, size)` of its region or SHRAM | `StreamError::OutOfRange`          |
//! | the stream ends with STOP …                                    | `StreamError::NoStop`               |
//! | … and nothing follows it                                       | `StreamError::DataAfterStop`        |
//!
//! Decisions, each tested:
//! - **Nothing may follow STOP.** The NPU never executes it, so it is either a producer's bug or
//!   bytes smuggled past the check; Vela's streams end exactly at STOP (NPU1's `cmd_bytes` is the
//!   exact length, padding lives outside it).
//! - **A length that is not a multiple of 4 is rejected** outright, before decoding.
//! - **Empty ranges** (a zero `*_LENGTH` or `DMA0_LEN`) touch nothing and are not checked or counted.
//! - **Unknown accelerator**: [`verify_blob`] takes the SHRAM size from the pack's `accel` word; when
//!   that is unspecified or unknown it assumes the smallest SHRAM of the U55 family
//!   ([`SHRAM_BYTES_MIN`], 16 KiB), so a stream cannot claim more SHRAM than any U55 has.
//! - The IFM extent, the tile rules, NHCWB16 and signed strides are documented in `ranges.rs`; which
//!   registers each operation reads, 2-D/3-D DMA and upscaling in `ops.rs`.

mod access;
mod decode;
mod opcodes;
mod operand;
mod ops;
mod ranges;
mod registers;
mod summary;

pub use decode::{Command, WORD_BYTES, decode};
pub use opcodes::{OpCode, Operation};
pub use operand::{Operand, Target};
pub use registers::{Reg, RegisterFile};
pub use summary::{OpCounts, Span, StreamSummary};

use crate::format::MAX_BASE_POINTERS;
use crate::{Accel, Blob, Error, StreamError};
use access::Memory;

/// Bytes per KiB of SHRAM.
const KIB: u32 = 1024;

/// The smallest SHRAM of the Ethos-U55 family (U55-32 and U55-64): what a pack whose `accel` is
/// unspecified or unknown is checked against, so the check fails closed.
pub const SHRAM_BYTES_MIN: u32 = 16 * KIB;

/// The NPU's internal shared buffer (SHRAM) for an accelerator configuration, per core: Vela's
/// `shram_banks × 1 KiB`.
///
/// | config   | SHRAM  |
/// |----------|-------:|
/// | U55-32   | 16 KiB |
/// | U55-64   | 16 KiB |
/// | U55-128  | 24 KiB |
/// | U55-256  | 48 KiB |
/// | U65-256  | 48 KiB |
/// | U65-512  | 48 KiB per core (two cores; a DMA addresses its own core's) |
/// | unspecified, unknown | [`SHRAM_BYTES_MIN`] (fail closed) |
pub const fn shram_bytes(accel: Accel) -> u32 {
    match accel {
        Accel::EthosU55_32 | Accel::EthosU55_64 => 16 * KIB,
        Accel::EthosU55_128 => 24 * KIB,
        Accel::EthosU55_256 | Accel::EthosU65_256 | Accel::EthosU65_512 => 48 * KIB,
        Accel::Unspecified | Accel::Unknown(_) => SHRAM_BYTES_MIN,
    }
}

/// Verifies `cmd` (the raw stream QBASE points at, ending with STOP) against regions of
/// `region_sizes` bytes (index = BASEP*n*; an index past the slice has no descriptor; only the
/// first eight can be addressed) and a SHRAM of `shram_bytes`.
///
/// Returns what the stream does, or the first command that could touch memory outside its region,
/// read a register the stream never set, or is malformed.
pub fn verify(cmd: &[u8], region_sizes: &[u32], shram_bytes: u32) -> Result<StreamSummary, Error> {
    let len = u32::try_from(cmd.len()).map_err(|_| {
        Error::Stream(StreamError::TooLong {
            len: cmd.len() as u64,
        })
    })?;
    if len as usize % decode::WORD_BYTES != 0 {
        return Err(Error::Stream(StreamError::NotWordAligned {
            len: u64::from(len),
        }));
    }
    let mem = Memory::new(region_sizes, shram_bytes);
    let mut regs = RegisterFile::new();
    let mut summary = StreamSummary::new();
    let mut offset = 0usize;
    while offset < cmd.len() {
        let (command, size) = decode(cmd, offset)?;
        summary.commands += 1;
        match command {
            Command::Set { reg, value, .. } => regs.write(reg, value),
            Command::Op {
                code: OpCode::Stop, ..
            } => {
                let end = offset + size;
                if end != cmd.len() {
                    return Err(Error::Stream(StreamError::DataAfterStop {
                        offset: offset as u32,
                        trailing: len - end as u32,
                    }));
                }
                return Ok(summary);
            }
            Command::Op { code, param } => {
                if let Some(op) = code.operation() {
                    ops::Exec::new(&regs, &mem, &mut summary, offset as u32, op).run(param)?;
                    summary.ops.count(op);
                }
            }
        }
        offset += size;
    }
    Err(Error::Stream(StreamError::NoStop {
        len: u64::from(len),
    }))
}

/// The commands of a stream with their byte offsets, decoded one by one with the word-level checks
/// of [`decode`], stopping after the first error. It does not check operands: run [`verify`] first
/// when the stream is to be executed (an emulator walks the stream with this after the verifier
/// accepted it).
pub fn commands(cmd: &[u8]) -> impl Iterator<Item = Result<(u32, Command), Error>> + '_ {
    let mut offset = 0usize;
    let mut failed = false;
    core::iter::from_fn(move || {
        if failed || offset >= cmd.len() || u32::try_from(offset).is_err() {
            return None;
        }
        match decode(cmd, offset) {
            Ok((command, size)) => {
                let at = offset as u32;
                offset += size;
                Some(Ok((at, command)))
            }
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// Verifies a parsed pack's command stream against its own region table (sizes by BASEP index)
/// and the SHRAM of its `accel` word ([`shram_bytes`]; the U55 family's smallest when the word is
/// unspecified or unknown).
pub fn verify_blob(blob: &Blob<'_>) -> Result<StreamSummary, Error> {
    let mut sizes = [0u32; MAX_BASE_POINTERS];
    let mut n = 0;
    for desc in blob.regions().take(MAX_BASE_POINTERS) {
        sizes[n] = desc.size;
        n += 1;
    }
    verify(
        blob.command_stream(),
        &sizes[..n],
        shram_bytes(blob.accel()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_walks_with_offsets_and_stops_at_the_first_error() {
        let words = [0x0007_010Bu32, 0x0000_4000, 512, 0xFFFF_0000, 0x0000_0400];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let got: Vec<_> = commands(&bytes).collect();
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[1],
            Ok((
                4,
                Command::Set {
                    reg: Reg::IfmBase0,
                    value: 512,
                    param: 0
                }
            ))
        );
        assert!(matches!(
            got[2],
            Ok((
                12,
                Command::Op {
                    code: OpCode::Stop,
                    ..
                }
            ))
        ));
        assert!(matches!(
            got[3],
            Err(Error::Stream(StreamError::MustBeZero { offset: 16, .. }))
        ));
    }

    #[test]
    fn shram_sizes_follow_vela() {
        assert_eq!(shram_bytes(Accel::EthosU55_256), 48 * 1024);
        assert_eq!(shram_bytes(Accel::EthosU55_128), 24 * 1024);
        assert_eq!(shram_bytes(Accel::EthosU55_64), 16 * 1024);
        assert_eq!(shram_bytes(Accel::Unspecified), SHRAM_BYTES_MIN);
        assert_eq!(shram_bytes(Accel::Unknown(99)), SHRAM_BYTES_MIN);
        // The fail-closed value is the family's minimum.
        for a in Accel::ALL.into_iter().filter(|a| a.is_u55()) {
            assert!(shram_bytes(a) >= SHRAM_BYTES_MIN);
        }
    }
}
