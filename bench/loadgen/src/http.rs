//! A minimal HTTP/1.1 client for GETs over one keep-alive connection: what a device's agent does,
//! with as little client-side work as possible, so that the load generator is not the bottleneck
//! of the server it measures (a general client such as reqwest spends more per request than a
//! static-file server does answering it).
//!
//! Supported: `Content-Length` bodies and bodiless answers (1xx, 204, 304); `Connection: close`.
//! Not supported (an error, never a silent misreading): chunked bodies, pipelining, redirects.
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::TcpStream;

use crate::tls;

/// Most response header bytes accepted: far above what npub-server or nginx send.
const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most response headers parsed.
const MAX_HEADERS: usize = 32;

/// Why a request failed.
#[derive(Debug)]
pub enum HttpError {
    /// Connecting, writing or reading failed.
    Io(std::io::Error),
    /// The server closed the connection before a whole response.
    Closed,
    /// The response head is not HTTP/1.1 as this client reads it.
    Malformed(&'static str),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "connection: {e}"),
            Self::Closed => f.write_str("connection: closed before a whole response"),
            Self::Malformed(what) => write!(f, "response head: {what}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<std::io::Error> for HttpError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// What a response was, without its body (which is counted, and kept only when asked for).
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Body bytes received.
    pub body_bytes: u64,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// A connection's bytes: plain TCP, or TLS over it.
#[derive(Debug)]
enum Io {
    Plain(TcpStream),
    /// Boxed: rustls's state is a few kilobytes.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// How a connection's TLS handshake went (the client's view: what it offered and got).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Plain TCP.
    None,
    /// A full handshake: key exchange, certificate, signature.
    Full,
    /// A session resumed from a ticket (key exchange still, no certificate or signature).
    Resumed,
}

/// One connection.
#[derive(Debug)]
pub struct Conn {
    stream: Io,
    handshake: Handshake,
    buf: Vec<u8>,
    /// Bytes of `buf` read but not yet consumed: `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Conn {
    /// Connects, with `TCP_NODELAY` (a device's request is one small write).
    /// With `tls`, a TLS handshake follows before this returns.
    pub async fn connect(
        addr: SocketAddr,
        buf_bytes: usize,
        tls: Option<&tls::Client>,
    ) -> Result<Self, HttpError> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (stream, handshake) = match tls {
            None => (Io::Plain(tcp), Handshake::None),
            Some(client) => {
                let s = client.connect(tcp).await?;
                let kind = match s.get_ref().1.handshake_kind() {
                    Some(rustls::HandshakeKind::Resumed) => Handshake::Resumed,
                    _ => Handshake::Full,
                };
                (Io::Tls(Box::new(s)), kind)
            }
        };
        Ok(Self {
            stream,
            handshake,
            buf: vec![0; buf_bytes.max(MAX_HEADER_BYTES)],
            start: 0,
            end: 0,
        })
    }

    /// How the connection's TLS handshake went.
    pub fn handshake(&self) -> Handshake {
        self.handshake
    }

    /// The negotiated cipher suite and key exchange group, `plain` on plain TCP.
    pub fn suite(&self) -> String {
        match &self.stream {
            Io::Plain(_) => "plain".to_owned(),
            Io::Tls(s) => {
                let c = s.get_ref().1;
                let suite = c
                    .negotiated_cipher_suite()
                    .map_or_else(|| "none".to_owned(), |s| format!("{:?}", s.suite()));
                let kx = c
                    .negotiated_key_exchange_group()
                    .map_or_else(|| "none".to_owned(), |g| format!("{:?}", g.name()));
                format!("{suite}/{kx}")
            }
        }
    }

    /// Closes the connection as a well-behaved client does: TLS `close_notify`, then FIN.
    pub async fn close(mut self) -> Result<(), HttpError> {
        self.stream.shutdown().await?;
        Ok(())
    }

    /// Sends `request` (a whole request head) and reads the answer; the body is appended to
    /// `keep` when given, otherwise read and dropped.
    pub async fn send(
        &mut self,
        request: &[u8],
        mut keep: Option<&mut Vec<u8>>,
    ) -> Result<Answer, HttpError> {
        self.stream.write_all(request).await?;
        let (head_len, status, length, close) = self.read_head().await?;
        self.start += head_len;
        let mut body = 0u64;
        while body < length {
            if self.start == self.end && !self.fill().await? {
                return Err(HttpError::Closed);
            }
            let available = (self.end - self.start) as u64;
            let take = available.min(length - body) as usize;
            if let Some(keep) = keep.as_deref_mut() {
                keep.extend_from_slice(&self.buf[self.start..self.start + take]);
            }
            self.start += take;
            body += take as u64;
        }
        Ok(Answer {
            status,
            body_bytes: body,
            close,
        })
    }

    /// Reads until a whole response head is buffered; returns its length, the status, the body
    /// length and whether the connection closes after it.
    async fn read_head(&mut self) -> Result<(usize, u16, u64, bool), HttpError> {
        loop {
            if self.start < self.end
                && let Some(head) = parse_head(&self.buf[self.start..self.end])?
            {
                return Ok(head);
            }
            if self.end - self.start >= MAX_HEADER_BYTES {
                return Err(HttpError::Malformed("longer than 16 KiB"));
            }
            if !self.fill().await? {
                return Err(HttpError::Closed);
            }
        }
    }

    /// Reads more bytes; `false` at end of stream.
    async fn fill(&mut self) -> Result<bool, HttpError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n > 0)
    }
}

