//! PostgreSQL that accepts a statement and does not answer it (a lock held by another session,
//! not a stopped server: `outage.rs`): the server's own limits (`server/src/db/timeouts.rs`) end
//! the statement, the request is answered a clear 503 in bounded time, and once the lock is gone
//! the server serves again with no connection left inside a transaction and no pool exhausted.
//! Each test runs on its own database of the test binary's temporary cluster
//! (`common/postgres.rs`), with the limits set small through the server's configuration.
use std::time::{Duration, Instant};

use npub_server::db::{self, Location, PgTimeouts};
use npub_server::http::error::ApiError;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::{Connection as _, PgConnection};

use crate::common::{TestServer, postgres};

/// The limit a test waits out; the answer must come within [`BOUND`] of the request.
const LIMIT_SECS: u64 = 1;
/// Three times the limit: generous for a loaded machine, far from "forever".
const BOUND: Duration = Duration::from_secs(3 * LIMIT_SECS);
/// A limit a test does not mean to hit.
const LONG_SECS: u64 = 30;
/// Requests at once: twice the pool, so that waiting for a connection is part of what is tested.
const BURST: usize = 2 * db::MAX_CONNECTIONS as usize;

/// A server on a fresh PostgreSQL database with `(statement, lock)` limits in seconds, and that
/// database's URL; `None` (printed) where PostgreSQL is not installed outside CI.
async fn pg_server(
    dir: &std::path::Path,
    statement: u64,
    lock: u64,
) -> Option<(TestServer, String)> {
    if !postgres::available() {
        return None;
    }
    let url = postgres::database_for(dir).await;
    let server_url = url.clone();
    let server = TestServer::start_with(dir, move |c| {
        c.database_url = Some(server_url);
        c.key_encryption_key = Some(postgres::TEST_KEK.into());
        c.database_statement_timeout = statement;
        c.database_lock_timeout = lock;
        c.database_idle_transaction_timeout = LONG_SECS;
    })
    .await;
    Some((server, url))
}

/// Sends `request`; fails the test if no answer comes within twice the burst's bound (a
/// statement nothing ends hangs its request for good).
async fn answer(request: reqwest::RequestBuilder) -> reqwest::Response {
    let patience = 4 * BOUND;
    tokio::time::timeout(patience, request.send())
        .await
        .unwrap_or_else(|_| panic!("no answer within {patience:?}: the statement hangs"))
        .unwrap()
}

/// Creates devices `ids` (the caller checks the status).
async fn provision(server: &TestServer, ids: &[&str]) -> reqwest::Response {
    let devices: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "accelerator": "ethos-u55-256", "group": "g"}))
        .collect();
    answer(
        server
            .req(Method::POST, "/api/v1/devices")
            .json(&json!({ "devices": devices })),
    )
    .await
}

/// Asserts `r` is the 503 of a database that did not answer in time, answered within `bound`.
async fn assert_timed_out(r: reqwest::Response, elapsed: Duration, bound: Duration, what: &str) {
    let status = r.status();
    let retry = r.headers().get("retry-after").cloned();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}: {body}");
    assert_eq!(body["error"], "unavailable", "{what}: {body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("did not answer in time") && !detail.contains("sqlx"),
        "{what}: {detail}"
    );
    assert!(retry.is_some(), "{what}: no Retry-After");
    assert!(
        elapsed < bound,
        "{what}: answered after {elapsed:?}, bound {bound:?}"
    );
}

/// Sessions on `url`'s database, other than the asking one, inside a transaction.
async fn idle_in_transaction(url: &str) -> i64 {
    let mut c = PgConnection::connect(url).await.unwrap();
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(&mut c)
    .await
    .unwrap();
    n
}

/// `n` device listings at once: every one must be 200.
async fn list_ok(server: &TestServer, n: usize) {
    let calls = (0..n).map(|_| answer(server.req(Method::GET, "/api/v1/devices")));
    for r in futures_util::future::join_all(calls).await {
        assert_eq!(r.status(), StatusCode::OK);
    }
}

/// A read (the device listing) behind `LOCK TABLE devices` from another session: without a limit
/// it waits for as long as the lock is held. With `statement_timeout` at 1 s (and the lock limit
/// out of the way) each request is answered 503 within 3 s, a burst of twice the pool as well;
/// after the lock goes, more requests than the pool holds are served, none inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejects_a_read_stuck_behind_a_table_lock_within_the_statement_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, url)) = pg_server(dir.path(), LIMIT_SECS, LONG_SECS).await else {
        return;
    };
    assert_eq!(provision(&server, &["d1", "d2"]).await.status(), 201);

    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("LOCK TABLE devices IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();

    let start = Instant::now();
    let r = answer(server.req(Method::GET, "/api/v1/devices")).await;
    assert_timed_out(r, start.elapsed(), BOUND, "one listing").await;

    // Twice the pool at once: the second half waits for the connections the first half frees,
    // so the burst takes two limits, and its bound is twice one request's.
    let start = Instant::now();
    let calls = (0..BURST).map(|_| async {
        let r = answer(server.req(Method::GET, "/api/v1/devices")).await;
        (r, start.elapsed())
    });
    for (r, elapsed) in futures_util::future::join_all(calls).await {
        assert_timed_out(r, elapsed, 2 * BOUND, "a listing of the burst").await;
    }

    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    list_ok(&server, 3 * db::MAX_CONNECTIONS as usize).await;
    assert_eq!(idle_in_transaction(&url).await, 0);
    server.stop().await;
}

