//! The accept loop and what bounds a connection's life. `axum::serve` exposes none of these, so
//! the loop drives hyper itself.
//!
//! | Limit                | Flag                | Default | What it stops                                  |
//! |----------------------|---------------------|---------|------------------------------------------------|
//! | header read          | `--header-timeout`  | 30 s    | headers sent a byte at a time; hyper starts this clock when a connection begins waiting for a request, so it is also the **keep-alive idle** limit |
//! | idle connection      | `--idle-timeout`    | 60 s    | a connection on which no byte moves either way while no request is being handled: a client that stopped reading a response (a slow-read attack) or went silent |
//! | request body rate    | `--body-min-rate`   | 512 B/s | a body trickled in (one byte every 5 s): see `body_rate.rs` |
//! | connections in flight | `--max-connections` | 4096   | descriptor exhaustion: one more closes the connection idle the longest, or is answered 503 when none is idle ([`table`]) |
//! | connections per peer | `--max-connections-per-peer` | 64 | one address holding every permit: its 65th closes its own oldest idle one, or is answered 503 ([`table`]) |
//! | open files           | (process)           | hard limit | at start the soft `RLIMIT_NOFILE` is raised to the hard one, and `--max-connections` is lowered to fit under it |
//!
//! None of them cuts off a slow but live transfer: a 2G (GPRS, ~5 kB/s) modem downloading a
//! 1 MB pack keeps bytes moving every few seconds, far inside the idle limit, and no limit bounds
//! a download's total time.
//!
//! With `--tls-cert` every connection first completes a TLS handshake within
//! `--tls-handshake-timeout` (else it is closed and counted: `npub_tls_handshakes_total`), holding
//! its permit meanwhile, so the caps above bound handshakes too. A connection refused for want of
//! room is closed without an answer there (a plain 503 means nothing to a TLS client).
//!
//! Every connection starts in the device lane ([`lane`]), which answers manifest polls and pack
//! downloads itself; at the first request it does not answer, hyper and the router take the
//! connection over for good ([`rewind`]).
pub(crate) mod activity;
pub(crate) mod hold;
pub(crate) mod rewind;
pub(crate) mod stream;
pub mod table;
pub(crate) mod timer;
pub(crate) mod wire;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpListener;

use crate::device::lane;
use crate::ops::metrics::Metrics;
use crate::peer::TrustedProxies;
use crate::state::AppState;
use crate::tls::Tls;
use crate::tls::client::{DeviceName, Rejection};
use activity::{Activity, Answering, Watched};
use stream::{Stream, TlsConn};

/// Descriptors kept for everything that is not a connection: the database and its WAL, pack
/// files being read, staged uploads, the listener.
pub const RESERVED_FDS: u64 = 128;

/// Connections the `--admin-listen` address holds at once (its own, beside `--max-connections`).
pub const ADMIN_CONNECTIONS: usize = 256;

/// Per-connection limits of the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `--header-timeout`.
    pub header_timeout: Duration,
    /// `--idle-timeout`.
    pub idle_timeout: Duration,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one (systemd starts services with a soft limit of
/// 1024 whatever `LimitNOFILE=` allows above it) and returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(soft), Some(hard)) = (limit.current, limit.maximum) else {
        // Unlimited (or unknown): nothing to raise.
        return limit.current.unwrap_or(u64::MAX);
    };
    if soft >= hard {
        return soft;
    }
    let raised = Rlimit {
        current: Some(hard),
        maximum: Some(hard),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(from = soft, to = hard, "raised the open-file limit");
            hard
        }
        Err(e) => {
            tracing::warn!(soft, hard, error = %e, "cannot raise the open-file limit");
            soft
        }
    }
}

