//! The "nothing new" manifest poll allocates nothing in npub's code (issue #17): the token
//! lookup, the decision and the headers every answer carries run under a counting global
//! allocator, on a real server's snapshot, and any allocation fails the test.
//!
//! What hyper and axum allocate around the handler (the request's and the response's header
//! maps, routing) is theirs; the second test counts a whole poll over a real socket and prints
//! it, so that `docs/performance.md` can say what one costs end to end.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use npub_server::fleet::device_api::{always_headers, newer};
use npub_server::fleet::device_auth::Device;
use serde_json::json;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[path = "common/mod.rs"]
mod common;
#[path = "fleet/support.rs"]
#[allow(dead_code)]
mod support;

use common::TestServer;

/// Counts allocations: on this thread while [`COUNTING`] is set, and in the whole process.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static HERE: Cell<u64> = const { Cell::new(0) };
}
static EVERYWHERE: AtomicU64 = AtomicU64::new(0);

fn note() {
    EVERYWHERE.fetch_add(1, Ordering::Relaxed);
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = HERE.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`; the counting touches only a
// const-initialised thread-local `Cell` and an atomic, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `f`'s result and how many allocations it made on this thread.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    HERE.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    let r = std::hint::black_box(f());
    COUNTING.with(|on| on.set(false));
    (r, HERE.with(Cell::get))
}

/// A fleet where `deployed` runs deployment `seq` and `idle` has no deployment.
struct Fleet {
    server: TestServer,
    deployed: String,
    idle: String,
    seq: u64,
    _dir: TempDir,
}

async fn fleet() -> Fleet {
    let dir = TempDir::new().unwrap();
    let server = TestServer::start(dir.path()).await;
    support::fleet(&server).await;
    let deployed = support::provision(&server, "field", &["d-1", "d-2"]).await;
    let idle = support::provision(&server, "lab", &["l-1"]).await;
    let d = support::deploy(
        &server,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    Fleet {
        server,
        deployed: deployed[0].clone(),
        idle: idle[0].clone(),
        seq,
        _dir: dir,
    }
}

/// Everything the handler does on a "nothing new" poll, in its order: find the device by its
/// token, note it seen, decide, build the headers. `None` for an unknown token.
fn nothing_new_poll(
    fleet: &npub_server::fleet::Fleet,
    secret: &str,
    seq: u64,
) -> Option<(bool, usize)> {
    let snapshot = fleet.cache.get();
    let entry = Arc::clone(snapshot.device(secret)?);
    let device = Device { entry, snapshot };
    fleet.last_seen.touch(&device.entry.id, 1);
    let newer = newer(&device, seq).is_some();
    let headers = always_headers(fleet, &device.snapshot);
    Some((newer, headers.len()))
}

#[tokio::test]
async fn survives_a_nothing_new_poll_without_allocating() {
    let f = fleet().await;
    let state = &f.server.state.fleet;
    // First touches insert into the last-seen map (amortised growth, once per device per flush
    // interval); every poll after that finds its entry.
    for t in [&f.deployed, &f.idle] {
        nothing_new_poll(state, t, f.seq).unwrap();
    }

    let (answer, n) = allocations(|| nothing_new_poll(state, &f.deployed, f.seq));
    assert_eq!(
        answer,
        Some((false, 2)),
        "a device at seq {} is up to date",
        f.seq
    );
    assert_eq!(n, 0, "allocations in a deployed device's nothing-new poll");

    let (answer, n) = allocations(|| nothing_new_poll(state, &f.idle, 0));
    assert_eq!(answer, Some((false, 2)), "a device without a deployment");
    assert_eq!(n, 0, "allocations in an unassigned device's poll");

    let (answer, n) = allocations(|| nothing_new_poll(state, "npub_dev_not-a-token", 0));
    assert_eq!(answer, None);
    assert_eq!(n, 0, "allocations in looking up an unknown token");

    // The same path does see a newer deployment: the zero above is not a path that skips work.
    let (answer, _) = allocations(|| nothing_new_poll(state, &f.deployed, f.seq - 1));
    assert_eq!(answer, Some((true, 2)));
    f.server.stop().await;
}

/// Counts every allocation in the process (server and this client) while one keep-alive
/// connection sends `polls` "nothing new" polls; prints the count per poll. hyper and axum's
/// share is not asserted (not this project's code); the run checks every answer is a 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn survives_counting_a_whole_poll_over_a_socket() {
    let f = fleet().await;
    let addr = f.server.url.trim_start_matches("http://").to_owned();
    let request = format!(
        "GET /api/v1/device/manifest?seq={} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
        f.seq, f.deployed
    );
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut poll = async |socket: &mut tokio::net::TcpStream| {
        socket.write_all(request.as_bytes()).await.unwrap();
        let n = socket.read(&mut buf).await.unwrap();
        let head = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(head.starts_with("HTTP/1.1 204"), "{head}");
        assert!(
            head.ends_with("\r\n\r\n"),
            "one read holds the whole 204: {head}"
        );
    };
    for _ in 0..100 {
        poll(&mut socket).await;
    }
    let polls = 1000;
    let before = EVERYWHERE.load(Ordering::Relaxed);
    for _ in 0..polls {
        poll(&mut socket).await;
    }
    let per_poll = (EVERYWHERE.load(Ordering::Relaxed) - before) as f64 / f64::from(polls);
    println!(
        "allocations per nothing-new poll, whole process (hyper + axum + npub): {per_poll:.1}"
    );
    // Not hyper's share (it may change with a release), but which path answered: the accept
    // loop's poll path costs about 12 allocations a poll, the router's layer stack about 58
    // (docs/performance.md). tests/fleet/fast_poll.rs proves the two answer alike; this is what
    // fails if polls quietly go back through the router.
    assert!(
        per_poll < 30.0,
        "{per_poll:.1} allocations per poll: the poll went through the router's layers, not \
         the accept loop's poll path (conn.rs)"
    );
    drop(socket);
    f.server.stop().await;
}