/// A write behind the write lock every replica's writes take (`pg_advisory_xact_lock`), held by
/// another session as a stuck replica would: with `lock_timeout` at 1 s the device creation is
/// answered 503 within 3 s and nothing of it is stored; reads go on meanwhile (they never take
/// the write lock); once the lock is released, more writes than the pool holds succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejects_a_write_stuck_behind_the_write_lock_within_the_lock_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, url)) = pg_server(dir.path(), LONG_SECS, LIMIT_SECS).await else {
        return;
    };
    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(db::WRITE_LOCK_KEY)
        .execute(&mut holder)
        .await
        .unwrap();

    let start = Instant::now();
    let r = provision(&server, &["blocked"]).await;
    assert_timed_out(r, start.elapsed(), BOUND, "a device creation").await;
    list_ok(&server, 2).await;

    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(db::WRITE_LOCK_KEY)
        .execute(&mut holder)
        .await
        .unwrap();
    let missing = answer(server.req(Method::GET, "/api/v1/devices/blocked")).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let ids: Vec<String> = (0..3 * db::MAX_CONNECTIONS)
        .map(|i| format!("w{i}"))
        .collect();
    let on = &server;
    let calls = ids
        .iter()
        .map(|id| async move { provision(on, &[id.as_str()]).await });
    for r in futures_util::future::join_all(calls).await {
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    assert_eq!(idle_in_transaction(&url).await, 0);
    server.stop().await;
}

/// `SHOW` of the three settings on `conn`.
async fn settings(conn: &mut db::Conn) -> [String; 3] {
    let mut out: [String; 3] = Default::default();
    for (slot, name) in out.iter_mut().zip([
        "statement_timeout",
        "lock_timeout",
        "idle_in_transaction_session_timeout",
    ]) {
        let (v,): (String,) = sqlx::query_as(sqlx::AssertSqlSafe(format!("SHOW {name}")))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        *slot = v;
    }
    out
}

/// Every connection of the pool the server opens carries the limits (checked on a full pool's
/// worth held at once), and PostgreSQL itself ends a session left idle inside a transaction: the
/// transaction's next statement fails (a 503 to a client), its connection is not pooled again,
/// and the pool then serves more transactions than it holds connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_ends_a_pooled_session_left_idle_in_its_transaction() {
    if !postgres::available() {
        return;
    }
    let url = postgres::fresh_database("npub_idle_in_transaction", true).await;
    let limits = PgTimeouts::new(
        Duration::from_secs(7),
        Duration::from_secs(3),
        Duration::from_secs(LIMIT_SECS),
    );
    let pool = db::open_with(&Location::Postgres(&url), &limits)
        .await
        .unwrap();
    let mut held = Vec::new();
    for _ in 0..db::MAX_CONNECTIONS {
        held.push(pool.acquire().await.unwrap());
    }
    for conn in &mut held {
        assert_eq!(settings(conn).await, ["7s", "3s", "1s"]);
    }
    drop(held);

    let mut tx = db::begin_read(&pool).await.unwrap();
    let (pid,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    // Wait (bounded) for PostgreSQL to end the session: no sleep for a fixed time.
    let mut watcher = PgConnection::connect(&url).await.unwrap();
    let start = Instant::now();
    loop {
        let (alive,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1")
                .bind(pid)
                .fetch_one(&mut watcher)
                .await
                .unwrap();
        if alive == 0 {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "the session idle in its transaction still runs after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = sqlx::query("SELECT 1")
        .execute(&mut *tx)
        .await
        .expect_err("the session was ended");
    assert_eq!(
        ApiError::from(err).status_code(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    drop(tx);

    for _ in 0..3 * db::MAX_CONNECTIONS {
        let mut tx = db::begin_read(&pool).await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }
    assert_eq!(idle_in_transaction(&url).await, 0);
    pool.close().await;
}

/// An `options` the operator wrote into the database URL is applied after the server's own, and
/// wins for the setting it names; the others keep the configured values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_urls_own_options_win_over_the_configured_limits() {
    if !postgres::available() {
        return;
    }
    let url = postgres::fresh_database("npub_url_options", true).await;
    let url = format!("{url}&options=-c%20statement_timeout%3D9s");
    let pool = db::open_with(&Location::Postgres(&url), &PgTimeouts::from_secs(7, 3, 5))
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(settings(&mut conn).await, ["9s", "3s", "5s"]);
    drop(conn);
    pool.close().await;
}

/// Migrations run without the request-scale limits: a migration run that waits on a lock (here
/// `_sqlx_migrations`, held by another session) longer than both the statement and the lock
/// limit is not ended by them, and the database opens once the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_outlast_the_statement_and_lock_timeouts() {
    if !postgres::available() {
        return;
    }
    let url = postgres::fresh_database("npub_migration_limits", true).await;
    db::open(&Location::Postgres(&url))
        .await
        .unwrap()
        .close()
        .await;

    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let limits = PgTimeouts::from_secs(LIMIT_SECS, LIMIT_SECS, LONG_SECS);
    let opening = {
        let url = url.clone();
        tokio::spawn(async move { db::open_with(&Location::Postgres(&url), &limits).await })
    };
    // Until the migration is waiting for the lock, then past both limits. Asked on a connection
    // of its own: inside the holder's transaction `pg_stat_activity` would not change.
    let mut watcher = PgConnection::connect(&url).await.unwrap();
    let start = Instant::now();
    loop {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            start.elapsed() < crate::PATIENCE,
            "the migration never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(BOUND).await;
    assert!(
        !opening.is_finished(),
        "the migration gave up while the lock was held"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    let pool = tokio::time::timeout(crate::PATIENCE, opening)
        .await
        .expect("the migration goes on once the lock is released")
        .unwrap()
        .expect("the database opens");
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(settings(&mut conn).await, ["1s", "1s", "30s"]);
    drop(conn);
    pool.close().await;
}