/// `--max-connections`, lowered so that every permitted connection has a descriptor with
/// [`RESERVED_FDS`] to spare under `nofile`.
pub fn fit_connections(wanted: usize, nofile: u64) -> usize {
    let room = usize::try_from(nofile.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
    let fitted = wanted.clamp(1, room.max(1));
    if fitted < wanted {
        tracing::warn!(
            wanted,
            fitted,
            nofile,
            "--max-connections lowered to fit the open-file limit; raise LimitNOFILE="
        );
    }
    fitted
}

/// The most a connection's read buffer grows to (hyper's default is about 400 KiB). An upload's
/// body passes through it on its way to disk; 64 uploads at once held 25 MiB in these buffers
/// at the default. 64 KiB still reads a fast upload in large steps, and holds any request head
/// the router takes.
const READ_BUFFER_MAX: usize = 64 * 1024;

/// What a connection is told before it is closed when there is no room for it: the server holds
/// `--max-connections` and none is idle.
const FULL_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 71\r\n\r\n\
{\"error\":\"unavailable\",\"detail\":\"too many connections; retry shortly\"}\n";

/// The same when its own address holds `--max-connections-per-peer`, all of them answering.
const PEER_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 118\r\n\r\n\
{\"error\":\"unavailable\",\"detail\":\"too many connections from this address (--max-connections-per-peer); retry shortly\"}\n";

/// Who is in front of the server: the reverse proxies believed, and the TLS it speaks itself.
#[derive(Debug, Clone)]
pub struct Front {
    /// `--trusted-proxy`.
    pub trusted: Arc<TrustedProxies>,
    /// `--tls-cert`.
    pub tls: Option<Arc<Tls>>,
}

/// The accept loop: every connection gets the limits of [`Limits`] and holds one of
/// `max_connections` permits; a connection that finds none is answered 503 and closed, so the
/// process never runs out of descriptors while it can still accept. Accept errors (e.g.
/// `EMFILE`) are logged and retried after a pause instead of spinning. On `shutdown`, stops
/// accepting, closes idle connections and lets requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    state: AppState,
    limits: Limits,
    table: Arc<table::Table>,
    front: Front,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let Front { trusted, tls } = front;
    let metrics = Arc::clone(&state.metrics);
    let lane = Arc::new(lane::Lane::new(Arc::new(state), limits.header_timeout));
    // Every connection holds a receiver; a stop is a send, and it is over once all are dropped.
    let (stop, _) = tokio::sync::watch::channel(());
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(READ_BUFFER_MAX)
        .keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::error!(error = %e, "accept error");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A poll's answer is one small write: Nagle would hold it back waiting for an ACK the
        // device delays. hyper writes a response's head and body in one vectored write, so
        // nothing is split into more packets for it.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "TCP_NODELAY");
        }
        let activity = Arc::new(Activity::new());
        let slot = match table.admit(peer.ip(), Arc::clone(&activity)) {
            Ok(slot) => slot,
            Err(refused) => {
                tracing::debug!(%peer, reason = refused.label(), "connection refused: no room");
                if tls.is_some() {
                    // No plain answer on a TLS port, and no handshake spent on a refusal: a
                    // TLS client sees the connection closed and retries as after a reset.
                    drop(stream);
                } else {
                    tokio::spawn(refuse_busy(stream, refused));
                }
                continue;
            }
        };
        let router = router.clone();
        let trusted = Arc::clone(&trusted);
        let tls = tls.clone();
        let metrics = Arc::clone(&metrics);
        let io = Watched {
            inner: stream,
            activity: Arc::clone(&activity),
            // Under TLS the handshake's writes wait for its first read, and the ticket rustls
            // writes at its end for the first answer (`hold.rs`).
            hold: if tls.is_some() {
                hold::Hold::handshake()
            } else {
                hold::Hold::off()
            },
        };
        let idle = limits.idle_timeout;
        let lane = Arc::clone(&lane);
        let builder = builder.clone();
        let mut stop = stop.subscribe();
        tokio::spawn(async move {
            let connection = async {
                let io = match &tls {
                    None => Stream::Plain(io),
                    Some(tls) => match handshake(tls, io, &metrics, peer).await {
                        Some(io) => io,
                        None => return,
                    },
                };
                let tracked = Tracked {
                    router,
                    peer,
                    trusted,
                    activity: Arc::clone(&activity),
                    device: io.device().cloned(),
                };
                let io = match lane::serve(&lane, io, &mut stop).await {
                    lane::End::Closed => return,
                    lane::End::HandOff(io) => io,
                };
                let service = hyper_util::service::TowerToHyperService::new(tracked);
                let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(io), service);
                let mut conn = std::pin::pin!(conn);
                let ended = tokio::select! {
                    ended = conn.as_mut() => ended,
                    _ = stop.changed() => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            };
            tokio::select! {
                // The connection first: it is what woke the task, nearly always.
                biased;
                () = connection => {}
                () = activity.idle_for(idle) => {
                    tracing::debug!(%peer, "idle connection closed");
                }
                () = slot.shed() => {
                    tracing::debug!(%peer, "idle connection closed to make room for another");
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    lane.stop();
    let _ = stop.send(());
    stop.closed().await;
    Ok(())
}

/// The router, with the request's client address put into every request as
/// `ConnectInfo<SocketAddr>` (what `axum::serve` does with the TCP peer; here the client a
/// trusted proxy names, `crate::peer`), and each request counted as being handled until its
/// response head is ready and as being answered until its body's last byte is sent.
#[derive(Clone)]
struct Tracked {
    router: axum::Router,
    peer: SocketAddr,
    trusted: Arc<TrustedProxies>,
    activity: Arc<Activity>,
    /// The device the connection's client certificate names: put into every request for the
    /// `Device` extractor (`device/auth.rs`).
    device: Option<DeviceName>,
}

/// A response body that keeps its request counted as being answered until it is sent (hyper
/// drops the body after its last frame, or when the connection dies).
struct AnsweringBody {
    body: axum::body::Body,
    _answering: Answering,
}

impl http_body::Body for AnsweringBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Decrements [`Activity::handling`] when the request's future ends, however it ends.
struct Handling(Arc<Activity>);

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.handling.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

type RouterFuture<B> = <axum::Router as tower_service::Service<axum::http::Request<B>>>::Future;

impl<B> tower_service::Service<axum::http::Request<B>> for Tracked
where
    axum::Router: tower_service::Service<
            axum::http::Request<B>,
            Response = axum::response::Response,
            Error = Infallible,
        >,
    RouterFuture<B>: Send + 'static,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<axum::http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        self.activity.handling.fetch_add(1, Ordering::Relaxed);
        let handling = Handling(Arc::clone(&self.activity));
        let answering = Answering::new(&self.activity);
        let client = self.trusted.client(self.peer, request.headers());
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(client));
        if let Some(device) = &self.device {
            request.extensions_mut().insert(device.clone());
        }
        let future = self.router.call(request);
        Box::pin(async move {
            let response = future.await;
            drop(handling);
            response.map(|response| {
                response.map(|body| {
                    axum::body::Body::new(AnsweringBody {
                        body,
                        _answering: answering,
                    })
                })
            })
        })
    }
}

/// The TLS handshake of a connection, within the handshake timeout; `None` (counted, and logged
/// when a client certificate was refused) closes the connection.
async fn handshake(tls: &Tls, io: Watched, metrics: &Metrics, peer: SocketAddr) -> Option<Stream> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let io = match tokio::time::timeout(tls.handshake_timeout(), acceptor.accept(io)).await {
        Ok(Ok(io)) => io,
        Ok(Err(e)) => {
            metrics.observe_tls_handshake("failed");
            let refused = e
                .get_ref()
                .and_then(|e| e.downcast_ref::<rustls::Error>())
                .and_then(Rejection::of_handshake);
            match refused {
                Some(why) => {
                    metrics.observe_client_cert_rejection(why.label());
                    tracing::warn!(%peer, reason = why.reason(), error = %e, "client certificate refused");
                }
                None => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            }
            return None;
        }
        Err(_) => {
            metrics.observe_tls_handshake("timeout");
            tracing::debug!(%peer, "TLS handshake not finished in time; closed");
            return None;
        }
    };
    let mut io = io;
    if io.get_ref().1.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
        // What rustls wrote as the handshake ended (a ticket) leaves with the first answer.
        io.get_mut().0.hold.handshake_done();
    } else {
        // TLS 1.2 ends with the server's Finished, which the client waits for.
        use tokio::io::AsyncWriteExt as _;
        io.get_mut().0.hold.release();
        if !matches!(
            tokio::time::timeout(tls.handshake_timeout(), io.flush()).await,
            Ok(Ok(()))
        ) {
            metrics.observe_tls_handshake("failed");
            return None;
        }
    }
    let session = io.get_ref().1;
    let resumed = session.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    metrics.observe_tls_handshake(if resumed { "resumed" } else { "full" });
    let device = match session.peer_certificates().and_then(<[_]>::first) {
        None => None,
        Some(cert) => match crate::tls::client::device_name(cert) {
            Ok(name) => Some(name),
            Err(why) => {
                metrics.observe_client_cert_rejection(why.label());
                tracing::warn!(%peer, reason = why.reason(), "client certificate refused");
                return None;
            }
        },
    };
    Some(Stream::Tls(Box::new(TlsConn { io, device })))
}

