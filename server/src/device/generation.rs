//! The fleet generation: a counter every change to what devices are offered bumps, in the
//! transaction that makes the change, so that every replica's snapshot follows it.
use crate::db::Conn;
use crate::device::notify;
use crate::device::snapshot::Generation;

/// Marks a change to what devices are offered, in the caller's transaction; after the commit,
/// the caller rebuilds its own cache ([`PollCache::rebuild`]) and other replicas notice the new
/// generation at once on PostgreSQL (the commit delivers [`notify::notify_in`]'s notification),
/// or within [`FleetTimers::cache_check`] when a notification was missed.
pub async fn bump_generation(conn: &mut Conn) -> Result<Generation, sqlx::Error> {
    let (value,): (i64,) = sqlx::query_as(
        "UPDATE fleet_generation SET value = value + 1 WHERE id = 1 RETURNING value",
    )
    .fetch_one(&mut *conn)
    .await?;
    notify::notify_in(conn).await?;
    Ok(Generation(value))
}
