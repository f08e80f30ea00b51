//! Manifest verification and the release check (two signatures): what a device with release
//! keys runs before it downloads. Its .text minus manifest_only's is the release check's cost.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use npub_measure::{BUNDLE, MANIFEST, PUBKEY, RELEASE_KEYS, policy, verify_release};

#[entry]
fn main() -> ! {
    let r = verify_release(
        core::hint::black_box(MANIFEST),
        core::hint::black_box(PUBKEY),
        core::hint::black_box(BUNDLE),
        core::hint::black_box(RELEASE_KEYS),
        &core::hint::black_box(policy()),
    );
    let _ = core::hint::black_box(r.is_ok());
    loop {}
}
