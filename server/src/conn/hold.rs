//! Writes held back during a TLS handshake, so that what the server says after it leaves with
//! the first answer: a NewSessionTicket that rustls writes at the handshake's end (tokio-rustls
//! flushes it as the handshake completes) and the poll's 204 go out in one `send`, one TCP
//! segment, where they left in two (the device saw two frames: 54 B of headers more, in some
//! runs). Plain connections never hold.
//!
//! | state       | a write                                   | a flush          | a read                        |
//! |-------------|-------------------------------------------|------------------|-------------------------------|
//! | `Holding`   | kept (the handshake's flights, a ticket)  | nothing          | what is kept is sent first: the peer must hear the flight before it answers |
//! | `OneMore`   | (after the handshake) kept with what was, all sent as one; a write over [`JOIN_MAX`] is not copied: what is kept goes first | sends what is kept | nothing: no client waits for a ticket, and tokio-rustls reads on after every request it hands over |
//! | `Draining`  | what is kept is sent first                | the same         | the same                      |
//! | `Off`       | straight to the socket                    | the socket's     | the socket's                  |
//!
//! What is kept is at most a handshake's flights ([`HOLD_MAX`]) and one answer ([`JOIN_MAX`]); a connection dropped with bytes kept (a failed handshake's alert) sends them with one
//! non-blocking `send`, best effort, as a socket closing with them queued would.
use std::io;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

/// The largest write joined to what is kept: a poll's answer (a few hundred bytes) is, a pack's
/// records (tens of KiB) are not copied.
pub(crate) const JOIN_MAX: usize = 4096;

/// The most a handshake keeps: a server flight with a certificate chain is a few KiB. Past it
/// the hold sends what it kept and lets the write through, so what one connection keeps is
/// bounded whatever rustls writes (TLS 1.2, a HelloRetryRequest, alerts) and however long the
/// peer does not read.
pub(crate) const HOLD_MAX: usize = 32 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Holding,
    OneMore,
    Draining,
    Off,
}

/// The writes a connection holds back.
#[derive(Debug)]
pub(crate) struct Hold {
    state: State,
    bytes: Vec<u8>,
    /// How much of `bytes` has been sent.
    sent: usize,
}

impl Hold {
    /// Nothing held: a plain connection.
    pub(crate) fn off() -> Self {
        Self {
            state: State::Off,
            bytes: Vec::new(),
            sent: 0,
        }
    }

    /// Holding from the start: a connection whose TLS handshake begins.
    pub(crate) fn handshake() -> Self {
        Self {
            state: State::Holding,
            ..Self::off()
        }
    }

    /// The handshake is over: the next write joins what is kept, then all of it goes.
    pub(crate) fn handshake_done(&mut self) {
        if self.state == State::Holding {
            self.state = State::OneMore;
            // What is kept now is the ticket, a few hundred bytes; the room the server's flight
            // took goes back, or a client that never asks anything would keep it until the idle
            // timeout.
            self.bytes.shrink_to_fit();
        }
    }

    /// Nothing more is held: what is kept goes at the next write, flush or read. For TLS 1.2,
    /// whose handshake ends with the server's own Finished, which the client waits for.
    pub(crate) fn release(&mut self) {
        if self.state != State::Off {
            self.state = State::Draining;
        }
    }

