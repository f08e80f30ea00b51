//! The Ethos-U weight-stream decoder: the compressed format Vela's encoder writes into a
//! `WEIGHT_BASE`/`WEIGHT_LENGTH` range, decoded to the signed 9-bit values the MAC array gets.
//!
//! Written from the format's description (Vela's `mlw_codec`), not from its code.
//!
//! ## Bitstream
//!
//! Bits are read least-significant first from consecutive bytes. A stream is a sequence of
//! slices; a slice starts with a header:
//!
//! | field   | bits | meaning                                                                 |
//! |---------|------|-------------------------------------------------------------------------|
//! | ZDIV    | 3    | Golomb-Rice divisor (log2) of the zero runs; 6 = no zero runs; 7 = end of stream |
//! | SLICELEN| 15   | weights in the slice, minus one                                         |
//! | WDIV    | 3    | Golomb-Rice divisor (log2) of the weights; 7 = uncompressed              |
//! | WTRUNC  | 1    | truncated unary: a quotient is at most 2                                |
//! | NEWPAL  | 1    | a palette follows (otherwise the previous slice's is kept)              |
//! | DIROFS  | 5    | NEWPAL only: offset of the values past the palette                      |
//! | PALSIZE | 5    | NEWPAL only: palette entries − 1 (0 = no palette)                       |
//! | PALBITS | 3    | NEWPAL only: bits per palette entry − 2                                 |
//! | palette | PALSIZE × PALBITS | NEWPAL only                                                |
//!
//! End of stream (ZDIV = 7) is followed by padding to the next byte; if bytes remain, another
//! stream follows (Vela pads streams to 16 bytes with one bits, which read as further ends of
//! stream). Fewer than 3 bits left where a header would start also end the stream.
//!
//! ## Slice body
//!
//! The weight indices and (unless ZDIV = 6) the zero runs are Golomb-Rice coded and interleaved in
//! *chunks*: per chunk, the unary quotient bits of up to 12 weights (a 12-bit field, then one
//! extra bit per set bit saying 1 or 2), the unary bits of the zero runs (12 bits, or 8 when
//! ZDIV ≥ 3), and then the remainders of the *previous* chunk's symbols. A flow-control rule keeps
//! the weight and zero-run positions within 8 of each other. An index below the palette size is
//! a palette entry, anything else is `index − palette size + DIROFS`; the value is sign-magnitude
//! with the sign in bit 0. With NEWPAL set a slice has one zero run more than weights: the run
//! before the first weight.
use crate::error::{RunError, WeightProblem};

/// `ZDIV` meaning "no zero runs in this slice".
const ZDIV_DISABLE: u32 = 6;
/// `ZDIV` meaning "end of stream".
const ZDIV_EOS: u32 = 7;
/// `WDIV` meaning "indices are stored uncompressed".
const WDIV_UNCOMPRESSED: u32 = 7;
/// Bits of the `SLICELEN` field.
const SLICELEN_BITS: u32 = 15;
/// Most palette entries (`PALSIZE` is 5 bits, plus one).
const PALETTE_MAX: usize = 32;
/// Unary bits per chunk for weights (and zero runs with a small divisor).
const CHUNK_SYMBOLS: u32 = 12;

/// Least-significant-bit-first reader over a byte slice; reading past its end is an error.
struct Bits<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() * 8 - self.pos
    }

    /// The next `n` bits (`n` ≤ 32), least significant first.
    #[inline]
    fn get(&mut self, n: u32) -> Result<u32, WeightProblem> {
        if n as usize > self.remaining() {
            return Err(WeightProblem::Truncated {
                bit: self.pos as u64,
            });
        }
        if n == 0 {
            return Ok(0);
        }
        // Up to 8 bytes from the current byte: enough for 32 bits at any bit offset.
        let byte = self.pos / 8;
        let window = match self.bytes.get(byte..byte + 8) {
            Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
            None => {
                let mut w = [0u8; 8];
                let avail = self.bytes.len() - byte;
                w[..avail].copy_from_slice(&self.bytes[byte..]);
                u64::from_le_bytes(w)
            }
        };
        let v = (window >> (self.pos % 8)) & ((1u64 << n) - 1);
        self.pos += n as usize;
        Ok(v as u32)
    }

    fn align_byte(&mut self) {
        self.pos = self.pos.div_ceil(8) * 8;
    }
}

