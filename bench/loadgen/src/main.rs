//! `npub-loadgen`: a simulated fleet over loopback, for `bench/fleet.sh`.
//!
//! | Command     | Does                                                                         |
//! |-------------|------------------------------------------------------------------------------|
//! | `make-pack` | a 1 MB-class `.npub` from a real Vela compilation (weights region grown)     |
//! | `setup`     | model `bench`, version 1.0.0, N devices (one token each), deployed to all     |
//! | `deploy`    | another version, deployed to group `bench` in staged batches                 |
//! | `saturate`  | closed loop on C keep-alive connections: requests/s, MB/s, latency, CPU      |
//! | `steady`    | open loop at a fixed rate with Poisson jitter: p50/p99/p99.9                 |
//! | `wave`      | every device polls; those offered the new deployment download it at once     |
//! | `handshakes` | closed loop of short TLS connections, one poll each: resumed or full handshakes/s |
//!
//! Every load takes `https://` URLs too (`--cert`: the server's certificate, pinned; `tls`).
//! The loads use a minimal HTTP/1.1 client (`http`) on one thread: the server's cores, not the
//! load generator's, must be what limits a run (each result says how busy this process was).
//! Not a test: never run by `cargo test`.
#![forbid(unsafe_code)]

mod handshakes;
mod http;
mod load;
mod setup;
mod stats;
mod tls;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use crate::http::Requests;
use crate::load::{Expect, Target};

#[derive(Parser)]
#[command(name = "npub-loadgen", about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The operator API.
#[derive(Args)]
struct Api {
    /// Server base URL.
    #[arg(long)]
    url: String,
    /// An admin token.
    #[arg(long, env = "NPUB_TOKEN", hide_env_values = true)]
    token: String,
}

