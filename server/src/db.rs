//! The database: one SQLite file in WAL mode, migrated at start.
//!
//! ## Growth path: PostgreSQL
//! Everything database-specific is named here: the pool type ([`Db`]), the connection type the
//! per-module query functions take ([`Conn`]), and how the pool is opened. The queries themselves
//! are plain runtime `sqlx::query` strings with numbered `$1` parameters, integer unix-millisecond
//! timestamps and no SQLite-only functions, so moving to PostgreSQL means: a `postgres` feature
//! swapping these aliases for `PgPool`/`PgConnection`, a `migrations/postgres/` twin of the schema
//! (`BIGINT GENERATED ALWAYS AS IDENTITY` for `INTEGER PRIMARY KEY`, `BYTEA` for `BLOB`), and the
//! constraint checks in `error.rs` (already backend-neutral through `sqlx::error::DatabaseError`).
//! The serialisation that [`crate::state::AppState::write_lock`] provides would then come from
//! the transaction's row locks instead.
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// The connection pool.
pub type Db = sqlx::SqlitePool;
/// One connection (or a transaction, which dereferences to one).
pub type Conn = sqlx::SqliteConnection;

/// Connections in the pool. WAL lets readers run beside the one writer; a handful is plenty for
/// an operator API whose writes are serialised anyway.
const MAX_CONNECTIONS: u32 = 8;
/// How long a statement waits for SQLite's write lock before failing: long enough to ride out
/// another request's commit (including its fsync), short enough to surface a wedged writer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema, from the workspace's top-level `migrations/` (append-only: a migration that has
/// been applied anywhere is never edited; changes are new files).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Begins a write transaction with `BEGIN IMMEDIATE`, so it takes SQLite's write lock up front
/// and waits out [`BUSY_TIMEOUT`] for it. A deferred transaction that reads and then writes
/// gets `SQLITE_BUSY` at once when another writer committed in between (WAL cannot upgrade a
/// stale read snapshot), which surfaced as a 500 `database is locked`. Every write path uses
/// this; read-only transactions keep `begin()`.
pub async fn begin_write(db: &Db) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
    db.begin_with("BEGIN IMMEDIATE").await
}

/// Opens (creating if missing) the database at `path` and applies pending migrations.
pub async fn open(path: &Path) -> Result<Db, sqlx::Error> {
    let options = SqliteConnectOptions::from_str("sqlite://")?
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // FULL: a 201 for an upload means the row survives a power cut, not just a crash.
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT);
    let db = SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .connect_with(options)
        .await?;
    MIGRATOR.run(&db).await?;
    Ok(db)
}
