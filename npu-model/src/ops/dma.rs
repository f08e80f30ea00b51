//! `NPU_OP_DMA_START`: a 1-D copy of `DMA0_LEN` bytes between regions and SHRAM.
//!
//! | register          | bits                                                          |
//! |-------------------|---------------------------------------------------------------|
//! | `DMA0_SRC_REGION`, `DMA0_DST_REGION` | 7:0 region; 8 internal (SHRAM); 10:9 stride mode (0 only) |
//! | `DMA0_SRC`, `DMA0_DST`, `DMA0_LEN`   | byte offsets and length                                 |
use npub_core::cmdstream::Reg;

use crate::error::RunError;
use crate::machine::{Mem, Site};

const INTERNAL: u32 = 1 << 8;

enum End {
    Region(u8),
    Shram,
}

fn end(site: &Site<'_>, reg: Reg) -> Result<End, RunError> {
    let v = site.get(reg);
    if (v >> 9) & 0b11 != 0 {
        return Err(site.unsupported("2-D/3-D DMA"));
    }
    Ok(if v & INTERNAL != 0 {
        End::Shram
    } else {
        End::Region((v & 0xFF) as u8)
    })
}

/// Runs one DMA.
pub fn run(site: &Site<'_>, mem: &mut Mem<'_>) -> Result<(), RunError> {
    let len = site.get(Reg::Dma0Len) as usize;
    if len == 0 {
        return Ok(());
    }
    let src = site.get(Reg::Dma0Src) as usize;
    let dst = site.get(Reg::Dma0Dst) as usize;
    let out = |r: u8, a: usize| RunError::OutOfRange {
        offset: site.offset,
        op: site.name,
        region: r,
        address: a as i64,
    };
    let bytes = match end(site, Reg::Dma0SrcRegion)? {
        End::Region(r) => mem
            .region(r)
            .get(src..src + len)
            .ok_or(out(r, src))?
            .to_vec(),
        End::Shram => mem.shram.get(src..src + len).ok_or(out(0, src))?.to_vec(),
    };
    match end(site, Reg::Dma0DstRegion)? {
        End::Region(r) => {
            let region = mem.region_mut(r).ok_or(out(r, dst))?;
            region
                .get_mut(dst..dst + len)
                .ok_or(out(r, dst))?
                .copy_from_slice(&bytes);
            mem.mark(r, dst, dst + len, site.offset);
        }
        End::Shram => mem
            .shram
            .get_mut(dst..dst + len)
            .ok_or(out(0, dst))?
            .copy_from_slice(&bytes),
    }
    Ok(())
}
