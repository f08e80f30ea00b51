//! The three loads of `bench/fleet.sh`, each printing one `RESULT key=value …` line:
//!
//! | Load        | Model                                                    | Reports                                   |
//! |-------------|----------------------------------------------------------|-------------------------------------------|
//! | [`saturate`] | closed loop: C keep-alive connections, back to back     | requests/s, MB/s, latency, CPU µs/request |
//! | [`steady`]  | open loop: Poisson arrivals at R/s, a new connection per poll (a device polling every minute does not keep one) | latency p50/p99/p99.9, scheduling lag |
//! | [`wave`]    | every device polls once; those offered a deployment then download it, all at once | completion time, errors, per-device time |
//!
//! Every request carries the next device's token (round robin), also against nginx, which ignores
//! the header but parses it: both servers read the same bytes.
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::http::{Answer, Conn, Requests};
use crate::stats::{Latencies, cpu_seconds, cpu_total, nanos};
use crate::tls;

/// Read buffer of a saturating connection: large reads keep a download's syscalls few.
const SATURATE_BUF: usize = 256 * 1024;
/// Read buffer of a steady-poll connection (answers are headers only).
const POLL_BUF: usize = 16 * 1024;
/// Read buffer of a wave connection: ten thousand at once must fit in memory.
const WAVE_BUF: usize = 32 * 1024;

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's address.
    pub addr: SocketAddr,
    /// Its `Host`.
    pub host: String,
    /// `https://`: the certificate it must present.
    pub pin: Option<tls::Pin>,
    /// `https://`: the client of the keep-alive loads (one session store for all their
    /// connections).
    pub shared: Option<tls::Client>,
}

impl Target {
    /// From `http://ADDR:PORT` or `https://ADDR:PORT` (the only forms the benches use); an
    /// `https://` target needs `cert`, the server's certificate (PEM), which is pinned, and its
    /// clients offer `group` alone.
    pub fn parse(url: &str, cert: Option<&Path>, group: tls::Group) -> Result<Self, String> {
        let (host, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(host), _) => (host, false),
            (_, Some(host)) => (host, true),
            _ => return Err(format!("{url}: only http:// and https:// URLs")),
        };
        let host = host.trim_end_matches('/');
        let addr = host
            .parse()
            .map_err(|_| format!("{url}: the host must be an IP address and port"))?;
        let pin = match (tls, cert) {
            (false, _) => None,
            (true, Some(cert)) => Some(tls::Pin::load(cert, host, group)?),
            (true, None) => return Err(format!("{url}: an https:// URL needs --cert")),
        };
        let shared = pin
            .as_ref()
            .map(|pin| tls::Client::new(pin, tls::Resume::Tickets))
            .transpose()?;
        Ok(Self {
            addr,
            host: host.to_owned(),
            pin,
            shared,
        })
    }

    /// A TLS client for an `https://` target (`None` for `http://`).
    pub fn client(&self, resume: tls::Resume) -> Result<Option<tls::Client>, String> {
        self.pin
            .as_ref()
            .map(|pin| tls::Client::new(pin, resume))
            .transpose()
    }
}

/// What every response must be.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Status.
    pub status: u16,
    /// Body length, when known.
    pub bytes: Option<u64>,
}

impl Expect {
    pub(crate) fn check(&self, a: &Answer) -> Result<(), String> {
        if a.status != self.status {
            return Err(format!("HTTP {} (expected {})", a.status, self.status));
        }
        if let Some(b) = self.bytes
            && a.body_bytes != b
        {
            return Err(format!("{} body bytes (expected {b})", a.body_bytes));
        }
        Ok(())
    }
}

/// A run's `key=value` result line (without its label) and its error count.
#[derive(Debug)]
pub struct Outcome {
    /// The fields.
    pub fields: String,
    /// Failed requests.
    pub errors: u64,
}

