//! Stack depth, measured by painting: fill the free stack with a pattern, run the path, and find
//! the lowest word that changed. Prints the figures over semihosting and exits (run under QEMU,
//! see run.sh). Everything below `main`'s own frame is counted: the callee's frames, spills and
//! the SHA/curve state they hold.
#![no_std]
#![no_main]

use core::arch::asm;
use core::hint::black_box;

use cortex_m_rt::entry;
use npub_core::manifest::Keyring;
use npub_core::release::DeviceReleaseTrust;
use npub_measure::{
    BUNDLE, MANIFEST, PACK, POLICY_UPDATE, PUBKEY, RELEASE_KEYS, RELEASE_ROOT, ROOT, UPDATE,
    check_pack, policy, provision, provision_release, release_check, release_update, rotate,
    verify_only,
};

unsafe extern "C" {
    /// Lowest address the stack may grow to (end of .bss/.uninit), from cortex-m-rt's link.x.
    static _stack_end: u32;
}

const PAINT: u32 = 0xC0FF_EE55;
/// Words just below the current SP left unpainted: the painting loop's own spills.
const MARGIN: usize = 64;

fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer into a register; no memory is touched.
    unsafe { asm!("mov {}, sp", out(reg) sp) };
    sp
}

/// Paints `[_stack_end, sp - MARGIN)` and returns (bottom, top) of the painted range.
#[inline(always)]
fn paint() -> (usize, usize) {
    let bottom = &raw const _stack_end as usize;
    let top = sp() - MARGIN;
    let mut p = bottom;
    while p < top {
        // SAFETY: [bottom, top) is free stack below the live frames; word aligned (link.x asserts it).
        unsafe { (p as *mut u32).write_volatile(PAINT) };
        p += 4;
    }
    (bottom, top)
}

/// Bytes between the lowest changed word and the SP at the time of painting.
#[inline(always)]
fn used((bottom, top): (usize, usize)) -> usize {
    let mut p = bottom;
    // SAFETY: reads back the words painted above.
    while p < top && unsafe { (p as *const u32).read_volatile() } == PAINT {
        p += 4;
    }
    top + MARGIN - p
}

#[entry]
fn main() -> ! {
    let mut ring = Keyring::<4>::new();
    let painted = paint();
    let provisioned = provision(&mut ring, black_box(PUBKEY));
    let provision_stack = used(painted);

    let painted = paint();
    let verified = verify_only(black_box(MANIFEST), &ring, &black_box(policy()));
    let verify_stack = used(painted);

    let painted = paint();
    let rotated = rotate(&mut ring, black_box(UPDATE), black_box(ROOT));
    let rotate_stack = used(painted);

    let mut trust = DeviceReleaseTrust::new();
    let released_ok = provision_release(&mut trust, black_box(RELEASE_KEYS));
    let painted = paint();
    let policy_ok = release_update(
        &mut ring,
        &mut trust,
        black_box(POLICY_UPDATE),
        black_box(RELEASE_ROOT),
    );
    let release_update_stack = used(painted);

    let ok = match verified {
        Ok(verified) => {
            let painted = paint();
            let released = release_check(&trust, black_box(BUNDLE), &verified);
            let release_stack = used(painted);
            let painted = paint();
            let checked = check_pack(verified, black_box(PACK));
            let pack_stack = used(painted);
            let mut line = Line::new();
            line.push(b"Keyring::add stack=");
            line.number(provision_stack);
            line.push(b" bytes\nmanifest::verify stack=");
            line.number(verify_stack);
            line.push(b" bytes\nPackCheck new+feed+finish stack=");
            line.number(pack_stack);
            line.push(b" bytes\nKeyring::apply_update stack=");
            line.number(rotate_stack);
            line.push(b" bytes\n");
            line.write();
            let mut line = Line::new();
            line.push(b"release::check (2 signatures) stack=");
            line.number(release_stack);
            line.push(b" bytes\nrelease::apply_update (policy) stack=");
            line.number(release_update_stack);
            line.push(b" bytes\n");
            line.write();
            provisioned
                && rotated
                && checked.is_ok()
                && released_ok
                && policy_ok
                && released == Ok(2)
        }
        Err(_) => false,
    };
    if !ok {
        let mut line = Line::new();
        line.push(b"verification FAILED\n");
        line.write();
    }
    exit(ok)
}

/// A fixed buffer of text for semihosting's SYS_WRITE0 (NUL-terminated), no formatter.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.len + 1 < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn number(&mut self, mut n: usize) {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn write(&mut self) {
        self.buf[self.len] = 0;
        semihost(0x04, self.buf.as_ptr() as usize);
    }
}

/// SYS_EXIT with ADP_Stopped_ApplicationExit (0x20026), or RunTimeErrorUnknown (0x20023).
fn exit(ok: bool) -> ! {
    semihost(0x18, if ok { 0x20026 } else { 0x20023 });
    loop {}
}

fn semihost(op: usize, arg: usize) {
    // SAFETY: the Arm semihosting call (BKPT 0xAB, r0 = operation, r1 = argument); QEMU's
    // -semihosting services it. `arg` points to live memory for SYS_WRITE0.
    unsafe { asm!("bkpt 0xab", inout("r0") op => _, in("r1") arg, options(nostack)) };
}
