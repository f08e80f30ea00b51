//! A manifest poll allocates nothing (issue #17), measured two ways under a counting global
//! allocator on a real server's snapshot:
//!
//! - the shipped decision, `device::decide::poll` after the snapshot's token lookup, for a
//!   device that is up to date, one with nothing assigned, and an unknown token: any allocation
//!   on the calling thread fails;
//! - whole polls over a real socket, answered by the accept loop's device lane
//!   (`server/src/device/lane.rs`): every allocation in the process (server, runtime and this
//!   client) is counted, and more than one per hundred polls fails. A poll that went through
//!   hyper and the router instead costs about 58.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use npub_server::device::decide::{self, Poll};
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

/// The counter is the whole process's: the tests here run one at a time, so that one's server
/// starting is never counted in the other's window.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn fleet() -> Fleet {
    let dir = TempDir::new().unwrap();
    // The periodic work (the generation check every second, the last-seen flush) allocates and
    // is not a poll's: it is kept out of the counted window, which on a slow machine spans more
    // than a second of polls.
    let server = TestServer::start_with(dir.path(), |c| {
        c.cache_check = 3600;
        c.last_seen_flush = 3600;
    })
    .await;
    support::fleet(&server).await;
    let deployed = support::provision(&server, "field", &["d-1", "d-2"]).await;
    let idle = support::provision(&server, "lab", &["l-1"]).await;
    let d = support::deploy(
        &server,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await;
    let seq = d["sequence"].as_u64().unwrap();
    // The background sweep of the pack store runs once at start, on its own schedule: it is
    // over before anything is counted.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.state.metrics.store_sweeps_ok() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the store was never swept"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Fleet {
        server,
        deployed: deployed[0].clone(),
        idle: idle[0].clone(),
        seq,
        _dir: dir,
    }
}

/// The shipped steps of a poll: find the device by its token, then `decide::poll` (last seen,
/// the decision, the offer note). `None` for an unknown token; else whether a manifest is
/// offered.
fn poll(fleet: &npub_server::device::polling::Polling, secret: &str, seq: u64) -> Option<bool> {
    let snapshot = fleet.cache.get();
    let enrolled = snapshot.enrolled(secret.as_bytes())?;
    let answer = decide::poll(
        &fleet.last_seen,
        &enrolled.entry,
        enrolled.assignment.as_ref(),
        snapshot.window(&enrolled.entry.group),
        seq,
        1,
        |_| false,
    );
    Some(matches!(answer, Poll::Offer(_)))
}

#[tokio::test]
async fn survives_a_nothing_new_poll_without_allocating() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let f = fleet().await;
    let state = &f.server.state.polling;
    // First touches insert into the last-seen map (amortised growth, once per device per flush
    // interval); every poll after that finds its entry.
    for t in [&f.deployed, &f.idle] {
        poll(state, t, f.seq).unwrap();
    }

    let (answer, n) = allocations(|| poll(state, &f.deployed, f.seq));
    assert_eq!(
        answer,
        Some(false),
        "a device at seq {} is up to date",
        f.seq
    );
    assert_eq!(n, 0, "allocations in a deployed device's nothing-new poll");

    let (answer, n) = allocations(|| poll(state, &f.idle, 0));
    assert_eq!(answer, Some(false), "a device without a deployment");
    assert_eq!(n, 0, "allocations in an unassigned device's poll");

    let (answer, n) = allocations(|| poll(state, "npub_dev_not-a-token", 0));
    assert_eq!(answer, None);
    assert_eq!(n, 0, "allocations in looking up an unknown token");

    // The same path does see a newer deployment: the zero above is not a path that skips work.
    let (answer, _) = allocations(|| poll(state, &f.deployed, f.seq - 1));
    assert_eq!(answer, Some(true));
    f.server.stop().await;
}

/// Reads one answer (head and `content-length` body) into `buf`; returns the head's status line.
async fn answer(socket: &mut tokio::net::TcpStream, buf: &mut [u8]) -> String {
    let mut filled = 0;
    loop {
        let n = socket.read(&mut buf[filled..]).await.unwrap();
        assert!(n > 0, "closed");
        filled += n;
        let got = &buf[..filled];
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = std::str::from_utf8(&got[..end]).unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |v| v.parse().unwrap());
        if filled == end + 4 + len {
            return head.lines().next().unwrap().to_owned();
        }
    }
}

/// Counts every allocation in the process (server, runtime and this client, whose socket reads
/// and writes allocate nothing) while one keep-alive connection sends "nothing new" polls and
/// polls that are offered the manifest, alternately.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn survives_counting_whole_polls_over_a_socket() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let f = fleet().await;
    let addr = f.server.url.trim_start_matches("http://").to_owned();
    let request = |seq: u64| {
        format!(
            "GET /api/v1/device/manifest?seq={seq} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
            f.deployed
        )
    };
    let (nothing, offer) = (request(f.seq), request(f.seq - 1));
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut pair = async |socket: &mut tokio::net::TcpStream| {
        socket.write_all(nothing.as_bytes()).await.unwrap();
        assert_eq!(answer(socket, &mut buf).await, "HTTP/1.1 204 No Content");
        socket.write_all(offer.as_bytes()).await.unwrap();
        assert_eq!(answer(socket, &mut buf).await, "HTTP/1.1 200 OK");
    };
    for _ in 0..100 {
        pair(&mut socket).await;
    }
    let pairs: u32 = 1000;
    let before = EVERYWHERE.load(Ordering::Relaxed);
    for _ in 0..pairs {
        pair(&mut socket).await;
    }
    let polls = 2 * pairs;
    let total = EVERYWHERE.load(Ordering::Relaxed) - before;
    println!("allocations in {polls} polls over one connection, whole process: {total}");
    // The status lines above are Strings of this test's: two a pair.
    let server = total - 2 * u64::from(pairs);
    assert!(
        server * 100 <= u64::from(polls),
        "{server} allocations in {polls} polls besides the test's own: more than one per \
         hundred polls (through hyper and the router a poll costs about 58)"
    );
    drop(socket);
    f.server.stop().await;
}
