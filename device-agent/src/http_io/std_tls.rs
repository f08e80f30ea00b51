//! (std) The host's `https://` link: rustls (on ring) over a `TcpStream`, the server checked
//! against the CA file given (`--ca`: the CA that issued the server's certificate, or the
//! server's own self-signed certificate, pinned). Plain `http://` works through it as well, so
//! one link serves a URL of either scheme.
//!
//! | The server's certificate …              | [`HttpError::Tls`] of          |
//! |-----------------------------------------|--------------------------------|
//! | not issued by a CA of the file          | [`TlsFailure::UnknownCa`]      |
//! | for another host name than the URL's    | [`TlsFailure::WrongHostName`]  |
//! | past its `notAfter`                     | [`TlsFailure::Expired`]        |
//! | before its `notBefore`                  | [`TlsFailure::NotYetValid`]    |
//!
//! The handshake completes inside [`Link::connect_tls`], before the transport writes a request:
//! the token never leaves for a server that did not prove its name.
use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_io::{ErrorKind, ErrorType, Read, Write};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConnection, StreamOwned};

use super::error::{HttpError, TlsFailure};
use super::link::Link;
use super::std_link::{TICK, kind, tcp_connect};

/// The trust a [`TlsLink`] is made with ([`trust_file`], [`trust_pem_as`]).
pub use rustls::ClientConfig;

/// Why a `--ca` file cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum CaError {
    /// It cannot be read.
    Read(io::Error),
    /// A PEM section does not parse.
    Pem(String),
    /// It holds no `CERTIFICATE`.
    Empty,
    /// rustls refused a certificate as a trust anchor.
    Anchor(String),
    /// The device's client certificate or key (`--client-cert`, `--client-key`) is unusable.
    Identity(String),
}

impl std::fmt::Display for CaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaError::Read(e) => write!(f, "cannot read: {e}"),
            CaError::Pem(e) => write!(f, "not PEM: {e}"),
            CaError::Empty => f.write_str("holds no CERTIFICATE"),
            CaError::Anchor(e) => write!(f, "not a usable CA certificate: {e}"),
            CaError::Identity(e) => write!(f, "client certificate: {e}"),
        }
    }
}

impl std::error::Error for CaError {}

/// A client configuration trusting the certificates of the PEM file `path` (and only them).
pub fn trust_file(path: &Path) -> Result<Arc<ClientConfig>, CaError> {
    let pem = std::fs::read(path).map_err(CaError::Read)?;
    trust_pem(&pem)
}

/// [`trust_file`] from the file's bytes.
pub fn trust_pem(pem: &[u8]) -> Result<Arc<ClientConfig>, CaError> {
    trust_pem_as(pem, None)
}

/// [`trust_pem`], presenting the device's client certificate when the server asks for one:
/// `identity` is its chain and its private key, PEM (a P-256 key: the server's `--client-ca`
/// takes no other).
pub fn trust_pem_as(
    pem: &[u8],
    identity: Option<(&[u8], &[u8])>,
) -> Result<Arc<ClientConfig>, CaError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| CaError::Pem(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| CaError::Anchor(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(CaError::Empty);
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| CaError::Anchor(e.to_string()))?
            .with_root_certificates(roots);
    let mut config = match identity {
        None => config.with_no_client_auth(),
        Some((chain, key)) => {
            let chain = CertificateDer::pem_slice_iter(chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| CaError::Identity(e.to_string()))?;
            if chain.is_empty() {
                return Err(CaError::Identity("holds no CERTIFICATE".into()));
            }
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| CaError::Identity(format!("its key: {e}")))?;
            config
                .with_client_auth_cert(chain, key)
                .map_err(|e| CaError::Identity(e.to_string()))?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One connection at a time, TLS or plain.
enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

/// The host's link for `https://` (and `http://`) servers. Sessions are resumed across
/// connections (rustls's in-memory ticket cache in the configuration).
pub struct TlsLink {
    config: Option<Arc<ClientConfig>>,
    /// `config` without the client certificate and with a session cache of its own: a
    /// redirect's target on another origin ([`Link::connect_tls_anonymous`]).
    anonymous: Option<Arc<ClientConfig>>,
    conn: Option<Conn>,
}

impl std::fmt::Debug for TlsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsLink")
            .field("tls", &self.config.is_some())
            .field("open", &self.conn.is_some())
            .finish()
    }
}

