//! The device lane: the accept loop's own HTTP/1.1 for the two requests that are nearly all of a
//! fleet's traffic, a manifest poll and a pack download, answered straight from the poll
//! snapshot with no per-request allocation, and pack bodies sent by the kernel (`sendfile` from
//! the file the snapshot hashed). Anything else is handed to hyper and the router, which then own
//! the connection; their answer is the reference the lane's must equal
//! (`tests/fleet/fast_poll.rs` compares them answer for answer).
//!
//! | Request (HTTP/1.1, no body)                                  | Lane                       | Handed to the router (`reason` label) |
//! |--------------------------------------------------------------|----------------------------|---------------------------------------|
//! | `GET /api/v1/device/manifest`, no query or `?seq=N` (N ≤ 2^63 − 1), a known device token | 204 / 304 / 200 ([`decide::poll`]) | another query (`query`): the router's 400 / 422 |
//! | `GET /api/v1/device/packs/{sha256}` (64 hex), a known device token, its assigned pack, a local store | 200 whole, 206 for one `Range` (`bytes=A-B`, `A-`, `-N`), by `sendfile` | `If-None-Match`, `If-Range`, two `Range`s (`headers`); not assigned, past the end, an object store (`answer`): the router's 304 / 404 / 416 / 307 |
//! | no token, an unknown or revoked one (a device may send no token when its client certificate names it, `--client-ca`) | — | `token`: the router's 401 / 429, counted as an auth failure |
//! | `Expect`, `Upgrade`, `Transfer-Encoding`, a `Content-Length` other than 0, a `Connection` other than `keep-alive` / `close` | — | `headers` |
//! | another method, path or HTTP version                         | —                          | `route` |
//! | a head that does not parse, or is longer than [`HEAD_MAX`]   | —                          | `unparsed`: hyper's 400 / 431 |
//!
//! Over TLS (`--tls-cert`, `conn/stream.rs`) the lane decides the same way and writes through
//! rustls: a poll's answer is one record, a pack body goes to rustls straight from the snapshot's
//! copy in memory ([`TLS_WRITE`] a step), or else in [`TLS_CHUNK`] records read from the file into
//! a buffer the connection keeps (rustls must see the bytes to encrypt them, so `sendfile` cannot
//! serve). A client certificate naming another device than the
//! token's is left to the router, which refuses it and says why (`device/auth.rs`).
//!
//! A hand-off happens at a request boundary, before anything of that request is answered: hyper
//! reads the request again from its first byte ([`Rewind`]), with everything pipelined after it.
//! The lane applies the accept loop's header timeout (also the keep-alive idle limit) and
//! graceful shutdown the way hyper does: a head not complete in time closes the connection, and a
//! stop closes it between requests.
use std::fs::File;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, SystemTime};

use axum::http::HeaderValue;
use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, Interest};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::conn::activity::Watched;
use crate::conn::rewind::Rewind;
use crate::conn::stream::{Stream, TlsConn};
use crate::conn::timer::Deadline;
use crate::conn::wire::Head;
use crate::device::auth::DEVICE_TOKEN_PREFIX;
use crate::device::decide;
use crate::device::routes;
use crate::device::snapshot::{Assignment, Snapshot};
use crate::http::header_text;
use crate::http::ranges;
use crate::ops::metrics::{Metrics, RouteCounter};
use crate::state::AppState;
use crate::tls::client::DeviceName;

/// The longest request head the lane reads; a longer one goes to hyper (which has its own limit).
/// A device's poll is about 200 bytes.
pub(crate) const HEAD_MAX: usize = 4096;
/// The room a connection's head buffer starts with: a poll, a download and what a client
/// pipelines after one, without holding [`HEAD_MAX`] for each of the 10,000 connections of a
/// deployment wave. A head that needs more grows the buffer to [`HEAD_MAX`] once.
const HEAD_START: usize = 1024;
/// Headers the lane parses; a request with more goes to hyper.
const MAX_HEADERS: usize = 32;
/// `If-None-Match` headers the lane considers; more go to hyper.
const MAX_IF_NONE_MATCH: usize = 4;
/// Room for a response head and a 280-byte manifest.
const OUT_CAPACITY: usize = 1024;
/// A pack body over TLS read from its file goes through a buffer of this size (a connection's
/// own, made at its first such download and reused): rustls encrypts what it is given, so
/// `sendfile` cannot serve it.
/// One TLS record's worth of plaintext, so every write fills a record and the head rides in the
/// first one.
const TLS_CHUNK: usize = 16 * 1024;
/// A pack body in memory goes to rustls this much at a time: four full records, which rustls
/// queues (its limit on queued records is 64 KiB, so a slow reader holds no more than before)
/// and tokio-rustls writes in one `writev`, where a record a write cost a system call each.
const TLS_WRITE: usize = 64 * 1024;

/// What the lane shares between connections: the state the snapshot comes from, and the two
/// routes' counters, found once.
pub(crate) struct Lane {
    state: Arc<AppState>,
    manifest: RouteCounter,
    pack: RouteCounter,
    header_timeout: Duration,
    starts: PollStarts,
    /// Set by [`Self::stop`] before the accept loop's stop is sent: what a connection checks
    /// (one load) when it wakes, where polling the channel again cost a lock.
    stopping: AtomicBool,
}

