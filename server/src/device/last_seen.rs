//! Batched last-seen times: a poll records its time in memory; a background task writes them all
//! in one transaction every [`crate::device::polling::FleetTimers::last_seen_flush`] and once more at shutdown. A
//! poll therefore never writes the database, and a thousand devices polling cost one transaction
//! per flush, not a thousand. A crash loses at most one interval of last-seen times, which only
//! makes devices look quieter than they were.
//!
//! The same flush records **offers**: the first time a device was handed a deployment's manifest
//! (`device_offers`, and an `offered` event in its history, `crate::fleet::history`). Pending offers are
//! keyed by (device, deployment), so a device polling all day costs one entry, and the flush is
//! the only writer.
//!
//! ## Several replicas
//! Each replica batches the polls it answered and flushes them on its own timer; a device that
//! polls both (a load balancer alternating) has pending entries on each. Both writes are claims
//! that only the first can win, so the outcome does not depend on which replica flushes first:
//! `last_seen` only moves forward (`WHERE last_seen < $1`), and an offer is recorded by the one
//! `INSERT … ON CONFLICT DO NOTHING` into `device_offers` that inserts, which alone writes the
//! device's `offered` history event (`crate::fleet::history::record_offer`), so a device offered a
//! deployment by two replicas has one `offered` event, with the earliest time of the replica
//! that flushed first.
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use crate::db::Db;
use crate::device::snapshot::DeviceEntry;

/// Last-seen times waiting to be written, by device id.
#[derive(Debug, Default)]
pub struct LastSeen {
    pending: Mutex<HashMap<Arc<str>, i64>>,
    offers: Mutex<HashMap<(Arc<str>, i64), i64>>,
}

/// How much newer than the last recorded time a poll must be to be recorded again. Devices
/// poll every minute or so; anything between (a device retrying, a saturated benchmark's
/// hundreds of polls a device) would only make the flush write the same row again.
pub const RESOLUTION_MS: i64 = 30_000;

impl LastSeen {
    /// Records that the device of `entry` polled at `at_ms`, unless a time less than
    /// [`RESOLUTION_MS`] older was recorded already: then this costs one atomic load and
    /// nothing is written (`devices.last_seen` is at most this much behind the last poll).
    pub fn seen(&self, entry: &DeviceEntry, at_ms: i64) {
        let recorded = entry.recorded_ms.load(Ordering::Relaxed);
        if (recorded..recorded.saturating_add(RESOLUTION_MS)).contains(&at_ms) {
            return;
        }
        entry.recorded_ms.store(at_ms, Ordering::Relaxed);
        self.touch(&entry.id, at_ms);
    }

    /// Records that `device` was seen at `at_ms`.
    pub fn touch(&self, device: &Arc<str>, at_ms: i64) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get_mut(device) {
            Some(t) => *t = (*t).max(at_ms),
            None => {
                pending.insert(Arc::clone(device), at_ms);
            }
        }
    }

    /// Records that `device` was handed the manifest of deployment `deployment_id` at `at_ms`
    /// (the earliest time is kept).
    pub fn offered(&self, device: &Arc<str>, deployment_id: i64, at_ms: i64) {
        let mut offers = self.offers.lock().unwrap_or_else(PoisonError::into_inner);
        offers
            .entry((Arc::clone(device), deployment_id))
            .and_modify(|t| *t = (*t).min(at_ms))
            .or_insert(at_ms);
    }

    /// Takes `device`'s pending offers (deployment id, time), for a caller that writes them in
    /// its own transaction, before the device's report, so that its history reads in order.
    /// The returned guard puts them back unless [`TakenOffers::written`] is called.
    pub fn take_offers<'a>(&'a self, device: &Arc<str>) -> TakenOffers<'a> {
        let mut offers = self.offers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut taken: Vec<(i64, i64)> = Vec::new();
        offers.retain(|(d, deployment), at| {
            let mine = d == device;
            if mine {
                taken.push((*deployment, *at));
            }
            !mine
        });
        taken.sort_unstable_by_key(|&(_, at)| at);
        TakenOffers {
            owner: self,
            device: Arc::clone(device),
            offers: taken,
        }
    }

    /// Writes and forgets the pending times and offers; returns how many devices' times were
    /// updated. On a database error everything is put back for the next flush.
    pub async fn flush(&self, db: &Db) -> Result<usize, sqlx::Error> {
        let batch = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            // The next interval sees about as many devices: keep room for them, so that polls
            // do not regrow the map.
            let room = HashMap::with_capacity(pending.len());
            std::mem::replace(&mut *pending, room)
        };
        let offers =
            std::mem::take(&mut *self.offers.lock().unwrap_or_else(PoisonError::into_inner));
        if batch.is_empty() && offers.is_empty() {
            return Ok(0);
        }
        match write(db, &batch, &offers).await {
            Ok(()) => Ok(batch.len()),
            Err(e) => {
                for (device, at) in batch {
                    self.touch(&device, at);
                }
                for ((device, deployment), at) in offers {
                    self.offered(&device, deployment, at);
                }
                Err(e)
            }
        }
    }
}

