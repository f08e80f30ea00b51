//! The device API over plain HTTP (feature `std`): the simulator's [`Transport`].
//!
//! | call             | request                                                                       | answers understood |
//! |------------------|-------------------------------------------------------------------------------|--------------------|
//! | `fetch_manifest` | `GET /api/v1/device/manifest?seq=N`                                            | 200 body = manifest; 204 / 304 nothing newer |
//! | `fetch_pack`     | `GET /api/v1/device/packs/{sha256 hex}` with `Range: bytes=O-E`                | 206 the range; 200 the whole pack (offset 0 only); 416 nothing past the end; 307 / 302 / 303 / 308 with `Location`: the same `Range` from there, once, without the token |
//! | `registered_accelerator` (simulator start-up) | `GET /api/v1/device`                   | 200 JSON, its `accelerator` |
//! | `report`         | `POST /api/v1/device/status` `{"sequence", "state", "progress"?, "reason"?}`   | any 2xx |
//!
//! Every request to the server carries `Authorization: Bearer <device token>`. A pack download
//! the server redirects (`--presign-downloads`: a presigned URL of the bucket) is followed by hand,
//! one hop, and the token is never sent there: the URL is its own authorisation, and a bucket
//! has no business seeing a device's token. The bytes are checked exactly as when the server
//! sends them (the agent verifies length, NPU1 structure and SHA-256 whatever their source). No
//! TLS here: the simulator talks to a server on loopback; a real device's TLS lives in its
//! network stack.
use std::io::Read;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION, RANGE};

use npub_core::manifest::ROTATION_BYTES;

use crate::transport::{Report, Transport, TransportError};

/// The newest keyring update's sequence, on every manifest answer (`docs/device-api.md`).
const KEYRING_SEQUENCE: &str = "npub-keyring-sequence";

/// How long one request may take before the transport gives up (the install resumes later).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The device API of one server, as one device (its token).
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: Client,
    base: String,
    auth: String,
    /// `Npub-Keyring-Sequence` of the last manifest answer.
    keyring_sequence: Option<u64>,
}

impl HttpTransport {
    /// A transport to the server at `base` (e.g. `http://127.0.0.1:8080`) with `token`.
    pub fn new(base: &str, token: &str) -> Result<Self, TransportError> {
        let client = Client::builder()
            .timeout(REQUEST_TIMEOUT)
            // Redirects are followed by `fetch_pack` itself, which knows what to drop.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|_| TransportError::Protocol("cannot build the HTTP client"))?;
        Ok(Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            auth: format!("Bearer {token}"),
            keyring_sequence: None,
        })
    }

    /// The NPU configuration the server registered for this device (Vela's name, e.g.
    /// `ethos-u55-256`): the packs it will be offered are compiled for it.
    pub fn registered_accelerator(&self) -> Result<String, TransportError> {
        let resp = send(self.get("/api/v1/device"))?;
        if resp.status() != StatusCode::OK {
            return Err(TransportError::Status(resp.status().as_u16()));
        }
        let mut body = vec![0u8; 4096];
        let (n, more) = read_body(resp, &mut body)?;
        if more {
            return Err(TransportError::Protocol(
                "GET /api/v1/device: answer too long",
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&body[..n])
            .map_err(|_| TransportError::Protocol("GET /api/v1/device: not JSON"))?;
        v["accelerator"]
            .as_str()
            .map(str::to_owned)
            .ok_or(TransportError::Protocol(
                "GET /api/v1/device: no `accelerator`",
            ))
    }

    fn get(&self, path: &str) -> reqwest::blocking::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .header(AUTHORIZATION, &self.auth)
    }
}

fn send(req: reqwest::blocking::RequestBuilder) -> Result<Response, TransportError> {
    req.send().map_err(|_| TransportError::Unreachable)
}

/// Reads up to `buf.len()` bytes of the body; returns how many, and whether the body had more.
/// `Npub-Keyring-Sequence`: absent is `None`, anything but a decimal number is a protocol error.
fn keyring_sequence(resp: &Response) -> Result<Option<u64>, TransportError> {
    resp.headers()
        .get(KEYRING_SEQUENCE)
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(TransportError::Protocol(
                    "Npub-Keyring-Sequence is not a number",
                ))
        })
        .transpose()
}

