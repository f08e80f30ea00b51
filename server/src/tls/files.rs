//! Reading the PEM files of the TLS flags: a certificate chain, a private key, CA certificates.
use std::path::Path;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::TlsError;

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        flag,
        path: path.to_owned(),
        error,
    })
}

/// Every `CERTIFICATE` in `path`, in order (for `--tls-cert`: the server's first, then the
/// intermediates).
pub(crate) fn certificates(
    flag: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            flag,
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Missing {
            flag,
            path: path.to_owned(),
            what: "CERTIFICATE section",
        });
    }
    Ok(certs)
}

/// The first private key in `path` (PKCS#8, SEC1 or PKCS#1).
pub(crate) fn private_key(
    flag: &'static str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(flag, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Missing {
            flag,
            path: path.to_owned(),
            what: "private key (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY section)",
        },
        e => TlsError::Pem {
            flag,
            path: path.to_owned(),
            detail: e.to_string(),
        },
    })
}

/// The lines of `path` that are not blank or `#` comments, with their line numbers.
pub(crate) fn key_lines(flag: &'static str, path: &Path) -> Result<Vec<(usize, String)>, TlsError> {
    let text = read(flag, path)?;
    let text = String::from_utf8_lossy(&text);
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim().to_owned()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect())
}
