//! Closed loop of short connections: each of C clients connects, shakes hands, sends one request,
//! reads the answer and closes (`close_notify`, then FIN), again and again. That is a device's
//! poll (it keeps no connection between polls a minute apart), here back to back so that the
//! server's cores are the limit.
//!
//! | `--resume` | Each client                                                            | Measures                   |
//! |------------|------------------------------------------------------------------------|----------------------------|
//! | `tickets`  | keeps the tickets the server sends and offers one on its next connection (its first connection, in the warm-up, is full) | resumed polls/s |
//! | `never`    | keeps no ticket: every handshake is full (key exchange, certificate, signature) | full handshakes/s |
//!
//! The client counts how each handshake went (rustls's `handshake_kind`) and the tickets it was
//! sent; a run whose measured handshakes are not all of the kind asked for is an error, so a
//! "resumed" figure cannot silently be full handshakes.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::http::{Conn, Handshake, Requests};
use crate::load::{Cpu, Errors, Expect, Outcome, Target};
use crate::stats::{Latencies, nanos};
use crate::tls::{self, Resume};

/// Read buffer of a connection (answers are a poll's: headers and at most a manifest).
const BUF: usize = 16 * 1024;

/// What one client saw in the measured window.
#[derive(Debug, Default)]
struct Seen {
    latencies: Vec<u64>,
    full: u64,
    resumed: u64,
    suite: Option<String>,
    errors: Errors,
}

/// How long a run is: `warmup` unmeasured, then `seconds` measured.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Run before measuring (each client's first, full, handshake falls in it).
    pub warmup: Duration,
    /// Measured.
    pub seconds: Duration,
}

/// Runs `clients` clients for `window`.
pub async fn run(
    target: &Target,
    requests: Arc<Requests>,
    clients: usize,
    resume: Resume,
    window: Window,
    expect: Expect,
    pids: &[String],
) -> Result<Outcome, String> {
    let Window { warmup, seconds } = window;
    if target.pin.is_none() {
        return Err("handshakes: the target must be an https:// URL".to_owned());
    }
    let next = Arc::new(AtomicUsize::new(0));
    let measure_from = Instant::now() + warmup;
    let deadline = measure_from + seconds;
    let mut tasks = Vec::with_capacity(clients);
    let mut all = Vec::with_capacity(clients);
    for _ in 0..clients {
        let client = target.client(resume)?.ok_or("handshakes: no TLS client")?;
        all.push(client.clone());
        let (addr, requests, next) = (target.addr, Arc::clone(&requests), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            while Instant::now() < deadline {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let polled = async {
                    let mut c = Conn::connect(addr, BUF, Some(&client))
                        .await
                        .map_err(|e| e.to_string())?;
                    let a = c
                        .send(requests.get(i), None)
                        .await
                        .map_err(|e| e.to_string())?;
                    expect.check(&a)?;
                    let (kind, suite) = (c.handshake(), c.suite());
                    c.close().await.map_err(|e| e.to_string())?;
                    Ok::<_, String>((kind, suite))
                }
                .await;
                let done = Instant::now();
                if t < measure_from || done > deadline {
                    if let Err(e) = polled {
                        seen.errors.add(format!("warm-up: {e}"));
                    }
                    continue;
                }
                match polled {
                    Ok((kind, suite)) => {
                        seen.latencies.push(nanos(done - t));
                        match kind {
                            Handshake::Resumed => seen.resumed += 1,
                            Handshake::Full | Handshake::None => seen.full += 1,
                        }
                        seen.suite.get_or_insert(suite);
                    }
                    Err(e) => seen.errors.add(e),
                }
            }
            seen
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu = Cpu::start(pids);
    let tickets_before: u64 = all.iter().map(tls::Client::tickets).sum();
    let mut total = Seen::default();
    for t in tasks {
        match t.await {
            Ok(seen) => {
                total.latencies.extend(seen.latencies);
                total.full += seen.full;
                total.resumed += seen.resumed;
                if total.suite.is_none() {
                    total.suite = seen.suite;
                }
                total.errors.merge(seen.errors);
            }
            Err(e) => total.errors.add(format!("task: {e}")),
        }
    }
    let tickets = all.iter().map(tls::Client::tickets).sum::<u64>() - tickets_before;
    let wanted_kind = match resume {
        Resume::Tickets => (total.full, "full handshakes where resumption was asked"),
        Resume::Never => (
            total.resumed,
            "resumed handshakes where full ones were asked",
        ),
    };
    if wanted_kind.0 > 0 {
        total
            .errors
            .add(format!("{} {}", wanted_kind.0, wanted_kind.1));
    }
    let wall = seconds.as_secs_f64();
    let cpu = cpu.fields(total.latencies.len(), wall);
    let handshakes = total.full + total.resumed;
    let per = if handshakes == 0 {
        0.0
    } else {
        tickets as f64 / handshakes as f64
    };
    let lat = Latencies::new(total.latencies);
    let fields = format!(
        "requests={} rps={:.0} resumed={} full={} tickets_per_handshake={per:.2} suite={} {} {} \
         clients={clients} {cpu}",
        lat.len(),
        lat.len() as f64 / wall,
        total.resumed,
        total.full,
        total.suite.as_deref().unwrap_or("none"),
        lat.fields(),
        total.errors.fields(),
    );
    Ok(Outcome {
        fields,
        errors: total.errors.count(),
    })
}