impl Lane {
    pub(crate) fn new(state: Arc<AppState>, header_timeout: Duration) -> Self {
        let manifest = state.metrics.route("GET", routes::MANIFEST_PATH);
        let pack = state.metrics.route("GET", routes::PACK_ROUTE);
        let starts = PollStarts::new(&state.polling.poll_interval);
        Self {
            state,
            manifest,
            pack,
            header_timeout,
            starts,
            stopping: AtomicBool::new(false),
        }
    }

    /// Marks the lane stopping; the caller then sends the stop that wakes every connection.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// How the lane left a connection.
pub(crate) enum End {
    /// Closed: the peer left, a head timed out, a write failed, `Connection: close`, or a stop.
    Closed,
    /// The connection is hyper's from the request that starts the unread bytes on.
    HandOff(Rewind<Stream>),
}

/// Why the lane leaves a request to the router: [`crate::ops::metrics::HANDOFF_REASONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Route,
    Token,
    Query,
    Headers,
    Answer,
    Unparsed,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Reason::Route => "route",
            Reason::Token => "token",
            Reason::Query => "query",
            Reason::Headers => "headers",
            Reason::Answer => "answer",
            Reason::Unparsed => "unparsed",
        }
    }
}

/// What the lane answers a request it keeps.
enum Plan {
    Poll {
        snapshot: Arc<Snapshot>,
        answer: PollPlan,
        close: bool,
        /// The request's time: its last-seen time and its `Date`.
        now: SystemTime,
    },
    Pack {
        file: Arc<File>,
        /// The same bytes in memory: what is sent if the file's filesystem refuses `sendfile`.
        bytes: Option<Bytes>,
        etag: HeaderValue,
        len: u64,
        range: Option<(u64, u64)>,
        close: bool,
        now: SystemTime,
    },
}

/// [`Poll`] with its assignment held (a reference count), so that it outlives the parse.
enum PollPlan {
    Nothing,
    NotModified(Arc<Assignment>),
    Offer(Arc<Assignment>),
}

/// One request head, decided: the lane's plan or the reason it is the router's.
enum Step {
    /// The head is not complete yet.
    More,
    Keep {
        head_len: usize,
        plan: Plan,
    },
    Leave(Reason),
}

/// The bytes of request heads read so far: `bytes[..filled]` of a buffer of zeroed bytes
/// ([`HEAD_START`], grown to [`HEAD_MAX`] when a head needs it), initialised when allocated so
/// that the kernel reads into it without unsafe code.
struct Heads {
    bytes: Vec<u8>,
    filled: usize,
}

impl Heads {
    fn read(&self) -> &[u8] {
        &self.bytes[..self.filled]
    }

    /// Makes room for more of a head that fills the buffer; `false` at [`HEAD_MAX`].
    fn grow(&mut self) -> bool {
        if self.filled < self.bytes.len() {
            return true;
        }
        if self.bytes.len() >= HEAD_MAX {
            return false;
        }
        self.bytes.resize(HEAD_MAX, 0);
        true
    }

    /// Drops the first `n` bytes (an answered head), keeping what was pipelined after it.
    fn consume(&mut self, n: usize) {
        self.bytes.copy_within(n..self.filled, 0);
        self.filled -= n;
    }

    /// What hyper must read first.
    fn into_unread(mut self) -> Vec<u8> {
        self.bytes.truncate(self.filled);
        self.bytes
    }
}

