//! How long PostgreSQL lets one of the server's sessions wait, work, or sit inside a transaction.
//!
//! Without them a statement that hangs on PostgreSQL (a lock another session holds, a server that
//! accepted the query and stalls) holds its request forever, and with it every request waiting
//! behind it: the ones sharing a ranking (`fleet/target_cache.rs`), every writer of every replica
//! queued on the write lock (`WRITE_LOCK_KEY`); and a session whose process stopped
//! inside a transaction keeps its locks until its TCP connection dies. With them PostgreSQL ends
//! the statement or the session itself, the error is answered 503 (`http/error.rs`) and the
//! connection is rolled back or closed, never pooled inside a transaction (`tx.rs`).
//!
//! | Setting (flag) | Default | Above | Below |
//! |----------------|---------|-------|-------|
//! | `lock_timeout` (`--database-lock-timeout`) | 10 s | the longest legitimate wait for a lock: a write transaction holds the write lock for milliseconds to a few hundred (a device status report during a rollout at 100,000 devices: p95 16–339 ms on SQLite; the longest wait for it logged in the PostgreSQL run of the next row: 15 ms), so 10 s is dozens of writers queued ahead | `statement_timeout`, so that a stuck lock is told apart (55P03) from a slow statement (57014); the same 10 s SQLite waits for its write lock (`BUSY_TIMEOUT`), so both backends give up on a wedged writer alike |
//! | `statement_timeout` (`--database-statement-timeout`) | 20 s | the longest legitimate statement the server runs, on a request or in the background: at 100,000 devices on PostgreSQL (`bench/pg_statements.sh`, `docs/performance.md`) reading every device for the poll snapshot at most 1.75 s (a debug build reading the rows, a machine at load 5–6), every other statement ≤ 150 ms (a `COMMIT`, a listing's page 137 ms, the summary's counts 55 ms); 20 s is 11× the slowest | `--header-timeout` (30 s), the time the server itself gives a client to send a request, and what clients and proxies commonly wait for an answer (the deployment's nginx: 120 s): a client gets the 503 rather than its own timeout |
//! | `idle_in_transaction_session_timeout` (`--database-idle-transaction-timeout`) | 30 s | the longest gap between two statements of one transaction: Rust work between them (ranking, signing manifests, milliseconds to a few seconds on a loaded machine); no transaction waits on the pack store or a webhook (`store/gc.rs` commits before removing) | nothing waits on it but the locks it frees: a transaction of a process that stopped (a paused VM, `SIGSTOP`, a wedged task) holds the write lock of every replica until then. A dropped request rolls back at once (`Tx`'s `Drop`); this is for what `Drop` cannot reach |
//!
//! ## How they are set: startup options, before the URL's own
//! They travel in the connection's startup packet (`options=-c name=ms …`, libpq's parameter, which
//! sqlx reads from the URL): no extra round trip per connection, and they are in force from the
//! first statement. A startup option overrides PostgreSQL's own defaults (`postgresql.conf`,
//! `ALTER DATABASE`/`ALTER ROLE … SET`) and `PGOPTIONS`. The database URL's own `options` (or
//! `options[name]=value`) come after ours, so **what the URL says wins**: an operator who wrote
//! a timeout into the URL keeps it, and the server logs at start which setting the URL replaced
//! ([`PgTimeouts::check`]). A connection pooler that refuses startup options (PgBouncer before
//! `ignore_startup_parameters = options`) must be told to pass or ignore them; with it ignoring
//! them, set the values on the role instead.
//!
//! ## Migrations: no statement or lock limit
//! Migrations run at start, before the listener binds, on a connection of their own
//! ([`PgTimeouts::migration_options`]): `statement_timeout` and `lock_timeout` 0 (none). A
//! migration rewriting a large table may legitimately take minutes, and sqlx makes a replica
//! starting beside another wait on its migration lock for the other's whole run; a limit would
//! only roll the migration back and fail the start, which would then retry the same migration and
//! fail again, never converging. A start that hangs is visible (no listener, no readiness); one
//! that loops is not better.
use std::time::Duration;

