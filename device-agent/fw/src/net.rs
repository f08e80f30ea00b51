//! The network: the LAN9118, smoltcp (DHCPv4 and one TCP socket), and the transport's [`Link`]
//! over them.
//!
//! Polled, no interrupts but the SysTick: every link call runs `Interface::poll` until it can
//! answer, and sleeps (`wfi`, woken by the 1 ms tick) only when the controller has no frame
//! waiting. The TCP receive window is the socket's receive buffer; it is kept below the LAN9118's
//! RX FIFO (10.5 KB in QEMU's model, which drops what does not fit), so a full window never
//! overruns the chip.
use core::net::Ipv4Addr;

use device_agent::http_io::{Clock, Link};
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use smoltcp::iface::{
    Config, Interface, PollIngressSingleResult, SocketHandle, SocketSet, SocketStorage,
};
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Cidr};

use crate::clock::SysClock;
use crate::lan9118::Lan9118;

/// The TCP receive buffer (= the largest window offered).
pub const TCP_RX_BYTES: usize = 8 * 1024;
/// The TCP send buffer: a request is well under 1 KiB.
pub const TCP_TX_BYTES: usize = 2 * 1024;
/// How long a `read` waits before it returns `TimedOut` (the transport then checks its clocks).
const TICK_MS: u64 = 20;
/// A write that cannot go out for this long (peer window shut) fails.
const WRITE_MS: u64 = 10_000;
/// smoltcp's delayed ACK.
pub const ACK_DELAY_MS: u64 = 10;
/// The delayed ACK during a TLS handshake: longer than a resumed handshake's work on the
/// server's flight (~40 ms under QEMU's `-icount shift=0`), well under the 200 ms a peer waits
/// at least before it resends (Linux's minimum RTO) and RFC 1122's 500 ms.
pub const HANDSHAKE_ACK_DELAY_MS: u64 = 100;
/// How long a TLS close waits for the server's FIN after its `close_notify` ([`Net::await_fin`]).
/// npub-server closes at once (under a millisecond on the host, a few in QEMU's user network);
/// a server that does not is reset after this.
pub const FIN_WAIT_MS: u64 = 500;
/// The first ephemeral port; each connection takes the next.
const FIRST_PORT: u16 = 49_152;

/// The interface, its sockets and the controller.
pub struct Net<'s> {
    dev: Lan9118,
    iface: Interface,
    sockets: SocketSet<'s>,
    dhcp: SocketHandle,
    tcp: SocketHandle,
    clock: SysClock,
    address: Option<Ipv4Cidr>,
    router: Option<Ipv4Addr>,
    port: u16,
}

fn now(clock: &mut SysClock) -> Instant {
    Instant::from_millis(clock.now_ms() as i64)
}