/// Serves `io` until it closes or a request is the router's.
pub(crate) async fn serve(lane: &Lane, io: Stream, stop: &mut watch::Receiver<()>) -> End {
    let mut heads = Heads {
        bytes: vec![0; HEAD_START],
        filled: 0,
    };
    let mut out: Vec<u8> = Vec::with_capacity(OUT_CAPACITY);
    let mut io = io;
    // A TLS connection's pack buffer ([`TLS_CHUNK`]), made at its first download.
    let mut chunk: Vec<u8> = Vec::new();
    // A stop, awaited for the connection's life: the channel's `changed()` is polled once, which
    // registers the task to be woken, and after that a wake checks the lane's flag (where a new
    // `changed()` for every read took the channel's waiter lock twice a request).
    let stopped = stop.changed();
    let mut stopped = std::pin::pin!(stopped);
    let mut stop_registered = false;
    // The header timeout runs from when a request is awaited: the connection's start, then the
    // end of each answer. One timer for the connection's life, set lazily: `deadline` moves with
    // each request, and the timer, when it fires before the deadline, is set to it then (at
    // most once a timeout, where setting it for every request cost as much as the parse).
    let mut awaited = Instant::now();
    let sleep = tokio::time::sleep_until(awaited + lane.header_timeout);
    let sleep = std::pin::pin!(sleep);
    let mut timer = Deadline::new(sleep);
    // When the bytes of the request being decided were read: its latency starts there.
    let mut last_read = awaited;
    loop {
        let deadline = awaited + lane.header_timeout;
        let (head_len, plan) = loop {
            match decide(lane, heads.read(), io.device()) {
                Step::Keep { head_len, plan } => break (head_len, plan),
                Step::Leave(reason) => {
                    lane.state.metrics.observe_handoff(reason.label());
                    return End::HandOff(Rewind::new(heads.into_unread(), io));
                }
                Step::More if !heads.grow() => {
                    lane.state.metrics.observe_handoff(Reason::Unparsed.label());
                    return End::HandOff(Rewind::new(heads.into_unread(), io));
                }
                // Part of a head: the connection is not idle.
                Step::More if heads.filled > 0 => io.activity().touch_at(last_read),
                Step::More => {}
            }
            let waiting = heads.filled == 0;
            // The read first: it is what woke the task, nearly always. It cannot starve the
            // timer: a peer that always has bytes ready fills the head or `HEAD_MAX` at once.
            let read = tokio::select! {
                biased;
                read = read_more(&mut io, &mut heads) => read,
                () = timer.fired() => {
                    if Instant::now() < deadline {
                        timer.reset(deadline);
                        continue;
                    }
                    // The head took longer than the timeout.
                    return End::Closed;
                }
                // Waiting for the next request: a stop closes the connection now.
                () = stop_signal(lane, stopped.as_mut(), &mut stop_registered), if waiting => {
                    return End::Closed;
                }
            };
            match read {
                Ok(n) if n > 0 => last_read = Instant::now(),
                // The peer left, or the read failed.
                _ => return End::Closed,
            }
        };
        let received = last_read;
        let close = match plan {
            Plan::Poll {
                snapshot,
                answer,
                close,
                now,
            } => {
                let status = poll_head(&mut out, &lane.starts, &snapshot, &answer, close, now);
                if send_answer(&mut io, &out).await.is_err() {
                    return End::Closed;
                }
                awaited = Instant::now();
                lane.manifest
                    .observe(status, (awaited - received).as_secs_f64());
                close
            }
            Plan::Pack {
                file,
                bytes,
                etag,
                len,
                range,
                close,
                now,
            } => {
                let (status, offset, count) = pack_head(&mut out, &etag, len, range, close, now);
                lane.pack.observe(status, received.elapsed().as_secs_f64());
                let body = Body {
                    file: &file,
                    bytes: bytes.as_ref(),
                    offset,
                    count,
                };
                // A download may take minutes on a slow link: never the connection closed to
                // make room for another. (A poll's answer is one small write: not counted.)
                let answering = crate::conn::activity::Answering::new(io.activity());
                let sent = match &mut io {
                    Stream::Plain(plain) => send_pack(lane, plain, &out, body).await,
                    Stream::Tls(tls) => {
                        send_pack_tls(tls, &out, body, &mut chunk, &lane.state.metrics).await
                    }
                };
                drop(answering);
                if sent.is_err() {
                    return End::Closed;
                }
                awaited = Instant::now();
                close
            }
        };
        io.activity().touch_at(awaited);
        lane.state.metrics.observe_lane_answer();
        heads.consume(head_len);
        if close || lane.stopping() {
            let _ = io.shutdown().await;
            return End::Closed;
        }
    }
}

/// Ready once the lane is stopping. `stopped` (the channel's `changed()`) is polled until it has
/// registered the task's waker, and never again after it is ready.
fn stop_signal<'f, F: Future>(
    lane: &'f Lane,
    stopped: Pin<&'f mut F>,
    registered: &'f mut bool,
) -> impl Future<Output = ()> + 'f {
    let mut stopped = stopped;
    std::future::poll_fn(move |cx| {
        if lane.stopping() {
            return Poll::Ready(());
        }
        if !*registered {
            if stopped.as_mut().poll(cx).is_ready() {
                // The channel closed or changed without the flag: a stop all the same.
                return Poll::Ready(());
            }
            *registered = true;
        }
        Poll::Pending
    })
}

/// Reads what the connection has into the rest of `heads`; `Ok(0)` at end of stream.
async fn read_more(io: &mut Stream, heads: &mut Heads) -> io::Result<usize> {
    match io {
        Stream::Plain(plain) => read_plain(plain, heads).await,
        Stream::Tls(tls) => {
            let n = tls.io.read(&mut heads.bytes[heads.filled..]).await?;
            heads.filled += n;
            Ok(n)
        }
    }
}