/// The palette, kept across slices of a stream until a slice brings a new one.
#[derive(Clone, Copy)]
struct Palette {
    entries: [u16; PALETTE_MAX],
    size: usize,
    bits: u32,
    direct_offset: u32,
}

/// Decodes every stream in `bytes` (one `WEIGHT` range) into signed weights, refusing to produce
/// more than `limit` values: a range holds exactly the weights its operation needs, so anything
/// past that is a corrupt stream, and the limit bounds memory whatever the stream claims.
///
/// `offset` is the operation's command offset, for errors.
pub fn decode(bytes: &[u8], limit: usize, offset: u32) -> Result<Vec<i16>, RunError> {
    decode_inner(bytes, limit).map_err(|problem| RunError::WeightStream { offset, problem })
}

fn decode_inner(bytes: &[u8], limit: usize) -> Result<Vec<i16>, WeightProblem> {
    let mut bits = Bits { bytes, pos: 0 };
    let mut out = Vec::with_capacity(limit);
    let mut palette = Palette {
        entries: [0; PALETTE_MAX],
        size: 0,
        bits: 2,
        direct_offset: 0,
    };
    loop {
        // Slice header, skipping ends of stream and their padding.
        let zdiv = loop {
            if bits.remaining() < 3 {
                let rest = bits.remaining() as u32;
                if bits.get(rest)? != (1 << rest) - 1 {
                    return Err(WeightProblem::BadPadding {
                        bit: bits.pos as u64,
                    });
                }
                return Ok(out);
            }
            let z = bits.get(3)?;
            if z != ZDIV_EOS {
                break z;
            }
            bits.align_byte();
            if bits.remaining() == 0 {
                return Ok(out);
            }
        };
        if zdiv > 3 && zdiv != ZDIV_DISABLE {
            return Err(WeightProblem::BadZeroDivisor {
                bit: bits.pos as u64 - 3,
                zdiv: zdiv as u8,
            });
        }
        slice(&mut bits, zdiv, &mut palette, &mut out, limit)?;
    }
}