/// Errors of a run: how many, and the first one in words.
#[derive(Debug, Default)]
pub(crate) struct Errors {
    count: u64,
    first: Option<String>,
}

impl Errors {
    pub(crate) fn add(&mut self, e: String) {
        self.count += 1;
        self.first.get_or_insert(e);
    }

    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    pub(crate) fn merge(&mut self, other: Errors) {
        self.count += other.count;
        if self.first.is_none() {
            self.first = other.first;
        }
    }

    pub(crate) fn fields(&self) -> String {
        match &self.first {
            None => format!("errors={}", self.count),
            Some(e) => format!("errors={} first_error={:?}", self.count, e),
        }
    }
}

/// CPU seconds of the measured processes and of this one, between two instants.
pub(crate) struct Cpu {
    pids: Vec<String>,
    server: f64,
    me: f64,
}

impl Cpu {
    pub(crate) fn start(pids: &[String]) -> Self {
        Self {
            pids: pids.to_vec(),
            server: cpu_total(pids),
            me: cpu_seconds("self").unwrap_or(0.0),
        }
    }

    /// `server_cpu_s=… server_us_per_req=… loadgen_cpu_pct=…`.
    pub(crate) fn fields(&self, requests: usize, wall: f64) -> String {
        let server = cpu_total(&self.pids) - self.server;
        let me = cpu_seconds("self").unwrap_or(0.0) - self.me;
        let per_req = if requests == 0 {
            0.0
        } else {
            server * 1e6 / requests as f64
        };
        format!(
            "server_cpu_s={server:.2} server_us_per_req={per_req:.2} loadgen_cpu_pct={:.0}",
            me * 100.0 / wall
        )
    }
}

