//! Milliseconds from SysTick: the clock the transport's timeouts and the poll loop run on.
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use device_agent::http_io::Clock;

/// The AN547's processor clock as QEMU models it (the SysTick's clock source).
pub const CPU_HZ: u32 = 32_000_000;

static TICKS: AtomicU32 = AtomicU32::new(0);
static EPOCHS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    if TICKS.fetch_add(1, Ordering::Relaxed) == u32::MAX {
        EPOCHS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts the 1 kHz tick.
pub fn start(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CPU_HZ / 1000 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// Milliseconds since [`start`].
pub fn now_ms() -> u64 {
    loop {
        let hi = EPOCHS.load(Ordering::Relaxed);
        let lo = TICKS.load(Ordering::Relaxed);
        if EPOCHS.load(Ordering::Relaxed) == hi {
            return (u64::from(hi) << 32) | u64::from(lo);
        }
    }
}

/// The SysTick clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysClock;

impl Clock for SysClock {
    fn now_ms(&mut self) -> u64 {
        now_ms()
    }

    fn sleep_ms(&mut self, ms: u32) {
        let end = now_ms() + u64::from(ms);
        while now_ms() < end {
            crate::watchdog::feed();
            cortex_m::asm::wfi();
        }
    }

    fn feed(&mut self) {
        crate::watchdog::feed();
    }
}
