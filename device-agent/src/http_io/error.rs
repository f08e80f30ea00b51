//! Why an HTTP exchange was abandoned: one variant per bad answer, `Copy`, with the numbers.
//!
//! The agent's [`TransportError`] is small on purpose (it is journalled nowhere and carried
//! everywhere); [`HttpError::to_transport`] folds each variant into it, and the transport keeps
//! the full [`HttpError`] of the last failure for the firmware's log
//! ([`super::HttpIo::last_error`]).
use core::fmt;

use embedded_io::ErrorKind;

use crate::error::TransportError;

/// Which request an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `GET /api/v1/device/manifest`.
    Manifest,
    /// `GET /api/v1/device/packs/{sha256}`.
    Pack,
    /// `POST /api/v1/device/status`.
    Report,
    /// `GET /api/v1/device/keys`.
    Keys,
    /// `GET /api/v1/device/packs/{sha256}/release`.
    Release,
    /// `GET /api/v1/device/packs/{sha256}/selftest`.
    SelfTest,
}

impl Call {
    /// What a range answer's body is, for messages: "self-test record" for the record's
    /// request, "pack" for every other (only the pack's and the record's ask for ranges).
    pub const fn body(self) -> &'static str {
        match self {
            Call::SelfTest => "self-test record",
            _ => "pack",
        }
    }

    /// The route, for messages.
    pub const fn route(self) -> &'static str {
        match self {
            Call::Manifest => "GET /api/v1/device/manifest",
            Call::Pack => "GET /api/v1/device/packs",
            Call::Report => "POST /api/v1/device/status",
            Call::Keys => "GET /api/v1/device/keys",
            Call::Release => "GET /api/v1/device/packs/{sha256}/release",
            Call::SelfTest => "GET /api/v1/device/packs/{sha256}/selftest",
        }
    }
}

/// Why a TLS connection to the server was refused (`https://` on the host's link,
/// `std_tls.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The link speaks no TLS (the firmware's, today), or was given no CA to check the server
    /// against.
    Unsupported,
    /// The server's certificate is not issued by the CA given (`--ca`), nor pinned there.
    UnknownCa,
    /// The server's certificate does not name the host of the URL.
    WrongHostName,
    /// The server's certificate has expired.
    Expired,
    /// The server's certificate is not valid yet.
    NotYetValid,
    /// The server's certificate is unusable otherwise (malformed, a bad signature, not for a
    /// server).
    BadCertificate,
    /// The server ended the handshake with an alert (no protocol version or cipher in common,
    /// or it refused this device's client certificate).
    Refused,
    /// The handshake failed otherwise (a bad record, the connection closed in the middle).
    Handshake,
}

impl TlsFailure {
    /// One static line.
    pub const fn what(self) -> &'static str {
        match self {
            TlsFailure::Unsupported => "https:// needs a link with TLS and a CA (--ca)",
            TlsFailure::UnknownCa => "the server's certificate is not issued by the CA given",
            TlsFailure::WrongHostName => "the server's certificate is for another host name",
            TlsFailure::Expired => "the server's certificate has expired",
            TlsFailure::NotYetValid => "the server's certificate is not valid yet",
            TlsFailure::BadCertificate => "the server's certificate is unusable",
            TlsFailure::Refused => "the server refused the TLS handshake",
            TlsFailure::Handshake => "the TLS handshake failed",
        }
    }
}

/// Redirects of one range request followed in a row, at most: a presigned URL is one; a CDN
/// in front of a bucket, or a bucket that moved, may add one or two.
pub const MAX_REDIRECTS: usize = 4;

