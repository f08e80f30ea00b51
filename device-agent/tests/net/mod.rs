//! Shared by the network tests (`http_io.rs`, `qemu*.rs`): a real npub server in-process on
//! loopback that can be stopped and started again on the same port and data, a NOR in RAM with the
//! agent's layout, and packs.
#![allow(dead_code)]

pub mod proxy;
pub mod qemu;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use device_agent::{Device, Layout, Mapped};
use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Role};
use npub_server::{Config, Server};
use serde_json::{Value, json};

/// The bootstrap admin token of the test servers.
pub const ADMIN: &str = "npub_op_net-admin-0123456789abcdef0123456789abcdef";
/// What the test servers tell devices in `Npub-Poll-Interval` (an odd value, to see it honoured).
pub const POLL_INTERVAL_S: u32 = 7;
/// The hardware class the server signs for by default (a registered device's).
pub const HW_CLASS: u32 = 1;

/// The Vela fixtures' directory.
pub fn vela_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela"
    ))
}

/// `vela_out/u55_256/tflite/<name>`.
pub fn tflite(name: &str) -> Vec<u8> {
    std::fs::read(vela_dir().join("vela_out/u55_256/tflite").join(name)).unwrap()
}

/// The `small_net` case's command stream with its weights grown to `weights` bytes: a real
/// command stream in a pack of the size of a real vision model (what the bench installs).
pub fn big_pack(weights: usize) -> Vec<u8> {
    let case = vela_dir().join("cases/small_net_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let mut w = std::fs::read(case.join("weights.bin")).unwrap();
    let mut x = 0x1234_5678u32;
    while w.len() < weights {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w.push(x as u8);
    }
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &w,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 19_424,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

/// The device the servers register (`hw_class` 1, Ethos-U55-256).
pub fn device() -> Device {
    Device {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        io_bindings: None,
        trust: device_agent::Trust::NONE,
    }
}

/// Program unit and sector of [`RamNor`] (and of the firmware's flash).
pub const WRITE: usize = 16;
pub const ERASE: usize = 4096;

/// The flash map the host tests and the firmware share: two one-sector journal banks, then two
/// slots of `slot_bytes`, progress every 16 KiB.
pub fn layout(slot_bytes: u32, xip_base: u32) -> Layout {
    Layout::contiguous(0, ERASE as u32, slot_bytes, 16 * 1024, xip_base)
}

/// NOR in RAM: erase sets 4 KiB sectors to 0xFF, a program needs 16-byte alignment, only clears
/// bits and is refused on a word that is not erased; the bytes are the XIP mapping.
#[derive(Debug, Clone)]
pub struct RamNor(pub Vec<u8>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamNorError {
    NotAligned,
    OutOfBounds,
    NotErased,
}

impl NorFlashError for RamNorError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            RamNorError::NotAligned => NorFlashErrorKind::NotAligned,
            RamNorError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
            RamNorError::NotErased => NorFlashErrorKind::Other,
        }
    }
}

impl RamNor {
    pub fn blank(len: usize) -> Self {
        Self(vec![0xFF; len])
    }

    fn range(
        &self,
        offset: u32,
        len: usize,
        align: usize,
    ) -> Result<std::ops::Range<usize>, RamNorError> {
        let start = offset as usize;
        if start % align != 0 || len % align != 0 {
            return Err(RamNorError::NotAligned);
        }
        let end = start.checked_add(len).ok_or(RamNorError::OutOfBounds)?;
        if end > self.0.len() {
            return Err(RamNorError::OutOfBounds);
        }
        Ok(start..end)
    }
}

impl ErrorType for RamNor {
    type Error = RamNorError;
}

impl ReadNorFlash for RamNor {
    const READ_SIZE: usize = 1;
    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), RamNorError> {
        let r = self.range(offset, bytes.len(), 1)?;
        bytes.copy_from_slice(&self.0[r]);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

impl NorFlash for RamNor {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;
    fn erase(&mut self, from: u32, to: u32) -> Result<(), RamNorError> {
        let len = to.checked_sub(from).ok_or(RamNorError::OutOfBounds)? as usize;
        let r = self.range(from, len, ERASE)?;
        self.0[r].fill(0xFF);
        Ok(())
    }
    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), RamNorError> {
        let r = self.range(offset, bytes.len(), WRITE)?;
        if self.0[r.clone()].iter().any(|&c| c != 0xFF) {
            return Err(RamNorError::NotErased);
        }
        for (c, &b) in self.0[r].iter_mut().zip(bytes) {
            *c &= b;
        }
        Ok(())
    }
}

impl Mapped for RamNor {
    fn mapped(&self) -> &[u8] {
        &self.0
    }
}

/// A request body for [`LiveServer::call`].
pub enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

/// A real npub server on its own runtime, on a port that survives [`LiveServer::stop`] +
/// [`LiveServer::start_again`] (same data directory, same address).
pub struct LiveServer {
    pub dir: PathBuf,
    pub addr: SocketAddr,
    /// The operator API (the admin listener's, plain, when the server has one).
    pub url: String,
    /// The device API: `https://` when the server speaks TLS.
    pub device_url: String,
    http: reqwest::blocking::Client,
    rt: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// Applied to the server's configuration at every start.
    customize: Option<Customize>,
}

/// A change to the server's configuration, applied at every start.
pub type Customize = Box<dyn Fn(&mut Config)>;