impl<'s> Net<'s> {
    /// The stack over `dev`, with socket storage and TCP buffers from the caller (statics).
    pub fn new(
        mut dev: Lan9118,
        storage: &'s mut [SocketStorage<'s>; 2],
        rx: &'s mut [u8],
        tx: &'s mut [u8],
        seed: u64,
    ) -> Self {
        let mut clock = SysClock;
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(dev.mac())));
        config.random_seed = seed;
        let iface = Interface::new(config, &mut dev, now(&mut clock));
        let mut sockets = SocketSet::new(&mut storage[..]);
        let dhcp = sockets.add(dhcpv4::Socket::new());
        let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(rx), tcp::SocketBuffer::new(tx));
        socket.set_nagle_enabled(false);
        socket.set_timeout(Some(Duration::from_secs(30)));
        let tcp = sockets.add(socket);
        Self {
            dev,
            iface,
            sockets,
            dhcp,
            tcp,
            clock,
            address: None,
            router: None,
            port: FIRST_PORT + (seed % 1000) as u16,
        }
    }

    /// One round of the stack: frames in and out, DHCP's news.
    fn poll(&mut self) {
        self.ingress();
        self.egress();
        self.dhcp_news();
    }

    /// Frames out: what the sockets have to send.
    fn egress(&mut self) {
        let t = now(&mut self.clock);
        self.iface.poll_egress(t, &mut self.dev, &mut self.sockets);
    }

    /// Frames in only: what the sockets would answer waits for the next [`Self::poll`].
    fn ingress(&mut self) {
        let t = now(&mut self.clock);
        while self
            .iface
            .poll_ingress_single(t, &mut self.dev, &mut self.sockets)
            != PollIngressSingleResult::None
        {}
    }

    /// DHCP's news: the address and route it configured or withdrew.
    fn dhcp_news(&mut self) {
        let event = self.sockets.get_mut::<dhcpv4::Socket>(self.dhcp).poll();
        match event {
            Some(dhcpv4::Event::Configured(c)) => {
                self.address = Some(c.address);
                self.router = c.router;
                self.iface.update_ip_addrs(|addrs| {
                    addrs.clear();
                    let _ = addrs.push(IpCidr::Ipv4(c.address));
                });
                match c.router {
                    Some(r) => {
                        let _ = self.iface.routes_mut().add_default_ipv4_route(r);
                    }
                    None => {
                        self.iface.routes_mut().remove_default_ipv4_route();
                    }
                }
            }
            Some(dhcpv4::Event::Deconfigured) => {
                self.address = None;
                self.iface.update_ip_addrs(|addrs| addrs.clear());
                self.iface.routes_mut().remove_default_ipv4_route();
            }
            None => {}
        }
    }

    /// Waits for the next tick, unless a frame is already waiting.
    fn idle(&mut self) {
        if !self.dev.rx_pending() {
            cortex_m::asm::wfi();
        }
    }

    /// Runs DHCP until the interface has an address (or `timeout_ms` passes).
    pub fn up(&mut self, timeout_ms: u64) -> Option<(Ipv4Cidr, Option<Ipv4Addr>)> {
        let end = self.clock.now_ms() + timeout_ms;
        loop {
            self.poll();
            if let Some(a) = self.address {
                return Some((a, self.router));
            }
            if self.clock.now_ms() >= end {
                return None;
            }
            self.idle();
        }
    }

    /// Frames received and sent.
    #[allow(dead_code)]
    pub fn frames(&self) -> (u32, u32) {
        self.dev.frames
    }

    /// How long the socket may hold an ACK back, waiting for data to carry it: smoltcp's 10 ms,
    /// or [`HANDSHAKE_ACK_DELAY_MS`] while a TLS handshake works through the server's flight (its
    /// ACK then rides with the client's Finished instead of leaving alone).
    pub fn set_ack_delay_ms(&mut self, ms: u64) {
        self.socket().set_ack_delay(Some(Duration::from_millis(ms)));
    }

    /// Sends what is queued (a TLS `close_notify`, with the ACK of the last answer) and waits up
    /// to `ms` for the server's FIN, dropping whatever else arrives; the caller then resets.
    ///
    /// Why wait: a server answers `close_notify` by closing. Reset at once, the device would
    /// race that FIN: when it crossed the reset, the user network (or a NAT) sent it on, the
    /// device answered it with a second reset, and the poll took up to three frames more. Once
    /// the FIN is in, nothing of the server's is left to cross. The FIN is not acknowledged: the
    /// reset that follows at once closes the connection on both sides, one frame where an ACK
    /// then a FIN of the device's own would take two or more.
    pub fn await_fin(&mut self, ms: u64) {
        let until = self.clock.now_ms() + ms;
        self.egress();
        loop {
            self.ingress();
            let s = self.socket();
            while s.can_recv() {
                let _ = s.recv(|b| (b.len(), ()));
            }
            if !s.may_recv() || self.clock.now_ms() >= until {
                return;
            }
            self.egress();
            self.idle();
        }
    }

    fn socket(&mut self) -> &mut tcp::Socket<'s> {
        self.sockets.get_mut::<tcp::Socket>(self.tcp)
    }
}

impl ErrorType for Net<'_> {
    type Error = ErrorKind;
}