/// One failed or refused HTTP exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The server URL is not `http[s]://HOST[:PORT][/PATH]`.
    BadUrl(&'static str),
    /// The device token is empty or not printable ASCII (it goes into a header).
    BadToken,
    /// The request (path, headers, report) does not fit the transmit buffer.
    RequestTooLong {
        /// Which request.
        call: Call,
    },
    /// The TCP connection could not be opened.
    Connect(ErrorKind),
    /// The TLS handshake with an `https://` server failed or its certificate was refused.
    Tls(TlsFailure),
    /// Writing the request failed.
    Send(ErrorKind),
    /// Reading the answer failed (reset, aborted …).
    Receive(ErrorKind),
    /// The server closed the connection before the whole response head.
    ClosedBeforeHead {
        /// Which request.
        call: Call,
        /// Head bytes received.
        received: usize,
    },
    /// No byte arrived for this long.
    ReadTimeout {
        /// Which request.
        call: Call,
        /// Milliseconds waited.
        waited_ms: u64,
    },
    /// The exchange as a whole took longer than its deadline.
    RequestTimeout {
        /// Which request.
        call: Call,
    },
    /// The pack download took longer than the whole-download timeout.
    DownloadTimeout {
        /// Milliseconds since its first request in this attempt.
        elapsed_ms: u64,
    },
    /// The response head does not fit the receive buffer.
    HeadTooLong {
        /// The buffer's size.
        limit: usize,
    },
    /// The response head is not HTTP/1.x (httparse's verdict).
    MalformedHead(httparse::Error),
    /// A header the transport relies on does not parse (`Content-Length` …).
    MalformedHeader {
        /// Its name.
        name: &'static str,
    },
    /// Two `Content-Length` headers that disagree.
    ConflictingContentLength,
    /// A body the transport must read has no `Content-Length` (or uses a transfer coding).
    NoContentLength {
        /// Which request.
        call: Call,
        /// The status of the answer.
        status: u16,
    },
    /// An unexpected HTTP status.
    Status {
        /// Which request.
        call: Call,
        /// The status.
        status: u16,
    },
    /// 304 Not Modified, though no `If-None-Match` was sent.
    UnaskedNotModified,
    /// `200 OK` with the whole pack, where `206` with the range was asked.
    RangeIgnored {
        /// The pack offset asked for.
        offset: u32,
    },
    /// A 206 without `Content-Range`.
    NoContentRange {
        /// The pack's or the self-test record's request.
        call: Call,
    },
    /// A `Content-Range` that is not `bytes FIRST-LAST/TOTAL`.
    MalformedContentRange {
        /// The pack's or the self-test record's request.
        call: Call,
    },
    /// The 206 covers other bytes than the ones asked for.
    WrongRange {
        /// The pack's or the self-test record's request.
        call: Call,
        /// First byte asked for.
        asked_first: u32,
        /// Last byte asked for (inclusive).
        asked_last: u32,
        /// First byte the server says it sends.
        first: u64,
        /// Last byte the server says it sends.
        last: u64,
    },
    /// The server's length of the pack differs from the manifest's.
    PackLength {
        /// The manifest's `pack_len`.
        manifest: u32,
        /// The total in `Content-Range`.
        server: u64,
    },
    /// `Content-Length` differs from the length of the range in `Content-Range`.
    BodyLength {
        /// The pack's or the self-test record's request.
        call: Call,
        /// `Content-Length`.
        content_length: u64,
        /// `LAST - FIRST + 1` of `Content-Range`.
        range: u64,
    },
    /// 416 for an offset inside the manifest's length.
    Unsatisfiable {
        /// The offset asked for.
        offset: u32,
    },
    /// The connection ended before the body's `Content-Length`.
    BodyTruncated {
        /// Which request.
        call: Call,
        /// Body bytes received.
        received: u64,
        /// `Content-Length`.
        expected: u64,
    },
    /// Bytes arrived past the end of the pack body.
    TrailingBytes {
        /// How many were buffered.
        extra: usize,
    },
    /// A redirect of a pack download without a `Location` this transport can follow (none, or
    /// not a URL).
    RedirectWithoutLocation {
        /// The redirect's status.
        status: u16,
    },
    /// A redirect to a scheme other than `http` or `https` (`ftp:`, `file:` …).
    RedirectNotHttp,
    /// The download was redirected more than [`MAX_REDIRECTS`] times in a row.
    TooManyRedirects {
        /// The last hop's status: another redirect.
        status: u16,
    },
}

