//! Which weight each decoded value is, and the bias/scale records.
//!
//! The NPU consumes a weight stream in the order its MAC array needs it. For an operation with
//! `D` output channels, an undilated `KH × KW` kernel and `I` input channels (1 for DEPTHWISE):
//!
//! | loop (outer to inner)  | over                                                              |
//! |------------------------|-------------------------------------------------------------------|
//! | OFM block              | `D` in steps of `OFM_BLK_DEPTH_M1 + 1`                             |
//! | IFM block              | `I` in steps of 32 (16 for part-kernel-first or a 16-bit IFM)       |
//! | sub-kernel             | the kernel cut into at most `8/dilation` × `8/dilation` pieces, rows then columns |
//! | IFM micro-block (outer)| part-kernel-first only: the IFM block in steps of the IFM micro-block |
//! | OFM micro-block        | the OFM block in steps of the OFM micro-block depth (4 on U55-32, else 8) |
//! | kernel element         | the sub-kernel's elements row-major, padded up to a multiple of 4 (DEPTHWISE, part-kernel-first 8-bit) or 2 (part-kernel-first 16-bit) |
//! | IFM micro-block (inner)| depth-first only: the IFM block in steps of 8                       |
//! | OFM channel            | the micro-block's channels                                         |
//! | IFM channel            | the micro-block's 8 channels (1 for DEPTHWISE)                      |
//!
//! A position past an edge (channel ≥ `D` or `I`, padding element) carries a zero the NPU
//! ignores. The result is a dense `[KH][KW][I][D]` array: one input channel's weights for every
//! output channel are contiguous, so the MAC loop adds one input element times a row of weights
//! into a row of accumulators.
//!
//! ## Scale records (`SCALE_BASE`, 10 bytes per output channel, little-endian)
//!
//! | bytes | field                                            |
//! |-------|--------------------------------------------------|
//! | 0..5  | bias, 40-bit signed                              |
//! | 5..9  | scale, 32-bit unsigned                           |
//! | 9     | shift, bits 5:0                                  |
use crate::error::{RunError, WeightProblem};
use crate::machine::Site;
use crate::mlw;

/// IFM micro-block depth on every U55.
const IFM_UBLOCK: usize = 8;
/// Bytes per scale record.
pub const SCALE_RECORD: usize = 10;

/// What decides the weight order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    /// Output channels.
    pub ofm_depth: usize,
    /// Input channels (1 for DEPTHWISE).
    pub ifm_depth: usize,
    /// Undilated kernel height and width.
    pub kh: usize,
    /// Undilated kernel width.
    pub kw: usize,
    /// Dilation.
    pub dil_x: usize,
    /// Dilation.
    pub dil_y: usize,
    /// `OFM_BLK_DEPTH_M1 + 1`.
    pub ofm_block_depth: usize,
    /// 4 on U55-32, 8 otherwise.
    pub ofm_ublock: usize,
    /// DEPTHWISE.
    pub depthwise: bool,
    /// `KERNEL_STRIDE` bit 2.
    pub part_kernel: bool,
    /// 16-bit IFM.
    pub ifm16: bool,
}

