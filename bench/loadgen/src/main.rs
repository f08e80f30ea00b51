//! `npub-loadgen`: N simulated devices over loopback, for `bench/fleet.sh`.
//!
//! * `setup`: through the operator API, creates a model, uploads a pack, provisions N devices
//!   (one token each, written to a file) and deploys the pack to their group.
//! * `run`: C concurrent connections send GETs for a fixed time, each request with the next
//!   device's token (round robin), and print requests/s, p50/p99 latency and body throughput.
//!   The same command points at nginx for the baseline (tokens are then just ignored headers).
//!
//! Not a test: it is never run by `cargo test`.
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde_json::{Value, json};

/// Most requests a run records: bounds memory whatever the duration.
const MAX_SAMPLES: usize = 20_000_000;

#[derive(Parser)]
#[command(name = "npub-loadgen", about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Creates model `bench`, uploads `--pack`, provisions `--devices` devices in group `bench`,
    /// deploys; writes the tokens (one a line) and prints `SHA256=… SEQUENCE=…`.
    Setup {
        /// Server base URL.
        #[arg(long)]
        url: String,
        /// An admin token.
        #[arg(long, env = "NPUB_TOKEN")]
        token: String,
        /// The pack (.npub or Vela .tflite) to deploy.
        #[arg(long)]
        pack: PathBuf,
        /// Devices to provision.
        #[arg(long, default_value_t = 1000)]
        devices: usize,
        /// Where to write the device tokens.
        #[arg(long)]
        tokens: PathBuf,
    },
    /// Sends GET `--path` on `--concurrency` connections for `--seconds`.
    Run {
        /// Base URL.
        #[arg(long)]
        url: String,
        /// Path and query.
        #[arg(long)]
        path: String,
        /// Device tokens (one a line), used round robin; none: no Authorization header.
        #[arg(long)]
        tokens: Option<PathBuf>,
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Label printed with the results.
        #[arg(long)]
        label: String,
        /// Status every response must have.
        #[arg(long, default_value_t = 200)]
        expect: u16,
    },
}

#[tokio::main]
async fn main() {
    let result = match Cli::parse().cmd {
        Cmd::Setup {
            url,
            token,
            pack,
            devices,
            tokens,
        } => setup(&url, &token, &pack, devices, &tokens).await,
        Cmd::Run {
            url,
            path,
            tokens,
            concurrency,
            seconds,
            label,
            expect,
        } => run(&url, &path, tokens, concurrency, seconds, &label, expect).await,
    };
    if let Err(e) = result {
        eprintln!("npub-loadgen: {e}");
        std::process::exit(1);
    }
}

async fn call(req: reqwest::RequestBuilder, want: u16) -> Result<Value, String> {
    let r = req.send().await.map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let text = r.text().await.map_err(|e| e.to_string())?;
    if status != want {
        return Err(format!("HTTP {status}: {text}"));
    }
    serde_json::from_str(&text).or(Ok(Value::Null))
}

async fn setup(
    url: &str,
    token: &str,
    pack: &PathBuf,
    devices: usize,
    tokens: &PathBuf,
) -> Result<(), String> {
    let http = reqwest::Client::new();
    let auth = format!("Bearer {token}");
    let post = |path: &str| {
        http.post(format!("{url}{path}"))
            .header("Authorization", &auth)
    };
    call(post("/api/v1/models").json(&json!({"name": "bench"})), 201).await?;
    let body = std::fs::read(pack).map_err(|e| format!("{}: {e}", pack.display()))?;
    let version = call(post("/api/v1/models/bench/versions/1.0.0").body(body), 201).await?;
    let accel = version["accelerator"]
        .as_str()
        .unwrap_or("ethos-u55-256")
        .to_owned();
    let mut all = Vec::with_capacity(devices);
    for start in (0..devices).step_by(1000) {
        let batch: Vec<Value> = (start..(start + 1000).min(devices))
            .map(|i| json!({"id": format!("bench-{i:06}"), "accelerator": accel, "group": "bench"}))
            .collect();
        let created = call(
            post("/api/v1/devices").json(&json!({"devices": batch})),
            201,
        )
        .await?;
        for d in created.as_array().ok_or("devices: not an array")? {
            all.push(d["token"].as_str().ok_or("no token")?.to_owned());
        }
    }
    std::fs::write(tokens, all.join("\n")).map_err(|e| e.to_string())?;
    let d = call(
        post("/api/v1/deployments")
            .json(&json!({"model": "bench", "version": "1.0.0", "group": "bench"})),
        201,
    )
    .await?;
    println!(
        "SHA256={} SEQUENCE={}",
        d["sha256"].as_str().unwrap_or(""),
        d["sequence"]
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn run(
    url: &str,
    path: &str,
    tokens: Option<PathBuf>,
    concurrency: usize,
    seconds: u64,
    label: &str,
    expect: u16,
) -> Result<(), String> {
    let tokens: Arc<Vec<String>> = Arc::new(match tokens {
        Some(p) => std::fs::read_to_string(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .lines()
            .map(|l| format!("Bearer {}", l.trim()))
            .collect(),
        None => Vec::new(),
    });
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .map_err(|e| e.to_string())?;
    let target = Arc::new(format!("{url}{path}"));
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (http, target, tokens, next) =
            (http.clone(), target.clone(), tokens.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut bytes = 0u64;
            let mut errors = 0u64;
            while Instant::now() < deadline && lat.len() < MAX_SAMPLES / 64 {
                let mut req = http.get(target.as_str());
                if !tokens.is_empty() {
                    let i = next.fetch_add(1, Ordering::Relaxed) % tokens.len();
                    req = req.header("Authorization", &tokens[i]);
                }
                let t = Instant::now();
                match req.send().await {
                    Ok(r) if r.status().as_u16() == expect => match r.bytes().await {
                        Ok(b) => {
                            bytes += b.len() as u64;
                            lat.push(t.elapsed());
                        }
                        Err(_) => errors += 1,
                    },
                    _ => errors += 1,
                }
            }
            (lat, bytes, errors)
        }));
    }
    let mut lat = Vec::new();
    let (mut bytes, mut errors) = (0u64, 0u64);
    for t in tasks {
        let (l, b, e) = t.await.map_err(|e| e.to_string())?;
        lat.extend(l);
        bytes += b;
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "RESULT label={label} requests={} errors={errors} rps={:.0} p50_ms={:.3} p99_ms={:.3} MBps={:.1}",
        lat.len(),
        lat.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        bytes as f64 / elapsed / 1e6
    );
    if errors > 0 {
        return Err(format!(
            "{label}: {errors} requests failed or had a status other than {expect}"
        ));
    }
    Ok(())
}
