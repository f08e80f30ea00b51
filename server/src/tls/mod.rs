//! The server's own TLS: rustls on ring, terminated in the accept loop (`conn/`), so the device
//! lane answers polls and downloads over it as over plain TCP.
//!
//! | Flag                      | What                                                          |
//! |---------------------------|---------------------------------------------------------------|
//! | `--tls-cert`, `--tls-key` | PEM: the server's certificate then its chain; its private key  |
//! | `--tls12`                 | TLS 1.2 besides 1.3 (off: 1.3 only)                            |
//! | `--tls-ticket-key`        | session-ticket keys the replicas share ([`tickets`]); unset: keys of this process's own, rotated by rustls |
//! | `--client-ca`             | device client certificates issued by this CA ([`client`])      |
//! | `--tls-handshake-timeout` | a handshake not finished in time is dropped and counted        |
//!
//! ALPN offers `http/1.1` only. `SIGHUP` reads every file again ([`Tls::reload`]); connections
//! open keep the configuration they started with, the next ones get the new one, and a reload
//! that fails keeps the old one. Ticket keys carry over a reload (a device resumes across it), as
//! does the session cache.
pub mod client;
pub mod error;
mod files;
pub mod tickets;

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ProducesTickets, StoresServerSessions};

pub use error::TlsError;

/// Default for `--tls-handshake-timeout`: a handshake is a few round trips; a 2G link needs a few
/// seconds for it, not more.
pub const DEFAULT_HANDSHAKE_TIMEOUT_SECS: u64 = 10;
/// Sessions kept for resumption by ID (TLS 1.2 without tickets); tickets need no server memory.
const SESSION_CACHE: usize = 4096;
/// TLS 1.3 tickets sent after each handshake (rustls's default is 2). A device opens one
/// connection a poll and resumes it with one ticket; every handshake, resumed ones too, gives it
/// the next. The second ticket cost an AEAD seal, a random nonce and a record more per handshake
/// for a ticket the device never used (`bench/https.sh` counts what each server sends).
const TICKETS_PER_HANDSHAKE: usize = 1;
/// The most tickets a client's RFC 9149 `ticket_request` gets. A client asking for fewer is
/// answered with fewer: the firmware (npub-tls) asks for one after a full handshake and none
/// after a resumed one, since it offers its ticket again until it expires; a resumed poll then
/// carries no NewSessionTicket (about 180 bytes, an eighth of it). Clients that do not send the
/// extension get [`TICKETS_PER_HANDSHAKE`].
const TICKETS_REQUESTED_MAX: usize = 1;

/// The TLS flags, as given.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--tls-cert`.
    pub cert: PathBuf,
    /// `--tls-key`.
    pub key: PathBuf,
    /// `--tls12`.
    pub tls12: bool,
    /// `--tls-ticket-key`.
    pub ticket_key: Option<PathBuf>,
    /// `--client-ca`.
    pub client_ca: Option<PathBuf>,
    /// `--tls-handshake-timeout`.
    pub handshake_timeout: Duration,
}

/// The TLS configuration in force, replaced whole on a reload.
#[derive(Debug)]
pub struct Tls {
    settings: Settings,
    current: RwLock<Arc<ServerConfig>>,
    /// Kept across reloads when there is no `--tls-ticket-key`: a reload must not void tickets.
    own_ticketer: Arc<dyn ProducesTickets>,
    sessions: Arc<dyn StoresServerSessions>,
}

impl Tls {
    /// Reads the files of `settings`.
    pub fn load(settings: Settings) -> Result<Self, TlsError> {
        let own_ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| TlsError::Rustls {
            flag: "--tls-cert",
            path: settings.cert.clone(),
            error: format!("no ticket key: {e}"),
        })?;
        let sessions: Arc<dyn StoresServerSessions> =
            rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        let config = build(&settings, &own_ticketer, &sessions)?;
        Ok(Self {
            current: RwLock::new(Arc::new(config)),
            settings,
            own_ticketer,
            sessions,
        })
    }

    /// The configuration for the next connection.
    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// How long a client may take over its handshake.
    pub fn handshake_timeout(&self) -> Duration {
        self.settings.handshake_timeout
    }

    /// Client certificates are asked for (`--client-ca`).
    pub fn client_certificates(&self) -> bool {
        self.settings.client_ca.is_some()
    }

    /// Reads every file again and puts the result in force for the next connection; on an
    /// error the configuration in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build(&self.settings, &self.own_ticketer, &self.sessions)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
        Ok(())
    }
}

