//! Decoding one command: the word-level checks, before any meaning is given to it.
use super::opcodes::{
    MUST_BE_ZERO_MASK, OPCODE_MASK, OpCode, PARAM_SHIFT, PAYLOAD_CMD0, PAYLOAD_CMD1,
    PAYLOAD_SIZE_SHIFT,
};
use super::registers::Reg;
use crate::{Error, StreamError};

/// Bytes per command-stream word.
pub const WORD_BYTES: usize = 4;

/// What one command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// A cmd0 operation with its param.
    Op {
        /// The operation.
        code: OpCode,
        /// Bits 31:16.
        param: u16,
    },
    /// A register write (cmd0: the param; cmd1: the data word).
    Set {
        /// The register.
        reg: Reg,
        /// The value written.
        value: u32,
        /// cmd1 only: bits 31:16 of the first word, the shift of the `*_SCALE` registers (0 for
        /// cmd0, where the param is the value).
        param: u16,
    },
}

/// Decodes the command at byte `offset` of `cmd` (a multiple of [`WORD_BYTES`], inside `cmd`) and
/// returns it with its length in bytes (4 or 8).
///
/// Checks, in this order: must-be-zero bits 13:10, payload size 0 or 1, a known opcode in its
/// space, a complete data word for cmd1, and the address-high rule of the register's param.
#[inline]
pub fn decode(cmd: &[u8], offset: usize) -> Result<(Command, usize), Error> {
    let at = offset as u32; // the caller bounds the stream to u32 offsets
    let word = read_word(cmd, offset).ok_or(Error::Stream(StreamError::NoStop {
        len: cmd.len() as u64,
    }))?;
    if word & MUST_BE_ZERO_MASK != 0 {
        return Err(Error::Stream(StreamError::MustBeZero { offset: at, word }));
    }
    let opcode = (word & OPCODE_MASK) as u16;
    let param = (word >> PARAM_SHIFT) as u16;
    match (word >> PAYLOAD_SIZE_SHIFT) & 0b11 {
        PAYLOAD_CMD0 => {
            if let Some(code) = OpCode::from_opcode(opcode) {
                Ok((Command::Op { code, param }, WORD_BYTES))
            } else if let Some(reg) = Reg::from_cmd0(opcode) {
                Ok((
                    Command::Set {
                        reg,
                        value: u32::from(param),
                        param: 0,
                    },
                    WORD_BYTES,
                ))
            } else {
                Err(Error::Stream(StreamError::UnknownOpcode {
                    offset: at,
                    opcode,
                    cmd1: false,
                }))
            }
        }
        PAYLOAD_CMD1 => {
            let reg = Reg::from_cmd1(opcode).ok_or(Error::Stream(StreamError::UnknownOpcode {
                offset: at,
                opcode,
                cmd1: true,
            }))?;
            let data = read_word(cmd, offset + WORD_BYTES)
                .ok_or(Error::Stream(StreamError::Truncated { offset: at, reg }))?;
            if !reg.param_ok(param, data) {
                return Err(Error::Stream(StreamError::AddressHigh {
                    offset: at,
                    reg,
                    param,
                    data,
                }));
            }
            Ok((
                Command::Set {
                    reg,
                    value: data,
                    param,
                },
                2 * WORD_BYTES,
            ))
        }
        size => Err(Error::Stream(StreamError::PayloadSize {
            offset: at,
            word,
            size: size as u8,
        })),
    }
}

#[inline]
fn read_word(cmd: &[u8], offset: usize) -> Option<u32> {
    let end = offset.checked_add(WORD_BYTES)?;
    let b: [u8; WORD_BYTES] = cmd.get(offset..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(words: &[u32]) -> Result<(Command, usize), Error> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        decode(&bytes, 0)
    }

    #[test]
    fn cmd0_register_and_operation() {
        assert_eq!(
            one(&[0x0007_010B]).unwrap(),
            (
                Command::Set {
                    reg: Reg::IfmHeight0M1,
                    value: 7,
                    param: 0
                },
                4
            )
        );
        assert_eq!(
            one(&[0xFFFF_0000]).unwrap(),
            (
                Command::Op {
                    code: OpCode::Stop,
                    param: 0xFFFF
                },
                4
            )
        );
    }

    #[test]
    fn cmd1_carries_its_data_word() {
        assert_eq!(
            one(&[0x0000_4000, 512]).unwrap(),
            (
                Command::Set {
                    reg: Reg::IfmBase0,
                    value: 512,
                    param: 0
                },
                8
            )
        );
    }

    #[test]
    fn cmd1_keeps_the_scale_shift() {
        // OFM_SCALE (cmd1 0x024) with shift 38 in the param.
        assert_eq!(
            one(&[0x0026_4024, 1_518_500_250]).unwrap().0,
            Command::Set {
                reg: Reg::OfmScale,
                value: 1_518_500_250,
                param: 38
            }
        );
    }

    #[test]
    fn rejects_each_word_level_fault() {
        assert!(matches!(
            one(&[0x0000_0400]),
            Err(Error::Stream(StreamError::MustBeZero { offset: 0, .. }))
        ));
        assert!(matches!(
            one(&[0x0000_8000]),
            Err(Error::Stream(StreamError::PayloadSize { size: 2, .. }))
        ));
        assert!(matches!(
            one(&[0x0000_0004]),
            Err(Error::Stream(StreamError::UnknownOpcode {
                opcode: 4,
                cmd1: false,
                ..
            }))
        ));
        assert!(matches!(
            one(&[0x0000_4100, 0]),
            Err(Error::Stream(StreamError::UnknownOpcode {
                opcode: 0x100,
                cmd1: true,
                ..
            }))
        ));
        assert!(matches!(
            one(&[0x0000_4000]),
            Err(Error::Stream(StreamError::Truncated {
                reg: Reg::IfmBase0,
                ..
            }))
        ));
        assert!(matches!(
            one(&[0x0001_4000, 0]),
            Err(Error::Stream(StreamError::AddressHigh { param: 1, .. }))
        ));
    }
}
