//! `LISTEN/NOTIFY` on PostgreSQL: a change committed through one replica reaches every other
//! replica's poll cache at once, instead of at its next generation check.
//!
//! | Side | What | When |
//! |------|------|------|
//! | the writer | `SELECT pg_notify('`[`CHANNEL`]`', '')` in the transaction that bumps `fleet_generation` ([`notify_in`], from [`crate::device::generation::bump_generation`]) | delivered by PostgreSQL at commit, never for a rolled-back change |
//! | every replica | a [`PgListener`] on [`CHANNEL`] ([`listen`]), one connection of its own | on a notification: [`crate::device::poll_cache::PollCache::refresh_if_stale`] |
//!
//! Notifications are hints, not the truth: the listener only makes the replica compare
//! `fleet_generation` with its snapshot's now rather than at the next
//! [`crate::device::polling::FleetTimers::cache_check`]. Nothing is lost when a notification is: the periodic
//! check stays on as the fallback, and after the listener's connection drops (PostgreSQL
//! restarted, a proxy cut it) it reconnects with backoff and checks once straight away, since a
//! change may have been committed while nobody listened. SQLite has no replicas to tell; there
//! the listener is never started.
use std::future::Future;
use std::time::Duration;

use sqlx::postgres::PgListener;

use crate::db::{Backend, Conn, Db};

/// The channel the generation bump is announced on.
pub const CHANNEL: &str = "npub_fleet_generation";
/// First wait before reconnecting a lost listener; doubled per failure up to
/// [`RECONNECT_MAX`]. Short: a restarted database is usually back within seconds.
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between two reconnection attempts (the periodic check covers the gap).
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Announces a generation bump on PostgreSQL, in the caller's transaction (so only a committed
/// change is announced); nothing on SQLite.
pub async fn notify_in(conn: &mut Conn) -> Result<(), sqlx::Error> {
    if Backend::of_conn(conn) != Backend::Postgres {
        return Ok(());
    }
    // `pg_notify` returns `void`, which the Any driver cannot decode: select a constant.
    sqlx::query("SELECT 1 FROM pg_notify($1, '')")
        .bind(CHANNEL)
        .execute(conn)
        .await?;
    Ok(())
}

/// Listens for [`CHANNEL`] until the future is dropped, calling `on_change` (which brings the
/// snapshot up to date and logs its own failures) on each notification and after each
/// reconnection. On SQLite it never resolves and does nothing.
pub async fn listen<F, Fut>(db: Db, on_change: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    if Backend::of(&db) != Backend::Postgres {
        return std::future::pending().await;
    }
    let url = db.connect_options().database_url.to_string();
    let mut wait = RECONNECT_FIRST;
    loop {
        match session(&url, &on_change, &mut wait).await {
            Ok(()) => {}
            Err(e) => tracing::warn!(error = %e, retry_in = ?wait, "fleet change listener"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RECONNECT_MAX);
    }
}

/// One connection's life: connect, `LISTEN`, catch up, then call `on_change` per notification
/// until the connection fails. Resets `wait` once connected.
async fn session<F, Fut>(url: &str, on_change: &F, wait: &mut Duration) -> Result<(), sqlx::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut listener = PgListener::connect(url).await?;
    listener.listen(CHANNEL).await?;
    *wait = RECONNECT_FIRST;
    tracing::debug!(channel = CHANNEL, "listening for fleet changes");
    // Whatever was committed while nobody listened.
    on_change().await;
    loop {
        // `None`: the connection dropped and sqlx reconnected it (and listens again); a change
        // may have been announced in between.
        let _ = listener.try_recv().await?;
        // A burst of changes (a rollout opening batches) needs one refresh, not one each.
        while listener.next_buffered().is_some() {}
        on_change().await;
    }
}
