//! Little-endian words read from unaligned bytes.
//!
//! NPU1 is a sequence of little-endian `u32` words, but a blob may sit at any address (a DMA buffer,
//! an XIP mapping, a `Vec`). Every read goes through [`word`], which checks the length and never
//! casts a pointer: there is no `unsafe` in this crate.

/// The `u32` stored little-endian at `bytes[offset..offset + 4]`, or `None` if that runs past the end.
#[inline]
pub(crate) fn word(bytes: &[u8], offset: usize) -> Option<u32> {
    let end = offset.checked_add(4)?;
    let raw: [u8; 4] = bytes.get(offset..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw))
}

/// `value` rounded up to a multiple of `align` (a power of two), or `None` on overflow.
#[inline]
pub(crate) const fn align_up(value: u64, align: u64) -> Option<u64> {
    match value.checked_add(align - 1) {
        Some(v) => Some(v & !(align - 1)),
        None => None,
    }
}
