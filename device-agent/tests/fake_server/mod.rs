//! The compromised server of the release tests (`release_attacks.rs`, `qemu_release.rs`): the
//! device API over real HTTP on 127.0.0.1:0, serving whatever manifest, pack, release bundle and
//! keyring records the test built with keys it holds, and keeping the paths asked and the
//! status reports received. Plus the keys and builders those tests share.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{ManifestFields, PackFacts, ROTATION_BYTES, sign_manifest};
use npub_core::release::{
    ReleaseChange, ReleaseFields, TrustChange, TrustUpdate, encode_bundle, sign_release,
    sign_trust_update,
};
use npub_core::{Accel, Role};

use crate::net;

/// The keys of the story: the online signing key and the server's root (both the attacker's),
/// three release keys and the release root (offline, never the server's).
pub struct Keys {
    pub online: KeyPair,
    pub server_root: KeyPair,
    pub release: [KeyPair; 3],
    pub release_root: KeyPair,
}

pub fn keys() -> Keys {
    Keys {
        online: KeyPair::from_seed([0x10; 32]),
        server_root: KeyPair::from_seed([0x11; 32]),
        release: [0x21, 0x22, 0x23].map(|s| KeyPair::from_seed([s; 32])),
        release_root: KeyPair::from_seed([0x30; 32]),
    }
}

/// A small_net pack; `salt` changes its weights, so two salts are two packs.
pub fn pack(salt: u8) -> Vec<u8> {
    let case = net::vela_dir().join("cases/small_net_u55_256");
    let cmd = std::fs::read(case.join("cmd.bin")).unwrap();
    let mut weights = std::fs::read(case.join("weights.bin")).unwrap();
    weights.push(salt);
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 19_424,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

/// The manifest the server signs with the online key: `pack` as `model` `version`.
pub fn manifest(keys: &Keys, pack: &[u8], sequence: u64, model: &str, version: &str) -> Vec<u8> {
    let facts = PackFacts::of(pack).unwrap();
    sign_manifest(
        &ManifestFields {
            sequence,
            model_name: model,
            model_version: version,
            accel: Accel::EthosU55_256,
            hw_class: net::HW_CLASS,
            pack_len: facts.len,
            pack_checksum: facts.checksum,
            pack_sha256: facts.sha256,
            io_digest: [0; 32],
            issued_at: 1_700_000_000,
            expires_at: 0,
        },
        &keys.online,
    )
    .unwrap()
    .to_vec()
}

/// One release signature by `key` over `pack` as `model` `version`.
pub fn release(key: &KeyPair, pack: &[u8], model: &str, version: &str) -> [u8; 288] {
    let facts = PackFacts::of(pack).unwrap();
    sign_release(
        &ReleaseFields {
            pack_sha256: facts.sha256,
            model_name: model,
            model_version: version,
            accel: Accel::EthosU55_256,
            io_digest: [0; 32],
            selftest_digest: [0; 32],
            signed_at: 1_700_000_100,
        },
        key,
    )
    .unwrap()
}

pub fn bundle(signatures: &[[u8; 288]]) -> Vec<u8> {
    encode_bundle(signatures).unwrap()
}

/// A keyring record of a release action, signed by `root`.
pub fn record(root: &KeyPair, sequence: u64, change: ReleaseChange) -> [u8; ROTATION_BYTES] {
    let update = TrustUpdate {
        sequence,
        change: TrustChange::Release(change),
        issued_at: 1_700_000_000,
    };
    sign_trust_update(&update, root).unwrap()
}

/// What the fake server serves and what it saw.
#[derive(Default)]
pub struct Served {
    pub manifest: Vec<u8>,
    pub sequence: u64,
    pub pack: Vec<u8>,
    pub release: Option<Vec<u8>>,
    /// Answer the release request with this status instead (a server error).
    pub release_status: Option<u16>,
    pub records: Vec<[u8; ROTATION_BYTES]>,
    /// Paths asked, in order.
    pub asked: Vec<String>,
    /// The `POST /api/v1/device/status` bodies.
    pub reports: Vec<String>,
}

/// The compromised server: the device API over real HTTP, serving whatever [`Served`] holds.
pub struct Fake {
    pub url: String,
    pub served: Arc<Mutex<Served>>,
}

impl Fake {
    pub fn start(served: Served) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = Arc::new(Mutex::new(served));
        let shared = Arc::clone(&served);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        Fake { url, served }
    }

    pub fn pack_requests(&self) -> usize {
        let s = self.served.lock().unwrap();
        s.asked
            .iter()
            .filter(|p| p.starts_with("/api/v1/device/packs/") && !p.ends_with("/release"))
            .count()
    }

    pub fn release_requests(&self) -> usize {
        let s = self.served.lock().unwrap();
        s.asked.iter().filter(|p| p.ends_with("/release")).count()
    }

    pub fn failed_reason(&self) -> String {
        let s = self.served.lock().unwrap();
        s.reports
            .iter()
            .rev()
            .find(|r| r.contains("\"failed\""))
            .cloned()
            .unwrap_or_else(|| panic!("no failed report among {:?}", s.reports))
    }
}

