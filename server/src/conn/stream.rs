//! A connection as the device lane and hyper see it: plain TCP, or TLS over it (`crate::tls`).
//! The lane works plain TCP with system calls of its own (`recv`, `send`, `sendfile`) and a TLS
//! stream through rustls; hyper reads and writes either through this type.
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::{Activity, Watched};
use crate::tls::client::DeviceName;

/// One accepted connection.
pub(crate) enum Stream {
    Plain(Watched),
    /// Boxed: rustls's connection state is a few kilobytes, a plain connection's nothing.
    Tls(Box<TlsConn>),
}

/// A connection after its TLS handshake.
pub(crate) struct TlsConn {
    pub(crate) io: tokio_rustls::server::TlsStream<Watched>,
    /// The device its client certificate names (`--client-ca`).
    pub(crate) device: Option<DeviceName>,
}

impl Stream {
    /// What the connection is doing (the TCP bytes under TLS).
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        match self {
            Stream::Plain(io) => &io.activity,
            Stream::Tls(tls) => &tls.io.get_ref().0.activity,
        }
    }

    /// The device the client certificate names, if one was presented.
    pub(crate) fn device(&self) -> Option<&DeviceName> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(tls) => tls.device.as_ref(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut tls.io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut tls.io).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(&mut tls.io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(io) => io.is_write_vectored(),
            Stream::Tls(tls) => tls.io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(io) => Pin::new(io).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(&mut tls.io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(&mut tls.io).poll_shutdown(cx),
        }
    }
}
