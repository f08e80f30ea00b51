//! Helpers shared by the integration tests (each test file includes it with `mod common;`).
#![allow(dead_code)]

use npub_core::fnv::fnv1a32;
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Role};

/// A small valid pack: 40-byte stream, baked weights, runtime scratch, zero-size scratch_fast.
pub fn small_pack() -> Vec<u8> {
    let cmd: Vec<u8> = (0..40u8).collect();
    let weights: Vec<u8> = (0..100u8).map(|b| b.wrapping_mul(7)).collect();
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 1000,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

/// Little-endian word `i` of the header (or any word at byte `4 i`).
pub fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap())
}

/// Sets the word at byte offset `at`.
pub fn set(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Recomputes the payload checksum, so that a test reaches the check it aims at rather than
/// stopping at the checksum.
pub fn reseal(b: &mut [u8]) {
    let sum = fnv1a32(&b[32..]);
    set(b, 28, sum);
}

/// Byte offset of descriptor `i`'s word `w` (0 role, 1 flags, 2 size, 3 data_offset).
pub fn desc(i: usize, w: usize) -> usize {
    32 + 16 * i + 4 * w
}

/// A buffer of `len` bytes plus a sub-range of exactly `len` bytes that starts 16-byte aligned
/// (`misalign` = 0) or `misalign` bytes past a 16-byte boundary.
pub fn arena(len: usize, misalign: usize) -> (Vec<u8>, usize) {
    let buf = vec![0u8; len + 32];
    let addr = buf.as_ptr() as usize;
    let start = (16 - addr % 16) % 16 + misalign;
    (buf, start)
}
