//! The AN547's CMSDK APB watchdog (the SSE-300's S32K watchdog at 0x4802_E000, clocked at
//! 32,768 Hz): armed with `--watchdog-ms`, fed through the transport's `Clock::feed` and every
//! wait of the poll loop. Its first expiry raises the NMI, its second resets the board (`RESEN`):
//! the counter counts half the budget each time, so a board that goes `ms` without a feed resets.
//! A reset restarts the firmware from its image on the same flash file: the agent boots what the
//! journal says and resumes the download.
//!
//! `--starve-once FILE` is the test of it: once the download passes 256 KiB, if `FILE` does not
//! exist, the firmware creates it and stops feeding, so the board resets, and the next boot (the
//! file now there) feeds again and finishes the install.
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicBool, Ordering};

const BASE: usize = 0x4802_E000;
const LOAD: usize = BASE;
const CONTROL: usize = BASE + 0x08;
const INTCLR: usize = BASE + 0x0C;
const LOCK: usize = BASE + 0xC00;
const UNLOCK: u32 = 0x1ACC_E551;
const CLOCK_HZ: u32 = 32_768;
/// `INTEN` (count, and raise the interrupt at zero) | `RESEN` (reset at the second zero).
const ENABLE: u32 = 0b11;

static ARMED: AtomicBool = AtomicBool::new(false);
static STARVED: AtomicBool = AtomicBool::new(false);

fn write(at: usize, value: u32) {
    // SAFETY: a register of the watchdog the AN547 maps at BASE (secure, no PPC).
    unsafe { write_volatile(at as *mut u32, value) }
}

/// Arms the watchdog: the board resets after `ms` without a [`feed`].
pub fn arm(ms: u32) {
    let ticks = (u64::from(ms) * u64::from(CLOCK_HZ) / 2000).max(1) as u32;
    write(LOCK, UNLOCK);
    write(LOAD, ticks);
    write(CONTROL, ENABLE);
    write(LOCK, 0);
    ARMED.store(true, Ordering::Relaxed);
}

/// Restarts the count (clears a pending first expiry), unless the firmware was told to starve.
pub fn feed() {
    if !ARMED.load(Ordering::Relaxed) || STARVED.load(Ordering::Relaxed) {
        return;
    }
    write(LOCK, UNLOCK);
    // SAFETY: as in `write`: reading LOAD back and writing it reloads the counter.
    let load = unsafe { read_volatile(LOAD as *const u32) };
    write(LOAD, load);
    write(INTCLR, 1);
    write(LOCK, 0);
}

/// Stops feeding for good (this boot): the board resets.
pub fn starve() {
    STARVED.store(true, Ordering::Relaxed);
}