/// A `Range: bytes=A-B` header's bounds.
type Range = Option<(usize, usize)>;

/// One request: its path, its `Range`, its body; `None` at EOF.
pub fn read_request(stream: &mut TcpStream) -> Option<(String, Range, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&buf).unwrap();
    let path = req.path.unwrap().to_owned();
    let mut range = None;
    let mut len = 0usize;
    for h in req.headers.iter() {
        let v = std::str::from_utf8(h.value).unwrap();
        if h.name.eq_ignore_ascii_case("range") {
            let (a, b) = v.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
            range = Some((a.parse().unwrap(), b.parse().unwrap()));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            len = v.parse().unwrap();
        }
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some((path, range, body))
}

pub fn serve(mut stream: TcpStream, served: &Mutex<Served>) {
    while let Some((path, range, body)) = read_request(&mut stream) {
        let mut s = served.lock().unwrap();
        s.asked.push(path.clone());
        let newest = s
            .records
            .last()
            .map_or(0, |r| TrustUpdate::decode(r).map_or(0, |(_, u)| u.sequence));
        let reply = |status: &str, extra: &str, body: &[u8]| {
            [
                format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nNpub-Keyring-Sequence: \
                     {newest}\r\n{extra}\r\n",
                    body.len()
                )
                .as_bytes(),
                body,
            ]
            .concat()
        };
        let answer = if let Some(query) = path.strip_prefix("/api/v1/device/manifest?seq=") {
            let after: u64 = query.parse().unwrap();
            if s.sequence > after {
                reply("200 OK", "", &s.manifest)
            } else {
                reply("204 No Content", "", &[])
            }
        } else if let Some(query) = path.strip_prefix("/api/v1/device/keys?after=") {
            let after: u64 = query.parse().unwrap();
            let records: Vec<u8> = s
                .records
                .iter()
                .filter(|r| TrustUpdate::decode(&r[..]).is_ok_and(|(_, u)| u.sequence > after))
                .flatten()
                .copied()
                .collect();
            reply("200 OK", "", &records)
        } else if path.ends_with("/release") {
            match &s.release {
                _ if s.release_status.is_some() => {
                    let status = format!("{} Oops", s.release_status.unwrap_or(500));
                    reply(&status, "", &[])
                }
                Some(bundle) => reply("200 OK", "", bundle),
                None => reply("404 Not Found", "", b"no release signatures for this pack"),
            }
        } else if path.starts_with("/api/v1/device/packs/") {
            let (first, last) = range.expect("the transport asks for a range");
            let last = last.min(s.pack.len() - 1);
            let range = format!("Content-Range: bytes {first}-{last}/{}\r\n", s.pack.len());
            reply("206 Partial Content", &range, &s.pack[first..=last])
        } else if path.starts_with("/api/v1/device/status") {
            s.reports.push(String::from_utf8(body).unwrap());
            reply("204 No Content", "", &[])
        } else {
            reply("404 Not Found", "", &[])
        };
        drop(s);
        if stream.write_all(&answer).is_err() {
            return;
        }
    }
}

/// The model and version the release tests deploy.
pub const MODEL: &str = "person-detect";
pub const VERSION: &str = "1.0.0";

/// `key`'s public key file in `dir`, as `npub keygen` writes `KEYFILE.pub`.
pub fn key_file(dir: &std::path::Path, name: &str, key: &KeyPair) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.key.pub"));
    let text = npub_core::keypair::public_key_file_text(&key.public_key());
    std::fs::write(&path, text).unwrap();
    path
}
