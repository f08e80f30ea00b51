//! The agent core's flash budget: `fw/src/bin/size_probe.rs` links the agent alone (power-on,
//! boot, poll with ed25519, download, journal, counter, verification, bind; no network, no text
//! formatting) for the Cortex-M55 as the firmware is built (`opt-level = "s"`, LTO,
//! `compact-sha`). The target is 48 KiB of `.text` (issue #12), and this test fails above it.
//! Since the keyring moved into flash with its update path the agent core measured about 55 KB;
//! shrinking the agent (one verification pass, one record module, mounts that keep records as
//! bytes, `#[inline(never)]` where inlining copied code) brought it to 50,748 B, and verifying
//! signatures with salty's curve arithmetic instead of ed25519-dalek to about 44.4 KB (rustc 1.95).
//! `device-agent/README.md` gives the figure and how it is measured.
//!
//! **Raised to 58 KiB by issue 34 (release signatures), measured.** With the release check the
//! probe (which now provisions a release key and a release root, so the whole path is linked)
//! measured 58,156 B against 47,880 B on main (rustc 1.95): npub-core's `release::check` with its
//! bundle parser, per-signature checks and model id (about 2.9 KB, as `docs/release.md`'s figures
//! say), the release half of keyring updates (`apply_update`'s decoder of actions 4-8, key
//! changes, policy decoding: about 3.4 KB), the release record in flash (read, program, decode:
//! about 1.6 KB), the trust's provisioning and the agent's own glue (about 2.3 KB). Tried first:
//! `opt-level = "z"` (59,188 B against 59,200 B with `"s"`: nothing), reading a refused update's
//! sequence from its bytes instead of decoding it again, and one read of the release record at
//! mount instead of two (-1,044 B together). What is left is npub-core's, and the check the
//! issue asks for; the target keeps 1,236 B of room over the measured figure, as before.
//!
//! **Raised to 62 KiB by issue 37 (the golden self-test), measured.** The probe measured 62,144 B
//! against 59,232 B on main (rustc 1.95, `fw/`'s release profile): the version-2 manifest (its
//! length, version and domain dispatch, the 312-byte buffers), fetching the self-test record
//! into the slot after the pack and hashing it in flash, the descriptor's two new fields, the
//! record's parse for the golden input and the digest comparison with its error (about
//! 2.9 KB together). The target keeps 1,344 B of room over the measured figure.
mod net;

use std::path::Path;

/// The agent core's `.text` may not exceed this (issue #12: ≤ 48 KiB; 58 KiB since the release
/// check of issue 34, measured at 58,156 B; 62 KiB since the golden self-test of issue 37,
/// measured at 62,144 B: see above).
const TEXT_TARGET: u64 = 62 * 1024;

/// The size of section `name` in a 32-bit little-endian ELF file.
fn section_size(elf: &[u8], name: &str) -> Option<u64> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x01", "not a 32-bit ELF file");
    let (shoff, shentsize) = (u32_at(0x20) as usize, usize::from(u16_at(0x2E)));
    let (shnum, shstrndx) = (usize::from(u16_at(0x30)), usize::from(u16_at(0x32)));
    let strtab = u32_at(shoff + shstrndx * shentsize + 0x10) as usize;
    (0..shnum).find_map(|i| {
        let sh = shoff + i * shentsize;
        let at = strtab + u32_at(sh) as usize;
        let end = at + elf[at..].iter().position(|&b| b == 0)?;
        (&elf[at..end] == name.as_bytes()).then(|| u64::from(u32_at(sh + 0x14)))
    })
}

#[test]
fn the_agent_core_does_not_outgrow_its_flash_budget() {
    let probe = net::qemu::firmware().parent().unwrap().join("size_probe");
    let elf = std::fs::read(&probe).unwrap_or_else(|e| panic!("{}: {e}", probe.display()));
    let text = section_size(&elf, ".text").expect("a .text section");
    let rodata = section_size(&elf, ".rodata").unwrap_or(0);
    println!(
        "{}: .text {text} B, .rodata {rodata} B",
        Path::new(&probe).display()
    );
    println!(
        "{} B under the {TEXT_TARGET} B target",
        TEXT_TARGET.saturating_sub(text)
    );
    assert!(
        text <= TEXT_TARGET,
        "the agent core's .text is {text} B, {} B over its {TEXT_TARGET} B target: see \
         fw/src/bin/size_probe.rs and `llvm-nm --size-sort` on it for what grew",
        text.saturating_sub(TEXT_TARGET)
    );
}
