//! The NPU1 streaming validator alone (FNV-1a and the structural checks): the part of the pack
//! check a firmware that loads NPU1 packs links anyway.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use npub_core::StreamValidator;
use npub_measure::PACK;

#[entry]
fn main() -> ! {
    let pack = core::hint::black_box(PACK);
    let mut v = StreamValidator::new(pack.len() as u32);
    let fed = pack.chunks(256).try_for_each(|c| v.feed(c));
    let _ = core::hint::black_box(fed.is_ok() && v.finish().is_ok());
    loop {}
}
