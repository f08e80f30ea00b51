//! The poll cache: everything the device API needs, in memory, so that a poll costs a hash, two
//! map lookups and no database access.
//!
//! The "nothing new" poll allocates nothing in npub's code (`tests/poll_alloc.rs` counts): the
//! token is hashed on the stack and looked up by its 32-byte digest (a hash map: the same cost at
//! 1,000 and 100,000 devices), and the headers every answer carries are built with the snapshot
//! ([`KeyringRecords::newest_header`]) and cloned by reference count.
//!
//! A [`Snapshot`] holds the unrevoked devices by token hash, each device's current assignment
//! (deployment sequence and signed manifest for its hardware class), the keyring updates
//! ([`KeyringRecords`]) and every assigned pack:
//! its bytes, or only its length when the store streams downloads (an S3 bucket). It is
//! immutable; a change makes a new one and swaps the pointer, so readers never wait for a
//! rebuild and never see half of one. Every change that affects devices bumps
//! `fleet_generation` in its own transaction, and after its commit the cache catches up to the
//! generation it committed:
//!
//! | The change                                  | The next snapshot                                       |
//! |---------------------------------------------|---------------------------------------------------------|
//! | any, and the snapshot is already at or past its generation (a rebuild for a later change read it) | none: it is held ([`PollCache::catch_up`]; concurrent changes cost one rebuild) |
//! | provisioning, and the snapshot is of the generation just before it | the current one plus the new devices, assigned from the deployments it holds; nothing is read ([`PollCache::add_devices`]) |
//! | anything else                               | read from the database in one read transaction          |
//!
//! Snapshots are made one at a time.
//!
//! ## Several replicas
//! Each replica keeps its own snapshot. A change made through one replica rebuilds that replica's
//! snapshot at once; the others compare `fleet_generation` with the generation their snapshot was
//! built from every [`crate::device::polling::FleetTimers::cache_check`] (one indexed single-row read per second
//! per replica, whatever the fleet size) and rebuild when it moved. A device may therefore see a
//! change up to one check interval late on another replica, which a polling device (minutes
//! between polls) cannot tell from its own poll timing. With PostgreSQL, `LISTEN/NOTIFY` on the
//! same bump removes even that delay (`crate::device::notify`); the generation row stays as the fallback.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::db::Db;
use crate::device::build::{build, extend};
use crate::device::snapshot::{Added, Generation, LoadError, Snapshot};

use crate::store::PackStore;

/// The current snapshot and the lock that serialises rebuilds.
#[derive(Debug)]
pub struct PollCache {
    current: RwLock<Arc<Snapshot>>,
    rebuild: tokio::sync::Mutex<()>,
    /// Snapshots made current, by how: read from the database, or extended with provisioned
    /// devices; and changes that found the snapshot already past them.
    read: AtomicU64,
    extended: AtomicU64,
    caught_up: AtomicU64,
    /// Generations this process is committing or has committed and is bringing the snapshot up
    /// to itself ([`OwnChange`]): a notification or periodic check that reads one of them leaves
    /// it to the committer, whose refresh may extend the snapshot instead of reading the fleet.
    own: std::sync::Mutex<Vec<i64>>,
}

/// A change of this process's own, at one generation, from before its `COMMIT` until its
/// committer has refreshed the snapshot (or given up): dropping it hands the generation back to
/// the notifications and the periodic check.
#[derive(Debug)]
pub struct OwnChange<'c> {
    cache: &'c PollCache,
    generation: i64,
}

impl Drop for OwnChange<'_> {
    fn drop(&mut self) {
        let mut own = self
            .cache
            .own
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = own.iter().position(|&g| g == self.generation) {
            own.swap_remove(i);
        }
    }
}

impl PollCache {
    /// Builds the first snapshot; with an index of devices by id when `by_certificate` (the
    /// server takes client certificates naming devices).
    pub async fn load(
        db: &Db,
        store: &Arc<dyn PackStore>,
        by_certificate: bool,
    ) -> Result<Self, LoadError> {
        let snapshot = build(db, store, &Snapshot::empty(by_certificate)).await?;
        Ok(Self {
            current: RwLock::new(Arc::new(snapshot)),
            rebuild: tokio::sync::Mutex::new(()),
            read: AtomicU64::new(1),
            extended: AtomicU64::new(0),
            caught_up: AtomicU64::new(0),
            own: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Marks `generation` as this process's change until the answer is dropped (see
    /// [`OwnChange`]); taken before the `COMMIT` that publishes it.
    pub fn claim(&self, generation: Generation) -> OwnChange<'_> {
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(generation.0);
        OwnChange {
            cache: self,
            generation: generation.0,
        }
    }

    fn is_own(&self, generation: i64) -> bool {
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&generation)
    }

    /// Snapshots made current since the start: (read from the database, extended with
    /// provisioned devices), and committed changes the snapshot was already past.
    pub fn builds(&self) -> (u64, u64, u64) {
        (
            self.read.load(Ordering::Relaxed),
            self.extended.load(Ordering::Relaxed),
            self.caught_up.load(Ordering::Relaxed),
        )
    }

    /// The cache's lines of `/metrics`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let (read, extended, caught_up) = self.builds();
        let snapshot = self.get();
        let _ = write!(
            out,
            "# HELP npub_fleet_snapshots_total Poll snapshots made current, by how: read from the database, or extended with provisioned devices without reading it.\n\
             # TYPE npub_fleet_snapshots_total counter\n\
             npub_fleet_snapshots_total{{kind=\"read\"}} {read}\n\
             npub_fleet_snapshots_total{{kind=\"extended\"}} {extended}\n\
             # HELP npub_fleet_changes_coalesced_total Committed fleet changes that needed no snapshot of their own (one made for a later change already held them).\n\
             # TYPE npub_fleet_changes_coalesced_total counter\n\
             npub_fleet_changes_coalesced_total {caught_up}\n\
             # HELP npub_fleet_devices Unrevoked devices in the current poll snapshot.\n\
             # TYPE npub_fleet_devices gauge\n\
             npub_fleet_devices {}\n\
             # HELP npub_fleet_generation The fleet_generation of the current poll snapshot.\n\
             # TYPE npub_fleet_generation gauge\n\
             npub_fleet_generation {}\n",
            snapshot.devices.len(),
            snapshot.generation,
        );
    }