/// Writes the 503 for `why` (bounded by a second, so a client that does not read cannot hold the
/// socket) and closes.
async fn refuse_busy(mut stream: tokio::net::TcpStream, why: table::Refused) {
    use tokio::io::AsyncWriteExt as _;
    let response = match why {
        table::Refused::Full => FULL_RESPONSE,
        table::Refused::Peer => PEER_RESPONSE,
    };
    let write = async {
        stream.write_all(response).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_connections_under_the_open_file_limit() {
        assert_eq!(fit_connections(4096, 1024), 1024 - RESERVED_FDS as usize);
        assert_eq!(fit_connections(100, 1024), 100);
        assert_eq!(fit_connections(100, 10), 1);
        assert_eq!(fit_connections(0, 1 << 20), 1);
    }

    /// Polls `idle` once after letting the (paused) clock run `secs`.
    async fn after(secs: u64, idle: &tokio::task::JoinHandle<()>) -> bool {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        idle.is_finished()
    }

    #[tokio::test(start_paused = true)]
    async fn survives_a_long_handler_and_a_slow_transfer_then_closes_once_idle() {
        let activity = Arc::new(Activity::new());
        let watch = |a: &Arc<Activity>| {
            let a = Arc::clone(a);
            tokio::spawn(async move { a.idle_for(Duration::from_secs(60)).await })
        };
        // A handler working for ten minutes is not idle.
        activity.handling.fetch_add(1, Ordering::Relaxed);
        let idle = watch(&activity);
        assert!(!after(600, &idle).await);
        drop(Handling(Arc::clone(&activity)));
        // A slow transfer moving a byte every 30 s is not idle either.
        for _ in 0..20 {
            assert!(!after(30, &idle).await);
            activity.touch();
        }
        // Silence: closed once the idle time is over, not before.
        assert!(!after(59, &idle).await);
        assert!(after(2, &idle).await);
    }
}
