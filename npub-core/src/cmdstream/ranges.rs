//! Byte ranges of feature-map tiles, and the IFM extent an operation reads: pure arithmetic.
//!
//! All of it is `i64`: every input is at most a 16-bit count plus one (≤ 65 536, times 4 for
//! kernel strides and 2 for upscaling) or a 32-bit stride, so no product or sum here can come near
//! 2^63, and a negative stride simply gives a negative offset that the region check rejects.
//!
//! ## Tiles
//!
//! A feature map of `H × W` is split into up to four tiles by `HEIGHT0`, `HEIGHT1` and `WIDTH0`
//! (`h0`, `h1`, `w0` below, each the register plus one); each tile has its own base address and
//! coordinates local to it. A point `(y, x)` is in:
//!
//! | tile | columns      | rows         | present when        |
//! |------|--------------|--------------|---------------------|
//! | 0    | `[0, w0)`    | `[0, h0)`    | always              |
//! | 1    | `[w0, W)`    | `[0, h1)`    | `W > w0`            |
//! | 2    | `[0, w0)`    | `[h0, H)`    | `H > h0`            |
//! | 3    | `[w0, W)`    | `[h1, H)`    | `W > w0 && H > h1`  |
//!
//! (the rule of Vela's `get_address`; Vela's own range helper drops tile 3 unless tiles 1 and 2
//! both exist, which can only under-count, so the wider rule is the one checked).
//!
//! ## Bytes of a tile of `rows × cols × c` elements of `elem` bytes
//!
//! | layout  | offset of element (y, x, ch)                                                    |
//! |---------|----------------------------------------------------------------------------------|
//! | NHWC    | `y·STRIDE_Y + x·STRIDE_X + ch·elem`                                               |
//! | NHCWB16 | `y·STRIDE_Y + x·16·elem + ⌊ch/16⌋·STRIDE_C + (ch mod 16)·elem`                    |
//!
//! Strides are signed, so the lowest and the highest byte are taken over the whole box: each term
//! depends on one coordinate only, so the extremes are the sums of each term's extremes. The range
//! is `[base + lowest, base + highest_element + elem)`. For NHCWB16 the x term is taken both as
//! `16·elem` (the documented rule) and as `STRIDE_X` (in case the hardware honours the register):
//! Vela writes `STRIDE_X = 16·elem` for NHCWB16, so on real streams both agree, and a stream where
//! they differ is checked for both.

/// How a feature map is laid out (PRECISION bits 7:6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 0: plain NHWC.
    Nhwc,
    /// 1: NHCWB16, bricks of 16 channels.
    Nhcwb16,
}

/// Channels per NHCWB16 brick.
pub const BRICK_CHANNELS: i64 = 16;

/// What decides where a feature map's elements are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Layout.
    pub layout: Layout,
    /// Bytes per element: 1, 2 or 4.
    pub elem: i64,
    /// `STRIDE_X`, signed.
    pub stride_x: i64,
    /// `STRIDE_Y`, signed.
    pub stride_y: i64,
    /// `STRIDE_C`, signed (NHCWB16 only; 0 for NHWC, where it is not read).
    pub stride_c: i64,
}

/// The extent of a feature map in elements (each at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Rows.
    pub h: u32,
    /// Columns.
    pub w: u32,
    /// Channels.
    pub c: u32,
}

/// The tile split: `HEIGHT0 + 1`, `HEIGHT1 + 1`, `WIDTH0 + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Rows of tiles 0 (and where tile 2 starts).
    pub h0: u32,
    /// Rows of tile 1 (and where tile 3 starts).
    pub h1: u32,
    /// Columns of tiles 0 and 2 (and where tiles 1 and 3 start).
    pub w0: u32,
}

/// `rows × cols` of each of the four tiles of `ext` under `split`, `None` for a tile not present.
pub fn tiles(ext: Extent, split: Split) -> [Option<(u32, u32)>; 4] {
    let (h, w) = (ext.h, ext.w);
    let right = w > split.w0;
    [
        Some((h.min(split.h0), w.min(split.w0))),
        right.then(|| (h.min(split.h1), w - split.w0)),
        (h > split.h0).then(|| (h - split.h0, w.min(split.w0))),
        (right && h > split.h1).then(|| (h - split.h1, w - split.w0)),
    ]
}

/// Whether tile 1's height (`HEIGHT1`) is read at all for `ext`.
pub const fn needs_height1(ext: Extent, split_w0: u32) -> bool {
    ext.w > split_w0
}