    /// Sends what is kept; `Ready(Ok)` once there is nothing left (the hold is then off).
    fn drain(&mut self, socket: &mut TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.bytes.len() {
            let n =
                ready!(std::pin::Pin::new(&mut *socket).poll_write(cx, &self.bytes[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if self.state != State::Holding {
            self.state = State::Off;
            self.bytes = Vec::new();
            self.sent = 0;
        }
        Poll::Ready(Ok(()))
    }

    /// Before a read: what is kept goes first.
    pub(crate) fn before_read(
        &mut self,
        socket: &mut TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if matches!(self.state, State::Off | State::OneMore) {
            return Poll::Ready(Ok(()));
        }
        let drained = self.drain(socket, cx);
        if self.state == State::Holding && matches!(drained, Poll::Ready(Ok(()))) {
            self.bytes.clear();
            self.sent = 0;
        }
        drained
    }

    /// A write of `bufs` (`len` bytes in all): `Some` if the hold took it (kept, or joined and
    /// sent), `None` if it goes to the socket now, nothing being kept any more.
    pub(crate) fn write(
        &mut self,
        socket: &mut TcpStream,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
        len: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        match self.state {
            State::Off => None,
            State::Holding if self.bytes.len().saturating_add(len) <= HOLD_MAX => {
                bufs.iter().for_each(|b| self.bytes.extend_from_slice(b));
                Some(Poll::Ready(Ok(len)))
            }
            // More than a handshake's flights: what is kept goes first, then this write, straight
            // (still holding after it), so a peer that never reads keeps no more than this.
            State::Holding => match self.drain(socket, cx) {
                Poll::Ready(Ok(())) => {
                    self.bytes.clear();
                    self.sent = 0;
                    None
                }
                Poll::Ready(Err(e)) => Some(Poll::Ready(Err(e))),
                Poll::Pending => Some(Poll::Pending),
            },
            State::OneMore if len <= JOIN_MAX => {
                bufs.iter().for_each(|b| self.bytes.extend_from_slice(b));
                self.state = State::Draining;
                // Taken whether or not it all leaves now: the rest goes at the next call.
                if let Poll::Ready(Err(e)) = self.drain(socket, cx) {
                    return Some(Poll::Ready(Err(e)));
                }
                Some(Poll::Ready(Ok(len)))
            }
            State::OneMore | State::Draining => {
                self.state = State::Draining;
                match self.drain(socket, cx) {
                    Poll::Ready(Ok(())) => None,
                    Poll::Ready(Err(e)) => Some(Poll::Ready(Err(e))),
                    Poll::Pending => Some(Poll::Pending),
                }
            }
        }
    }

    /// Before a flush or shutdown: nothing while the handshake holds, else what is kept goes.
    pub(crate) fn flush(
        &mut self,
        socket: &mut TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        match self.state {
            State::Off | State::Holding => Poll::Ready(Ok(())),
            State::OneMore | State::Draining => {
                self.state = State::Draining;
                self.drain(socket, cx)
            }
        }
    }

    /// A connection dropped with bytes kept: one non-blocking `send` of them, best effort.
    pub(crate) fn on_drop(&mut self, socket: &TcpStream) {
        if self.sent < self.bytes.len() {
            let _ = socket.try_write(&self.bytes[self.sent..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::AsyncReadExt as _;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (accepted.unwrap().0, client.unwrap())
    }

    async fn write(hold: &mut Hold, socket: &mut TcpStream, bytes: &[u8]) -> Option<usize> {
        poll_fn(|cx| {
            let slices = [io::IoSlice::new(bytes)];
            match hold.write(socket, cx, &slices, bytes.len()) {
                None => Poll::Ready(None),
                Some(p) => p.map(|r| Some(r.unwrap())),
            }
        })
        .await
    }

    /// What the peer can read now (within 200 ms).
    async fn readable(peer: &mut TcpStream) -> Vec<u8> {
        let mut buf = vec![0u8; 64 * 1024];
        match tokio::time::timeout(std::time::Duration::from_millis(200), peer.read(&mut buf)).await
        {
            Ok(n) => buf[..n.unwrap()].to_vec(),
            Err(_) => Vec::new(),
        }
    }

    #[tokio::test]
    async fn holds_the_handshake_until_a_read_and_the_ticket_until_the_first_answer() {
        let (mut socket, mut peer) = pair().await;
        let mut hold = Hold::handshake();
        assert_eq!(write(&mut hold, &mut socket, b"flight").await, Some(6));
        poll_fn(|cx| hold.flush(&mut socket, cx)).await.unwrap();
        assert!(
            readable(&mut peer).await.is_empty(),
            "a flush sends nothing"
        );
        poll_fn(|cx| hold.before_read(&mut socket, cx))
            .await
            .unwrap();
        assert_eq!(
            readable(&mut peer).await,
            b"flight",
            "a read sends it first"
        );

        assert_eq!(write(&mut hold, &mut socket, b"ticket").await, Some(6));
        poll_fn(|cx| hold.flush(&mut socket, cx)).await.unwrap();
        hold.handshake_done();
        // tokio-rustls reads on after the request it hands over: that sends nothing yet.
        poll_fn(|cx| hold.before_read(&mut socket, cx))
            .await
            .unwrap();
        assert!(readable(&mut peer).await.is_empty());
        assert_eq!(write(&mut hold, &mut socket, b"+204").await, Some(4));
        assert_eq!(readable(&mut peer).await, b"ticket+204", "one send");
        // Off now: writes go straight to the socket.
        assert_eq!(write(&mut hold, &mut socket, b"next").await, None);
    }

    #[tokio::test]
    async fn sends_what_it_holds_before_a_large_write_without_copying_it() {
        let (mut socket, mut peer) = pair().await;
        let mut hold = Hold::handshake();
        write(&mut hold, &mut socket, b"ticket").await;
        hold.handshake_done();
        let large = vec![7u8; JOIN_MAX + 1];
        assert_eq!(write(&mut hold, &mut socket, &large).await, None);
        assert_eq!(readable(&mut peer).await, b"ticket");
    }

    #[tokio::test]
    async fn keeps_no_room_for_the_flight_once_the_handshake_is_done() {
        let (mut socket, mut peer) = pair().await;
        let mut hold = Hold::handshake();
        write(&mut hold, &mut socket, &[5u8; 4000]).await;
        poll_fn(|cx| hold.before_read(&mut socket, cx))
            .await
            .unwrap();
        let mut got = 0;
        while got < 4000 {
            got += readable(&mut peer).await.len();
        }
        write(&mut hold, &mut socket, &[6u8; 200]).await;
        hold.handshake_done();
        assert!(
            hold.bytes.capacity() < 1024,
            "a ticket's room, not the flight's: {}",
            hold.bytes.capacity()
        );
    }

    #[tokio::test]
    async fn never_keeps_more_than_hold_max_during_a_handshake() {
        let (mut socket, mut peer) = pair().await;
        let mut hold = Hold::handshake();
        let flight = vec![1u8; HOLD_MAX];
        assert_eq!(write(&mut hold, &mut socket, &flight).await, Some(HOLD_MAX));
        assert_eq!(
            write(&mut hold, &mut socket, b"x").await,
            None,
            "past HOLD_MAX the write goes straight"
        );
        assert!(hold.bytes.is_empty(), "nothing kept after it");
        let mut got = Vec::new();
        while got.len() < HOLD_MAX {
            let more = readable(&mut peer).await;
            assert!(!more.is_empty(), "the kept flight was sent");
            got.extend(more);
        }
        assert_eq!(got, flight);
        // Still holding: the next flight is kept again.
        assert_eq!(write(&mut hold, &mut socket, b"next").await, Some(4));
    }

    #[tokio::test]
    async fn a_dropped_connection_sends_what_it_held() {
        let (mut socket, mut peer) = pair().await;
        let mut hold = Hold::handshake();
        write(&mut hold, &mut socket, b"alert").await;
        hold.on_drop(&socket);
        drop(socket);
        assert_eq!(readable(&mut peer).await, b"alert");
    }
}
