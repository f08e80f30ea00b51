//! [`Tx`]: a transaction whose connection goes back to the pool only in a known state.
//!
//! sqlx's own `Transaction` counts its depth on the connection and trusts that count: when a
//! `COMMIT` fails (SQLite's `SQLITE_FULL` on a full disk, which may already have rolled the
//! transaction back) its rollback fails too, the count stays at one, and the connection goes back
//! to the pool still "in a transaction". Every later `BEGIN` on it failed with "begin_with at
//! non-zero transaction depth", so a disk that filled once broke writes until a restart.
//!
//! This type issues `BEGIN`/`COMMIT`/`ROLLBACK` itself and keeps no count:
//!
//! | what happens                          | the connection                                       |
//! |---------------------------------------|------------------------------------------------------|
//! | `BEGIN` fails                         | closed (its state is unknown), never pooled           |
//! | `COMMIT` succeeds                     | back to the pool                                      |
//! | `COMMIT` fails, `ROLLBACK` succeeds   | back to the pool, idle; the commit's error is returned |
//! | `COMMIT` fails, `ROLLBACK` fails too  | closed                                                |
//! | [`Tx::rollback`] fails                | closed                                                |
//! | dropped unfinished (an error path)    | a task rolls it back, then pools it, or closes it if that fails |
//!
//! A `ROLLBACK` that finds no transaction ("cannot rollback - no transaction is active": SQLite
//! rolled back by itself) counts as a failure: closing a healthy connection costs a reconnect, a
//! pooled one in an unknown state costs every later write.
use std::ops::{Deref, DerefMut};

use sqlx::Executor as _;
use sqlx::pool::PoolConnection;

use super::pool::{Conn, Db};

/// A transaction on one pooled connection; dereferences to the connection for queries
/// (`&mut *tx`). End it with [`Tx::commit`] or [`Tx::rollback`]; dropping it rolls back.
#[derive(Debug)]
pub struct Tx {
    /// `None` once committed or rolled back.
    conn: Option<PoolConnection<sqlx::Any>>,
}

impl Tx {
    /// Acquires a connection and runs `begin` (`BEGIN`, `BEGIN IMMEDIATE`, …) on it.
    pub(super) async fn begin(db: &Db, begin: &'static str) -> Result<Self, sqlx::Error> {
        let mut conn = db.acquire().await?;
        if let Err(e) = (&mut *conn).execute(begin).await {
            close(conn).await;
            return Err(e);
        }
        Ok(Self { conn: Some(conn) })
    }

    /// Commits. On error the transaction is rolled back (the connection closed if even that
    /// fails) and the commit's error returned: nothing of it is applied.
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        let mut conn = self
            .conn
            .take()
            .expect("an open transaction has its connection");
        match (&mut *conn).execute("COMMIT").await {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, "commit failed; rolling back");
                if (&mut *conn).execute("ROLLBACK").await.is_err() {
                    close(conn).await;
                }
                Err(e)
            }
        }
    }

    /// Rolls back; the connection is closed rather than pooled if that fails.
    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        let mut conn = self
            .conn
            .take()
            .expect("an open transaction has its connection");
        match (&mut *conn).execute("ROLLBACK").await {
            Ok(_) => Ok(()),
            Err(e) => {
                close(conn).await;
                Err(e)
            }
        }
    }
}

/// Closes `conn` instead of returning it to the pool (which then opens a fresh one).
async fn close(conn: PoolConnection<sqlx::Any>) {
    if let Err(e) = conn.close().await {
        tracing::debug!(error = %e, "closing a connection in an unknown state");
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = (&mut *conn).execute("ROLLBACK").await {
                        tracing::warn!(error = %e, "rolling back a dropped transaction failed");
                        close(conn).await;
                    }
                });
            }
            // No runtime to roll back on: the connection must not be pooled as it is.
            Err(_) => conn.close_on_drop(),
        }
    }
}

impl Deref for Tx {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
            .as_deref()
            .expect("an open transaction has its connection")
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_deref_mut()
            .expect("an open transaction has its connection")
    }
}
