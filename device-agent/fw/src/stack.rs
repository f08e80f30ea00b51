//! Peak stack use, measured by painting: fill the unused stack with a pattern before the work,
//! then find the deepest word the work overwrote.
use core::ptr::{addr_of, read_volatile, write_volatile};
use core::sync::atomic::AtomicUsize;
use core::sync::atomic::Ordering::Relaxed;

/// A value the agent is unlikely to leave on the stack by chance.
const PAINT: u32 = 0xC5AC_CE55;
/// Left unpainted below the painter's own stack pointer: its frame and the call that follows.
const MARGIN: usize = 256;

unsafe extern "C" {
    /// cortex-m-rt: end of .bss/.data in RAM, where the stack's free space starts.
    static __sheap: u32;
    /// cortex-m-rt: initial stack pointer, the top of RAM.
    static _stack_start: u32;
}

// Only the symbols' addresses are taken; they are never read.
fn bottom() -> usize {
    addr_of!(__sheap) as usize
}

/// The top of the stack (the initial stack pointer).
pub fn top() -> usize {
    addr_of!(_stack_start) as usize
}

/// Paints the free stack, from the end of static RAM up to a little below the current stack
/// pointer.
#[inline(never)]
pub fn paint() {
    let sp = cortex_m::register::msp::read() as usize;
    let mut p = bottom();
    while p + 4 <= sp - MARGIN {
        // SAFETY: [__sheap, sp − MARGIN) is RAM that nothing uses yet: below every live frame and
        // above all statics; the only interrupt (SysTick) runs below the live stack pointer and
        // writes its own frame there, which is stack use like any other.
        unsafe { write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

/// The lowest address written since `paint`.
fn deepest() -> usize {
    let mut p = bottom();
    // SAFETY: reads words of the RAM `paint` wrote, within [__sheap, _stack_start).
    while p < top() && unsafe { read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    p
}

/// The stack pointer now.
#[inline(always)]
pub fn sp() -> usize {
    cortex_m::register::msp::read() as usize
}

/// Stack used at the deepest point since `paint`: (from the top of RAM, below `sp`) — the second
/// is what a call made at stack pointer `sp` needed, without the frames of its callers.
pub fn peak(sp: usize) -> (usize, usize) {
    let d = deepest();
    (top() - d, sp.saturating_sub(d))
}

/// The deepest stack of the whole run, from the top of RAM, across [`repaint`]s (only the main
/// thread touches it: load and store suffice).
static DEEPEST: AtomicUsize = AtomicUsize::new(0);

/// Keeps the deepest point so far, then paints again: what follows is measured alone.
#[inline(never)]
pub fn repaint() {
    DEEPEST.store(deepest_overall(), Relaxed);
    paint();
}

/// The deepest stack of the whole run (from the top of RAM).
pub fn deepest_overall() -> usize {
    DEEPEST.load(Relaxed).max(top() - deepest())
}
