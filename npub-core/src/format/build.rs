//! Building packs (feature `alloc`): one forward pass, tables at the front.
//!
//! ```text
//! | 0      | 32                 | align16                  | align16         | align16 …
//! | header | 16 × region_count  | command stream | pad 0s  | baked region a | baked region b …
//! ```
//!
//! [`build_pack_for_driver`] also writes the COP1 driver payload's header into the padding right
//! before the stream (the stream still starts 16-byte aligned, at the first aligned offset with
//! room for the header after the table), so that a device hands Arm's driver its payload in place
//! (`cop1.rs`).
//!
//! Every size is known before a byte is written, so the header (checksum aside) and the table are
//! emitted first and the payload follows in table order. The command stream and each baked region
//! start 16-byte aligned (Arm's driver requires a 16-byte-aligned stream and base addresses, and a
//! pack mapped at an aligned address keeps that alignment); padding is zeros; the pack ends at the
//! last data byte. The output is a pure function of the inputs: same inputs, same bytes.
use alloc::vec::Vec;

use super::le::align_up;
use super::{
    ARENA_ALIGN, Accel, FLAG_BAKED, HEADER_BYTES, Header, MAGIC, REGION_DESC_BYTES, RegionDesc,
    Role, VERSION,
};
use crate::{Cop1Error, Error, FormatError, fnv};

/// One region to put in a pack, in BASEP order.
#[derive(Debug, Clone, Copy)]
pub enum RegionSpec<'a> {
    /// Bytes carried in the pack and used in place (weights).
    Baked {
        /// Informational role.
        role: Role,
        /// The region's bytes.
        bytes: &'a [u8],
    },
    /// Carved from the device's arena at bind time (scratch, activations).
    Runtime {
        /// Informational role.
        role: Role,
        /// Size in bytes.
        size: u32,
    },
}

/// Builds an NPU1 pack from a command stream, its regions (index = BASEP slot) and the accelerator
/// config. Refuses an empty command stream and anything that would not fit `u32` offsets.
///
/// A pack with more than eight regions is built (and parses), but cannot be bound on an
/// Ethos-U55; that is [`super::bind`]'s decision, not the container's.
pub fn build_pack(cmd: &[u8], regions: &[RegionSpec<'_>], accel: Accel) -> Result<Vec<u8>, Error> {
    build_pack_for_driver(&[], cmd, regions, accel)
}

/// [`build_pack`], with `head` — the COP1 driver payload's header, whose last word is the stream
/// tag for `cmd` — written into the padding so that it ends exactly at `cmd_offset`: the pack then
/// holds the driver payload `head ‖ cmd` in one piece (see `cop1.rs`). An empty `head` builds
/// exactly what [`build_pack`] builds. A `head` that is not whole words is refused.
pub fn build_pack_for_driver(
    head: &[u8],
    cmd: &[u8],
    regions: &[RegionSpec<'_>],
    accel: Accel,
) -> Result<Vec<u8>, Error> {
    if cmd.is_empty() {
        return Err(Error::Format(FormatError::EmptyCommandStream));
    }
    if head.len() % 4 != 0 {
        return Err(Error::Cop1(Cop1Error::NotWords {
            len: head.len() as u64,
        }));
    }
    let align = u64::from(ARENA_ALIGN);
    let table_end = u64::from(HEADER_BYTES) + u64::from(REGION_DESC_BYTES) * regions.len() as u64;
    let cmd_offset = align_up(table_end + head.len() as u64, align)
        .ok_or(Error::Format(FormatError::PackTooLarge { bytes: u64::MAX }))?;
    let mut end = cmd_offset + cmd.len() as u64;

    let mut descs = Vec::with_capacity(regions.len());
    for (index, spec) in regions.iter().enumerate() {
        let desc = match *spec {
            RegionSpec::Baked { role, bytes } => {
                let data_offset = align_up(end, align)
                    .ok_or(Error::Format(FormatError::PackTooLarge { bytes: end }))?;
                end = data_offset + bytes.len() as u64;
                RegionDesc {
                    index: index as u32,
                    role,
                    flags: FLAG_BAKED,
                    size: fits(bytes.len() as u64)?,
                    data_offset: fits(data_offset)?,
                }
            }
            RegionSpec::Runtime { role, size } => RegionDesc {
                index: index as u32,
                role,
                flags: 0,
                size,
                data_offset: 0,
            },
        };
        descs.push(desc);
    }
    let total_bytes = fits(end)?;

    let mut out = Vec::with_capacity(total_bytes as usize);
    let mut header = Header {
        magic: MAGIC,
        version: VERSION,
        total_bytes,
        region_count: fits(regions.len() as u64)?,
        cmd_offset: fits(cmd_offset)?,
        cmd_bytes: fits(cmd.len() as u64)?,
        accel: accel.word(),
        checksum: 0,
    };
    out.extend_from_slice(&header.to_bytes());
    for d in &descs {
        out.extend_from_slice(&d.to_bytes());
    }
    out.resize(cmd_offset as usize - head.len(), 0);
    out.extend_from_slice(head);
    out.extend_from_slice(cmd);
    for (d, spec) in descs.iter().zip(regions) {
        if let RegionSpec::Baked { bytes, .. } = spec {
            out.resize(d.data_offset as usize, 0);
            out.extend_from_slice(bytes);
        }
    }
    debug_assert_eq!(out.len(), total_bytes as usize);
    header.checksum = fnv::fnv1a32(&out[HEADER_BYTES as usize..]);
    out[..HEADER_BYTES as usize].copy_from_slice(&header.to_bytes());
    Ok(out)
}

fn fits(v: u64) -> Result<u32, Error> {
    u32::try_from(v).map_err(|_| Error::Format(FormatError::PackTooLarge { bytes: v }))
}