    fn make_current(&self, next: Snapshot, counter: &AtomicU64) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The current snapshot.
    pub fn get(&self) -> Arc<Snapshot> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Builds a new snapshot from the database and makes it current.
    pub async fn rebuild(&self, db: &Db, store: &Arc<dyn PackStore>) -> Result<(), LoadError> {
        let _one_at_a_time = self.rebuild.lock().await;
        let next = build(db, store, &self.get()).await?;
        self.make_current(next, &self.read);
        Ok(())
    }

    /// Makes the snapshot reflect the committed change that moved the generation to
    /// `committed`: nothing when it already does (a rebuild for a concurrent change read past
    /// it, so several changes committed together cost one rebuild), else a rebuild.
    pub async fn catch_up(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
        committed: Generation,
    ) -> Result<(), LoadError> {
        self.advance(db, store, committed, None).await.map(drop)
    }

    /// Makes the snapshot reflect a committed change that only provisioned `added` and moved the
    /// generation to `committed`. When the current snapshot is of the generation just before,
    /// the change is all that differs from it: the next snapshot is this one with the new
    /// devices, assigned from the deployments it already holds, and the database is not read
    /// (a rebuild reads every device: provisioning 100,000 devices 1,000 at a time read 5
    /// million rows). Otherwise, as [`Self::catch_up`].
    pub async fn add_devices(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
        committed: Generation,
        added: Vec<Added>,
    ) -> Result<(), LoadError> {
        self.advance(db, store, committed, Some(added))
            .await
            .map(drop)
    }

    /// [`Self::catch_up`] (`added`: `None`) and [`Self::add_devices`]; whether a snapshot was
    /// made (`false`: the current one was already at `committed`, checked under the lock).
    async fn advance(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
        committed: Generation,
        added: Option<Vec<Added>>,
    ) -> Result<bool, LoadError> {
        let _one_at_a_time = self.rebuild.lock().await;
        let current = self.get();
        if current.generation >= committed.0 {
            self.caught_up.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        match added {
            Some(added) if current.generation + 1 == committed.0 => {
                let next = extend(store, &current, committed.0, added).await?;
                self.make_current(next, &self.extended);
            }
            _ => {
                let next = build(db, store, &current).await?;
                self.make_current(next, &self.read);
            }
        }
        Ok(true)
    }

    /// Rebuilds if `fleet_generation` differs from the current snapshot's, unless it is a change
    /// of this process whose committer is still to refresh ([`Self::claim`]). Past it, the
    /// generation is looked at again under the rebuild lock: a change of this server that
    /// committed just before the read, and whose own [`Self::add_devices`] or
    /// [`Self::catch_up`] took the lock first, needs no second snapshot (without the second
    /// look, every provisioning the periodic check or a notification saw between its commit and
    /// its extension cost a read of the whole fleet). Behind it (the database was restored from
    /// a backup taken before the snapshot), the snapshot describes a fleet the database no
    /// longer holds, and is rebuilt from the database at once.
    pub async fn refresh_if_stale(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
    ) -> Result<bool, LoadError> {
        // The snapshot's generation first: it only grows, and the database's, read after it, is
        // at least as high unless the database went back. Read the other way round, a change
        // that committed and extended the snapshot between the two reads looked like a restore
        // and read the whole fleet again.
        let current = self.get().generation;
        let (generation,): (i64,) =
            sqlx::query_as("SELECT value FROM fleet_generation WHERE id = 1")
                .fetch_one(db)
                .await?;
        if generation == current || (generation > current && self.is_own(generation)) {
            Ok(false)
        } else if generation < current {
            self.rebuild(db, store).await.map(|()| true)
        } else {
            self.advance(db, store, Generation(generation), None).await
        }
    }
}
