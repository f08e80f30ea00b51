//! The NPU's fixed-point scaling: `x · scale / 2^shift` with one of three rounding modes, in the
//! arithmetic TFLite's reference kernels use (so that a stream Vela compiled reproduces them).
//!
//! | mode (PRECISION bits 15:14) | result                                                        |
//! |-----------------------------|---------------------------------------------------------------|
//! | 0 DBL                       | double rounding: first at bit `point` (half up, TFLite's `SaturatingRoundingDoublingHighMul`), then the rest of the shift (half away from zero, `RoundingDivideByPOT`); a shift not past `point` rounds once, half up |
//! | 1 TRUNCATE                  | towards zero                                                  |
//! | 2 NATURAL                   | once, half up (`(x·scale + 2^(shift−1)) >> shift`)            |
//!
//! `point` is 31 for the output scale (the Q31 multiplier of `MultiplyByQuantizedMultiplier`) and
//! `31 − 20` (8-bit) or `31 − 15` (16-bit) for an elementwise input scale, where TFLite shifts the
//! inputs left by 20 (15) bits before its first rounding.
//!
//! The product is formed in `i128`: the accumulator is 40-bit (int16 convolutions) and the scale
//! 32-bit, and the shift is at most 63.

/// PRECISION bits 15:14.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundMode {
    /// TFLite's double rounding.
    Dbl,
    /// Towards zero.
    Truncate,
    /// Half up, once.
    Natural,
}

impl RoundMode {
    /// From the 2-bit field; 3 is reserved.
    pub const fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            0 => Some(Self::Dbl),
            1 => Some(Self::Truncate),
            2 => Some(Self::Natural),
            _ => None,
        }
    }
}

/// `⌊(x + 2^(n−1)) / 2^n⌋`: half up; `n = 0` is the identity.
pub fn round_half_up(x: i128, n: u32) -> i128 {
    if n == 0 {
        x
    } else {
        (x + (1i128 << (n - 1))) >> n
    }
}

/// TFLite's `RoundingDivideByPOT`: `x / 2^n`, half away from zero.
pub fn round_half_away(x: i128, n: u32) -> i128 {
    if n == 0 {
        return x;
    }
    let mask = (1i128 << n) - 1;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i128::from(x < 0);
    (x >> n) + i128::from(remainder > threshold)
}

/// `x · scale / 2^shift` rounded by `mode`, with the double-rounding point at bit `point`.
pub fn scale(x: i64, scale: u32, shift: u32, mode: RoundMode, point: u32) -> i64 {
    let p = i128::from(x) * i128::from(scale);
    let shift = shift.min(127);
    let r = match mode {
        RoundMode::Dbl if shift > point => round_half_away(round_half_up(p, point), shift - point),
        RoundMode::Dbl | RoundMode::Natural => round_half_up(p, shift),
        RoundMode::Truncate => {
            if p < 0 {
                -((-p) >> shift)
            } else {
                p >> shift
            }
        }
    };
    r.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_away_matches_rounding_divide_by_pot() {
        assert_eq!(round_half_away(5, 1), 3);
        assert_eq!(round_half_away(-5, 1), -3);
        assert_eq!(round_half_away(-6, 2), -2);
        assert_eq!(round_half_away(-7, 2), -2);
        assert_eq!(round_half_away(6, 2), 2);
    }

    #[test]
    fn half_up_matches_saturating_rounding_doubling_high_mul() {
        // SRDHM(a, b) = (a·b + nudge) / 2^31 truncated, nudge 2^30 or 1 − 2^30: half up.
        for (a, b) in [
            (3i64, 1i64 << 30),
            (-3, 1 << 30),
            (-1, 1 << 30),
            (12345, 987654321),
        ] {
            let ab = i128::from(a) * i128::from(b);
            let nudge = if ab >= 0 {
                1i128 << 30
            } else {
                1 - (1i128 << 30)
            };
            let want = (ab + nudge) / (1i128 << 31);
            assert_eq!(round_half_up(ab, 31), want, "{a} {b}");
        }
    }

    #[test]
    fn dbl_is_tflite_multiply_by_quantized_multiplier() {
        // MultiplyByQuantizedMultiplier(x, M, s) with s = −3: NPU shift 34.
        let m = 1_518_500_250u32;
        for x in [-1000i64, -77, -1, 0, 1, 77, 1000, 123_456] {
            let tfl = round_half_away(round_half_up(i128::from(x) * i128::from(m), 31), 3);
            assert_eq!(i128::from(scale(x, m, 34, RoundMode::Dbl, 31)), tfl);
        }
    }
}