impl LiveServer {
    /// A fresh server over `dir` on 127.0.0.1, port chosen by the system.
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, None)
    }

    /// As [`LiveServer::start`], the configuration changed by `customize` (at every start).
    pub fn start_with(dir: &Path, customize: Option<Customize>) -> Self {
        let mut fleet = Self {
            dir: dir.to_owned(),
            addr: "127.0.0.1:0".parse().unwrap(),
            url: String::new(),
            device_url: String::new(),
            http: reqwest::blocking::Client::new(),
            rt: None,
            shutdown: None,
            task: None,
            customize,
        };
        fleet.start_again();
        fleet
    }

    /// Starts the server (again) on the same address and data.
    pub fn start_again(&mut self) {
        assert!(self.rt.is_none(), "the server is running");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config = Config::new(&self.dir, self.addr);
        config.admin_token = Some(ADMIN.into());
        config.poll_interval = POLL_INTERVAL_S;
        config.log = "warn".into();
        if let Some(customize) = &self.customize {
            customize(&mut config);
        }
        let server = rt.block_on(Server::start(config)).expect("server starts");
        self.addr = server.local_addr();
        self.url = format!("http://{}", server.admin_addr().unwrap_or(self.addr));
        self.device_url = format!("{}://{}", server.scheme(), self.addr);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self.task = Some(rt.spawn(server.run(async move {
            let _ = rx.await;
        })));
        self.shutdown = Some(tx);
        self.rt = Some(rt);
    }

    /// Stops the server as a crash would: the runtime is dropped with every connection open.
    pub fn kill(&mut self) {
        self.shutdown = None;
        self.task = None;
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }

    /// Stops the server cleanly (requests in flight finish).
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let (Some(rt), Some(task)) = (self.rt.take(), self.task.take()) {
            rt.block_on(task).unwrap().unwrap();
        }
    }

    /// `method path` as `token`; returns status and body.
    pub fn call(&self, token: &str, method: &str, path: &str, body: Body) -> (u16, Vec<u8>) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token);
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&v).unwrap()),
            Body::Raw(b) => req.body(b),
        };
        let r = req.send().unwrap();
        let status = r.status().as_u16();
        (status, r.bytes().unwrap().to_vec())
    }

    /// As the admin; panics unless `want`; the body as JSON (`null` if empty).
    pub fn admin(&self, method: &str, path: &str, body: Body, want: u16) -> Value {
        let (status, bytes) = self.call(ADMIN, method, path, body);
        assert_eq!(
            status,
            want,
            "{method} {path}: {}",
            String::from_utf8_lossy(&bytes)
        );
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    }

    /// Uploads `bytes` (a `.npub` or a Vela `.tflite`) as `model` `version` (the model is
    /// created first if needed); returns the pack the server serves for it.
    pub fn upload(&self, model: &str, version: &str, bytes: Vec<u8>) -> Vec<u8> {
        let (status, _) = self.call(ADMIN, "GET", &format!("/api/v1/models/{model}"), Body::None);
        if status == 404 {
            self.admin(
                "POST",
                "/api/v1/models",
                Body::Json(json!({"name": model})),
                201,
            );
        }
        self.admin(
            "POST",
            &format!("/api/v1/models/{model}/versions/{version}"),
            Body::Raw(bytes),
            201,
        );
        let (status, pack) = self.call(
            ADMIN,
            "GET",
            &format!("/api/v1/models/{model}/versions/{version}/npub"),
            Body::None,
        );
        assert_eq!(status, 200);
        pack
    }

    /// Registers device `id` (Ethos-U55-256) in `group`; returns its token.
    pub fn provision(&self, id: &str, group: &str) -> String {
        let devices = self.admin(
            "POST",
            "/api/v1/devices",
            Body::Json(json!({"devices": [
                {"id": id, "accelerator": "ethos-u55-256", "group": group}
            ]})),
            201,
        );
        devices[0]["token"].as_str().unwrap().to_owned()
    }

    /// Deploys `model` `version` to `group`; returns the manifest sequence.
    pub fn deploy(&self, model: &str, version: &str, group: &str) -> u64 {
        let d = self.admin(
            "POST",
            "/api/v1/deployments",
            Body::Json(json!({"model": model, "version": version, "group": group})),
            201,
        );
        d["sequence"].as_u64().unwrap()
    }

    /// Rolls `group` back to `model` `version`; returns the new sequence.
    pub fn rollback(&self, model: &str, version: &str, group: &str) -> u64 {
        let rb = self.admin(
            "POST",
            &format!("/api/v1/groups/{group}/rollback"),
            Body::Json(json!({"model": model, "version": version})),
            201,
        );
        rb["sequence"].as_u64().unwrap()
    }

    /// The server's signing key (public half).
    pub fn public_key(&self) -> [u8; 32] {
        let keys = self.admin("GET", "/api/v1/keys", Body::None, 200);
        let hex = keys["active"]["public_key"].as_str().unwrap();
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// The trust file of the active key, written into `dir`, as an operator downloads it.
    pub fn trust_file(&self, dir: &Path) -> PathBuf {
        let keys = self.admin("GET", "/api/v1/keys", Body::None, 200);
        let key_id = keys["active"]["key_id"].as_str().unwrap();
        let (status, bytes) = self.call(
            ADMIN,
            "GET",
            &format!("/api/v1/keys/{key_id}/trust"),
            Body::None,
        );
        assert_eq!(status, 200);
        let path = dir.join(format!("{key_id}.key.pub"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The fleet's view of device `id`.
    pub fn device(&self, id: &str) -> Value {
        self.admin("GET", &format!("/api/v1/devices/{id}"), Body::None, 200)
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        self.stop();
    }
}