impl HttpError {
    /// The agent's view: the connection-level failures are `Unreachable` (the install resumes
    /// later), a status is a status, everything else is a protocol violation.
    pub fn to_transport(self) -> TransportError {
        match self {
            HttpError::Connect(_)
            | HttpError::Send(_)
            | HttpError::Receive(_)
            | HttpError::ClosedBeforeHead { .. }
            | HttpError::ReadTimeout { .. }
            | HttpError::RequestTimeout { .. }
            | HttpError::DownloadTimeout { .. }
            | HttpError::BodyTruncated { .. } => TransportError::Unreachable,
            HttpError::Status { status, .. } => TransportError::Status(status),
            other => TransportError::Protocol(other.what()),
        }
    }

    /// One static line: what kind of answer was refused (no numbers, for [`TransportError`]).
    pub const fn what(self) -> &'static str {
        match self {
            HttpError::BadUrl(what) => what,
            HttpError::BadToken => "the device token is empty or not printable ASCII",
            HttpError::RequestTooLong { .. } => "the request does not fit the transmit buffer",
            HttpError::Connect(_) => "cannot connect",
            HttpError::Tls(failure) => failure.what(),
            HttpError::Send(_) => "sending the request failed",
            HttpError::Receive(_) => "receiving the answer failed",
            HttpError::ClosedBeforeHead { .. } => "connection closed before the response head",
            HttpError::ReadTimeout { .. } => "no byte within the read timeout",
            HttpError::RequestTimeout { .. } => "the exchange exceeded its deadline",
            HttpError::DownloadTimeout { .. } => "the download exceeded its deadline",
            HttpError::HeadTooLong { .. } => "response head longer than the receive buffer",
            HttpError::MalformedHead(_) => "response head is not HTTP/1.x",
            HttpError::MalformedHeader { .. } => "a response header does not parse",
            HttpError::ConflictingContentLength => "two Content-Length headers disagree",
            HttpError::NoContentLength { .. } => "a body without Content-Length",
            HttpError::Status { .. } => "unexpected HTTP status",
            HttpError::UnaskedNotModified => "304 without If-None-Match",
            HttpError::RangeIgnored { .. } => "200 with the whole pack where 206 was asked",
            HttpError::NoContentRange {
                call: Call::SelfTest,
            } => "self-test record: 206 without Content-Range",
            HttpError::NoContentRange { .. } => "pack: 206 without Content-Range",
            HttpError::MalformedContentRange {
                call: Call::SelfTest,
            } => "self-test record: Content-Range is not bytes FIRST-LAST/TOTAL",
            HttpError::MalformedContentRange { .. } => {
                "pack: Content-Range is not bytes FIRST-LAST/TOTAL"
            }
            HttpError::WrongRange {
                call: Call::SelfTest,
                ..
            } => "self-test record: Content-Range covers other bytes than asked",
            HttpError::WrongRange { .. } => "pack: Content-Range covers other bytes than asked",
            HttpError::PackLength { .. } => "the server's pack length differs from the manifest's",
            HttpError::BodyLength {
                call: Call::SelfTest,
                ..
            } => "self-test record: Content-Length differs from the Content-Range",
            HttpError::BodyLength { .. } => "pack: Content-Length differs from the Content-Range",
            HttpError::Unsatisfiable { .. } => "416 for an offset inside the pack",
            HttpError::BodyTruncated { .. } => "body ended before its Content-Length",
            HttpError::TrailingBytes { .. } => "bytes past the end of the pack body",
            HttpError::RedirectWithoutLocation { .. } => "redirect without a usable Location",
            HttpError::RedirectNotHttp => "redirect to a scheme other than HTTP or HTTPS",
            HttpError::TooManyRedirects { .. } => "too many redirects in a row",
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HttpError::BadUrl(what) => write!(f, "server URL: {what}"),
            HttpError::BadToken => f.write_str("device token: empty or not printable ASCII"),
            HttpError::RequestTooLong { call } => {
                write!(
                    f,
                    "{}: the request does not fit the transmit buffer",
                    call.route()
                )
            }
            HttpError::Connect(kind) => write!(f, "TCP connect: {kind:?}"),
            HttpError::Tls(failure) => write!(f, "TLS: {}", failure.what()),
            HttpError::Send(kind) => write!(f, "sending the request: {kind:?}"),
            HttpError::Receive(kind) => write!(f, "receiving the answer: {kind:?}"),
            HttpError::ClosedBeforeHead { call, received } => write!(
                f,
                "{}: the server closed the connection after {received} bytes of the response head",
                call.route()
            ),
            HttpError::ReadTimeout { call, waited_ms } => {
                write!(f, "{}: no byte for {waited_ms} ms", call.route())
            }
            HttpError::RequestTimeout { call } => {
                write!(f, "{}: the exchange exceeded its deadline", call.route())
            }
            HttpError::DownloadTimeout { elapsed_ms } => write!(
                f,
                "pack download: still running after {elapsed_ms} ms, past the whole-download timeout"
            ),
            HttpError::HeadTooLong { limit } => {
                write!(
                    f,
                    "response head: longer than the {limit}-byte receive buffer"
                )
            }
            HttpError::MalformedHead(e) => write!(f, "response head: not HTTP/1.x ({e})"),
            HttpError::MalformedHeader { name } => {
                write!(f, "response header {name}: does not parse")
            }
            HttpError::ConflictingContentLength => {
                f.write_str("response head: two Content-Length headers disagree")
            }
            HttpError::NoContentLength { call, status } => write!(
                f,
                "{}: {status} answer without Content-Length (or with a transfer coding)",
                call.route()
            ),
            HttpError::Status { call, status } => {
                write!(f, "{}: unexpected HTTP {status}", call.route())
            }
            HttpError::UnaskedNotModified => {
                f.write_str("manifest: 304 Not Modified, though no If-None-Match was sent")
            }
            HttpError::RangeIgnored { offset } => write!(
                f,
                "pack: 200 with the whole pack where 206 was asked for the range from {offset}"
            ),
            HttpError::NoContentRange { call } => {
                write!(f, "{}: 206 without Content-Range", call.body())
            }
            HttpError::MalformedContentRange { call } => write!(
                f,
                "{}: Content-Range is not `bytes FIRST-LAST/TOTAL`",
                call.body()
            ),
            HttpError::WrongRange {
                call,
                asked_first,
                asked_last,
                first,
                last,
            } => write!(
                f,
                "{}: Content-Range is bytes {first}-{last}, the request asked for \
                 {asked_first}-{last_asked}",
                call.body(),
                // The record's request asks for the rest from its offset: "-" + nothing.
                last_asked = LastAsked(asked_last),
            ),
            HttpError::PackLength { manifest, server } => write!(
                f,
                "pack: Content-Range says the pack is {server} bytes, the manifest {manifest}"
            ),
            HttpError::BodyLength {
                call,
                content_length,
                range,
            } => write!(
                f,
                "{}: Content-Length {content_length} differs from the {range} bytes of Content-Range",
                call.body()
            ),
            HttpError::Unsatisfiable { offset } => write!(
                f,
                "pack: 416 for offset {offset}, inside the manifest's length"
            ),
            HttpError::BodyTruncated {
                call,
                received,
                expected,
            } => write!(
                f,
                "{}: the body ended after {received} of its {expected} bytes",
                call.route()
            ),
            HttpError::TrailingBytes { extra } => {
                write!(f, "pack: {extra} bytes past the end of the body")
            }
            HttpError::RedirectWithoutLocation { status } => write!(
                f,
                "pack: {status} redirect without a Location this transport can follow (an \
                 absolute http:// or https:// URL, or a path)"
            ),
            HttpError::RedirectNotHttp => {
                f.write_str("pack: redirect to a scheme other than http:// or https://")
            }
            HttpError::TooManyRedirects { status } => write!(
                f,
                "pack: redirected {} times and then once more ({status}); not followed",
                MAX_REDIRECTS
            ),
        }
    }
}

/// A request's last byte as `Range` asked for it: `u32::MAX` stands for "to the end" (the
/// self-test record's `bytes=O-`), written as nothing.
struct LastAsked(u32);

impl fmt::Display for LastAsked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            u32::MAX => Ok(()),
            n => write!(f, "{n}"),
        }
    }
}