/// One slice after its `ZDIV`.
fn slice(
    bits: &mut Bits<'_>,
    zdiv: u32,
    palette: &mut Palette,
    out: &mut Vec<i16>,
    limit: usize,
) -> Result<(), WeightProblem> {
    let start = bits.pos as u64 - 3;
    let w_cnt = bits.get(SLICELEN_BITS)? as usize + 1;
    let mut wdiv = bits.get(3)?;
    let trunc = bits.get(1)? == 1;
    let new_palette = bits.get(1)? == 1;
    if new_palette {
        palette.direct_offset = bits.get(5)?;
        let size = bits.get(5)? as usize;
        palette.size = if size > 0 { size + 1 } else { 0 };
        palette.bits = bits.get(3)? + 2;
        for i in 0..palette.size {
            palette.entries[i] = bits.get(palette.bits)? as u16;
        }
    }
    let uncompressed = wdiv == WDIV_UNCOMPRESSED;
    if uncompressed {
        wdiv = if palette.size > 0 {
            usize::BITS - (palette.size - 1).leading_zeros()
        } else {
            palette.bits
        };
    } else if wdiv > 5 {
        return Err(WeightProblem::BadWeightDivisor {
            bit: start,
            wdiv: wdiv as u8,
        });
    }
    let zero_runs = zdiv != ZDIV_DISABLE;
    let z_cnt = w_cnt + usize::from(new_palette);
    if out.len() + w_cnt > limit {
        return Err(WeightProblem::TooManyWeights {
            bit: start,
            limit: limit as u64,
        });
    }

    let mut w_value = vec![0u64; w_cnt];
    let mut z_value = vec![0u32; if zero_runs { z_cnt } else { 0 }];
    let (mut w_pos, mut z_pos, mut w_prev_pos, mut z_prev_pos) = (0usize, 0usize, 0usize, 0usize);
    let (mut wq, mut zq) = (0u32, 0u32);
    let mut w_q = [0u32; CHUNK_SYMBOLS as usize];
    let mut z_q = [0u32; CHUNK_SYMBOLS as usize];
    let mut w_prev = (false, 0usize, [0u32; CHUNK_SYMBOLS as usize]);
    let mut z_prev = (false, 0usize, [0u32; CHUNK_SYMBOLS as usize]);
    let z_unary_len = if zdiv < 3 { CHUNK_SYMBOLS } else { 8 };
    loop {
        let balance = if zero_runs {
            w_pos as i64 - z_pos as i64
        } else {
            0
        };
        let w_en = (balance < 8 || !zero_runs) && w_pos < w_cnt;
        let z_en = balance >= 0 && zero_runs && z_pos < z_cnt;
        let w_unary0 = if w_en && !uncompressed {
            bits.get(CHUNK_SYMBOLS)?
        } else {
            0
        };
        let mut z_n = 0;
        if z_en {
            let z_unary = bits.get(z_unary_len)?;
            for i in 0..z_unary_len {
                if z_unary & (1 << i) != 0 {
                    zq = zq.saturating_add(1);
                } else {
                    z_q[z_n] = zq;
                    z_n += 1;
                    zq = 0;
                }
            }
            z_pos += z_n;
        }
        let mut w_n = 0;
        if w_en {
            let max_symbols = if uncompressed && wdiv > 5 {
                8
            } else {
                CHUNK_SYMBOLS
            };
            let mask = (1u32 << max_symbols) - 1;
            let mut w_unary1 = bits.get((w_unary0 & mask).count_ones())?;
            for i in 0..max_symbols {
                if w_n >= w_cnt - w_pos {
                    break;
                }
                let code = if w_unary0 & (1 << i) != 0 {
                    let c = 1 + (w_unary1 & 1);
                    w_unary1 >>= 1;
                    c
                } else {
                    0
                };
                wq = wq.saturating_add(code);
                if code < 2 || trunc {
                    w_q[w_n] = wq;
                    w_n += 1;
                    wq = 0;
                }
            }
            w_pos += w_n;
        }
        if w_prev.0 {
            for &q in &w_prev.2[..w_prev.1] {
                if w_prev_pos >= w_cnt {
                    break;
                }
                w_value[w_prev_pos] = (u64::from(q) << wdiv) + u64::from(bits.get(wdiv)?);
                w_prev_pos += 1;
            }
        }
        if z_prev.0 {
            for &q in &z_prev.2[..z_prev.1] {
                if z_prev_pos >= z_cnt {
                    break;
                }
                let run = (u64::from(q) << zdiv) + u64::from(bits.get(zdiv)?);
                z_value[z_prev_pos] = u32::try_from(run).unwrap_or(u32::MAX);
                z_prev_pos += 1;
            }
        }
        w_prev = (w_en, w_n, w_q);
        z_prev = (z_en, z_n, z_q);
        if !w_en && !z_en {
            break;
        }
    }

    // Everything the slice emits, checked against the limit once.
    let zeros: u64 = z_value.iter().map(|&z| u64::from(z)).sum();
    if (out.len() + w_cnt) as u64 + zeros > limit as u64 {
        return Err(WeightProblem::TooManyWeights {
            bit: start,
            limit: limit as u64,
        });
    }
    let lead = usize::from(new_palette);
    if new_palette && zero_runs {
        out.resize(out.len() + z_value[0] as usize, 0);
    }
    let palette_size = palette.size as u64;
    for (i, &w) in w_value.iter().enumerate() {
        let val = if w < palette_size {
            u64::from(palette.entries[w as usize])
        } else {
            w - palette_size + u64::from(palette.direct_offset)
        };
        let mag = (val >> 1) as i64;
        let v = if val & 1 != 0 { -mag } else { mag };
        out.push(i16::try_from(v).map_err(|_| WeightProblem::ValueRange { bit: start })?);
        if zero_runs {
            out.resize(out.len() + z_value[i + lead] as usize, 0);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes fields LSB first, as the encoder does.
    struct Writer {
        bytes: Vec<u8>,
        pos: usize,
    }

    impl Writer {
        fn new() -> Self {
            Writer {
                bytes: Vec::new(),
                pos: 0,
            }
        }
        fn put(&mut self, v: u32, n: u32) {
            for i in 0..n {
                if self.pos % 8 == 0 {
                    self.bytes.push(0);
                }
                let bit = ((v >> i) & 1) as u8;
                let last = self.bytes.len() - 1;
                self.bytes[last] |= bit << (self.pos % 8);
                self.pos += 1;
            }
        }
        fn eos_and_pad(&mut self) {
            self.put(ZDIV_EOS, 3);
            while self.pos % 8 != 0 {
                self.put(1, 1);
            }
            while self.bytes.len() % 16 != 0 {
                self.put(0xFF, 8);
            }
        }
    }

    /// An uncompressed slice, no palette, no zero runs: values in sign-magnitude, 8 bits each.
    fn uncompressed(values: &[i16]) -> Vec<u8> {
        let mut w = Writer::new();
        w.put(ZDIV_DISABLE, 3);
        w.put(values.len() as u32 - 1, SLICELEN_BITS);
        w.put(WDIV_UNCOMPRESSED, 3);
        w.put(0, 1); // WTRUNC
        w.put(1, 1); // NEWPAL
        w.put(0, 5); // DIROFS
        w.put(0, 5); // PALSIZE: no palette
        w.put(9 - 2, 3); // PALBITS: 9-bit indices
        // Uncompressed: chunks of 12 (8 when the index is wider than 5 bits) remainders, each
        // chunk's remainders one chunk late; with no unary part that is simply all of them.
        for &v in values {
            let code = (v.unsigned_abs() as u32) << 1 | u32::from(v < 0);
            w.put(code, 9);
        }
        w.eos_and_pad();
        w.bytes
    }

    #[test]
    fn uncompressed_values_round_trip() {
        let values: Vec<i16> = (-20..20).map(|v| v * 6).collect();
        let bytes = uncompressed(&values);
        assert_eq!(decode(&bytes, 1000, 0).unwrap(), values);
    }

    #[test]
    fn concatenated_streams_decode_back_to_back() {
        let mut bytes = uncompressed(&[1, -2, 3]);
        bytes.extend(uncompressed(&[-4, 5]));
        assert_eq!(decode(&bytes, 10, 0).unwrap(), vec![1, -2, 3, -4, 5]);
    }

    #[test]
    fn rejects_more_weights_than_the_operation_needs() {
        let bytes = uncompressed(&[1, 2, 3, 4]);
        assert!(matches!(
            decode(&bytes, 3, 7),
            Err(RunError::WeightStream {
                offset: 7,
                problem: WeightProblem::TooManyWeights { .. }
            })
        ));
    }

    #[test]
    fn rejects_truncated_stream() {
        let bytes = uncompressed(&[1, 2, 3, 4]);
        assert!(matches!(
            decode(&bytes[..4], 10, 0),
            Err(RunError::WeightStream {
                problem: WeightProblem::Truncated { .. },
                ..
            })
        ));
    }

    #[test]
    fn rejects_padding_that_is_not_ones() {
        // A header cut after one bit, its two remaining bits zero.
        assert!(matches!(
            decode(&[0b0000_0000], 10, 0),
            Err(RunError::WeightStream { .. })
        ));
    }
}