fn read_body(mut resp: Response, buf: &mut [u8]) -> Result<(usize, bool), TransportError> {
    let mut n = 0;
    while n < buf.len() {
        match resp.read(&mut buf[n..]) {
            Ok(0) => return Ok((n, false)),
            Ok(k) => n += k,
            Err(_) => return Err(TransportError::Unreachable),
        }
    }
    let more = resp
        .read(&mut [0u8; 1])
        .map_err(|_| TransportError::Unreachable)?
        > 0;
    Ok((n, more))
}

/// Where a redirect of a pack download points: an absolute `http`/`https` URL, or one relative to
/// the request's.
fn redirect_target(resp: &Response) -> Result<reqwest::Url, TransportError> {
    let location = resp
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(TransportError::Protocol(
            "redirect without a usable Location",
        ))?;
    let to = resp
        .url()
        .join(location)
        .map_err(|_| TransportError::Protocol("redirect Location is not a URL"))?;
    if !matches!(to.scheme(), "http" | "https") {
        return Err(TransportError::Protocol(
            "redirect to a scheme other than HTTP",
        ));
    }
    Ok(to)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Transport for HttpTransport {
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let resp = send(self.get(&format!("/api/v1/device/manifest?seq={after}")))?;
        self.keyring_sequence = keyring_sequence(&resp)?;
        match resp.status() {
            StatusCode::OK => {
                let (n, more) = read_body(resp, buf)?;
                // A longer body is reported as such, so the agent refuses it by its length.
                Ok(Some(if more { buf.len() + 1 } else { n }))
            }
            StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED => Ok(None),
            s => Err(TransportError::Status(s.as_u16())),
        }
    }

    fn keyring_sequence(&self) -> Option<u64> {
        self.keyring_sequence
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let resp = send(self.get(&format!("/api/v1/device/keys?after={after}")))?;
        match resp.status() {
            StatusCode::OK => {
                // Whole records only; the agent asks again after the last one it applied.
                let whole = buf.len() - buf.len() % ROTATION_BYTES;
                let (n, _more) = read_body(resp, &mut buf[..whole])?;
                if n % ROTATION_BYTES != 0 {
                    return Err(TransportError::Protocol(
                        "keyring updates are not whole 144-byte records",
                    ));
                }
                Ok(n)
            }
            StatusCode::NO_CONTENT => Ok(0),
            s => Err(TransportError::Status(s.as_u16())),
        }
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let last = u64::from(offset) + buf.len() as u64 - 1;
        let range = format!("bytes={offset}-{last}");
        let req = self
            .get(&format!("/api/v1/device/packs/{}", hex(sha256)))
            .header(RANGE, &range);
        let mut resp = send(req)?;
        if resp.status().is_redirection() && resp.status() != StatusCode::NOT_MODIFIED {
            let to = redirect_target(&resp)?;
            // A plain GET of the URL: no `Authorization`, and no further redirect.
            resp = send(self.client.get(to).header(RANGE, &range))?;
        }
        match resp.status() {
            StatusCode::PARTIAL_CONTENT => {
                let (n, more) = read_body(resp, buf)?;
                if more {
                    return Err(TransportError::Protocol(
                        "206 body longer than the range asked",
                    ));
                }
                Ok(n)
            }
            // A server that ignores Range sends the whole pack: usable only from its start.
            StatusCode::OK if offset == 0 => Ok(read_body(resp, buf)?.0),
            StatusCode::OK => Err(TransportError::Protocol("server ignored the Range header")),
            StatusCode::RANGE_NOT_SATISFIABLE => Ok(0),
            s => Err(TransportError::Status(s.as_u16())),
        }
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        let mut body = serde_json::json!({
            "sequence": report.sequence,
            "state": report.state.name(),
        });
        if let Some(p) = report.progress {
            body["progress"] = p.into();
        }
        if let Some(reason) = report.reason {
            body["reason"] = reason.to_string().into();
        }
        let resp = send(
            self.client
                .post(format!("{}/api/v1/device/status", self.base))
                .header(AUTHORIZATION, &self.auth)
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_string()),
        )?;
        if !resp.status().is_success() {
            return Err(TransportError::Status(resp.status().as_u16()));
        }
        Ok(())
    }
}