/// Closed loop on `connections` keep-alive connections for `warmup` + `seconds`; only the last
/// `seconds` are measured.
pub async fn saturate(
    target: &Target,
    requests: Arc<Requests>,
    connections: usize,
    warmup: Duration,
    seconds: Duration,
    expect: Expect,
    pids: &[String],
) -> Outcome {
    let next = Arc::new(AtomicUsize::new(0));
    let measure_from = Instant::now() + warmup;
    let deadline = measure_from + seconds;
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (addr, requests, next) = (target.addr, Arc::clone(&requests), Arc::clone(&next));
        let tls = target.shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let (mut bytes, mut errors) = (0u64, Errors::default());
            let mut conn: Option<Conn> = None;
            while Instant::now() < deadline {
                let c = match &mut conn {
                    Some(c) => c,
                    None => match Conn::connect(addr, SATURATE_BUF, tls.as_ref()).await {
                        Ok(c) => conn.insert(c),
                        Err(e) => {
                            errors.add(e.to_string());
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    },
                };
                let i = next.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let answer = c.send(requests.get(i), None).await;
                let done = Instant::now();
                let measured = t >= measure_from && done <= deadline;
                match answer {
                    Ok(a) => {
                        match expect.check(&a) {
                            Ok(()) if measured => {
                                lat.push(nanos(done - t));
                                bytes += a.body_bytes;
                            }
                            Ok(()) => {}
                            Err(e) => errors.add(e),
                        }
                        if a.close {
                            conn = None;
                        }
                    }
                    Err(e) => {
                        errors.add(e.to_string());
                        conn = None;
                    }
                }
            }
            (lat, bytes, errors)
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu = Cpu::start(pids);
    let mut lat = Vec::new();
    let (mut bytes, mut errors) = (0u64, Errors::default());
    for t in tasks {
        match t.await {
            Ok((l, b, e)) => {
                lat.extend(l);
                bytes += b;
                errors.merge(e);
            }
            Err(e) => errors.add(format!("task: {e}")),
        }
    }
    let wall = seconds.as_secs_f64();
    let cpu = cpu.fields(lat.len(), wall);
    let lat = Latencies::new(lat);
    let fields = format!(
        "requests={} rps={:.0} MBps={:.1} {} {} connections={connections} {cpu}",
        lat.len(),
        lat.len() as f64 / wall,
        bytes as f64 / wall / 1e6,
        lat.fields(),
        errors.fields(),
    );
    Outcome {
        fields,
        errors: errors.count,
    }
}

/// Open loop: Poisson arrivals at `rate`/s for `seconds`, each poll on a new connection, device
/// after device. Latency is measured from the moment the poll's task runs (connect included);
/// `lag` is how late that was against the schedule (the timer's granularity, or an overloaded
/// load generator — a large lag makes the run void).
pub async fn steady(
    target: &Target,
    requests: Arc<Requests>,
    rate: f64,
    seconds: Duration,
    expect: Expect,
    pids: &[String],
) -> Outcome {
    let start = Instant::now();
    let end = start + seconds;
    let cpu = Cpu::start(pids);
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut at = start;
    let mut tasks = Vec::new();
    let mut i = 0usize;
    loop {
        at += Duration::from_secs_f64(rng.exponential() / rate);
        if at >= end {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        let (addr, requests) = (target.addr, Arc::clone(&requests));
        let tls = target.shared.clone();
        let intended = at;
        tasks.push(tokio::spawn(async move {
            let woke = Instant::now();
            let lag = nanos(woke.saturating_duration_since(intended));
            let answer = async {
                let mut c = Conn::connect(addr, POLL_BUF, tls.as_ref())
                    .await
                    .map_err(|e| e.to_string())?;
                let a = c
                    .send(requests.get(i), None)
                    .await
                    .map_err(|e| e.to_string())?;
                expect.check(&a)
            }
            .await;
            (answer.map(|()| nanos(woke.elapsed())), lag)
        }));
        i += 1;
    }
    let (mut lat, mut lags, mut errors) = (Vec::new(), Vec::new(), Errors::default());
    for t in tasks {
        match t.await {
            Ok((Ok(l), lag)) => {
                lat.push(l);
                lags.push(lag);
            }
            Ok((Err(e), _)) => errors.add(e),
            Err(e) => errors.add(format!("task: {e}")),
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu.fields(lat.len(), wall);
    let (lat, lags) = (Latencies::new(lat), Latencies::new(lags));
    let fields = format!(
        "requests={} target_rps={rate:.0} rps={:.0} {} lag_p99_ms={:.3} lag_max_ms={:.3} {} {cpu}",
        lat.len(),
        lat.len() as f64 / seconds.as_secs_f64(),
        lat.fields(),
        lags.ms(0.99),
        lags.ms(1.0),
        errors.fields(),
    );
    Outcome {
        fields,
        errors: errors.count,
    }
}

/// A deployment wave. First every device polls once (`polls`, on `connections` keep-alive
/// connections) and those answered 200 — offered the new deployment — are noted. Then all of
/// them at once each open a connection, fetch the manifest and download the pack (`packs`),
/// which must be `pack_bytes` long; the first download is checked against `sha256` in full.
pub async fn wave(
    target: &Target,
    polls: Arc<Requests>,
    packs: Arc<Requests>,
    connections: usize,
    pack_bytes: u64,
    sha256: &str,
    pids: &[String],
) -> Outcome {
    let t0 = Instant::now();
    let (offered, mut errors) = discover(target, Arc::clone(&polls), connections).await;
    let discover_s = t0.elapsed().as_secs_f64();

    let start = Instant::now();
    let cpu = Cpu::start(pids);
    let mut tasks = Vec::with_capacity(offered.len());
    for (n, &i) in offered.iter().enumerate() {
        let (addr, polls, packs) = (target.addr, Arc::clone(&polls), Arc::clone(&packs));
        let tls = target.shared.clone();
        let want = sha256.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::connect(addr, WAVE_BUF, tls.as_ref())
                .await
                .map_err(|e| e.to_string())?;
            let m = c
                .send(polls.get(i), None)
                .await
                .map_err(|e| e.to_string())?;
            Expect {
                status: 200,
                bytes: None,
            }
            .check(&m)
            .map_err(|e| format!("manifest: {e}"))?;
            let mut body = Vec::new();
            let keep = (n == 0).then_some(&mut body);
            let p = c
                .send(packs.get(i), keep)
                .await
                .map_err(|e| e.to_string())?;
            Expect {
                status: 200,
                bytes: Some(pack_bytes),
            }
            .check(&p)
            .map_err(|e| format!("pack: {e}"))?;
            if n == 0 {
                let got = hex(&Sha256::digest(&body));
                if got != want {
                    return Err(format!("pack: SHA-256 {got}, expected {want}"));
                }
            }
            Ok(nanos(start.elapsed()))
        }));
    }
    let mut done = Vec::with_capacity(tasks.len());
    for t in tasks {
        match t.await {
            Ok(Ok(d)) => done.push(d),
            Ok(Err(e)) => errors.add(e),
            Err(e) => errors.add(format!("task: {e}")),
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu.fields(done.len(), wall);
    let done = Latencies::new(done);
    let fields = format!(
        "devices={} offered={} discover_s={discover_s:.2} downloads={} completion_s={wall:.2} \
         MBps={:.1} device_done_p50_s={:.2} device_done_p99_s={:.2} {} {cpu}",
        polls.len(),
        offered.len(),
        done.len(),
        done.len() as f64 * pack_bytes as f64 / wall / 1e6,
        done.ms(0.5) / 1e3,
        done.ms(0.99) / 1e3,
        errors.fields(),
    );
    Outcome {
        fields,
        errors: errors.count,
    }
}

/// Every device polls once; returns the devices answered 200 (offered something newer).
async fn discover(
    target: &Target,
    polls: Arc<Requests>,
    connections: usize,
) -> (Vec<usize>, Errors) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (addr, polls, next) = (target.addr, Arc::clone(&polls), Arc::clone(&next));
        let tls = target.shared.clone();
        tasks.push(tokio::spawn(async move {
            let (mut offered, mut errors) = (Vec::new(), Errors::default());
            let mut conn: Option<Conn> = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= polls.len() {
                    break;
                }
                if conn.is_none() {
                    match Conn::connect(addr, POLL_BUF, tls.as_ref()).await {
                        Ok(c) => conn = Some(c),
                        Err(e) => {
                            errors.add(format!("discovery: {e}"));
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                match c.send(polls.get(i), None).await {
                    Ok(a) if a.status == 200 => offered.push(i),
                    Ok(a) if a.status == 204 => {}
                    Ok(a) => errors.add(format!("discovery: HTTP {}", a.status)),
                    Err(e) => {
                        errors.add(format!("discovery: {e}"));
                        conn = None;
                    }
                }
            }
            (offered, errors)
        }));
    }
    let (mut offered, mut errors) = (Vec::new(), Errors::default());
    for t in tasks {
        match t.await {
            Ok((o, e)) => {
                offered.extend(o);
                errors.merge(e);
            }
            Err(e) => errors.add(format!("task: {e}")),
        }
    }
    offered.sort_unstable();
    (offered, errors)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// xorshift64*: the arrival schedule is the same on every run.
struct XorShift(u64);

impl XorShift {
    /// An exponential variate with mean 1.
    fn exponential(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        // In (0, 1]: never ln(0).
        let u = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        -u.ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_has_mean_one() {
        let mut r = XorShift(1);
        let n = 100_000;
        let mean: f64 = (0..n).map(|_| r.exponential()).sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
    }

    #[test]
    fn rejects_a_url_without_an_address() {
        let g = tls::Group::X25519;
        assert!(Target::parse("http://localhost:80", None, g).is_err());
        assert!(Target::parse("http://127.0.0.1:80/", None, g).is_ok());
        assert!(Target::parse("https://127.0.0.1:443/", None, g).is_err());
    }
}