/// [`read_more`] on plain TCP.
///
/// A read that does not fill the room it was given took everything the kernel had queued, so it
/// also clears the socket's readiness: the next read then waits for epoll's next event instead
/// of trying a `recv` that can only say `EAGAIN` (one system call a request saved; nginx does
/// the same). tokio only clears readiness that no newer event has set since.
async fn read_plain(io: &Watched, heads: &mut Heads) -> io::Result<usize> {
    let socket = &io.inner;
    loop {
        socket.readable().await?;
        let room = &mut heads.bytes[heads.filled..];
        let want = room.len();
        let mut got = 0;
        let read = socket.try_io(Interest::READABLE, || {
            let (n, _) = rustix::net::recv(socket, &mut *room, rustix::net::RecvFlags::empty())?;
            got = n;
            if n > 0 && n < want {
                // Drained: report WouldBlock so that tokio clears readiness; `got` has the count.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        match read {
            Ok(n) => {
                heads.filled += n;
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => {
                heads.filled += got;
                return Ok(got);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Sends a poll's answer: one `send` on plain TCP, one TLS record on TLS.
async fn send_answer(io: &mut Stream, bytes: &[u8]) -> io::Result<()> {
    match io {
        Stream::Plain(plain) => send_all(plain, bytes, rustix::net::SendFlags::NOSIGNAL).await,
        Stream::Tls(tls) => {
            tls.io.write_all(bytes).await?;
            tls.io.flush().await
        }
    }
}

/// Sends all of `bytes` with `flags`, straight to the socket: tried at once (a socket with room
/// takes a poll's answer in one call), waiting for room only when the kernel has none.
async fn send_all(io: &Watched, bytes: &[u8], flags: rustix::net::SendFlags) -> io::Result<()> {
    let socket = &io.inner;
    let mut sent = 0;
    while sent < bytes.len() {
        let send = || rustix::net::send(socket, &bytes[sent..], flags).map_err(io::Error::from);
        let n = match socket.try_io(Interest::WRITABLE, send) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                socket.async_io(Interest::WRITABLE, send).await?
            }
            Err(e) => return Err(e),
        };
        sent += n;
    }
    Ok(())
}

/// Decides the request at the start of `buf`.
fn decide(lane: &Lane, buf: &[u8], certified: Option<&DeviceName>) -> Step {
    if buf.is_empty() {
        return Step::More;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let head_len = match request.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Step::More,
        Err(_) => return Step::Leave(Reason::Unparsed),
    };
    match plan(lane, &request, certified) {
        Ok(plan) => Step::Keep { head_len, plan },
        Err(reason) => Step::Leave(reason),
    }
}

/// The headers the lane reads, from one parsed head.
#[derive(Default)]
struct Seen<'h> {
    authorization: Option<&'h [u8]>,
    authorizations: usize,
    range: Option<&'h [u8]>,
    ranges: usize,
    if_none_match: [&'h [u8]; MAX_IF_NONE_MATCH],
    if_none_matches: usize,
    close: bool,
}

impl<'h> Seen<'h> {
    fn of(headers: &[httparse::Header<'h>]) -> Result<Self, Reason> {
        let mut seen = Seen::default();
        for h in headers {
            let name = h.name.as_bytes();
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            if is("authorization") {
                seen.authorization = Some(h.value);
                seen.authorizations += 1;
            } else if is("range") {
                seen.range = Some(h.value);
                seen.ranges += 1;
            } else if is("if-none-match") {
                let slot = seen
                    .if_none_match
                    .get_mut(seen.if_none_matches)
                    .ok_or(Reason::Headers)?;
                *slot = h.value;
                seen.if_none_matches += 1;
            } else if is("content-length") {
                if h.value.trim_ascii() != b"0" {
                    return Err(Reason::Headers);
                }
            } else if is("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        seen.close = true;
                    } else if !token.eq_ignore_ascii_case(b"keep-alive") && !token.is_empty() {
                        return Err(Reason::Headers);
                    }
                }
            } else if is("transfer-encoding") || is("expect") || is("upgrade") || is("if-range") {
                return Err(Reason::Headers);
            }
        }
        Ok(seen)
    }

    fn if_none_match(&self) -> impl Iterator<Item = &'h [u8]> + '_ {
        self.if_none_match[..self.if_none_matches].iter().copied()
    }
}

/// The plan for a parsed request, or why it is the router's.
fn plan(
    lane: &Lane,
    request: &httparse::Request<'_, '_>,
    certified: Option<&DeviceName>,
) -> Result<Plan, Reason> {
    let (Some("GET"), Some(target), Some(1)) = (request.method, request.path, request.version)
    else {
        return Err(Reason::Route);
    };
    let (route, query) = route(target).ok_or(Reason::Route)?;
    let seen = Seen::of(request.headers)?;
    // The Device extractor's rule, before anything else is looked at (the router answers 401
    // and counts the failure).
    let token = match (seen.authorizations, seen.authorization) {
        (1, Some(value)) => Some(
            crate::auth::bearer_token(value)
                .filter(|t| t.starts_with(DEVICE_TOKEN_PREFIX.as_bytes()))
                .ok_or(Reason::Token)?,
        ),
        // No token: a client certificate alone may name the device.
        (0, None) if certified.is_some() => None,
        _ => return Err(Reason::Token),
    };
    let snapshot = lane.state.polling.cache.get();
    let enrolled = match (token, certified) {
        (Some(token), _) => snapshot.enrolled(token),
        (None, Some(name)) => snapshot.enrolled_by_id(&name.0),
        (None, None) => None,
    }
    .ok_or(Reason::Token)?;
    let device = &enrolled.entry;
    // A client certificate naming another device: the router refuses it, and says why.
    if certified.is_some_and(|name| *name.0 != *device.id) {
        return Err(Reason::Token);
    }
    let now = SystemTime::now();
    match route {
        Route::Manifest => {
            let seq = match query {
                None | Some("") => 0,
                Some(q) => seq(q).ok_or(Reason::Query)?,
            };
            let answer = match decide::poll(
                &lane.state.polling.last_seen,
                device,
                enrolled.assignment.as_ref(),
                snapshot.window(&device.group),
                seq,
                crate::time::ms_of(now),
                |etag| ranges::none_match_values(seen.if_none_match(), etag),
            ) {
                decide::Poll::Nothing => PollPlan::Nothing,
                decide::Poll::NotModified(a) => PollPlan::NotModified(Arc::clone(a)),
                decide::Poll::Offer(a) => PollPlan::Offer(Arc::clone(a)),
            };
            Ok(Plan::Poll {
                snapshot,
                answer,
                close: seen.close,
                now,
            })
        }
        Route::Pack(sha) => {
            if query.is_some() || seen.if_none_matches > 0 || seen.ranges > 1 {
                return Err(Reason::Headers);
            }
            let range = match seen.range {
                None => None,
                Some(value) => Some(header_text::text(value).ok_or(Reason::Headers)?),
            };
            let conditions = decide::Conditions {
                range,
                ..decide::Conditions::default()
            };
            // The lane sends 200 and 206 from a file; 304, 404, 416 and the store's answers
            // are the router's to render.
            let decide::Pack::Send { entry, range } =
                decide::pack(&snapshot, device, sha, &conditions)
            else {
                return Err(Reason::Answer);
            };
            let decide::Source::File(file, _) = decide::source(entry) else {
                return Err(Reason::Answer);
            };
            let range = match range {
                ranges::Answer::Full => None,
                ranges::Answer::Partial { start, end } => Some((start, end)),
                ranges::Answer::Unsatisfiable | ranges::Answer::NotModified => {
                    return Err(Reason::Answer);
                }
            };
            Ok(Plan::Pack {
                file: Arc::clone(file),
                bytes: entry.bytes.clone(),
                etag: entry.etag.clone(),
                len: entry.len,
                range,
                close: seen.close,
                now,
            })
        }
    }
}

/// The lane's two routes.
#[derive(Debug, PartialEq, Eq)]
enum Route<'p> {
    Manifest,
    /// A pack, by its SHA-256 in lowercase hex.
    Pack(&'p str),
}

/// The route of a request target and its query (after the first `?`), or `None` for a target
/// that is neither route exactly. Matched by prefix, so that the poll's path is compared once and
/// never searched.
fn route(target: &str) -> Option<(Route<'_>, Option<&str>)> {
    let (route, rest) = if let Some(rest) = target.strip_prefix(routes::MANIFEST_PATH) {
        (Route::Manifest, rest)
    } else {
        let rest = target.strip_prefix(routes::PACKS_PREFIX)?;
        let sha = rest.get(..64)?;
        if !sha
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        (Route::Pack(sha), &rest[64..])
    };
    match rest.strip_prefix('?') {
        Some(query) => Some((route, Some(query))),
        None => rest.is_empty().then_some((route, None)),
    }
}

/// `seq=N` exactly, N at most `i64::MAX` (what a device sends; the query extractor's other
/// spellings, and its errors, are the router's).
fn seq(query: &str) -> Option<u64> {
    let digits = query.strip_prefix("seq=")?;
    if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (i64::try_from(n).is_ok()).then_some(n)
}

/// Writes the poll's answer (head and body) into `out`; returns its status.
fn poll_head(
    out: &mut Vec<u8>,
    starts: &PollStarts,
    snapshot: &Snapshot,
    answer: &PollPlan,
    close: bool,
    now: SystemTime,
) -> u16 {
    let keyring = snapshot.keyring().newest_header().as_bytes();
    let keyring_name = routes::KEYRING_SEQUENCE_HEADER;
    let keyring_name = keyring_name.as_str().as_bytes();
    match answer {
        PollPlan::Nothing => {
            Head::resume(out, &starts.nothing)
                .header(keyring_name, keyring)
                .finish(close, now, b"");
            204
        }
        PollPlan::NotModified(a) => {
            Head::resume(out, &starts.not_modified)
                .header(keyring_name, keyring)
                .header(b"etag", a.etag.as_bytes())
                .finish(close, now, b"");
            304
        }
        PollPlan::Offer(a) => {
            Head::resume(out, &starts.offer)
                .header(keyring_name, keyring)
                .header(b"etag", a.etag.as_bytes())
                .number(routes::SEQUENCE_HEADER.as_str().as_bytes(), a.sequence)
                .header(b"content-type", b"application/octet-stream")
                .number(b"content-length", a.manifest.len() as u64)
                .finish(close, now, &a.manifest);
            200
        }
    }
}

/// The first bytes of each poll answer, the same for the process's life: the status line and
/// `npub-poll-interval`, written once (then a "nothing new" answer is four copies and the date).
struct PollStarts {
    nothing: Vec<u8>,
    not_modified: Vec<u8>,
    offer: Vec<u8>,
}

impl PollStarts {
    fn new(interval: &HeaderValue) -> Self {
        let start = |status: &[u8]| {
            let mut out = Vec::new();
            Head::new(&mut out, status).header(
                routes::POLL_INTERVAL_HEADER.as_str().as_bytes(),
                interval.as_bytes(),
            );
            out
        };
        Self {
            nothing: start(b"204 No Content"),
            not_modified: start(b"304 Not Modified"),
            offer: start(b"200 OK"),
        }
    }
}

/// Writes a pack answer's head into `out`; returns its status and the body's span.
fn pack_head(
    out: &mut Vec<u8>,
    etag: &HeaderValue,
    len: u64,
    range: Option<(u64, u64)>,
    close: bool,
    now: SystemTime,
) -> (u16, u64, u64) {
    let (status, line, offset, count) = match range {
        None => (200, &b"200 OK"[..], 0, len),
        Some((start, end)) => (206, &b"206 Partial Content"[..], start, end - start + 1),
    };
    let mut head = Head::new(out, line)
        .header(b"etag", etag.as_bytes())
        .header(b"accept-ranges", b"bytes")
        .header(b"content-type", b"application/octet-stream")
        .number(b"content-length", count);
    if let Some((start, end)) = range {
        head = head.content_range(start, end, len);
    }
    head.finish(close, now, b"");
    (status, offset, count)
}

/// A pack body: `count` bytes from `offset`.
struct Body<'p> {
    file: &'p Arc<File>,
    bytes: Option<&'p Bytes>,
    offset: u64,
    count: u64,
}

/// Sends `head` (with `MSG_MORE`, so that it leaves in the body's first segment) and then the
/// body ([`send_body`]).
async fn send_pack(lane: &Lane, io: &mut Watched, head: &[u8], body: Body<'_>) -> io::Result<()> {
    send_all(
        io,
        head,
        rustix::net::SendFlags::MORE | rustix::net::SendFlags::NOSIGNAL,
    )
    .await?;
    io.activity.touch();
    send_body(io, body, &lane.state.metrics).await
}

/// Sends a pack body by `sendfile`: page cache to socket, no copy through this process. A slow
/// reader holds only its own socket: each step waits for the socket to be writable. A
/// filesystem that does not support `sendfile` (it refuses the first call) gets the snapshot's
/// in-memory copy written instead; without one, the refusal is the error and nothing of the body
/// has been sent. Every byte that leaves is counted in `metrics`.
async fn send_body(io: &mut Watched, body: Body<'_>, metrics: &Metrics) -> io::Result<()> {
    let mut at = body.offset;
    let end = body.offset + body.count;
    while at < end {
        let want = usize::try_from(end - at).unwrap_or(usize::MAX);
        let socket = &io.inner;
        let sent = socket
            .async_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(socket, body.file, Some(&mut at), want)
                    .map_err(io::Error::from)
            })
            .await;
        let n = match sent {
            Ok(0) => {
                // The file is shorter than when it was hashed: the body cannot be finished.
                tracing::error!(at, end, "a pack file ended early while it was being sent");
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok(n) => n,
            Err(e) if at == body.offset && unsupported(&e) => {
                let Some(bytes) = body.bytes else {
                    return Err(e);
                };
                tracing::debug!(error = %e, "sendfile refused; writing the pack from memory");
                // Both within the pack, whose length is a `usize` (it is in memory).
                let slice = &bytes[at as usize..end as usize];
                io.write_all(slice).await?;
                metrics.add_pack_bytes_served(slice.len() as u64);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        metrics.add_pack_bytes_served(n as u64);
        io.activity.touch();
    }
    Ok(())
}

/// Sends `head` and a pack body over TLS, the head and the body's first bytes in one record.
/// A body in memory (the snapshot's copy) goes to rustls straight from it ([`send_memory_tls`]);
/// else through `chunk` ([`TLS_CHUNK`]) a record at a time, each read from the file (a
/// page-cache read of 16 KiB, like `sendfile`'s own steps, on the blocking pool: a slow disk
/// holds that thread, never a worker that serves other connections). A slow reader holds its
/// own buffer only: each write waits for the socket.
async fn send_pack_tls(
    tls: &mut TlsConn,
    head: &[u8],
    body: Body<'_>,
    chunk: &mut Vec<u8>,
    metrics: &Metrics,
) -> io::Result<()> {
    if let Some(bytes) = body.bytes {
        // Within the pack, whose length is a `usize` (it is in memory).
        let slice = &bytes[body.offset as usize..(body.offset + body.count) as usize];
        return send_memory_tls(tls, head, slice, metrics).await;
    }
    if chunk.len() != TLS_CHUNK {
        *chunk = vec![0; TLS_CHUNK];
    }
    let mut filled = head.len().min(TLS_CHUNK);
    chunk[..filled].copy_from_slice(&head[..filled]);
    let mut at = body.offset;
    let end = body.offset + body.count;
    loop {
        let want = usize::try_from(end - at)
            .map_or(TLS_CHUNK - filled, |left| left.min(TLS_CHUNK - filled));
        match body.bytes {
            // Within the pack, whose length is a `usize` (it is in memory).
            Some(bytes) => chunk[filled..filled + want]
                .copy_from_slice(&bytes[at as usize..at as usize + want]),
            None => {
                let file = Arc::clone(body.file);
                let mut buffer = std::mem::take(chunk);
                let (buffer, read) = tokio::task::spawn_blocking(move || {
                    let read = read_exact_at(&file, &mut buffer[filled..filled + want], at);
                    (buffer, read)
                })
                .await
                .map_err(io::Error::other)?;
                *chunk = buffer;
                if let Err(e) = read {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        tracing::error!(at, end, "a pack file ended early while it was being sent");
                    }
                    return Err(e);
                }
            }
        }
        filled += want;
        tls.io.write_all(&chunk[..filled]).await?;
        metrics.add_pack_bytes_served(want as u64);
        at += want as u64;
        filled = 0;
        if at == end {
            break;
        }
    }
    tls.io.flush().await
}

/// [`send_pack_tls`] for a body in memory: `head` and `body` handed to rustls together, which
/// cuts the records (the head in the first) and encrypts from these slices, [`TLS_WRITE`] of the
/// body a step: no staging copy and no buffer of the connection's own, and a step's records
/// leave in one `writev`.
async fn send_memory_tls(
    tls: &mut TlsConn,
    head: &[u8],
    body: &[u8],
    metrics: &Metrics,
) -> io::Result<()> {
    let (mut head, mut body) = (head, body);
    while !head.is_empty() || !body.is_empty() {
        let step = &body[..body.len().min(TLS_WRITE)];
        let n = tls
            .io
            .write_vectored(&[io::IoSlice::new(head), io::IoSlice::new(step)])
            .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let of_head = n.min(head.len());
        head = &head[of_head..];
        let of_body = n - of_head;
        body = &body[of_body..];
        metrics.add_pack_bytes_served(of_body as u64);
    }
    tls.io.flush().await
}

/// Fills `room` from `file` at `at`; `UnexpectedEof` if the file ends first.
fn read_exact_at(file: &File, room: &mut [u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let mut got = 0;
    while got < room.len() {
        let n = file.read_at(&mut room[got..], at + got as u64)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    Ok(())
}

/// `sendfile`'s answers for a file or socket it cannot work with (`EINVAL`, `ENOSYS`,
/// `EOPNOTSUPP`).
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
        Some(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's renderer of [`decide::poll`]'s answers: each status line, the headers every
    /// manifest answer carries, and the manifest as the body of a 200 only.
    #[test]
    fn renders_each_poll_answer_with_its_headers() {
        let snapshot = Snapshot::default();
        let assignment = Arc::new(Assignment {
            deployment_id: 1,
            sequence: 1,
            sha256: "ab".repeat(32),
            manifest: Bytes::from_static(b"MANIFEST"),
            etag: HeaderValue::from_static("\"m1-1\""),
            release: None,
            selftest: None,
        });
        let starts = PollStarts::new(&HeaderValue::from_static("60"));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let render = |plan: &PollPlan, close: bool| {
            let mut out = Vec::new();
            let status = poll_head(&mut out, &starts, &snapshot, plan, close, now);
            (status, String::from_utf8(out).unwrap())
        };
        let (status, nothing) = render(&PollPlan::Nothing, false);
        assert_eq!(status, 204);
        assert!(
            nothing.starts_with("HTTP/1.1 204 No Content\r\n"),
            "{nothing}"
        );
        assert!(nothing.contains("npub-poll-interval: 60\r\n"), "{nothing}");
        assert!(nothing.contains("npub-keyring-sequence: "), "{nothing}");
        assert!(
            nothing.contains("date: Tue, 14 Nov 2023 22:13:20 GMT\r\n"),
            "{nothing}"
        );
        assert!(nothing.ends_with("\r\n\r\n"), "{nothing}");
        assert!(!nothing.contains("etag"), "{nothing}");

        let (status, same) = render(&PollPlan::NotModified(Arc::clone(&assignment)), true);
        assert_eq!(status, 304);
        assert!(same.starts_with("HTTP/1.1 304 Not Modified\r\n"), "{same}");
        assert!(same.contains("etag: \"m1-1\"\r\n"), "{same}");
        assert!(same.contains("connection: close\r\n"), "{same}");
        assert!(same.ends_with("\r\n\r\n"), "{same}");

        let (status, offer) = render(&PollPlan::Offer(Arc::clone(&assignment)), false);
        assert_eq!(status, 200);
        assert!(offer.starts_with("HTTP/1.1 200 OK\r\n"), "{offer}");
        assert!(offer.contains("npub-sequence: 1\r\n"), "{offer}");
        assert!(offer.contains("content-length: 8\r\n"), "{offer}");
        assert!(offer.ends_with("\r\n\r\nMANIFEST"), "{offer}");
    }

    #[test]
    fn rejects_a_query_the_router_must_judge() {
        assert_eq!(seq("seq=5"), Some(5));
        assert_eq!(seq("seq=0009"), Some(9));
        assert_eq!(seq(&format!("seq={}", i64::MAX)), Some(i64::MAX as u64));
        for q in [
            "seq=",
            "seq=+5",
            "seq=-1",
            "seq=5&x=1",
            "x=1&seq=5",
            "seq=9223372036854775808",
            "seq=99999999999999999999",
            "SEQ=5",
            "seq=%35",
        ] {
            assert_eq!(seq(q), None, "{q}");
        }
    }

    #[test]
    fn rejects_a_target_that_is_not_exactly_a_lane_route() {
        let sha = "0123456789abcdef".repeat(4);
        let pack = format!("{}{sha}", routes::PACKS_PREFIX);
        let manifest = routes::MANIFEST_PATH;
        assert_eq!(route(manifest), Some((Route::Manifest, None)));
        assert_eq!(
            route(&format!("{manifest}?seq=3")),
            Some((Route::Manifest, Some("seq=3")))
        );
        assert_eq!(
            route(&format!("{manifest}?")),
            Some((Route::Manifest, Some("")))
        );
        assert_eq!(route(&pack), Some((Route::Pack(&sha), None)));
        assert_eq!(
            route(&format!("{pack}?a?b")),
            Some((Route::Pack(&sha), Some("a?b")))
        );
        for target in [
            format!("{manifest}x"),
            format!("{manifest}/"),
            format!("{manifest}#x"),
            manifest[..manifest.len() - 1].to_owned(),
            format!("{pack}0"),
            format!("{pack}/"),
            pack[..pack.len() - 1].to_owned(),
            pack.to_uppercase(),
            format!("{}{}", routes::PACKS_PREFIX, "g".repeat(64)),
            format!("{}{}é", routes::PACKS_PREFIX, "a".repeat(63)),
            "/".to_owned(),
            format!("{manifest}x").replace("manifest", "manifests"),
        ] {
            assert_eq!(route(&target), None, "{target}");
        }
    }

    /// A connected loopback pair: the server's end as the lane holds it, the client's end.
    async fn pair() -> (Watched, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let io = Watched {
            inner: accepted.unwrap().0,
            activity: Arc::new(crate::conn::activity::Activity::new()),
            hold: crate::conn::hold::Hold::off(),
        };
        (io, client.unwrap())
    }

    /// A file `sendfile` refuses with `EINVAL`: a directory opened for reading.
    fn refusing_file() -> (tempfile::TempDir, Arc<File>) {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(File::open(dir.path()).unwrap());
        (dir, file)
    }

    #[tokio::test]
    async fn survives_a_filesystem_that_refuses_sendfile_by_sending_the_copy_in_memory() {
        let (_dir, file) = refusing_file();
        let bytes = Bytes::from((0..=255u8).cycle().take(100_000).collect::<Vec<u8>>());
        let metrics = Metrics::default();
        let (mut io, mut client) = pair().await;
        let body = Body {
            file: &file,
            bytes: Some(&bytes),
            offset: 1_000,
            count: 50_000,
        };
        send_body(&mut io, body, &metrics).await.unwrap();
        drop(io);
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut got)
            .await
            .unwrap();
        assert_eq!(got, bytes[1_000..51_000]);
        assert!(
            metrics
                .render()
                .contains("npub_pack_bytes_served_total 50000")
        );
    }

    #[tokio::test]
    async fn rejects_a_refused_sendfile_without_a_copy_in_memory_and_sends_nothing() {
        let (_dir, file) = refusing_file();
        let metrics = Metrics::default();
        let (mut io, mut client) = pair().await;
        let body = Body {
            file: &file,
            bytes: None,
            offset: 0,
            count: 4_096,
        };
        let e = send_body(&mut io, body, &metrics).await.unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::INVAL.raw_os_error())
        );
        drop(io);
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut got)
            .await
            .unwrap();
        assert!(got.is_empty());
        assert!(metrics.render().contains("npub_pack_bytes_served_total 0"));
    }

    /// A TLS pair over loopback: the server's end as the lane holds it after the handshake, the
    /// client's end, with a certificate made here.
    async fn tls_pair() -> (
        TlsConn,
        tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    ) {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let (io, tcp) = pair().await;
        let accept = tokio_rustls::TlsAcceptor::from(Arc::new(server)).accept(io);
        let connect = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(ServerName::try_from("localhost").unwrap(), tcp);
        let (accepted, connected) = tokio::join!(accept, connect);
        let conn = TlsConn {
            io: accepted.unwrap(),
            device: None,
        };
        (conn, connected.unwrap())
    }

    /// [`send_pack_tls`] of `body` after the head `HEAD\r\n\r\n` over a fresh TLS pair, the
    /// connection then shut down: what the client read.
    async fn sent_over_tls(body: Body<'_>, chunk: &mut Vec<u8>, metrics: &Metrics) -> Vec<u8> {
        let (mut conn, mut client) = tls_pair().await;
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            let _ = client.read_to_end(&mut got).await;
            got
        });
        send_pack_tls(&mut conn, b"HEAD\r\n\r\n", body, chunk, metrics)
            .await
            .unwrap();
        conn.io.shutdown().await.unwrap();
        drop(conn);
        reading.await.unwrap()
    }

    #[tokio::test]
    async fn sends_a_pack_from_its_file_over_tls_in_bounded_records_with_the_head_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pack");
        let bytes: Vec<u8> = (0..=250u8).cycle().take(100_000).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let metrics = Metrics::default();
        let body = Body {
            file: &file,
            bytes: None,
            offset: 1_000,
            count: 50_000,
        };
        let mut chunk = Vec::new();
        let got = sent_over_tls(body, &mut chunk, &metrics).await;
        assert_eq!(chunk.len(), TLS_CHUNK, "one buffer, of one record's size");
        assert_eq!(&got[..8], b"HEAD\r\n\r\n");
        assert!(got[8..] == bytes[1_000..51_000], "the body, byte for byte");
        assert!(
            metrics
                .render()
                .contains("npub_pack_bytes_served_total 50000")
        );
    }

    #[tokio::test]
    async fn sends_a_pack_from_memory_over_tls_with_the_head_first_and_no_buffer_of_its_own() {
        let bytes = Bytes::from((0..=250u8).cycle().take(200_000).collect::<Vec<u8>>());
        // A file that would fail: the body must come from memory.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("short"), b"x").unwrap();
        let file = Arc::new(File::open(dir.path().join("short")).unwrap());
        let metrics = Metrics::default();
        let body = Body {
            file: &file,
            bytes: Some(&bytes),
            offset: 3,
            count: 150_000,
        };
        let mut chunk = Vec::new();
        let got = sent_over_tls(body, &mut chunk, &metrics).await;
        assert!(chunk.is_empty(), "no buffer of the connection's own");
        assert_eq!(&got[..8], b"HEAD\r\n\r\n");
        assert!(got[8..] == bytes[3..150_003], "the body, byte for byte");
        assert!(
            metrics
                .render()
                .contains("npub_pack_bytes_served_total 150000")
        );
    }

    #[tokio::test]
    async fn rejects_a_pack_file_shorter_than_its_body_over_tls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pack");
        std::fs::write(&path, vec![7u8; 1_000]).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let metrics = Metrics::default();
        let (mut conn, _client) = tls_pair().await;
        let body = Body {
            file: &file,
            bytes: None,
            offset: 0,
            count: 4_096,
        };
        let e = send_pack_tls(&mut conn, b"", body, &mut Vec::new(), &metrics)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