/// Default for `--database-statement-timeout`, in seconds (see the module doc).
pub const DEFAULT_STATEMENT_TIMEOUT_SECS: u64 = 20;
/// Default for `--database-lock-timeout`, in seconds (see the module doc).
pub const DEFAULT_LOCK_TIMEOUT_SECS: u64 = 10;
/// Default for `--database-idle-transaction-timeout`, in seconds (see the module doc).
pub const DEFAULT_IDLE_TRANSACTION_TIMEOUT_SECS: u64 = 30;

/// The PostgreSQL settings, as the server's flags name them (for the start-up warning).
const SETTINGS: [(&str, &str); 3] = [
    ("statement_timeout", "--database-statement-timeout"),
    ("lock_timeout", "--database-lock-timeout"),
    (
        "idle_in_transaction_session_timeout",
        "--database-idle-transaction-timeout",
    ),
];

/// The three limits of the server's PostgreSQL sessions (ignored on SQLite, which has its busy
/// timeout); each at least 1 ms, so that none is ever "no limit".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgTimeouts {
    statement: Duration,
    lock: Duration,
    idle_in_transaction: Duration,
}

impl Default for PgTimeouts {
    fn default() -> Self {
        Self::from_secs(
            DEFAULT_STATEMENT_TIMEOUT_SECS,
            DEFAULT_LOCK_TIMEOUT_SECS,
            DEFAULT_IDLE_TRANSACTION_TIMEOUT_SECS,
        )
    }
}

impl PgTimeouts {
    /// The limits in seconds, as the flags give them; 0 is taken as 1 (as the other timeouts).
    pub fn from_secs(statement: u64, lock: u64, idle_in_transaction: u64) -> Self {
        let secs = |s: u64| Duration::from_secs(s.max(1));
        Self::new(secs(statement), secs(lock), secs(idle_in_transaction))
    }

    /// The limits; each is raised to at least 1 ms (PostgreSQL's unit, where 0 means none).
    pub fn new(statement: Duration, lock: Duration, idle_in_transaction: Duration) -> Self {
        let floor = |d: Duration| d.max(Duration::from_millis(1));
        Self {
            statement: floor(statement),
            lock: floor(lock),
            idle_in_transaction: floor(idle_in_transaction),
        }
    }

    /// `statement_timeout`.
    pub fn statement(&self) -> Duration {
        self.statement
    }

    /// `lock_timeout`.
    pub fn lock(&self) -> Duration {
        self.lock
    }

    /// `idle_in_transaction_session_timeout`.
    pub fn idle_in_transaction(&self) -> Duration {
        self.idle_in_transaction
    }

    /// Each setting and its value in PostgreSQL's unit (ms), in [`SETTINGS`]' order.
    fn millis(&self) -> [u128; 3] {
        [
            self.statement.as_millis(),
            self.lock.as_millis(),
            self.idle_in_transaction.as_millis(),
        ]
    }

