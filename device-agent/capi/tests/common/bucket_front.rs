//! A TLS front for the bucket (s3s-fs on loopback speaks plain HTTP; a bucket is reached over
//! HTTPS in production), logging what the clients sent it: every connection that completes a
//! handshake is forwarded byte for byte to the bucket, so the `Host` a presigned URL's signature
//! covers reaches s3s-fs as the client sent it, and every byte the client sent is kept, to show
//! which requests (and which headers) reached the object store side.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The most a connection's client may send before the front stops keeping it (its requests
/// are heads only: presigned GETs carry no body).
const KEPT_PER_CONNECTION: usize = 64 * 1024;

pub struct BucketFront {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// TCP connections accepted (whether or not their handshake completed).
    accepted: Arc<AtomicUsize>,
    /// What clients sent after a completed handshake, one entry per connection.
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Handshakes in which the client presented a certificate (the front asks for one, as a
    /// bucket could, and accepts a client without).
    client_certs: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

impl BucketFront {
    /// Serves the certificate chain `cert_pem` with `key_pem`, forwarding to `upstream`
    /// (`http://ADDR`); asks clients for a certificate `client_ca_pem` issued, and counts those
    /// that present one.
    pub fn start(upstream: &str, cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> Self {
        let upstream: SocketAddr = upstream
            .strip_prefix("http://")
            .expect("the bucket listens on http://")
            .parse()
            .unwrap();
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&provider),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                chain,
                PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let client_certs = Arc::new(AtomicUsize::new(0));
        let (count, log, certs) = (
            Arc::clone(&accepted),
            Arc::clone(&sent),
            Arc::clone(&client_certs),
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let (acceptor, log, certs) =
                    (acceptor.clone(), Arc::clone(&log), Arc::clone(&certs));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if tls.get_ref().1.peer_certificates().is_some() {
                        certs.fetch_add(1, Ordering::SeqCst);
                    }
                    let Ok(up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let index = {
                        let mut log = log.lock().unwrap();
                        log.push(Vec::new());
                        log.len() - 1
                    };
                    let (mut client_rx, mut client_tx) = tokio::io::split(tls);
                    let (mut up_rx, mut up_tx) = up.into_split();
                    let back = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut up_rx, &mut client_tx).await;
                        let _ = client_tx.shutdown().await;
                    });
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = match client_rx.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        {
                            let mut log = log.lock().unwrap();
                            let kept = &mut log[index];
                            let room = KEPT_PER_CONNECTION.saturating_sub(kept.len());
                            kept.extend_from_slice(&buf[..n.min(room)]);
                        }
                        if up_tx.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = up_tx.shutdown().await;
                    let _ = back.await;
                });
            }
        });
        Self {
            url,
            accepted,
            sent,
            client_certs,
            _rt: rt,
        }
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Handshakes in which the client presented a certificate.
    pub fn client_certs(&self) -> usize {
        self.client_certs.load(Ordering::SeqCst)
    }

    /// Everything clients sent after a completed handshake, as text, one entry per connection.
    pub fn sent(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }
}
