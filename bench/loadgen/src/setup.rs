//! The operator side of a bench: a 1 MB-class pack built from a real Vela compilation, devices
//! provisioned through the API (one token each), deployments. Printed as `KEY=value` pairs for
//! `bench/fleet.sh`.
use std::path::Path;
use std::time::Instant;

use npub_core::Blob;
use npub_core::format::build::{RegionSpec, build_pack};
use serde_json::{Value, json};

/// Devices per provisioning request: the server's own limit (`devices::MAX_BATCH`).
const PROVISION_BATCH: usize = 1000;

/// Builds a pack from Vela's `from` (`*_vela.tflite` or `.npz`) whose largest baked region (the
/// weights) is grown to `weights_bytes`, the tail filled from `fill` (so that two seeds give two
/// packs with different digests). The command stream is Vela's, so the pack passes every check
/// an upload does; its stream reads only the region's first bytes, as a bigger model's would
/// read all of them.
pub fn make_pack(from: &Path, weights_bytes: u32, fill: u8) -> Result<Vec<u8>, String> {
    let source = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let import =
        npub_core::vela::import(&source).map_err(|e| format!("{}: {e}", from.display()))?;
    let blob = Blob::parse(&import.pack).map_err(|e| format!("imported pack: {e}"))?;
    let largest = blob
        .regions()
        .filter(|r| r.is_baked())
        .max_by_key(|r| r.size)
        .map(|r| r.index)
        .ok_or("the compilation has no baked region to grow")?;
    let mut grown: Vec<u8> = Vec::new();
    let mut specs = Vec::new();
    for r in blob.regions() {
        if !r.is_baked() {
            specs.push(None);
            continue;
        }
        let bytes = blob
            .baked_bytes(r.index)
            .ok_or("a baked region without bytes")?;
        if r.index == largest {
            grown = bytes.to_vec();
            let mut x = u32::from(fill) | 0x100;
            while grown.len() < weights_bytes as usize {
                // xorshift32: incompressible, deterministic filler.
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                grown.push(x as u8);
            }
        }
        specs.push(Some(bytes));
    }
    let regions: Vec<RegionSpec<'_>> = blob
        .regions()
        .zip(&specs)
        .map(|(r, bytes)| match bytes {
            None => RegionSpec::Runtime {
                role: r.role,
                size: r.size,
            },
            Some(_) if r.index == largest => RegionSpec::Baked {
                role: r.role,
                bytes: &grown,
            },
            Some(bytes) => RegionSpec::Baked {
                role: r.role,
                bytes,
            },
        })
        .collect();
    build_pack(blob.command_stream(), &regions, import.accel).map_err(|e| format!("building: {e}"))
}

/// The operator API at `url` with an admin token.
pub struct Operator {
    http: reqwest::Client,
    url: String,
    auth: String,
}

impl Operator {
    /// A client for `url`.
    pub fn new(url: &str, token: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            auth: format!("Bearer {token}"),
        }
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.url))
            .header("Authorization", &self.auth)
    }

    /// Creates model `bench` (201, or 409 when it exists).
    pub async fn model(&self) -> Result<(), String> {
        let r = self
            .post("/api/v1/models")
            .json(&json!({"name": "bench"}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match r.status().as_u16() {
            201 | 409 => Ok(()),
            s => Err(format!("creating model bench: HTTP {s}")),
        }
    }

    /// Uploads `pack` as version `version` of model `bench`; returns its accelerator name.
    pub async fn upload(&self, version: &str, pack: Vec<u8>) -> Result<String, String> {
        let v = call(
            self.post(&format!("/api/v1/models/bench/versions/{version}"))
                .body(pack),
            201,
        )
        .await?;
        Ok(v["accelerator"]
            .as_str()
            .unwrap_or("ethos-u55-256")
            .to_owned())
    }

    /// Provisions `devices` devices `bench-000000…` in group `bench`; returns their tokens.
    pub async fn provision(&self, devices: usize, accel: &str) -> Result<Vec<String>, String> {
        let mut tokens = Vec::with_capacity(devices);
        for start in (0..devices).step_by(PROVISION_BATCH) {
            let batch: Vec<Value> = (start..(start + PROVISION_BATCH).min(devices))
                .map(|i| json!({"id": format!("bench-{i:06}"), "accelerator": accel, "group": "bench"}))
                .collect();
            let created = call(
                self.post("/api/v1/devices")
                    .json(&json!({"devices": batch})),
                201,
            )
            .await?;
            for d in created.as_array().ok_or("devices: not an array")? {
                tokens.push(d["token"].as_str().ok_or("no token")?.to_owned());
            }
        }
        Ok(tokens)
    }

    /// Deploys `version` to group `bench` in `batches` (cumulative percentages); returns the
    /// pack's SHA-256 and the deployment's sequence.
    pub async fn deploy(&self, version: &str, batches: &[u8]) -> Result<(String, u64), String> {
        let d = call(
            self.post("/api/v1/deployments").json(&json!({
                "model": "bench", "version": version, "group": "bench",
                "rollout": {"batches": batches},
            })),
            201,
        )
        .await?;
        let sha = d["sha256"].as_str().ok_or("deployment: no sha256")?;
        let seq = d["sequence"].as_u64().ok_or("deployment: no sequence")?;
        Ok((sha.to_owned(), seq))
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

/// Seconds since `t`, for `KEY=value` output.
pub fn seconds_since(t: Instant) -> String {
    format!("{:.2}", t.elapsed().as_secs_f64())
}