/// A configuration from the files of `s`, with the ticket keys and session cache given.
fn build(
    s: &Settings,
    own_ticketer: &Arc<dyn ProducesTickets>,
    sessions: &Arc<dyn StoresServerSessions>,
) -> Result<ServerConfig, TlsError> {
    {
        let chain = files::certificates("--tls-cert", &s.cert)?;
        let key = files::private_key("--tls-key", &s.key)?;
        let versions: &[&rustls::SupportedProtocolVersion] = if s.tls12 {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .map_err(|e| rustls_error("--tls-cert", &s.cert, &e))?;
        let builder = match &s.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in files::certificates("--client-ca", path)? {
                    roots
                        .add(cert)
                        .map_err(|e| rustls_error("--client-ca", path, &e))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Rustls {
                    flag: "--client-ca",
                    path: path.clone(),
                    error: e.to_string(),
                })?;
                builder.with_client_cert_verifier(Arc::new(client::DeviceVerifier(verifier)))
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| rustls_error("--tls-key", &s.key, &e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.ticketer = match &s.ticket_key {
            Some(path) => Arc::new(tickets::SharedTicketer::load(path)?),
            None => Arc::clone(own_ticketer),
        };
        config.session_storage = Arc::clone(sessions);
        config.send_tls13_tickets = TICKETS_PER_HANDSHAKE;
        config.max_tls13_tickets = TICKETS_REQUESTED_MAX;
        Ok(config)
    }
}

/// How the listeners carry traffic: what `/readyz` and the web UI tell an operator.
#[derive(Debug, Clone, Default)]
pub struct Exposure {
    /// The listeners speak TLS.
    pub tls: bool,
    /// Devices may present client certificates (`--client-ca`).
    pub client_certificates: bool,
    /// Listeners speaking plain HTTP on an address other than loopback.
    pub plain_exposed: Vec<std::net::SocketAddr>,
}

impl Exposure {
    /// The warning for plain HTTP reachable from the network, if there is any.
    pub fn warning(&self) -> Option<String> {
        if self.plain_exposed.is_empty() {
            return None;
        }
        let addrs: Vec<String> = self.plain_exposed.iter().map(ToString::to_string).collect();
        Some(format!(
            "plain HTTP on {}, which is not loopback: device tokens and packs cross the network \
             in clear. Give --tls-cert and --tls-key, or serve only behind a TLS-terminating proxy.",
            addrs.join(", ")
        ))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn rustls_error(flag: &'static str, path: &std::path::Path, e: &rustls::Error) -> TlsError {
    TlsError::Rustls {
        flag,
        path: path.to_owned(),
        error: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings for a certificate and key made here, written into `dir`.
    fn settings(dir: &std::path::Path) -> Settings {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        Settings {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            tls12: false,
            ticket_key: None,
            client_ca: None,
            handshake_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn rejects_a_reload_with_a_broken_key_and_keeps_the_configuration_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let tls = Tls::load(settings(dir.path())).unwrap();
        let before = tls.config();
        std::fs::write(dir.path().join("key.pem"), "not a key\n").unwrap();
        let e = tls.reload().unwrap_err();
        assert!(
            matches!(
                e,
                TlsError::Missing {
                    flag: "--tls-key",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            Arc::ptr_eq(&before, &tls.config()),
            "the old configuration stays"
        );
        // A good reload replaces it, and keeps the ticket keys and the session cache.
        // A renewed certificate and key in the same files.
        let _ = settings(dir.path());
        tls.reload().unwrap();
        let after = tls.config();
        assert!(!Arc::ptr_eq(&before, &after));
        assert!(Arc::ptr_eq(&before.ticketer, &after.ticketer));
        assert!(Arc::ptr_eq(&before.session_storage, &after.session_storage));
    }

    #[test]
    fn rejects_missing_files_naming_the_flag_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path());
        s.client_ca = Some(dir.path().join("absent.pem"));
        let e = Tls::load(s).unwrap_err().to_string();
        assert!(e.starts_with("--client-ca "), "{e}");
        assert!(e.contains("absent.pem: cannot read"), "{e}");
        let mut s = settings(dir.path());
        std::fs::write(dir.path().join("cert.pem"), "").unwrap();
        s.tls12 = true;
        let e = Tls::load(s).unwrap_err().to_string();
        assert!(e.contains("holds no CERTIFICATE"), "{e}");
    }
}