/// Where a load goes and what it sends.
#[derive(Args)]
struct Load {
    /// Base URL, `http://IP:PORT` or `https://IP:PORT`.
    #[arg(long)]
    url: String,
    /// `https://`: the server's certificate (PEM), pinned.
    #[arg(long)]
    cert: Option<PathBuf>,
    /// `https://`: the one key exchange group offered (`x25519`, `p256`).
    #[arg(long, default_value = "x25519")]
    kx: String,
    /// Path and query.
    #[arg(long)]
    path: String,
    /// Device tokens (one a line), used round robin; none: no `Authorization` header.
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Label printed with the result.
    #[arg(long)]
    label: String,
    /// Status every response must have.
    #[arg(long, default_value_t = 200)]
    expect: u16,
    /// Body length every response must have.
    #[arg(long)]
    expect_bytes: Option<u64>,
    /// Processes whose CPU time the result reports (the server, or nginx's workers).
    #[arg(long, value_delimiter = ',')]
    pids: Vec<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Writes a pack built from Vela output with its weights region grown to `--weights-bytes`.
    MakePack {
        /// Vela's `*_vela.tflite` or `.npz`.
        #[arg(long)]
        from: PathBuf,
        /// Size of the grown weights region.
        #[arg(long, default_value_t = 1_179_648)]
        weights_bytes: u32,
        /// Filler seed: packs with different seeds have different digests.
        #[arg(long, default_value_t = 1)]
        fill: u8,
        /// Output `.npub`.
        #[arg(long)]
        out: PathBuf,
    },
    /// Creates model `bench`, uploads `--pack` as 1.0.0, provisions `--devices` devices in group
    /// `bench`, deploys to all of them; writes the tokens and prints `KEY=value` facts.
    Setup {
        #[command(flatten)]
        api: Api,
        /// The pack to deploy.
        #[arg(long)]
        pack: PathBuf,
        /// Devices to provision.
        #[arg(long, default_value_t = 1000)]
        devices: usize,
        /// Where to write the device tokens.
        #[arg(long)]
        tokens: PathBuf,
    },
    /// Uploads `--pack` as `--version` and deploys it to group `bench` in `--batches`.
    Deploy {
        #[command(flatten)]
        api: Api,
        /// The pack.
        #[arg(long)]
        pack: PathBuf,
        /// Its version.
        #[arg(long)]
        version: String,
        /// Cumulative batch percentages.
        #[arg(long, value_delimiter = ',', default_value = "100")]
        batches: Vec<u8>,
    },
    /// Closed loop: `--connections` keep-alive connections back to back.
    Saturate {
        #[command(flatten)]
        load: Load,
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Seconds measured.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Seconds run before measuring.
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
    },
    /// Open loop: `--rate` polls/s with Poisson jitter, a new connection each.
    Steady {
        #[command(flatten)]
        load: Load,
        /// Requests per second.
        #[arg(long)]
        rate: f64,
        /// Seconds.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
    },
    /// Closed loop of short TLS connections: see `handshakes`.
    Handshakes {
        #[command(flatten)]
        load: Load,
        /// Concurrent clients.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// `tickets`: resume every handshake after a client's first; `never`: all full.
        #[arg(long, value_parser = ["tickets", "never"])]
        resume: String,
        /// Seconds measured.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Seconds run before measuring.
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
    },
    /// A deployment wave: see `load::wave`.
    Wave {
        /// Base URL.
        #[arg(long)]
        url: String,
        /// `https://`: the server's certificate (PEM), pinned.
        #[arg(long)]
        cert: Option<PathBuf>,
        /// Device tokens.
        #[arg(long)]
        tokens: PathBuf,
        /// The sequence every device runs now (its polls send `seq=`).
        #[arg(long)]
        seq: u64,
        /// The new deployment's pack digest.
        #[arg(long)]
        sha256: String,
        /// Its length.
        #[arg(long)]
        pack_bytes: u64,
        /// Keep-alive connections of the discovery polls.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Processes whose CPU time the result reports.
        #[arg(long, value_delimiter = ',')]
        pids: Vec<String>,
        /// Label printed with the result.
        #[arg(long)]
        label: String,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = dispatch(Cli::parse().cmd).await {
        eprintln!("npub-loadgen: {e}");
        std::process::exit(1);
    }
}

async fn dispatch(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::MakePack {
            from,
            weights_bytes,
            fill,
            out,
        } => {
            let pack = setup::make_pack(&from, weights_bytes, fill)?;
            std::fs::write(&out, &pack).map_err(|e| format!("{}: {e}", out.display()))?;
            println!("PACK_BYTES={}", pack.len());
        }
        Cmd::Setup {
            api,
            pack,
            devices,
            tokens,
        } => {
            let op = setup::Operator::new(&api.url, &api.token);
            op.model().await?;
            let accel = op.upload("1.0.0", read(&pack)?).await?;
            let t = Instant::now();
            let all = op.provision(devices, &accel).await?;
            let provision_s = setup::seconds_since(t);
            std::fs::write(&tokens, all.join("\n")).map_err(|e| e.to_string())?;
            let (sha, seq) = op.deploy("1.0.0", &[100]).await?;
            println!(
                "DEVICES={devices} PROVISION_SECONDS={provision_s} ACCEL={accel} SHA256={sha} SEQUENCE={seq}"
            );
        }
        Cmd::Deploy {
            api,
            pack,
            version,
            batches,
        } => {
            let op = setup::Operator::new(&api.url, &api.token);
            op.upload(&version, read(&pack)?).await?;
            let t = Instant::now();
            let (sha, seq) = op.deploy(&version, &batches).await?;
            println!(
                "SHA256={sha} SEQUENCE={seq} DEPLOY_SECONDS={}",
                setup::seconds_since(t)
            );
        }
        Cmd::Saturate {
            load,
            connections,
            seconds,
            warmup,
        } => {
            let (target, requests, expect) = prepare(&load)?;
            let out = load::saturate(
                &target,
                requests,
                connections,
                Duration::from_secs_f64(warmup),
                Duration::from_secs_f64(seconds),
                expect,
                &load.pids,
            )
            .await;
            report(&load.label, &out)?;
        }
        Cmd::Steady {
            load,
            rate,
            seconds,
        } => {
            let (target, requests, expect) = prepare(&load)?;
            let out = load::steady(
                &target,
                requests,
                rate,
                Duration::from_secs_f64(seconds),
                expect,
                &load.pids,
            )
            .await;
            report(&load.label, &out)?;
        }
        Cmd::Handshakes {
            load,
            clients,
            resume,
            seconds,
            warmup,
        } => {
            let (target, requests, expect) = prepare(&load)?;
            let resume = match resume.as_str() {
                "never" => tls::Resume::Never,
                _ => tls::Resume::Tickets,
            };
            let out = handshakes::run(
                &target,
                requests,
                clients,
                resume,
                handshakes::Window {
                    warmup: Duration::from_secs_f64(warmup),
                    seconds: Duration::from_secs_f64(seconds),
                },
                expect,
                &load.pids,
            )
            .await?;
            report(&load.label, &out)?;
        }
        Cmd::Wave {
            url,
            cert,
            tokens,
            seq,
            sha256,
            pack_bytes,
            connections,
            pids,
            label,
        } => {
            let target = Target::parse(&url, cert.as_deref(), tls::Group::X25519)?;
            let tokens = read_tokens(&tokens)?;
            let polls = Requests::new(
                &target.host,
                &format!("/api/v1/device/manifest?seq={seq}"),
                &tokens,
            );
            let packs = Requests::new(
                &target.host,
                &format!("/api/v1/device/packs/{sha256}"),
                &tokens,
            );
            let out = load::wave(
                &target,
                Arc::new(polls),
                Arc::new(packs),
                connections,
                pack_bytes,
                &sha256,
                &pids,
            )
            .await;
            report(&label, &out)?;
        }
    }
    Ok(())
}

fn prepare(load: &Load) -> Result<(Target, Arc<Requests>, Expect), String> {
    let group = tls::Group::parse(&load.kx)?;
    let target = Target::parse(&load.url, load.cert.as_deref(), group)?;
    let tokens = match &load.tokens {
        Some(p) => read_tokens(p)?,
        None => Vec::new(),
    };
    let requests = Arc::new(Requests::new(&target.host, &load.path, &tokens));
    let expect = Expect {
        status: load.expect,
        bytes: load.expect_bytes,
    };
    Ok((target, requests, expect))
}

/// Prints the result line; a run with errors fails (the bench must run with 0 errors).
fn report(label: &str, out: &load::Outcome) -> Result<(), String> {
    println!("RESULT label={label} {}", out.fields);
    match out.errors {
        0 => Ok(()),
        n => Err(format!("{label}: {n} requests failed (see first_error)")),
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_tokens(path: &PathBuf) -> Result<Vec<String>, String> {
    Ok(std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}