/// Offers taken out of the pending set; put back when dropped unless written.
#[derive(Debug)]
pub struct TakenOffers<'a> {
    owner: &'a LastSeen,
    device: Arc<str>,
    offers: Vec<(i64, i64)>,
}

impl TakenOffers<'_> {
    /// (deployment id, first time), oldest first.
    pub fn offers(&self) -> &[(i64, i64)] {
        &self.offers
    }

    /// The offers were committed: forget them.
    pub fn written(mut self) {
        self.offers.clear();
    }
}

impl Drop for TakenOffers<'_> {
    fn drop(&mut self) {
        for &(deployment, at) in &self.offers {
            self.owner.offered(&self.device, deployment, at);
        }
    }
}

async fn write(
    db: &Db,
    batch: &HashMap<Arc<str>, i64>,
    offers: &HashMap<(Arc<str>, i64), i64>,
) -> Result<(), sqlx::Error> {
    let mut tx = crate::db::begin_write(db).await?;
    for ((device, deployment), at) in offers {
        crate::fleet::history::record_offer(&mut tx, device, *deployment, *at).await?;
    }
    let seen: Vec<(&Arc<str>, &i64)> = batch.iter().collect();
    for rows in seen.chunks(ROWS_PER_STATEMENT) {
        // Built from placeholder numbers only: no value reaches the SQL text.
        let mut update = if rows.len() == ROWS_PER_STATEMENT {
            sqlx::query(full_statement())
        } else {
            sqlx::query(sqlx::AssertSqlSafe(update_statement(rows.len())))
        };
        for &(device, at) in rows {
            update = update.bind(&**device).bind(*at);
        }
        update.execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Devices per `UPDATE`: two parameters each. One statement per device made a flush cost a
/// database round trip per device seen, so that a poll's share of the flush grew with the fleet
/// (100,000 devices seen in one interval: 100,000 statements); per 100 it is 1,000. Not more:
/// binding a numbered parameter looks its name up among the statement's
/// (`sqlite3_bind_parameter_name`, 4 % of a saturated server's time at 500 rows).
const ROWS_PER_STATEMENT: usize = 100;

/// [`update_statement`] for [`ROWS_PER_STATEMENT`] rows, every chunk of a flush but its last:
/// formatted once per process, not once per chunk.
fn full_statement() -> &'static str {
    static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FULL.get_or_init(|| update_statement(ROWS_PER_STATEMENT))
}

/// `UPDATE devices SET last_seen` for `rows` (id, time) pairs, `$1, $2` the first: a time only
/// moves forward.
fn update_statement(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|i| format!("(${}, CAST(${} AS BIGINT))", 2 * i + 1, 2 * i + 2))
        .collect();
    format!(
        "WITH seen (id, at) AS (VALUES {}) UPDATE devices SET last_seen = seen.at FROM seen \
         WHERE devices.id = seen.id AND (devices.last_seen IS NULL OR devices.last_seen < seen.at)",
        values.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(seen: &LastSeen, id: &str) -> Option<i64> {
        seen.pending.lock().unwrap().get(id).copied()
    }

    #[test]
    fn survives_a_burst_of_polls_by_recording_once_per_resolution() {
        let seen = LastSeen::default();
        let entry = DeviceEntry::new(Arc::from("d-1"), 1, 0, "field".into());
        seen.seen(&entry, 1_000_000);
        assert_eq!(
            pending(&seen, "d-1"),
            Some(1_000_000),
            "the first poll is recorded"
        );
        seen.pending.lock().unwrap().clear(); // as a flush does
        seen.seen(&entry, 1_000_000 + RESOLUTION_MS - 1);
        assert_eq!(
            pending(&seen, "d-1"),
            None,
            "inside the resolution: nothing to write"
        );
        seen.seen(&entry, 1_000_000 + RESOLUTION_MS);
        assert_eq!(pending(&seen, "d-1"), Some(1_000_000 + RESOLUTION_MS));
        // A clock that stepped back is recorded (the flush keeps the newer stored time).
        seen.seen(&entry, 5);
        assert_eq!(pending(&seen, "d-1"), Some(1_000_000 + RESOLUTION_MS));
        assert_eq!(entry.recorded_ms.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn numbers_every_parameter_once() {
        let sql = update_statement(3);
        assert!(sql.contains("VALUES ($1, CAST($2 AS BIGINT)), ($3, CAST($4 AS BIGINT)), ($5, CAST($6 AS BIGINT))"), "{sql}");
        assert!(!sql.contains("$7"));
    }
}