/// `[lowest, end)` byte offsets, relative to the tile's base, of a tile of `rows × cols × c`
/// (each at least 1).
pub fn tile_bytes(g: &Geometry, rows: u32, cols: u32, c: u32) -> (i64, i64) {
    let (y_lo, y_hi) = span(i64::from(rows) - 1, g.stride_y);
    let cols_m1 = i64::from(cols) - 1;
    let c_m1 = i64::from(c) - 1;
    let (x_lo, x_hi, c_lo, c_hi) = match g.layout {
        Layout::Nhwc => {
            let (x_lo, x_hi) = span(cols_m1, g.stride_x);
            (x_lo, x_hi, 0, c_m1 * g.elem)
        }
        Layout::Nhcwb16 => {
            let (x_lo, x_hi) = span(cols_m1, g.stride_x);
            let x_hi = x_hi.max(cols_m1 * BRICK_CHANNELS * g.elem);
            let bricks_m1 = c_m1 / BRICK_CHANNELS;
            let (c_lo, _) = span(bricks_m1, g.stride_c);
            // The last brick ends at channel c-1; every earlier brick is full (16 channels).
            let last = bricks_m1 * g.stride_c + (c_m1 % BRICK_CHANNELS) * g.elem;
            let c_hi = if bricks_m1 >= 1 {
                let (_, full_hi) = span(bricks_m1 - 1, g.stride_c);
                last.max(full_hi + (BRICK_CHANNELS - 1) * g.elem)
            } else {
                last
            };
            (x_lo, x_hi, c_lo, c_hi)
        }
    };
    (y_lo + x_lo + c_lo, y_hi + x_hi + c_hi + g.elem)
}

/// `[min, max]` of `k · stride` over `k` in `[0, n]`.
fn span(n: i64, stride: i64) -> (i64, i64) {
    let far = n * stride;
    (far.min(0), far.max(0))
}

/// Rows (or columns) of input that a kernel sweep reads to produce `out` rows:
/// `(out − 1)·stride + kernel − pad_before − pad_after`.
///
/// Clamped below at 1: if the padding covers the whole sweep the hardware reads (at most) no input
/// rows, and assuming it reads one keeps the check conservative — a range that is too large can
/// only reject, never let an access through.
pub fn sweep_extent(out: u32, stride: u32, kernel: u32, pad_before: u32, pad_after: u32) -> u32 {
    let e = (i64::from(out) - 1) * i64::from(stride) + i64::from(kernel)
        - i64::from(pad_before)
        - i64::from(pad_after);
    // At most 65 536·4 + 65 536: always fits.
    e.max(1) as u32
}

/// Input rows behind `upscaled` rows of a 2× upscaled IFM (`IFM_UPSCALE` nearest or transpose):
/// `⌈(upscaled + 1) / 2⌉`, one more than the exact `⌈upscaled / 2⌉` when `upscaled` is even, to
/// cover Vela's rounding for nearest-neighbour (`_required_size` adds one before dividing).
/// Never more than `upscaled` for `upscaled ≥ 1`.
pub const fn upscale_source(upscaled: u32) -> u32 {
    upscaled / 2 + 1
}

