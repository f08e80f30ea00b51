//! Why a connection failed, grouped by domain: the transport, the server's alert, the server's
//! certificate, a message the client refuses, the caller's configuration. Every refusal has its
//! own variant, and each is `Copy` so a firmware can keep the last one for its log.
use core::fmt;

/// One failed TLS operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed (its own timeout included).
    Io(embedded_io::ErrorKind),
    /// The server closed the connection (TCP end of stream, or `close_notify`).
    Closed,
    /// The server sent a fatal alert; its description code (RFC 8446 §6).
    Alert(u8),
    /// The server's certificate was refused.
    Certificate(CertError),
    /// The server sent something this client refuses.
    Refused(Refusal),
    /// The caller's buffers or names do not fit.
    Config(ConfigError),
}

/// A certificate the verifier ([`crate::x509`]) refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CertError {
    /// Not issued by the anchor's CA, nor pinned by it.
    UnknownCa,
    /// Its subjectAltName does not name the host.
    WrongHostName,
    /// Its `notAfter` is past.
    Expired,
    /// Its `notBefore` is to come.
    NotYetValid,
    /// Its DER does not parse as an X.509 certificate.
    Malformed,
    /// Its key is not ECDSA P-256.
    NotP256,
    /// The server's `Certificate` message held no certificate.
    Empty,
}

/// A message or record the client refuses (RFC 8446 names the alert it sends back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A record longer than 2^14 + 256 bytes of ciphertext (record_overflow).
    RecordTooLong,
    /// A record of a content type not allowed here (unexpected_message).
    UnexpectedRecord,
    /// A record that does not decrypt under the current keys (bad_record_mac).
    BadRecordMac,
    /// A decrypted record that is all padding (unexpected_message).
    NoContentType,
    /// A handshake message split over records: none of the device's servers do that, and it
    /// would need a second buffer (unexpected_message).
    FragmentedHandshake,
    /// A handshake message of a type not expected in this state (unexpected_message).
    UnexpectedMessage,
    /// A message shorter than its fields say (decode_error).
    Truncated,
    /// Bytes after the last field of a message or extension (decode_error).
    TrailingData,
    /// The ServerHello does not select TLS 1.3 (protocol_version).
    NotTls13,
    /// The ServerHello selects a cipher suite other than TLS_AES_128_GCM_SHA256 (illegal_parameter).
    CipherSuite,
    /// The ServerHello's legacy fields (version, session id, compression) are wrong (illegal_parameter).
    LegacyField,
    /// The server's key share is not on secp256r1 or not a valid point (illegal_parameter).
    KeyShare,
    /// A full handshake without the server's key share (missing_extension).
    MissingKeyShare,
    /// An extension the client did not offer, or one not allowed in this message (unsupported_extension).
    UnofferedExtension,
    /// The same extension twice in one message (illegal_parameter).
    DuplicateExtension,
    /// The server selected a pre-shared key the client did not offer (illegal_parameter).
    PskNotOffered,
    /// A second HelloRetryRequest (unexpected_message).
    SecondHelloRetry,
    /// A HelloRetryRequest for secp256r1, which the client had offered (illegal_parameter).
    HelloRetrySameGroup,
    /// A HelloRetryRequest for a group other than secp256r1 (handshake_failure).
    HelloRetryGroup,
    /// A HelloRetryRequest that would change nothing (illegal_parameter).
    HelloRetryNoChange,
    /// A HelloRetryRequest cookie longer than [`crate::client::MAX_COOKIE`] (handshake_failure).
    CookieTooLong,
    /// The server chose an application protocol other than `http/1.1` (no_application_protocol).
    Alpn,
    /// A server `Certificate` with a request context (illegal_parameter).
    CertificateContext,
    /// A CertificateVerify with a scheme other than ecdsa_secp256r1_sha256 (illegal_parameter).
    SignatureScheme,
    /// A CertificateVerify whose signature does not verify under the certificate's key (decrypt_error).
    BadSignature,
    /// A server Finished whose MAC is wrong (decrypt_error).
    BadFinished,
    /// A NewSessionTicket whose lifetime is over seven days (illegal_parameter).
    TicketLifetime,
    /// A KeyUpdate whose request flag is neither 0 nor 1 (illegal_parameter).
    KeyUpdate,
    /// Application data before the handshake was done (unexpected_message).
    EarlyApplicationData,
    /// 2^64 - 1 records under one key: the sequence number would wrap.
    SequenceExhausted,
}

