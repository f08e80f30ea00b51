//! The runtime and nothing else: subtracted from the other binaries' `.text`.
#![no_std]
#![no_main]

use cortex_m_rt::entry;

#[entry]
fn main() -> ! {
    let _ = core::hint::black_box(npub_measure::MANIFEST.len() + npub_measure::PACK.len());
    loop {}
}
