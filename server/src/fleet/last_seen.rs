//! Batched last-seen times: a poll records its time in memory; a background task writes them all
//! in one transaction every [`super::FleetTimers::last_seen_flush`] and once more at shutdown. A
//! poll therefore never writes the database, and a thousand devices polling cost one transaction
//! per flush, not a thousand. A crash loses at most one interval of last-seen times, which only
//! makes devices look quieter than they were.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::db::Db;

/// Last-seen times waiting to be written, by device id.
#[derive(Debug, Default)]
pub struct LastSeen {
    pending: Mutex<HashMap<Arc<str>, i64>>,
}

impl LastSeen {
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

    /// Writes and forgets the pending times; returns how many devices were updated. On a
    /// database error the times are put back for the next flush.
    pub async fn flush(&self, db: &Db) -> Result<usize, sqlx::Error> {
        let batch =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if batch.is_empty() {
            return Ok(0);
        }
        match write(db, &batch).await {
            Ok(()) => Ok(batch.len()),
            Err(e) => {
                for (device, at) in batch {
                    self.touch(&device, at);
                }
                Err(e)
            }
        }
    }
}

async fn write(db: &Db, batch: &HashMap<Arc<str>, i64>) -> Result<(), sqlx::Error> {
    let mut tx = crate::db::begin_write(db).await?;
    for (device, at) in batch {
        sqlx::query(
            "UPDATE devices SET last_seen = $1 WHERE id = $2 AND (last_seen IS NULL OR last_seen < $1)",
        )
        .bind(at)
        .bind(&**device)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}