impl TlsLink {
    /// A closed link trusting what `config` trusts (from [`trust_file`]); `None`: plain
    /// `http://` only (an `https://` URL is refused with [`TlsFailure::Unsupported`]).
    pub fn new(config: Option<Arc<ClientConfig>>) -> Self {
        let anonymous = config.as_ref().map(|c| {
            let mut a = ClientConfig::clone(c);
            a.client_auth_cert_resolver = Arc::new(NoIdentity);
            // Tickets of sessions made with the identity stay with them.
            a.resumption = rustls::client::Resumption::default();
            Arc::new(a)
        });
        Self {
            config,
            anonymous,
            conn: None,
        }
    }

    fn handshake(
        &mut self,
        config: Option<Arc<ClientConfig>>,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        self.close();
        let config = config.ok_or(HttpError::Tls(TlsFailure::Unsupported))?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| HttpError::BadUrl("the host is not a DNS name or an IP address"))?;
        let started = Instant::now();
        let mut tcp = tcp_connect(host, port, timeout_ms).map_err(HttpError::Connect)?;
        let mut session = ClientConnection::new(config, name)
            .map_err(|_| HttpError::Tls(TlsFailure::Handshake))?;
        let budget = Duration::from_millis(u64::from(timeout_ms.max(1)));
        while session.is_handshaking() {
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(HttpError::Connect(ErrorKind::TimedOut));
            }
            tcp.set_read_timeout(Some(left))
                .map_err(|e| HttpError::Connect(kind(&e)))?;
            match session.complete_io(&mut tcp) {
                Ok(_) => {}
                Err(e) => {
                    let _ = tcp.shutdown(Shutdown::Both);
                    return Err(failure(&e));
                }
            }
        }
        tcp.set_read_timeout(Some(TICK))
            .map_err(|e| HttpError::Connect(kind(&e)))?;
        self.conn = Some(Conn::Tls(Box::new(StreamOwned::new(session, tcp))));
        Ok(())
    }
}

/// Presents no client certificate, whatever the server asks.
#[derive(Debug)]
struct NoIdentity;

impl rustls::client::ResolvesClientCert for NoIdentity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// The failure a handshake's error stands for.
fn failure(e: &io::Error) -> HttpError {
    let Some(tls) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
        return HttpError::Connect(kind(e));
    };
    HttpError::Tls(match tls {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => TlsFailure::UnknownCa,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsFailure::WrongHostName
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                TlsFailure::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TlsFailure::NotYetValid
            }
            _ => TlsFailure::BadCertificate,
        },
        rustls::Error::AlertReceived(_) => TlsFailure::Refused,
        _ => TlsFailure::Handshake,
    })
}

impl ErrorType for TlsLink {
    type Error = ErrorKind;
}

impl Read for TlsLink {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let read = match self.conn.as_mut().ok_or(ErrorKind::NotConnected)? {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        };
        read.map_err(|e| kind(&e))
    }
}

impl Write for TlsLink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        let written = match self.conn.as_mut().ok_or(ErrorKind::NotConnected)? {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        };
        written.map_err(|e| kind(&e))
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        let flushed = match self.conn.as_mut().ok_or(ErrorKind::NotConnected)? {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        };
        flushed.map_err(|e| kind(&e))
    }
}

impl Link for TlsLink {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        self.close();
        self.conn = Some(Conn::Plain(tcp_connect(host, port, timeout_ms)?));
        Ok(())
    }

    fn connect_tls(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), HttpError> {
        self.handshake(self.config.clone(), host, port, timeout_ms)
    }

    fn connect_tls_anonymous(
        &mut self,
        host: &str,
        port: u16,
        timeout_ms: u32,
    ) -> Result<(), HttpError> {
        self.handshake(self.anonymous.clone(), host, port, timeout_ms)
    }

    fn close(&mut self) {
        match self.conn.take() {
            None => {}
            Some(Conn::Plain(s)) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            Some(Conn::Tls(mut s)) => {
                s.conn.send_close_notify();
                let _ = s.conn.complete_io(&mut s.sock);
                let _ = s.sock.shutdown(Shutdown::Both);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_ca_file_without_a_certificate() {
        assert!(matches!(trust_pem(b"nothing here\n"), Err(CaError::Empty)));
        let bad = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(trust_pem(bad).is_err());
    }

    #[test]
    fn rejects_https_without_a_ca() {
        let mut link = TlsLink::new(None);
        assert_eq!(
            link.connect_tls("127.0.0.1", 1, 100),
            Err(HttpError::Tls(TlsFailure::Unsupported))
        );
    }
}
