//! Binding: turning a validated blob and a caller's arena into what the NPU's registers need.
//!
//! ```text
//!  blob (flash / XIP, never copied)          arena (caller's NPU-visible SRAM)
//!  ┌────────┬───────┬──────────┬─────────┐   ┌──pad──┬──────────────┬pad┬────────┬──…
//!  │ header │ table │ commands │ weights │   │ <16 B │ region 1     │   │ region 2│
//!  └────────┴───────┴────▲─────┴────▲────┘   └───────┴──▲───────────┴───┴──▲─────┴──…
//!                  QBASE ┘   BASEP0 ┘               BASEP1 ┘         BASEP2 ┘
//! ```
//!
//! A BAKED region's base is a pointer into the blob, in place. A RUNTIME region is carved from the
//! arena in table order, each base rounded up to 16 bytes *of its real address* (Ethos-U55 tensor
//! arenas are 16-byte aligned), so an arena that itself starts unaligned still yields aligned bases.
//! Role plays no part: binding is by index.
use super::le::align_up;
use super::{ARENA_ALIGN, Blob, MAX_BASE_POINTERS};
use crate::{Error, FormatError};

/// Where one region's bytes are for the NPU.
#[derive(Debug)]
pub enum BoundRegion<'a> {
    /// In the blob, used in place.
    Baked(&'a [u8]),
    /// Carved from the caller's arena; the NPU reads and writes it.
    Runtime(&'a mut [u8]),
}

impl BoundRegion<'_> {
    /// The base address to program into BASEP*n*.
    pub fn address(&self) -> usize {
        match self {
            Self::Baked(b) => b.as_ptr() as usize,
            Self::Runtime(b) => b.as_ptr() as usize,
        }
    }

    /// The region's size in bytes.
    pub fn len(&self) -> usize {
        match self {
            Self::Baked(b) => b.len(),
            Self::Runtime(b) => b.len(),
        }
    }

    /// True when the region has no bytes (a `scratch_fast` of size 0, say).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True for a region that lives in the blob.
    pub fn is_baked(&self) -> bool {
        matches!(self, Self::Baked(_))
    }
}

/// A bound job: the command stream and one base per region, ready for QBASE/QSIZE and BASEP0..7.
#[derive(Debug)]
pub struct Job<'a> {
    command_stream: &'a [u8],
    regions: [Option<BoundRegion<'a>>; MAX_BASE_POINTERS],
    count: usize,
}

impl<'a> Job<'a> {
    /// The command stream, in the blob (QBASE = its address, QSIZE = its length).
    pub fn command_stream(&self) -> &'a [u8] {
        self.command_stream
    }

    /// Number of bound regions (≤ 8).
    pub fn region_count(&self) -> usize {
        self.count
    }

    /// Region `index` (BASEP*index*), if bound.
    pub fn region(&self, index: usize) -> Option<&BoundRegion<'a>> {
        self.regions.get(index)?.as_ref()
    }

    /// Mutable access to region `index`, to fill an input or read an output in a runtime region.
    pub fn region_mut(&mut self, index: usize) -> Option<&mut BoundRegion<'a>> {
        self.regions.get_mut(index)?.as_mut()
    }

    /// The bound regions in BASEP order.
    pub fn regions(&self) -> impl Iterator<Item = &BoundRegion<'a>> {
        self.regions[..self.count].iter().flatten()
    }

    /// BASEP0..7 as addresses (0 for slots the blob does not use).
    pub fn base_addresses(&self) -> [usize; MAX_BASE_POINTERS] {
        let mut out = [0; MAX_BASE_POINTERS];
        for (slot, r) in out.iter_mut().zip(self.regions.iter()) {
            if let Some(r) = r {
                *slot = r.address();
            }
        }
        out
    }
}

/// Binds `blob` for the Ethos-U55: checks 10 (at most eight regions) and 11 (each RUNTIME region
/// fits what remains of `arena` after aligning its real address to 16).
///
/// Baked regions are never copied; runtime regions are disjoint sub-slices of `arena`, so the
/// borrow checker keeps the arena reserved for as long as the job lives.
pub fn bind<'a>(blob: &Blob<'a>, arena: &'a mut [u8]) -> Result<Job<'a>, Error> {
    let region_count = blob.region_count();
    if region_count as usize > MAX_BASE_POINTERS {
        return Err(Error::Format(FormatError::TooManyRegions {
            region_count,
            max: MAX_BASE_POINTERS as u32,
        }));
    }
    let arena_len = arena.len() as u64;
    let arena_base = arena.as_ptr() as usize;
    let mut rest: &'a mut [u8] = arena;
    let mut used: usize = 0;
    let mut regions: [Option<BoundRegion<'a>>; MAX_BASE_POINTERS] = Default::default();
    for desc in blob.regions() {
        let bound = if desc.is_baked() {
            // Present for every baked descriptor: check 8 bounded it.
            let bytes = blob.baked_bytes(desc.index).ok_or(Error::Format(
                FormatError::BakedRegionOutOfBounds {
                    region: desc.index,
                    data_offset: desc.data_offset,
                    size: desc.size,
                    total_bytes: blob.header().total_bytes,
                },
            ))?;
            BoundRegion::Baked(bytes)
        } else {
            let here = arena_base.wrapping_add(used);
            let pad = here.wrapping_neg() % ARENA_ALIGN as usize;
            let offset = used as u64 + pad as u64;
            let too_small = Error::Format(FormatError::ArenaTooSmall {
                region: desc.index,
                size: desc.size,
                offset,
                arena_len,
            });
            if offset + u64::from(desc.size) > arena_len {
                return Err(too_small);
            }
            let tail = core::mem::take(&mut rest);
            let (_, tail) = tail.split_at_mut(pad);
            let (region, tail) = tail.split_at_mut(desc.size as usize);
            rest = tail;
            used += pad + desc.size as usize;
            BoundRegion::Runtime(region)
        };
        regions[desc.index as usize] = Some(bound);
    }
    Ok(Job {
        command_stream: blob.command_stream(),
        regions,
        count: region_count as usize,
    })
}

/// Arena bytes that bind `blob` when the arena starts **16-byte aligned**: the runtime regions'
/// sizes plus the padding that aligns each one.
pub fn arena_bytes_required_aligned(blob: &Blob<'_>) -> u64 {
    let mut cursor: u64 = 0;
    for desc in blob.regions().filter(|d| !d.is_baked()) {
        // Cannot overflow: at most 2^32 regions of at most 2^32 bytes each, plus padding.
        cursor =
            align_up(cursor, u64::from(ARENA_ALIGN)).unwrap_or(u64::MAX) + u64::from(desc.size);
    }
    cursor
}

/// Arena bytes that bind `blob` wherever the arena starts.
///
/// Carving aligns each runtime region's *real address*, so an arena whose start is `m` bytes past a
/// 16-byte boundary loses `(16 − m) mod 16 ≤ 15` bytes before the first region, and after that the
/// layout is the aligned one. The answer is therefore [`arena_bytes_required_aligned`] + 15 when the
/// blob has any runtime region (0 when it has none): enough for any start address. A caller that
/// knows its arena is aligned can use the smaller figure.
pub fn arena_bytes_required(blob: &Blob<'_>) -> u64 {
    if blob.regions().all(|d| d.is_baked()) {
        return 0;
    }
    arena_bytes_required_aligned(blob) + u64::from(ARENA_ALIGN - 1)
}
