//! One way to change the fleet: [`FleetChange`] does the steps every write needs, in the only
//! order that keeps every replica's poll snapshot right, so a new write cannot forget one.
//!
//! | Step | Where                         | What                                                                 |
//! |------|-------------------------------|----------------------------------------------------------------------|
//! | 1    | [`FleetChange::begin`]        | this process's write lock, then `BEGIN` for a write (on PostgreSQL with the advisory lock that serialises every replica's writers) |
//! | 2    | the caller, on `&mut *change` | its queries, in that transaction                                     |
//! | 3    | [`FleetChange::commit`]       | the [`Record`] (an audit entry, or the device's own history), then `fleet_generation` + 1 when the [`Effect`] touches what devices are offered, then `COMMIT` |
//! | 4    | [`Committed::finish`]         | the write lock released, then this replica's snapshot brought up to the new generation (other replicas follow by `pg_notify` or their periodic check) |
//!
//! An error before step 3 drops the change: the transaction rolls back ([`crate::db::Tx`]) and
//! the lock is released, nothing half-written. [`Committed`] holds the lock between the commit
//! and the refresh for what must happen in that order (a key rotation makes the new key active
//! before another writer can sign with the old one).
use serde_json::Value;
use tokio::sync::MutexGuard;

use crate::auth::Operator;
use crate::db::{Conn, Tx};
use crate::device::poll_cache::OwnChange;
use crate::device::snapshot::{Added, Generation};
use crate::http::error::ApiError;
use crate::ops::audit;
use crate::state::AppState;

/// A write to the fleet in progress: the write lock held, a transaction open. Dereferences to
/// the transaction's connection for queries (`&mut *change`).
#[must_use = "a change is rolled back unless committed"]
pub struct FleetChange<'s> {
    state: &'s AppState,
    serial: MutexGuard<'s, ()>,
    tx: Tx,
}

/// What a committed change leaves as its record.
#[derive(Debug)]
pub enum Record<'a> {
    /// An audit entry by the operator who made the change.
    Audit {
        /// Who.
        op: &'a Operator,
        /// The action (`deployment.create`, `device.revoke`, …).
        action: &'a str,
        /// What it acted on (`deployments/7`).
        object: String,
        /// The change's details.
        detail: Value,
    },
    /// One audit entry per object by the same operator and action (a batch provisioned
    /// together): `(object, detail)`.
    Each {
        /// Who.
        op: &'a Operator,
        /// The action, for every entry.
        action: &'a str,
        /// Each object with its details.
        entries: Vec<(String, Value)>,
    },
    /// A device's own status report: its history row, written by the caller in the same
    /// transaction, is the record.
    DeviceReport,
}

/// What a change does to what devices are offered.
#[derive(Debug)]
pub enum Effect {
    /// It changes devices, deployments or the keyring: a new fleet generation, and this
    /// replica's snapshot rebuilt to it.
    Fleet,
    /// It only provisioned these devices: a new generation, and the snapshot gains them
    /// without reading deployments again ([`crate::device::poll_cache::PollCache::add_devices`]).
    Provisioned(Vec<Added>),
    /// Nothing devices are offered (a key imported without a keyring update, a report that
    /// changed no rollout): no new generation.
    Nothing,
}

impl<'s> FleetChange<'s> {
    /// Step 1: the write lock, then a write transaction.
    pub async fn begin(state: &'s AppState) -> Result<Self, ApiError> {
        let serial = state.write_turn().await?;
        let tx = crate::db::begin_write(&state.db).await?;
        Ok(Self { state, serial, tx })
    }

    /// Steps 3: the record, the generation (per `effect`), `COMMIT`. The write lock is still
    /// held by the answer: [`Committed::finish`] releases it and refreshes the snapshot.
    pub async fn commit(
        mut self,
        record: Record<'_>,
        effect: Effect,
    ) -> Result<Committed<'s>, ApiError> {
        match record {
            Record::Audit {
                op,
                action,
                object,
                detail,
            } => audit::record(&mut self.tx, op, action, &object, detail).await?,
            Record::Each {
                op,
                action,
                entries,
            } => {
                for (object, detail) in entries {
                    audit::record(&mut self.tx, op, action, &object, detail).await?;
                }
            }
            Record::DeviceReport => {}
        }
        let generation = match effect {
            Effect::Nothing => None,
            Effect::Fleet | Effect::Provisioned(_) => {
                Some(crate::device::generation::bump_generation(&mut self.tx).await?)
            }
        };
        // This replica refreshes for its own change (step 4): its own notification, or a
        // periodic check between the commit and the refresh, must not read the fleet first.
        let own = generation.map(|g| self.state.polling.cache.claim(g));
        self.tx.commit().await?;
        crate::ops::webhooks::emit::wake();
        Ok(Committed {
            state: self.state,
            serial: self.serial,
            own,
            refresh: match (generation, effect) {
                (Some(g), Effect::Provisioned(added)) => Refresh::Provisioned(g, added),
                (Some(g), _) => Refresh::Fleet(g),
                (None, _) => Refresh::Nothing,
            },
        })
    }

    /// Ends the change without writing (a patch that changes nothing): rolled back, lock
    /// released.
    pub async fn abandon(self) -> Result<(), ApiError> {
        self.tx.rollback().await?;
        Ok(())
    }
}

impl std::ops::Deref for FleetChange<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.tx
    }
}

impl std::ops::DerefMut for FleetChange<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.tx
    }
}

/// A committed change whose snapshot refresh is still to come; the write lock is held until
/// [`Committed::finish`].
#[must_use = "finish() releases the write lock and refreshes this replica's snapshot"]
pub struct Committed<'s> {
    state: &'s AppState,
    serial: MutexGuard<'s, ()>,
    /// Held until the refresh is done (or this is dropped unfinished).
    own: Option<OwnChange<'s>>,
    refresh: Refresh,
}

enum Refresh {
    Fleet(Generation),
    Provisioned(Generation, Vec<Added>),
    Nothing,
}

impl Committed<'_> {
    /// Step 4: the lock released, then this replica's snapshot brought up to the change. A
    /// failure is logged (the periodic generation check retries) rather than failing a request
    /// whose change is already committed.
    pub async fn finish(self) {
        let Committed {
            state,
            serial,
            own,
            refresh,
        } = self;
        drop(serial);
        let cache = &state.polling.cache;
        let result = match refresh {
            Refresh::Fleet(committed) => cache.catch_up(&state.db, &state.store, committed).await,
            Refresh::Provisioned(committed, added) => {
                cache
                    .add_devices(&state.db, &state.store, committed, added)
                    .await
            }
            Refresh::Nothing => Ok(()),
        };
        drop(own);
        if let Err(e) = result {
            tracing::error!(error = %e, "rebuilding the fleet cache");
        }
    }
}
