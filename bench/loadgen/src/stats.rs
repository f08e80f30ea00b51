//! Latency percentiles and the CPU time of processes (from `/proc`), so that a run reports not
//! only requests/s but what each request cost the server's cores.
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`: 100 on every Linux ABI Rust
/// supports on x86-64 and AArch64).
const USER_HZ: f64 = 100.0;

/// Sorted latencies.
#[derive(Debug, Default)]
pub struct Latencies {
    nanos: Vec<u64>,
}

impl Latencies {
    /// From unsorted samples.
    pub fn new(mut nanos: Vec<u64>) -> Self {
        nanos.sort_unstable();
        Self { nanos }
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// The `p` quantile (0..=1) in milliseconds; 0 without samples.
    pub fn ms(&self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return 0.0;
        }
        let rank = ((self.nanos.len() as f64 * p).ceil() as usize).clamp(1, self.nanos.len());
        self.nanos[rank - 1] as f64 / 1e6
    }

    /// `p50_ms=… p99_ms=… p999_ms=… max_ms=…`.
    pub fn fields(&self) -> String {
        format!(
            "p50_ms={:.3} p99_ms={:.3} p999_ms={:.3} max_ms={:.3}",
            self.ms(0.50),
            self.ms(0.99),
            self.ms(0.999),
            self.ms(1.0)
        )
    }
}

/// Nanoseconds of a duration, saturating (a request never takes 584 years).
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// User + system CPU seconds used so far by process `pid` (all its threads), or `None` when it
/// is gone or `/proc` is not Linux's.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// The summed CPU seconds of `pids`; a pid that vanished counts 0.
pub fn cpu_total(pids: &[String]) -> f64 {
    pids.iter().filter_map(|p| cpu_seconds(p)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_no_samples() {
        assert_eq!(Latencies::new(Vec::new()).ms(0.99), 0.0);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let l = Latencies::new((1..=1000).map(|i| i * 1_000_000).collect());
        assert_eq!(l.ms(0.5), 500.0);
        assert_eq!(l.ms(0.99), 990.0);
        assert_eq!(l.ms(0.999), 999.0);
        assert_eq!(l.ms(1.0), 1000.0);
    }

    #[test]
    fn reads_its_own_cpu_time() {
        assert!(cpu_seconds("self").is_some());
    }
}
