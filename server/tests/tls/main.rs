//! The server's own TLS (issue 33): a real server on 127.0.0.1:0 with certificates made in the
//! test, reached with rustls. The operator API is driven over `--admin-listen`, which stays plain
//! HTTP; devices speak TLS to `--listen`.
#[path = "../api/binary.rs"]
#[allow(dead_code)]
mod binary;
#[path = "../common/mod.rs"]
mod common;
#[path = "../fleet/support.rs"]
#[allow(dead_code)]
mod support;

mod certs;
mod client;

mod client_certs;
mod exposure;
mod handshake;
mod lane;
mod reload;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use npub_server::Config;

use certs::{Ca, Leaf, Validity};
use common::TestServer;

/// A server speaking TLS with a certificate of `ca` for `localhost` and 127.0.0.1.
pub struct TlsServer {
    /// Its operator API is at `server.url` (the plain admin listener).
    pub server: TestServer,
    /// The TLS listener.
    pub addr: SocketAddr,
    pub ca: Ca,
    pub cert: Leaf,
}

impl TlsServer {
    /// Starts one over `dir`, its files in `dir/tls/`, after `tweak`.
    pub async fn start(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Self {
        let ca = Ca::new("npub test CA");
        Self::start_for(dir, ca, tweak).await
    }

    /// [`Self::start`] with a certificate of `ca`.
    pub async fn start_for(dir: &Path, ca: Ca, tweak: impl FnOnce(&mut Config)) -> Self {
        let files = dir.join("tls");
        std::fs::create_dir_all(&files).unwrap();
        let cert = ca.server(&["localhost", "127.0.0.1"], Validity::Now);
        let (cert_path, key_path) = cert.write(&files, "server");
        let mut server = TestServer::start_with(&dir.join("data"), |c| {
            c.tls_cert = Some(cert_path);
            c.tls_key = Some(key_path);
            c.admin_listen = Some("127.0.0.1:0".parse().unwrap());
            tweak(c);
        })
        .await;
        let addr = server.url.strip_prefix("http://").unwrap().parse().unwrap();
        server.url = server.admin_url.clone().unwrap();
        Self {
            server,
            addr,
            ca,
            cert,
        }
    }

    /// `/metrics`, from the admin listener.
    pub async fn metrics(&self) -> String {
        self.server
            .req(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Waits until `/metrics` has `line` (a counter the server bumps after it closed the
    /// connection the test is looking at); panics after a minute.
    pub async fn wait_for_metric(&self, line: &str) {
        for _ in 0..6000 {
            if self.metrics().await.lines().any(|l| l == line) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no `{line}` in /metrics:\n{}", self.metrics().await);
    }
}
