//! Why the TLS settings could not be loaded, at start or on a `SIGHUP` reload (which then keeps
//! the settings in force). Each names the flag and the file.
use std::fmt;
use std::path::PathBuf;

/// A TLS setting that cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// One of `--tls-cert` / `--tls-key` without the other.
    Unpaired,
    /// A file could not be read.
    Read {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What reading it said.
        error: std::io::Error,
    },
    /// A PEM file with a section that does not parse.
    Pem {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        detail: String,
    },
    /// A PEM file without the section the flag needs (`CERTIFICATE`, a private key).
    Missing {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
    },
    /// A line of `--tls-ticket-key` that is not 64 hex digits.
    TicketKey {
        /// The file.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
    },
    /// rustls refused the key, the chain or the client CA.
    Rustls {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What rustls said.
        error: String,
    },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Unpaired => f.write_str("--tls-cert and --tls-key go together: give both"),
            TlsError::Read { flag, path, error } => {
                write!(f, "{flag} {}: cannot read: {error}", path.display())
            }
            TlsError::Pem { flag, path, detail } => {
                write!(f, "{flag} {}: not PEM: {detail}", path.display())
            }
            TlsError::Missing { flag, path, what } => {
                write!(f, "{flag} {}: holds no {what}", path.display())
            }
            TlsError::TicketKey { path, line } => write!(
                f,
                "--tls-ticket-key {} line {line}: not 64 hex digits (a key is `openssl rand -hex 32`)",
                path.display()
            ),
            TlsError::Rustls { flag, path, error } => {
                write!(f, "{flag} {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for TlsError {}
