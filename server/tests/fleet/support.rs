//! A simulated device and fleet helpers.
use npub_core::Accel;
use npub_core::manifest::{Keyring, PackCheck, Policy, VerifiedManifest, verify};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, conv1_npub, fixtures};

/// Slot size of the simulated devices.
pub const SLOT_BYTES: u32 = 16 * 1024 * 1024;

/// A fleet with model `kws`: `1.0.0` (the conv1 `.npub`) and `2.0.0` (the small_net Vela
/// `.tflite`, with IO bindings), both for ethos-u55-256.
pub async fn fleet(s: &TestServer) {
    s.create_model("kws").await;
    let r = s.upload("kws", "1.0.0", conv1_npub()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let tflite =
        std::fs::read(fixtures().join("vela_out/u55_256/tflite/small_net_vela.tflite")).unwrap();
    let r = s.upload("kws", "2.0.0", tflite).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// Provisions `ids` into `group` (ethos-u55-256, class 1); returns their tokens in order.
pub async fn provision(s: &TestServer, group: &str, ids: &[&str]) -> Vec<String> {
    let devices: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "accelerator": "ethos-u55-256", "group": group}))
        .collect();
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({"devices": devices}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let body: Vec<Value> = r.json().await.unwrap();
    body.iter()
        .map(|d| d["token"].as_str().unwrap().to_owned())
        .collect()
}

/// Creates a deployment; returns its JSON.
pub async fn deploy(s: &TestServer, body: Value) -> Value {
    let r = s
        .req(Method::POST, "/api/v1/deployments")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

/// `GET /api/v1/deployments/{id}`.
pub async fn deployment(s: &TestServer, id: i64) -> Value {
    let r = s
        .req(Method::GET, &format!("/api/v1/deployments/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The server's manifest signing public key.
pub async fn public_key(s: &TestServer) -> [u8; 32] {
    let keys: Value = s
        .req(Method::GET, "/api/v1/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hex = keys["active"]["public_key"].as_str().unwrap();
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// A simulated device: its token, trust store and last accepted sequence.
pub struct Sim<'a> {
    pub s: &'a TestServer,
    pub token: String,
    pub keyring: Keyring<4>,
    pub last_sequence: u64,
}

impl<'a> Sim<'a> {
    pub async fn new(s: &'a TestServer, token: &str) -> Self {
        let mut keyring = Keyring::new();
        keyring.add(&public_key(s).await).unwrap();
        Self {
            s,
            token: token.to_owned(),
            keyring,
            last_sequence: 0,
        }
    }

    pub fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.s.req_as(&self.token, method, path)
    }

    /// Polls with the last accepted sequence: the raw response.
    pub async fn poll(&self) -> reqwest::Response {
        self.req(
            Method::GET,
            &format!("/api/v1/device/manifest?seq={}", self.last_sequence),
        )
        .send()
        .await
        .unwrap()
    }

    pub fn policy(&self) -> Policy {
        Policy {
            hw_class: 1,
            accel: Accel::EthosU55_256,
            slot_bytes: SLOT_BYTES,
            last_sequence: self.last_sequence,
            now: None,
        }
    }

    /// Polls and verifies the manifest; `None` on 204.
    pub async fn poll_verified(&self) -> Option<(VerifiedManifest, Vec<u8>)> {
        let r = self.poll().await;
        if r.status() == StatusCode::NO_CONTENT {
            return None;
        }
        assert_eq!(r.status(), 200);
        let bytes = r.bytes().await.unwrap().to_vec();
        let verified = verify(&bytes, &self.keyring, &self.policy()).expect("manifest verifies");
        Some((verified, bytes))
    }

    /// Downloads the manifest's pack in `piece`-byte Range requests through `PackCheck`.
    pub async fn download(&self, manifest: VerifiedManifest, piece: u64) -> Vec<u8> {
        let sha = hex(&manifest.pack_sha256());
        let len = u64::from(manifest.pack_len());
        let mut check = PackCheck::new(manifest);
        let mut out = Vec::new();
        while (out.len() as u64) < len {
            let start = out.len() as u64;
            let end = (start + piece).min(len) - 1;
            let r = self
                .req(Method::GET, &format!("/api/v1/device/packs/{sha}"))
                .header("Range", format!("bytes={start}-{end}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 206);
            let chunk = r.bytes().await.unwrap();
            assert_eq!(chunk.len() as u64, end - start + 1);
            check.feed(&chunk).unwrap();
            out.extend_from_slice(&chunk);
        }
        check.finish().expect("pack verifies against the manifest");
        out
    }

    /// Reports `state` for `sequence`.
    pub async fn report(&self, sequence: u64, state: &str) {
        let r = self
            .req(Method::POST, "/api/v1/device/status")
            .json(&json!({"sequence": sequence, "state": state, "reason": (state == "failed").then_some("self-test failed")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    }

    /// Posts `body` as a status report; returns the answer.
    pub async fn report_body(&self, body: Value) -> reqwest::Response {
        self.req(Method::POST, "/api/v1/device/status")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Poll, verify, download, report installed; returns the installed sequence.
    pub async fn install(&mut self) -> u64 {
        let (manifest, _) = self.poll_verified().await.expect("a manifest is offered");
        let sequence = manifest.sequence();
        self.download(manifest, 4096).await;
        self.report(sequence, "installed").await;
        self.last_sequence = sequence;
        sequence
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
