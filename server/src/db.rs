//! The database: one SQLite file in WAL mode (the embedded default), or a PostgreSQL database
//! shared by several replicas (`--database-url postgres://…`), migrated at start.
//!
//! ## One pool type for both: sqlx's `Any` driver
//! The queries are runtime `sqlx::query` strings with numbered `$1` parameters, integer
//! unix-millisecond timestamps and no backend-only functions, and every module takes a
//! [`Conn`]. sqlx 0.9's `Any` driver runs exactly that kind of query on either backend, chosen
//! by the URL at start, so [`Db`] and [`Conn`] stay single types and no query function is written
//! twice or made generic over `sqlx::Database`. The alternative, an enum over `SqlitePool` and
//! `PgPool`, would have forced a `match` (or a generic) into every one of the ~100 query sites
//! for no gain: the types the schema uses (`i64`, `f64`, `String`, `Vec<u8>`, `Option` of them)
//! are exactly the ones `Any` maps on both sides. What `Any` costs: values are copied into
//! `AnyRow`s (the poll path never reads the database, so this is off the hot path), and only
//! those types decode; a `bool` is never read from SQL (SQLite has none), comparisons are
//! decoded as integers instead.
//!
//! ## Where the SQL differs (the only places)
//! | What | SQLite | PostgreSQL | Where |
//! |------|--------|------------|-------|
//! | schema | `migrations/*.sql` | `migrations/postgres/*.sql` (`BIGINT` ids and times, `BYTEA`, `DOUBLE PRECISION`) | [`SQLITE_MIGRATOR`], [`POSTGRES_MIGRATOR`] |
//! | write transaction | `BEGIN IMMEDIATE` (the database-wide write lock, up front) | `BEGIN` + `pg_advisory_xact_lock(`[`WRITE_LOCK_KEY`]`)` | [`begin_write`] |
//! | an optional `f64` parameter | any statement | `.persistent(false)` on the statement: sqlx 0.9's `Any` binds a `None::<f64>` as a `float4` NULL, and a cached statement first prepared with it then rejects a `Some(f64)` ("incorrect binary data format"); an unnamed statement is typed by each call's own values | `fleet/history.rs`, `fleet/device_api.rs` |
//! | read transaction (one snapshot) | `BEGIN` | `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY` | [`begin_read`] |
//! | connection settings | WAL, `synchronous = FULL`, foreign keys, busy timeout | the server's own | [`open`] |
//!
//! Everything else (`RETURNING`, `ON CONFLICT … DO UPDATE/NOTHING`, partial unique indexes,
//! `<>`) is the same SQL on both. Constraint violations are told apart in `error.rs` through
//! `sqlx::error::DatabaseError`'s kind, which both drivers fill.
//!
//! ## Serialisation across replicas
//! On SQLite the process is alone on its file (the data-dir lock), writers are serialised by
//! [`crate::state::AppState::write_lock`] in the process and by `BEGIN IMMEDIATE` in the file.
//! On PostgreSQL several processes write one database, so the in-process lock proves nothing:
//! every write transaction ([`begin_write`]) first takes one transaction-scoped advisory lock,
//! [`WRITE_LOCK_KEY`], held until commit or rollback. That is SQLite's write lock, one level up:
//! the same "one writer at a time, reads never wait" semantics the write paths were written
//! against, so the read-then-write sequences in them (the manifest sequence allocated from
//! `fleet_sequence` and committed with its deployment, a version's insert and its pack put, a
//! key rotation's retire-then-insert, the first admin token) are as serialised across replicas
//! as they were across requests. Commits therefore happen in lock order, which is what makes
//! manifest sequences increase in commit order (tests/replicas). Work done after a commit that
//! other replicas could race (removing a deleted version's pack) takes the lock again and checks
//! again (`versions.rs`, `remove_if_unreferenced`). Finer row locks would let unrelated writes
//! run side by side: the cost of one lock is that device status reports and last-seen flushes of
//! every replica queue behind each other, as they already do on SQLite (not measured yet on
//! PostgreSQL). One lock, always the first statement of its transaction, cannot deadlock. The
//! unique constraints (`deployments.sequence`, `versions (model_id,
//! version)`, `keyring_updates.sequence`, one active signing key) stay as the backstop.
use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Executor};

/// The connection pool (SQLite or PostgreSQL, see the module doc).
pub type Db = sqlx::AnyPool;
/// One connection (or a transaction, which dereferences to one).
pub type Conn = sqlx::AnyConnection;
/// A transaction on [`Db`].
pub type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Which database a [`Db`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default: one file in the data directory.
    Sqlite,
    /// A PostgreSQL server, possibly shared by several replicas.
    Postgres,
}

