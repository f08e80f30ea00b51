//! Exponential backoff with jitter, so that a fleet that lost its server does not come back in
//! lockstep.
//!
//! The `n`-th delay (from 0) is drawn uniformly from `[d/2, d]` with `d = min(base · 2ⁿ, cap)`
//! ("equal jitter"): never shorter than half the nominal delay, so a retry storm still thins out,
//! and never two devices in step. The randomness is a xorshift32 seeded by the caller (a device
//! has no entropy source to spare; its token or MAC address is different enough).

/// A backoff schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base_ms: u32,
    cap_ms: u32,
    failures: u32,
    rng: u32,
}

impl Backoff {
    /// A schedule from `base_ms` doubling up to `cap_ms`, jittered from `seed`.
    pub const fn new(base_ms: u32, cap_ms: u32, seed: u32) -> Self {
        Self {
            base_ms,
            cap_ms,
            failures: 0,
            // xorshift32 must not start at 0.
            rng: if seed == 0 { 0x9E37_79B9 } else { seed },
        }
    }

    /// The delay before the next attempt, after one more failure.
    pub fn next_delay_ms(&mut self) -> u32 {
        let shift = self.failures.min(31);
        self.failures = self.failures.saturating_add(1);
        let nominal = self
            .base_ms
            .checked_shl(shift)
            .filter(|d| d >> shift == self.base_ms)
            .map_or(self.cap_ms, |d| d.min(self.cap_ms));
        let half = nominal / 2;
        let span = nominal - half;
        half + self.random() % span.saturating_add(1)
    }

    /// Failures since the last [`Backoff::reset`].
    pub const fn failures(&self) -> u32 {
        self.failures
    }

    /// After a success: the next failure waits `base_ms` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    fn random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::Backoff;

    #[test]
    fn survives_many_failures_within_half_to_full_of_the_capped_nominal_delay() {
        let mut b = Backoff::new(100, 5_000, 7);
        for n in 0..64u32 {
            let nominal = if n < 16 {
                (100u32 << n).min(5_000)
            } else {
                5_000
            };
            let d = b.next_delay_ms();
            assert!(d >= nominal / 2 && d <= nominal, "failure {n}: {d} ms");
        }
        b.reset();
        assert!(b.next_delay_ms() <= 100);
    }

    #[test]
    fn survives_two_devices_failing_together_without_retrying_in_step() {
        let (mut a, mut b) = (
            Backoff::new(1_000, 60_000, 1),
            Backoff::new(1_000, 60_000, 2),
        );
        let same = (0..8)
            .filter(|_| a.next_delay_ms() == b.next_delay_ms())
            .count();
        assert!(same < 2, "{same} of 8 delays equal");
    }
}