/// `KERNEL_STRIDE` → (x stride, y stride): x = 1 + bit 0 + 2·bit 6, y = 1 + bit 1 + 2·bit 9.
pub const fn kernel_strides(param: u32) -> (u32, u32) {
    let x = 1 + (param & 1) + 2 * ((param >> 6) & 1);
    let y = 1 + ((param >> 1) & 1) + 2 * ((param >> 9) & 1);
    (x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nhwc(elem: i64, sx: i64, sy: i64) -> Geometry {
        Geometry {
            layout: Layout::Nhwc,
            elem,
            stride_x: sx,
            stride_y: sy,
            stride_c: 0,
        }
    }

    fn nhcwb16(elem: i64, sx: i64, sy: i64, sc: i64) -> Geometry {
        Geometry {
            layout: Layout::Nhcwb16,
            elem,
            stride_x: sx,
            stride_y: sy,
            stride_c: sc,
        }
    }

    #[test]
    fn dense_nhwc_tile_is_its_size() {
        // conv1's IFM: 8×8×3 int8, dense.
        assert_eq!(tile_bytes(&nhwc(1, 3, 24), 8, 8, 3), (0, 192));
        // 16-bit elements.
        assert_eq!(tile_bytes(&nhwc(2, 6, 48), 8, 8, 3), (0, 384));
    }

    #[test]
    fn dense_nhcwb16_tile_is_its_size() {
        // 16×16×32 int8 NHCWB16 (stride x 16, y 512, c 256): 8192 bytes.
        assert_eq!(tile_bytes(&nhcwb16(1, 16, 512, 256), 16, 16, 32), (0, 8192));
        // small_net writes that tensor one brick per CONV: channels 0..16 of it end 256 bytes
        // before the whole (the second CONV's base is 256).
        assert_eq!(tile_bytes(&nhcwb16(1, 16, 512, 256), 16, 16, 16), (0, 7936));
    }

    #[test]
    fn nhcwb16_partial_last_brick() {
        // 17 channels, one column, one row, brick stride 32: brick 0 ends at channel 15 (byte 15),
        // brick 1 holds channel 16 at byte 32.
        assert_eq!(tile_bytes(&nhcwb16(1, 16, 0, 32), 1, 1, 17), (0, 33));
        // With a tiny brick stride the full first brick is the farthest.
        assert_eq!(tile_bytes(&nhcwb16(1, 16, 0, 4), 1, 1, 17), (0, 16));
    }

    #[test]
    fn nhcwb16_x_covers_both_readings_of_stride_x() {
        let (_, hi16) = tile_bytes(&nhcwb16(1, 16, 0, 0), 1, 4, 1);
        let (_, hi_big) = tile_bytes(&nhcwb16(1, 100, 0, 0), 1, 4, 1);
        let (_, hi_small) = tile_bytes(&nhcwb16(1, 1, 0, 0), 1, 4, 1);
        assert_eq!(hi16, 3 * 16 + 1);
        assert_eq!(hi_big, 3 * 100 + 1);
        assert_eq!(hi_small, 3 * 16 + 1);
    }

    #[test]
    fn negative_strides_reach_below_the_base() {
        // Rows walked upwards: 4 rows of 8 bytes, stride −8.
        assert_eq!(tile_bytes(&nhwc(1, 1, -8), 4, 8, 1), (-24, 8));
        assert_eq!(tile_bytes(&nhwc(1, -1, 8), 1, 8, 1), (-7, 1));
    }

    #[test]
    fn tile_split_rules() {
        let ext = Extent { h: 8, w: 8, c: 1 };
        // No split: one tile.
        let t = tiles(
            ext,
            Split {
                h0: 8,
                h1: 8,
                w0: 8,
            },
        );
        assert_eq!(t, [Some((8, 8)), None, None, None]);
        // Split in four.
        let t = tiles(
            ext,
            Split {
                h0: 3,
                h1: 5,
                w0: 2,
            },
        );
        assert_eq!(t, [Some((3, 2)), Some((5, 6)), Some((5, 2)), Some((3, 6))]);
        // Split in height only: tile 2 below tile 0.
        let t = tiles(
            ext,
            Split {
                h0: 3,
                h1: 1,
                w0: 8,
            },
        );
        assert_eq!(t, [Some((3, 8)), None, Some((5, 8)), None]);
        // Split in width only, tile 1 of full height; tile 3 present only if h1 < H.
        let t = tiles(
            ext,
            Split {
                h0: 8,
                h1: 8,
                w0: 4,
            },
        );
        assert_eq!(t, [Some((8, 4)), Some((8, 4)), None, None]);
        let t = tiles(
            ext,
            Split {
                h0: 8,
                h1: 6,
                w0: 4,
            },
        );
        assert_eq!(t, [Some((8, 4)), Some((6, 4)), None, Some((2, 4))]);
    }

    #[test]
    fn sweep_extents() {
        // conv1: 8 out, stride 1, kernel 3, pads 1+1: 8 in.
        assert_eq!(sweep_extent(8, 1, 3, 1, 1), 8);
        // small_net: 16 out, stride 2, kernel 3, pads 0+1: 32 in.
        assert_eq!(sweep_extent(16, 2, 3, 0, 1), 32);
        // Pads covering everything: clamped to one row.
        assert_eq!(sweep_extent(1, 1, 1, 5, 5), 1);
    }

    #[test]
    fn upscale_never_exceeds_the_upscaled_extent() {
        for e in 1..200 {
            let s = upscale_source(e);
            assert!(s <= e && s >= e.div_ceil(2), "{e} -> {s}");
        }
    }

    #[test]
    fn kernel_stride_bits() {
        assert_eq!(kernel_strides(0), (1, 1));
        // small_net: param 7 = x lsb, y lsb, part-kernel-first.
        assert_eq!(kernel_strides(7), (2, 2));
        assert_eq!(kernel_strides((1 << 6) | (1 << 9) | 3), (4, 4));
        // Dilation bits 3, 4 do not change the stride.
        assert_eq!(kernel_strides(0b11000), (1, 1));
    }
}
