//! A connection handed from the device lane to hyper: the bytes the lane read but did not answer
//! (the request it leaves to the router, and any pipelined after it) are read again first.
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, with `unread` in front of whatever it reads next.
pub(crate) struct Rewind<T> {
    unread: Vec<u8>,
    at: usize,
    inner: T,
}

impl<T> Rewind<T> {
    pub(crate) fn new(unread: Vec<u8>, inner: T) -> Self {
        Self {
            unread,
            at: 0,
            inner,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.unread.len() {
            let n = buf.remaining().min(this.unread.len() - this.at);
            buf.put_slice(&this.unread[this.at..this.at + n]);
            this.at += n;
            if this.at == this.unread.len() {
                this.unread = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn survives_a_small_reader_buffer_and_reads_the_rest_after() {
        let (mut near, far) = tokio::io::duplex(64);
        let mut r = Rewind::new(b"GET / HTTP/1.1\r\n".to_vec(), far);
        near.write_all(b"Host: x\r\n\r\n").await.unwrap();
        drop(near);
        let mut got = Vec::new();
        let mut small = [0u8; 5];
        loop {
            let n = r.read(&mut small).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&small[..n]);
        }
        assert_eq!(got, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    }
}
