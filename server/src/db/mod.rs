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
//! | an optional `f64` parameter | any statement | `.persistent(false)` on the statement: sqlx 0.9's `Any` binds a `None::<f64>` as a `float4` NULL, and a cached statement first prepared with it then rejects a `Some(f64)` ("incorrect binary data format"); an unnamed statement is typed by each call's own values | `fleet/history.rs`, `device/routes.rs` |
//! | read transaction (one snapshot) | `BEGIN` | `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY` | [`begin_read`] |
//! | connection settings | WAL, `synchronous = FULL`, foreign keys, busy timeout | `statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout` as startup options; none of the first two for migrations | [`open_with`], [`PgTimeouts`] |
//!
//! Everything else (`RETURNING`, `ON CONFLICT … DO UPDATE/NOTHING`, partial unique indexes,
//! `<>`) is the same SQL on both. Constraint violations are told apart in `http/error.rs` through
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
//! again (`store/gc.rs`, `remove_if_unreferenced`). Finer row locks would let unrelated writes
//! run side by side: the cost of one lock is that device status reports and last-seen flushes of
//! every replica queue behind each other, as they already do on SQLite (not measured yet on
//! PostgreSQL). One lock, always the first statement of its transaction, cannot deadlock. The
//! unique constraints (`deployments.sequence`, `versions (model_id,
//! version)`, `keyring_updates.sequence`, one active signing key) stay as the backstop.
mod begin;
pub mod bind;
mod location;
mod pool;
mod timeouts;
mod tx;

pub use begin::{begin_read, begin_write};
pub use bind::Bind;
pub use location::{Location, redact};
pub use pool::{
    Backend, Conn, Db, MAX_CONNECTIONS, POSTGRES_MIGRATOR, SQLITE_MIGRATOR, WRITE_LOCK_KEY, open,
    open_with,
};
pub use timeouts::{
    DEFAULT_IDLE_TRANSACTION_TIMEOUT_SECS, DEFAULT_LOCK_TIMEOUT_SECS,
    DEFAULT_STATEMENT_TIMEOUT_SECS, PgTimeouts,
};
pub use tx::Tx;