    /// The startup options of the pool's connections: `-c statement_timeout=… -c …`.
    pub fn request_options(&self) -> String {
        SETTINGS
            .iter()
            .zip(self.millis())
            .map(|((name, _), ms)| format!("-c {name}={ms}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The startup options of the migration connection: no statement or lock limit (module doc),
    /// the same idle limit.
    pub fn migration_options(&self) -> String {
        format!(
            "-c statement_timeout=0 -c lock_timeout=0 -c idle_in_transaction_session_timeout={}",
            self.idle_in_transaction.as_millis()
        )
    }

    /// Each setting that a connection does not have as configured (the URL's own `options`
    /// replaced it), from `pg_settings` rows (`setting` is in ms for all three): `(name, in
    /// effect, configured)`.
    pub fn differences(&self, in_effect: &[(String, String)]) -> Vec<(&'static str, String, u128)> {
        SETTINGS
            .iter()
            .zip(self.millis())
            .filter_map(|((name, _), want)| {
                let got = in_effect.iter().find(|(n, _)| n == name)?;
                (got.1 != want.to_string()).then(|| (*name, got.1.clone(), want))
            })
            .collect()
    }

    /// Reads the three settings on a pooled connection and warns about each one the URL
    /// replaced ([`Self::differences`]).
    pub async fn check(&self, db: &sqlx::AnyPool) -> Result<(), sqlx::Error> {
        let in_effect: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, setting FROM pg_settings WHERE name IN \
             ('statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout')",
        )
        .fetch_all(db)
        .await?;
        for (name, got, want) in self.differences(&in_effect) {
            let flag = SETTINGS
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("", |(_, f)| f);
            tracing::warn!(
                "PostgreSQL {name} is {got} ms on the server's connections, not the {want} ms of \
                 {flag}: the database URL's `options` set it, and win"
            );
        }
        Ok(())
    }
}

/// `url` with `options` as its first query parameter, ahead of the URL's own (so that an
/// `options` the URL gives is applied after, and wins: the module doc).
pub fn with_startup_options(url: &str, options: &str) -> Result<String, sqlx::Error> {
    let mut parsed = url::Url::parse(url).map_err(|e| sqlx::Error::Configuration(e.into()))?;
    let own: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    parsed.set_query(None);
    {
        let mut query = parsed.query_pairs_mut();
        query.append_pair("options", options);
        for (k, v) in &own {
            query.append_pair(k, v);
        }
    }
    Ok(parsed.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(url: &str) -> Vec<(String, String)> {
        url::Url::parse(url)
            .unwrap()
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn puts_the_timeouts_first_and_keeps_the_urls_own_parameters_after_them() {
        let t = PgTimeouts::from_secs(20, 10, 30);
        assert_eq!(
            t.request_options(),
            "-c statement_timeout=20000 -c lock_timeout=10000 \
             -c idle_in_transaction_session_timeout=30000"
        );
        let url = with_startup_options(
            "postgres://npub:s%40cret@db:5432/npub?sslmode=require&options=-c%20lock_timeout%3D3s&host=%2Frun%2Fpg",
            &t.request_options(),
        )
        .unwrap();
        assert!(
            url.starts_with("postgres://npub:s%40cret@db:5432/npub?"),
            "{url}"
        );
        assert_eq!(
            query(&url),
            [
                ("options".into(), t.request_options()),
                ("sslmode".into(), "require".into()),
                ("options".into(), "-c lock_timeout=3s".into()),
                ("host".into(), "/run/pg".into()),
            ]
        );
    }

    #[test]
    fn migrations_have_no_statement_or_lock_limit() {
        let t = PgTimeouts::from_secs(1, 1, 7);
        assert_eq!(
            t.migration_options(),
            "-c statement_timeout=0 -c lock_timeout=0 -c idle_in_transaction_session_timeout=7000"
        );
    }

    #[test]
    fn a_zero_is_never_no_limit() {
        assert_eq!(PgTimeouts::from_secs(0, 0, 0).millis(), [1000, 1000, 1000]);
        assert_eq!(
            PgTimeouts::new(Duration::ZERO, Duration::ZERO, Duration::ZERO).millis(),
            [1, 1, 1]
        );
    }

    #[test]
    fn names_only_the_settings_the_url_replaced() {
        let t = PgTimeouts::from_secs(20, 10, 30);
        let in_effect = [
            ("statement_timeout".to_owned(), "20000".to_owned()),
            ("lock_timeout".to_owned(), "3000".to_owned()),
            (
                "idle_in_transaction_session_timeout".to_owned(),
                "30000".to_owned(),
            ),
        ];
        assert_eq!(
            t.differences(&in_effect),
            [("lock_timeout", "3000".to_owned(), 10_000)]
        );
    }
}
