//! The client side of TLS for `https://` targets: rustls on ring (what npub-server itself uses; no
//! aws-lc to build), TLS 1.3 only, one cipher suite, the server's certificate pinned.
//!
//! | Choice                  | Why                                                                        |
//! |-------------------------|----------------------------------------------------------------------------|
//! | TLS 1.3 only            | what a device speaks to npub-server (its default is 1.3 only)              |
//! | [`SUITE`] only          | both servers compared negotiate the same cipher: the client offers one     |
//! | one key exchange group  | [`Group`]: X25519 (what rustls clients, the host agent among them, offer first) or P-256 (the only one the Cortex-M firmware's embedded-tls offers) |
//! | certificate pinned      | the end-entity certificate must be byte for byte the file given (`--cert`); |
//! |                         | the `CertificateVerify` signature is not checked: the server still signs   |
//! |                         | every full handshake (its cost is what is measured), and the client, which |
//! |                         | must not be the bottleneck, saves an ECDSA verification per handshake      |
//! | a session store per [`Client`] | a device resumes its own session; [`Client::tickets`] counts the tickets the server sent |
//!
//! Not for anything but a benchmark on loopback: skipping the signature check means a
//! man in the middle holding the (public) certificate would be believed.
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, NamedGroup, SignatureScheme};

/// The one cipher suite offered (IANA name TLS_AES_128_GCM_SHA256): AES-NI and carry-less
/// multiply make it the cheapest on x86-64, and every TLS 1.3 server must implement it.
pub const SUITE: &str = "TLS13_AES_128_GCM_SHA256";
/// Tickets a client keeps for its server (rustls's own cache holds 8 per name; a device needs 1).
const TICKETS_KEPT: usize = 8;

/// How a client resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Every handshake is full: no ticket is kept or offered.
    Never,
    /// A handshake offers a ticket from an earlier one, when there is one.
    Tickets,
}

/// The key exchange group a client offers (the only one: both servers compared must use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// X25519.
    X25519,
    /// secp256r1 (P-256).
    P256,
}

impl Group {
    /// From `x25519` or `p256`.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "x25519" => Ok(Self::X25519),
            "p256" => Ok(Self::P256),
            _ => Err(format!("{name}: not a key exchange group (x25519, p256)")),
        }
    }

    fn named(self) -> NamedGroup {
        match self {
            Self::X25519 => NamedGroup::X25519,
            Self::P256 => NamedGroup::secp256r1,
        }
    }
}

/// What every client of one run shares: the pinned certificate, the server's name, the group.
#[derive(Debug, Clone)]
pub struct Pin {
    cert: CertificateDer<'static>,
    name: ServerName<'static>,
    group: Group,
}

impl Pin {
    /// The first certificate of the PEM file `path`, and the name the server is reached by (an
    /// IP address: the benches connect to `127.0.0.1`).
    pub fn load(path: &Path, host: &str, group: Group) -> Result<Self, String> {
        let cert = CertificateDer::from_pem_file(path)
            .map_err(|e| format!("{}: no PEM certificate: {e}", path.display()))?;
        let ip = host.rsplit_once(':').map_or(host, |(ip, _)| ip);
        let name = ServerName::try_from(ip.to_owned())
            .map_err(|e| format!("{host}: not a server name: {e}"))?;
        Ok(Self { cert, name, group })
    }
}

/// One TLS client: its configuration and its own session store.
#[derive(Debug, Clone)]
pub struct Client {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    tickets: Arc<Counting>,
}

impl Client {
    /// A client that trusts `pin` and resumes as `resume` says.
    pub fn new(pin: &Pin, resume: Resume) -> Result<Self, String> {
        let provider = provider(pin.group)?;
        let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS 1.3 with {SUITE}: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned(pin.cert.clone())))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tickets = Arc::new(Counting {
            inner: ClientSessionMemoryCache::new(TICKETS_KEPT),
            received: AtomicU64::new(0),
            offer: resume == Resume::Tickets,
        });
        config.resumption = Resumption::store(Arc::clone(&tickets) as Arc<dyn ClientSessionStore>);
        Ok(Self {
            config: Arc::new(config),
            name: pin.name.clone(),
            tickets,
        })
    }

    /// Handshakes over `tcp`.
    pub async fn connect(
        &self,
        tcp: tokio::net::TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.config))
            .connect(self.name.clone(), tcp)
            .await
    }

    /// Session tickets the server has sent this client so far (with [`Resume::Never`] too: they
    /// are counted, then dropped).
    pub fn tickets(&self) -> u64 {
        self.tickets.received.load(Ordering::Relaxed)
    }
}

/// ring's provider with its cipher suites cut to [`SUITE`] and its groups to `group`.
fn provider(group: Group) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .retain(|s| format!("{:?}", s.suite()) == SUITE);
    if provider.cipher_suites.is_empty() {
        return Err(format!("{SUITE}: not a cipher suite of ring's provider"));
    }
    provider.kx_groups.retain(|g| g.name() == group.named());
    if provider.kx_groups.is_empty() {
        return Err(format!("{group:?}: not a group of ring's provider"));
    }
    Ok(provider)
}

/// Accepts exactly one end-entity certificate (see the module's table for what it skips).
#[derive(Debug)]
struct Pinned(CertificateDer<'static>);

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.0.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // The configuration offers TLS 1.3 only.
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // The bench certificate's key is P-256: both servers sign with it the same way.
        vec![SignatureScheme::ECDSA_NISTP256_SHA256]
    }
}

/// rustls's memory cache, counting the TLS 1.3 tickets put into it; with `offer` false it keeps
/// none (every handshake is then full, though the server's tickets are still counted).
#[derive(Debug)]
struct Counting {
    inner: ClientSessionMemoryCache,
    received: AtomicU64,
    offer: bool,
}

impl ClientSessionStore for Counting {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    // TLS 1.2 is never offered.
    fn set_tls12_session(
        &self,
        _server_name: ServerName<'static>,
        _value: rustls::client::Tls12ClientSessionValue,
    ) {
    }

    fn tls12_session(
        &self,
        _server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        None
    }

    fn remove_tls12_session(&self, _server_name: &ServerName<'static>) {}

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.received.fetch_add(1, Ordering::Relaxed);
        if self.offer {
            self.inner.insert_tls13_ticket(server_name, value);
        }
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        if !self.offer {
            return None;
        }
        self.inner.take_tls13_ticket(server_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_exactly_one_suite_and_one_group() {
        for group in [Group::X25519, Group::P256] {
            let p = provider(group).unwrap();
            assert_eq!(p.cipher_suites.len(), 1);
            assert_eq!(p.kx_groups.len(), 1);
            assert_eq!(p.kx_groups[0].name(), group.named());
        }
    }

    #[test]
    fn rejects_a_missing_certificate_file() {
        let f = std::env::temp_dir().join("npub-loadgen-absent.pem");
        assert!(Pin::load(&f, "127.0.0.1:1", Group::X25519).is_err());
    }

    #[test]
    fn rejects_an_unknown_group() {
        assert!(Group::parse("x448").is_err());
        assert_eq!(Group::parse("p256").unwrap(), Group::P256);
    }
}
