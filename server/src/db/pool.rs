//! The pool: which backend, its connection settings, its migrations.
use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Executor};

use super::location::Location;
use super::timeouts::{PgTimeouts, with_startup_options};

/// The connection pool (SQLite or PostgreSQL, see the module doc).
pub type Db = sqlx::AnyPool;
/// One connection (or a transaction, which dereferences to one).
pub type Conn = sqlx::AnyConnection;

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
pub const MAX_CONNECTIONS: u32 = 8;
/// How long a statement waits for SQLite's write lock before failing: long enough to ride out
/// another request's commit (including its fsync), short enough to surface a wedged writer.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request waits for a PostgreSQL connection (a free one, or a new one while the
/// server is unreachable) before it is answered 503 (`crate::http::error`): sqlx's default of 30 s
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

/// Opens the database at `location` (creating a missing SQLite file) and applies pending
/// migrations; PostgreSQL sessions get the default [`PgTimeouts`].
pub async fn open(location: &Location<'_>) -> Result<Db, sqlx::Error> {
    open_with(location, &PgTimeouts::default()).await
}

/// [`open`], with `timeouts` on every PostgreSQL connection of the pool (ignored on SQLite).
pub async fn open_with(location: &Location<'_>, timeouts: &PgTimeouts) -> Result<Db, sqlx::Error> {
    sqlx::any::install_default_drivers();
    match location {
        Location::Sqlite(path) => open_sqlite(path).await,
        Location::Postgres(url) => open_postgres(url, timeouts).await,
    }
}

/// Migrates on a connection of its own, without the request-scale limits (`timeouts.rs`), then
/// opens the pool whose every connection starts with them.
async fn open_postgres(url: &str, timeouts: &PgTimeouts) -> Result<Db, sqlx::Error> {
    // A pool of one rather than a bare connection: its connect is bounded by the acquire timeout.
    let migration = AnyPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
        .connect(&with_startup_options(url, &timeouts.migration_options())?)
        .await?;
    let migrated = POSTGRES_MIGRATOR.run(&migration).await;
    migration.close().await;
    migrated?;
    let db = AnyPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
        .connect(&with_startup_options(url, &timeouts.request_options())?)
        .await?;
    timeouts.check(&db).await?;
    Ok(db)
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
}