/// `Some((head length, status, body length, close))` once `bytes` holds a whole head.
fn parse_head(bytes: &[u8]) -> Result<Option<(usize, u16, u64, bool)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HttpError::Malformed("not an HTTP/1.x response")),
    };
    let status = response.code.ok_or(HttpError::Malformed("no status"))?;
    let mut length = None;
    let mut close = response.version == Some(0);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(h.value)
                .map_err(|_| HttpError::Malformed("Content-Length is not text"))?;
            length = Some(
                text.trim()
                    .parse::<u64>()
                    .map_err(|_| HttpError::Malformed("Content-Length is not a number"))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::Malformed("chunked bodies are not supported"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    let bodiless = status < 200 || status == 204 || status == 304;
    let length = match (bodiless, length) {
        (true, _) => 0,
        (false, Some(n)) => n,
        (false, None) => return Err(HttpError::Malformed("no Content-Length")),
    };
    Ok(Some((head_len, status, length, close)))
}

/// Request heads for one path, one per device token (or one without a token): built once, so
/// that sending costs one write.
#[derive(Debug)]
pub struct Requests {
    heads: Vec<Vec<u8>>,
}

impl Requests {
    /// `GET path` to `host`, with `Authorization: Bearer <token>` for each token (none: one
    /// request without the header).
    pub fn new(host: &str, path: &str, tokens: &[String]) -> Self {
        let head = |auth: Option<&str>| {
            let mut r = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
            if let Some(t) = auth {
                r.push_str("Authorization: Bearer ");
                r.push_str(t);
                r.push_str("\r\n");
            }
            r.push_str("\r\n");
            r.into_bytes()
        };
        let heads = if tokens.is_empty() {
            vec![head(None)]
        } else {
            tokens.iter().map(|t| head(Some(t))).collect()
        };
        Self { heads }
    }

    /// The request of device `i` (round robin).
    pub fn get(&self, i: usize) -> &[u8] {
        &self.heads[i % self.heads.len()]
    }

    /// How many distinct requests there are.
    pub fn len(&self) -> usize {
        self.heads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_204_without_length() {
        let head = b"HTTP/1.1 204 No Content\r\nnpub-poll-interval: 60\r\n\r\n";
        let (n, status, len, close) = parse_head(head).unwrap().unwrap();
        assert_eq!((n, status, len, close), (head.len(), 204, 0, false));
    }

    #[test]
    fn rejects_chunked_bodies() {
        let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(matches!(parse_head(head), Err(HttpError::Malformed(_))));
    }

    #[test]
    fn survives_a_partial_head() {
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
    }
}