impl Backend {
    /// The backend a pool was opened on.
    pub fn of(db: &Db) -> Self {
        match db.connect_options().database_url.scheme() {
            "postgres" | "postgresql" => Self::Postgres,
            _ => Self::Sqlite,
        }
    }

    /// The backend a connection (or a transaction) talks to: for code that is handed a [`Conn`]
    /// rather than the pool.
    pub fn of_conn(conn: &Conn) -> Self {
        match conn.backend_name() {
            "PostgreSQL" => Self::Postgres,
            _ => Self::Sqlite,
        }
    }
}

/// Connections in the pool. WAL lets readers run beside the one writer; a handful is plenty for
/// an operator API whose writes are serialised anyway.
const MAX_CONNECTIONS: u32 = 8;
/// How long a statement waits for SQLite's write lock before failing: long enough to ride out
/// another request's commit (including its fsync), short enough to surface a wedged writer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request waits for a PostgreSQL connection (a free one, or a new one while the
/// server is unreachable) before it is answered 503 (`crate::error`): sqlx's default of 30 s
/// would hold every request of a replica whose database restarts for 30 s, past most clients'
/// and load balancers' timeouts, where a prompt 503 lets them retry or go elsewhere.
const POSTGRES_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The advisory lock every PostgreSQL write transaction holds (see the module doc). An arbitrary
/// constant, the ASCII of "npubwrit", so that it does not collide with another application's
/// advisory locks on a shared server.
pub const WRITE_LOCK_KEY: i64 = 0x6e70_7562_7772_6974;

/// The SQLite schema, from the workspace's top-level `migrations/` (append-only: a migration that
/// has been applied anywhere is never edited; changes are new files). Subdirectories are not
/// migrations, so `postgres/` beside them is not picked up.
pub static SQLITE_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");
/// The PostgreSQL twin of [`SQLITE_MIGRATOR`]: one file per SQLite migration, same number, same
/// tables and columns (tests/schema checks), append-only the same way.
pub static POSTGRES_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Begins a write transaction that holds the database's write lock from its first statement.
///
/// SQLite: `BEGIN IMMEDIATE`, waiting out [`BUSY_TIMEOUT`] for the lock. A deferred transaction
/// that reads and then writes gets `SQLITE_BUSY` at once when another writer committed in between
/// (WAL cannot upgrade a stale read snapshot), which surfaced as a 500 `database is locked`.
/// PostgreSQL: `BEGIN` and [`WRITE_LOCK_KEY`], which serialises writers of every replica.
/// Every write path uses this; read-only transactions take [`begin_read`].
pub async fn begin_write(db: &Db) -> Result<Tx, sqlx::Error> {
    match Backend::of(db) {
        Backend::Sqlite => db.begin_with("BEGIN IMMEDIATE").await,
        Backend::Postgres => {
            let mut tx = db.begin().await?;
            // The function returns `void`, which the Any driver cannot decode: select a constant.
            sqlx::query("SELECT 1 FROM pg_advisory_xact_lock($1)")
                .bind(WRITE_LOCK_KEY)
                .execute(&mut *tx)
                .await?;
            Ok(tx)
        }
    }
}

/// Begins a read-only transaction whose statements all see one committed state.
///
/// SQLite: a plain `BEGIN` (a WAL read transaction is a snapshot). PostgreSQL: `REPEATABLE
/// READ`, since its default (`READ COMMITTED`) gives every statement its own snapshot, and a
/// deployment aborted between two of a rebuild's queries would be half in it.
pub async fn begin_read(db: &Db) -> Result<Tx, sqlx::Error> {
    match Backend::of(db) {
        Backend::Sqlite => db.begin().await,
        Backend::Postgres => {
            db.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await
        }
    }
}

/// What `--database-url` named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location<'a> {
    /// The SQLite file at this path (the default: `<data-dir>/npub.db`).
    Sqlite(std::borrow::Cow<'a, Path>),
    /// A PostgreSQL URL, used as given.
    Postgres(&'a str),
}

impl<'a> Location<'a> {
    /// Reads `--database-url`; `None` or empty is the SQLite file `default`.
    pub fn parse(url: Option<&'a str>, default: &'a Path) -> Result<Self, String> {
        let Some(url) = url.filter(|u| !u.is_empty()) else {
            return Ok(Self::Sqlite(default.into()));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url));
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Ok(Self::Sqlite(default.into()));
            }
            return Ok(Self::Sqlite(Path::new(path).into()));
        }
        Err(format!(
            "{url:?}: expected postgres://… or sqlite://PATH (or nothing, for {})",
            default.display()
        ))
    }
}

