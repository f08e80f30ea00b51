//! Beginning transactions: the write lock up front, or one read snapshot.
use super::pool::{Backend, Db, WRITE_LOCK_KEY};
use super::tx::Tx;

/// Begins a write transaction that holds the database's write lock from its first statement.
///
/// SQLite: `BEGIN IMMEDIATE`, waiting out `BUSY_TIMEOUT` for the lock. A deferred transaction
/// that reads and then writes gets `SQLITE_BUSY` at once when another writer committed in between
/// (WAL cannot upgrade a stale read snapshot), which surfaced as a 500 `database is locked`.
/// PostgreSQL: `BEGIN` and [`WRITE_LOCK_KEY`], which serialises writers of every replica.
/// Every write path uses this; read-only transactions take [`begin_read`].
pub async fn begin_write(db: &Db) -> Result<Tx, sqlx::Error> {
    match Backend::of(db) {
        Backend::Sqlite => Tx::begin(db, "BEGIN IMMEDIATE").await,
        Backend::Postgres => {
            let mut tx = Tx::begin(db, "BEGIN").await?;
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
        Backend::Sqlite => Tx::begin(db, "BEGIN").await,
        Backend::Postgres => {
            Tx::begin(db, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::location::Location;
    use crate::db::pool::{MAX_CONNECTIONS, open};
    use sqlx::Executor as _;

    async fn sqlite() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("npub.db");
        let db = open(&Location::Sqlite(path.as_path().into()))
            .await
            .unwrap();
        (dir, db)
    }

    /// The failure the type exists for: a `COMMIT` that fails after the database already left
    /// the transaction. Made here by ending the transaction behind the wrapper's back, so the
    /// commit's `COMMIT` and the recovery's `ROLLBACK` both fail, as on a full disk.
    #[tokio::test]
    async fn survives_a_commit_whose_rollback_fails_without_pooling_the_connection() {
        let (_dir, db) = sqlite().await;
        for _ in 0..(MAX_CONNECTIONS * 2) {
            let mut tx = begin_write(&db).await.unwrap();
            (&mut *tx).execute("ROLLBACK").await.unwrap();
            assert!(tx.commit().await.is_err());
        }
        // Every connection the pool hands out can begin again.
        for _ in 0..(MAX_CONNECTIONS * 2) {
            let mut tx = begin_write(&db).await.unwrap();
            sqlx::query("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    }

    #[tokio::test]
    async fn survives_a_dropped_transaction_by_rolling_it_back() {
        let (_dir, db) = sqlite().await;
        let mut tx = begin_write(&db).await.unwrap();
        sqlx::query("CREATE TABLE dropped (x INTEGER)")
            .execute(&mut *tx)
            .await
            .unwrap();
        drop(tx);
        // The write lock is released once the spawned rollback ran; BEGIN IMMEDIATE waits for it.
        let mut tx = begin_write(&db).await.unwrap();
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM sqlite_master WHERE name = 'dropped'")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(n, 0, "the dropped transaction's table was rolled back");
        tx.rollback().await.unwrap();
    }
}