/// The caller's side does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The read buffer cannot hold a whole record ([`crate::READ_BUFFER_MIN`]).
    ReadBufferTooSmall,
    /// The write buffer cannot hold the ClientHello ([`crate::WRITE_BUFFER_MIN`]).
    WriteBufferTooSmall,
    /// The host name is empty or longer than 255 bytes.
    HostName,
    /// `read`/`write` on a connection that is not open.
    NotConnected,
}

impl Refusal {
    /// The alert this client sends the server before closing (RFC 8446 §6.2).
    pub const fn alert(self) -> u8 {
        use Refusal::*;
        match self {
            RecordTooLong => alert::RECORD_OVERFLOW,
            BadRecordMac => alert::BAD_RECORD_MAC,
            Truncated | TrailingData => alert::DECODE_ERROR,
            NotTls13 => alert::PROTOCOL_VERSION,
            CipherSuite | LegacyField | KeyShare | DuplicateExtension | PskNotOffered
            | HelloRetrySameGroup | HelloRetryNoChange | CertificateContext | SignatureScheme
            | TicketLifetime | KeyUpdate => alert::ILLEGAL_PARAMETER,
            MissingKeyShare => alert::MISSING_EXTENSION,
            UnofferedExtension => alert::UNSUPPORTED_EXTENSION,
            HelloRetryGroup | CookieTooLong => alert::HANDSHAKE_FAILURE,
            Alpn => alert::NO_APPLICATION_PROTOCOL,
            BadSignature | BadFinished => alert::DECRYPT_ERROR,
            SequenceExhausted => alert::INTERNAL_ERROR,
            UnexpectedRecord | NoContentType | FragmentedHandshake | UnexpectedMessage
            | SecondHelloRetry | EarlyApplicationData => alert::UNEXPECTED_MESSAGE,
        }
    }
}

impl CertError {
    /// The alert for this refusal.
    pub const fn alert(self) -> u8 {
        match self {
            CertError::UnknownCa => alert::UNKNOWN_CA,
            CertError::Expired | CertError::NotYetValid => alert::CERTIFICATE_EXPIRED,
            CertError::NotP256 => alert::UNSUPPORTED_CERTIFICATE,
            CertError::WrongHostName | CertError::Malformed | CertError::Empty => {
                alert::BAD_CERTIFICATE
            }
        }
    }
}

/// Alert descriptions (RFC 8446 §6).
pub mod alert {
    pub const CLOSE_NOTIFY: u8 = 0;
    pub const UNEXPECTED_MESSAGE: u8 = 10;
    pub const BAD_RECORD_MAC: u8 = 20;
    pub const RECORD_OVERFLOW: u8 = 22;
    pub const HANDSHAKE_FAILURE: u8 = 40;
    pub const BAD_CERTIFICATE: u8 = 42;
    pub const UNSUPPORTED_CERTIFICATE: u8 = 43;
    pub const CERTIFICATE_EXPIRED: u8 = 45;
    pub const ILLEGAL_PARAMETER: u8 = 47;
    pub const UNKNOWN_CA: u8 = 48;
    pub const DECODE_ERROR: u8 = 50;
    pub const DECRYPT_ERROR: u8 = 51;
    pub const PROTOCOL_VERSION: u8 = 70;
    pub const INTERNAL_ERROR: u8 = 80;
    pub const MISSING_EXTENSION: u8 = 109;
    pub const UNSUPPORTED_EXTENSION: u8 = 110;
    pub const NO_APPLICATION_PROTOCOL: u8 = 120;
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::Refused(r)
    }
}

impl From<CertError> for Error {
    fn from(c: CertError) -> Self {
        Error::Certificate(c)
    }
}

impl From<ConfigError> for Error {
    fn from(c: ConfigError) -> Self {
        Error::Config(c)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(kind) => write!(f, "TLS transport: {kind:?}"),
            Error::Closed => f.write_str("TLS: the server closed the connection"),
            Error::Alert(code) => write!(f, "TLS: the server sent alert {code}"),
            Error::Certificate(c) => write!(f, "TLS: the server's certificate: {c:?}"),
            Error::Refused(r) => write!(f, "TLS: refused from the server: {r:?}"),
            Error::Config(c) => write!(f, "TLS: the caller's configuration: {c:?}"),
        }
    }
}