impl Read for Net<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        if buf.is_empty() {
            return Ok(0);
        }
        let until = self.clock.now_ms() + TICK_MS;
        loop {
            self.poll();
            let s = self.socket();
            if s.can_recv() {
                let n = s.recv_slice(buf).map_err(|_| ErrorKind::ConnectionReset)?;
                // Tell the peer about the window this opened.
                self.poll();
                return Ok(n);
            }
            if !s.may_recv() {
                // A FIN leaves the socket closing; a reset (or the socket's timeout) closes it.
                return match s.state() {
                    tcp::State::Closed => Err(ErrorKind::ConnectionReset),
                    _ => Ok(0),
                };
            }
            if self.clock.now_ms() >= until {
                return Err(ErrorKind::TimedOut);
            }
            self.idle();
        }
    }
}

impl Write for Net<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Queued only: the bytes leave at the next `flush`, `read` or `close`, in as few
        // segments as the MSS allows (the TLS client's Finished rides with the first request).
        let until = self.clock.now_ms() + WRITE_MS;
        loop {
            let s = self.socket();
            if s.can_send() {
                return s.send_slice(buf).map_err(|_| ErrorKind::BrokenPipe);
            }
            if !s.may_send() {
                return Err(ErrorKind::ConnectionReset);
            }
            if self.clock.now_ms() >= until {
                return Err(ErrorKind::TimedOut);
            }
            // The send buffer is full: let the stack send (and hear ACKs) until it has room.
            self.poll();
            self.idle();
        }
    }

    /// Sends what `write` queued.
    fn flush(&mut self) -> Result<(), ErrorKind> {
        self.poll();
        Ok(())
    }
}

impl Link for Net<'_> {
    fn connect(&mut self, host: &str, port: u16, timeout_ms: u32) -> Result<(), ErrorKind> {
        // No DNS: the server is given by address (in QEMU's user network, 10.0.2.2 is the host).
        let ip: Ipv4Addr = host.parse().map_err(|_| ErrorKind::InvalidInput)?;
        // The guest has no loopback: 127.0.0.1 is the host's, which QEMU's user network calls
        // 10.0.2.2 (a presigned URL names a bucket on the host's loopback; the request's `Host`
        // keeps the name it was signed with).
        let ip = if ip.is_loopback() {
            Ipv4Addr::new(10, 0, 2, 2)
        } else {
            ip
        };
        let until = self.clock.now_ms() + u64::from(timeout_ms);
        self.close();
        while self.address.is_none() {
            if self.clock.now_ms() >= until {
                return Err(ErrorKind::NotConnected);
            }
            self.poll();
            self.idle();
        }
        self.port = if self.port >= 65_000 {
            FIRST_PORT
        } else {
            self.port + 1
        };
        let local = self.port;
        let Self {
            sockets,
            iface,
            tcp,
            ..
        } = self;
        sockets
            .get_mut::<tcp::Socket>(*tcp)
            .connect(iface.context(), (ip, port), local)
            .map_err(|_| ErrorKind::InvalidInput)?;
        // The SYN goes out; then frames in until the SYN-ACK, which is left unanswered: its
        // ACK leaves with the caller's first bytes (a TLS ClientHello, a request), one frame
        // less. Anything else the stack has to say waits as little: the caller writes and
        // flushes (or reads) next.
        loop {
            self.egress();
            self.ingress();
            match self.socket().state() {
                tcp::State::Established => return Ok(()),
                tcp::State::Closed => return Err(ErrorKind::ConnectionRefused),
                _ => {}
            }
            if self.clock.now_ms() >= until {
                self.close();
                return Err(ErrorKind::TimedOut);
            }
            self.idle();
        }
    }

    fn close(&mut self) {
        if self.socket().state() != tcp::State::Closed {
            // What was queued (a TLS `close_notify`) leaves before the reset.
            if self.socket().send_queue() > 0 {
                self.poll();
            }
            self.socket().abort();
            self.poll();
        }
    }
}
