//! Manifest verification alone.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use npub_measure::{MANIFEST, PUBKEY, policy, verify_manifest};

#[entry]
fn main() -> ! {
    let r = verify_manifest(
        core::hint::black_box(MANIFEST),
        core::hint::black_box(PUBKEY),
        &core::hint::black_box(policy()),
    );
    let _ = core::hint::black_box(r.is_ok());
    loop {}
}
