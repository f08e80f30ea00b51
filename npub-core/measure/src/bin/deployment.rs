//! The whole verification path: manifest, then the pack streamed against it.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use npub_measure::{MANIFEST, PACK, PUBKEY, policy, verify_deployment};

#[entry]
fn main() -> ! {
    let r = verify_deployment(
        core::hint::black_box(MANIFEST),
        core::hint::black_box(PACK),
        core::hint::black_box(PUBKEY),
        &core::hint::black_box(policy()),
    );
    let _ = core::hint::black_box(r.is_ok());
    loop {}
}