impl Order {
    /// Calls `f(Some(dense index))` for each stream position that is a weight, `f(None)` for a
    /// padding position, in stream order.
    pub fn walk(&self, mut f: impl FnMut(Option<usize>)) {
        let ifm_block = if self.part_kernel || self.ifm16 {
            16
        } else {
            32
        };
        let decomp_x = 8 / self.dil_x;
        let decomp_y = 8 / self.dil_y;
        let round = if self.depthwise {
            4
        } else if self.part_kernel {
            if self.ifm16 { 2 } else { 4 }
        } else {
            1
        };
        let ifm_depth = if self.depthwise { 1 } else { self.ifm_depth };
        let ifm_ub_z_end = if self.depthwise { 1 } else { IFM_UBLOCK };
        let index = |o: usize, y: usize, x: usize, i: usize| {
            ((y * self.kw + x) * ifm_depth + i) * self.ofm_depth + o
        };
        for ofm_block_z in (0..self.ofm_depth).step_by(self.ofm_block_depth.max(1)) {
            let clipped_ofm = self.ofm_block_depth.min(self.ofm_depth - ofm_block_z);
            for ifm_block_z in (0..ifm_depth).step_by(ifm_block) {
                let clipped_ifm = if self.depthwise {
                    IFM_UBLOCK
                } else if self.part_kernel {
                    ifm_block.min(ifm_depth - ifm_block_z)
                } else {
                    ifm_block
                };
                for sub_y in (0..self.kh).step_by(decomp_y) {
                    let sub_h = (self.kh - sub_y).min(decomp_y);
                    for sub_x in (0..self.kw).step_by(decomp_x) {
                        let sub_w = (self.kw - sub_x).min(decomp_x);
                        let elements = (sub_w * sub_h).div_ceil(round) * round;
                        let (outer, inner) = if self.part_kernel {
                            (clipped_ifm, 1)
                        } else {
                            (1, clipped_ifm)
                        };
                        for ifm_ub_outer in (0..outer).step_by(IFM_UBLOCK) {
                            for ofm_ub in (0..clipped_ofm).step_by(self.ofm_ublock) {
                                for e in 0..elements {
                                    let kx = e % sub_w;
                                    let ky = e / sub_w;
                                    for ifm_ub_inner in (0..inner).step_by(IFM_UBLOCK) {
                                        let ifm_ub = ifm_ub_inner + ifm_ub_outer;
                                        for ofm_ub_z in 0..self.ofm_ublock {
                                            for ifm_ub_z in 0..ifm_ub_z_end {
                                                let i = ifm_block_z + ifm_ub + ifm_ub_z;
                                                let o = ofm_block_z + ofm_ub + ofm_ub_z;
                                                if i < ifm_depth && o < self.ofm_depth && ky < sub_h
                                                {
                                                    f(Some(index(o, sub_y + ky, sub_x + kx, i)));
                                                } else {
                                                    f(None);
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Stream positions the operation consumes, without walking them: the loops of [`Self::walk`]
    /// factor into (OFM positions) × (IFM positions) × (sub-kernel elements), each a closed sum.
    /// Saturates instead of overflowing, so a hostile register file cannot wrap it small.
    pub fn count(&self) -> u128 {
        let (od, bd, ub) = (
            self.ofm_depth as u128,
            self.ofm_block_depth.max(1) as u128,
            self.ofm_ublock as u128,
        );
        // Per OFM block: its micro-blocks, each `ub` deep.
        let ofm_positions = (od / bd) * bd.div_ceil(ub) * ub + (od % bd).div_ceil(ub) * ub;
        let ifm_positions = if self.depthwise {
            1
        } else {
            let ifm_block: u128 = if self.part_kernel || self.ifm16 {
                16
            } else {
                32
            };
            let id = self.ifm_depth as u128;
            let u = IFM_UBLOCK as u128;
            if self.part_kernel {
                (id / ifm_block) * ifm_block.div_ceil(u) * u + (id % ifm_block).div_ceil(u) * u
            } else {
                id.div_ceil(ifm_block) * ifm_block
            }
        };
        let round = if self.depthwise || (self.part_kernel && !self.ifm16) {
            4
        } else if self.part_kernel {
            2
        } else {
            1
        };
        let pieces = |k: usize, d: usize| -> [(u128, u128); 2] {
            [
                ((k / d) as u128, d as u128),
                (u128::from(k % d != 0), (k % d) as u128),
            ]
        };
        let mut elements = 0u128;
        for (ny, h) in pieces(self.kh, 8 / self.dil_y) {
            for (nx, w) in pieces(self.kw, 8 / self.dil_x) {
                elements += ny * nx * (h * w).div_ceil(round) * round;
            }
        }
        ofm_positions
            .saturating_mul(ifm_positions)
            .saturating_mul(elements)
    }

    /// Dense weights `[KH][KW][I][D]` (saturating).
    pub fn dense_len(&self) -> usize {
        let i = if self.depthwise { 1 } else { self.ifm_depth };
        self.ofm_depth
            .saturating_mul(self.kh)
            .saturating_mul(self.kw)
            .saturating_mul(i)
    }
}

/// Decodes `stream` (one operation's `WEIGHT` range) into dense `[KH][KW][I][D]` weights, refusing a stream that
/// holds fewer or more values than the operation consumes.
pub fn decode(
    stream: &[u8],
    order: &Order,
    site: &Site<'_>,
    limit: usize,
) -> Result<Vec<i16>, RunError> {
    let needed = order.count();
    if needed > limit as u128 || order.dense_len() as u128 > limit as u128 {
        return Err(site.unsupported(
            "a weight volume larger than the pack's memory (16 × its regions' bytes)",
        ));
    }
    let needed = needed as usize;
    let values = mlw::decode(stream, needed, site.offset)?;
    if values.len() != needed {
        return Err(RunError::WeightStream {
            offset: site.offset,
            problem: WeightProblem::TooFewWeights {
                decoded: values.len() as u64,
                needed: needed as u64,
            },
        });
    }
    let mut dense = vec![0i16; order.dense_len()];
    let mut k = 0;
    order.walk(|at| {
        if let Some(at) = at {
            dense[at] = values[k];
        }
        k += 1;
    });
    Ok(dense)
}

/// One output channel's bias and scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelScale {
    /// 40-bit bias.
    pub bias: i64,
    /// Multiplier.
    pub scale: u32,
    /// Right shift.
    pub shift: u32,
}

/// Reads `channels` scale records from `bytes` (the `SCALE` range).
pub fn scales(
    bytes: &[u8],
    channels: usize,
    site: &Site<'_>,
) -> Result<Vec<ChannelScale>, RunError> {
    let needed = channels as u64 * SCALE_RECORD as u64;
    if (bytes.len() as u64) < needed {
        return Err(RunError::ScaleStream {
            offset: site.offset,
            bytes: bytes.len() as u32,
            needed,
        });
    }
    Ok(bytes
        .chunks_exact(SCALE_RECORD)
        .take(channels)
        .map(record)
        .collect())
}

/// One scale record.
fn record(r: &[u8]) -> ChannelScale {
    let mut b = [0u8; 8];
    b[..5].copy_from_slice(&r[..5]);
    ChannelScale {
        // Sign-extend the 40-bit bias.
        bias: (i64::from_le_bytes(b) << 24) >> 24,
        scale: u32::from_le_bytes([r[5], r[6], r[7], r[8]]),
        shift: u32::from(r[9] & 0x3F),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(ofm: usize, ifm: usize, k: usize, depthwise: bool, part_kernel: bool) -> Order {
        Order {
            ofm_depth: ofm,
            ifm_depth: ifm,
            kh: k,
            kw: k,
            dil_x: 1,
            dil_y: 1,
            ofm_block_depth: 16,
            ofm_ublock: 8,
            depthwise,
            part_kernel,
            ifm16: false,
        }
    }

    #[test]
    fn every_weight_is_placed_exactly_once() {
        for (o, i, k, dw, pk) in [
            (8, 3, 3, false, false),
            (20, 37, 3, false, true),
            (32, 1, 3, true, false),
            (16, 8192, 1, false, false),
            (5, 9, 9, false, false),
            (13, 21, 10, false, true),
            (7, 1, 11, true, false),
        ] {
            let ord = order(o, i, k, dw, pk);
            let mut seen = vec![0u32; ord.dense_len()];
            let mut walked = 0u128;
            ord.walk(|at| {
                walked += 1;
                if let Some(at) = at {
                    seen[at] += 1;
                }
            });
            assert!(seen.iter().all(|&n| n == 1), "{o} {i} {k} {dw} {pk}");
            assert_eq!(ord.count(), walked, "{o} {i} {k} {dw} {pk}");
        }
    }

    #[test]
    fn depth_first_pads_the_ifm_block_to_32() {
        // conv1: 8 OFM channels, 3 IFM channels, 3×3: 9 elements × 32 IFM channels × 8 OFM.
        assert_eq!(order(8, 3, 3, false, false).count(), 9 * 32 * 8);
    }

    #[test]
    fn scale_records_decode() {
        let mut r = [0u8; 10];
        r[..5].copy_from_slice(&(-3i64).to_le_bytes()[..5]);
        r[5..9].copy_from_slice(&1_518_500_250u32.to_le_bytes());
        r[9] = 38;
        let got = record(&r);
        assert_eq!(got.bias, -3);
        assert_eq!(got.scale, 1_518_500_250);
        assert_eq!(got.shift, 38);
        // The largest positive 40-bit bias stays positive.
        r[..5].copy_from_slice(&((1i64 << 39) - 1).to_le_bytes()[..5]);
        assert_eq!(record(&r).bias, (1 << 39) - 1);
    }
}