/// `url` with its password (if any) replaced by `***`, for logs and the banner.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(unparsable URL)".into(),
    }
}

/// Opens the database at `location` (creating a missing SQLite file) and applies pending
/// migrations.
pub async fn open(location: &Location<'_>) -> Result<Db, sqlx::Error> {
    sqlx::any::install_default_drivers();
    match location {
        Location::Sqlite(path) => open_sqlite(path).await,
        Location::Postgres(url) => {
            let db = AnyPoolOptions::new()
                .max_connections(MAX_CONNECTIONS)
                .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
                .connect(url)
                .await?;
            POSTGRES_MIGRATOR.run(&db).await?;
            Ok(db)
        }
    }
}

async fn open_sqlite(path: &Path) -> Result<Db, sqlx::Error> {
    // The Any driver takes a URL only, so the file's settings are applied on every new
    // connection instead of through SqliteConnectOptions' builder.
    let url = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .to_url_lossy();
    let options = AnyConnectOptions::from_url(&url)?;
    let busy_ms = BUSY_TIMEOUT.as_millis();
    let db = AnyPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                // FULL: a 201 for an upload means the row survives a power cut, not just a crash.
                conn.execute(sqlx::AssertSqlSafe(format!(
                    "PRAGMA busy_timeout = {busy_ms}; PRAGMA journal_mode = WAL; \
                     PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
                )))
                .await?;
                Ok(())
            })
        })
        .connect_with(options)
        .await?;
    SQLITE_MIGRATOR.run(&db).await?;
    Ok(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_url_or_an_empty_sqlite_url_is_the_file_in_the_data_dir() {
        let default = Path::new("/var/lib/npub/npub.db");
        for url in [None, Some(""), Some("sqlite://")] {
            assert_eq!(
                Location::parse(url, default).unwrap(),
                Location::Sqlite(default.into())
            );
        }
        assert_eq!(
            Location::parse(Some("sqlite:///srv/other.db"), default).unwrap(),
            Location::Sqlite(Path::new("/srv/other.db").into())
        );
        for pg in [
            "postgres://u:p@db/npub",
            "postgresql://db/npub?sslmode=require",
        ] {
            assert_eq!(
                Location::parse(Some(pg), default).unwrap(),
                Location::Postgres(pg)
            );
        }
    }

    #[test]
    fn rejects_a_database_url_that_is_neither_postgres_nor_sqlite() {
        let default = Path::new("npub.db");
        for bad in ["mysql://db/npub", "npub.db", "postgres:/db", "file:///x.db"] {
            let err = Location::parse(Some(bad), default).unwrap_err();
            assert!(err.contains(bad) && err.contains("postgres://"), "{err}");
        }
    }

    /// The embedded default is unchanged by the `Any` pool: every connection of it has the
    /// settings `SqliteConnectOptions` used to give (WAL, FULL sync, foreign keys, busy timeout).
    #[tokio::test]
    async fn sqlite_connections_keep_wal_full_sync_foreign_keys_and_the_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("npub.db");
        let db = open(&Location::Sqlite(path.as_path().into()))
            .await
            .unwrap();
        assert_eq!(Backend::of(&db), Backend::Sqlite);
        // Hold several connections at once, so that more than the first is checked.
        let mut conns = Vec::new();
        for _ in 0..3 {
            conns.push(db.acquire().await.unwrap());
        }
        for conn in &mut conns {
            let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
                .fetch_one(&mut **conn)
                .await
                .unwrap();
            assert_eq!(mode, "wal");
            for (pragma, want) in [
                ("PRAGMA synchronous", 2),
                ("PRAGMA foreign_keys", 1),
                ("PRAGMA busy_timeout", BUSY_TIMEOUT.as_millis() as i64),
            ] {
                let (got,): (i64,) = sqlx::query_as(pragma).fetch_one(&mut **conn).await.unwrap();
                assert_eq!(got, want, "{pragma}");
            }
        }
        assert!(path.is_file());
    }

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redact("postgres://npub:s3cret@db:5432/npub"),
            "postgres://npub:***@db:5432/npub"
        );
        assert_eq!(redact("postgres://db/npub"), "postgres://db/npub");
    }
}
