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
//! built from every [`super::FleetTimers::cache_check`] (one indexed single-row read per second
//! per replica, whatever the fleet size) and rebuild when it moved. A device may therefore see a
//! change up to one check interval late on another replica, which a polling device (minutes
//! between polls) cannot tell from its own poll timing. With PostgreSQL, `LISTEN/NOTIFY` on the
//! same bump removes even that delay (`super::notify`); the generation row stays as the fallback.
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use axum::http::HeaderValue;
use bytes::Bytes;
use futures_util::TryStreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt;

use npub_core::manifest::ROTATION_BYTES;

use super::rollout;
use super::token_index::{self, TokenIndex};
use crate::db::Db;
use crate::store::{PackDigest, PackStore};

/// A device that may call the device API.
#[derive(Debug)]
pub struct DeviceEntry {
    /// Its id.
    pub id: Arc<str>,
    /// Hardware class (the manifest it is offered is signed for it).
    pub hw_class: u32,
    /// Its accelerator's NPU1 accel word.
    pub accel: u32,
    /// Its group.
    pub group: String,
    /// The last time its last-seen time was recorded for the flush (unix ms; 0: never), kept
    /// with the entry so that a poll inside the resolution costs one atomic load
    /// (`super::last_seen::LastSeen::seen`).
    pub(crate) recorded_ms: AtomicI64,
}

impl DeviceEntry {
    /// An entry not yet seen.
    pub fn new(id: Arc<str>, hw_class: u32, accel: u32, group: String) -> Self {
        Self {
            id,
            hw_class,
            accel,
            group,
            recorded_ms: AtomicI64::new(0),
        }
    }
}

/// What a device is offered now.
#[derive(Debug)]
pub struct Assignment {
    /// The deployment.
    pub deployment_id: i64,
    /// Its sequence.
    pub sequence: u64,
    /// The pack's SHA-256, hex.
    pub sha256: String,
    /// The signed manifest for the device's hardware class.
    pub manifest: Bytes,
    /// `ETag` of the manifest response.
    pub etag: HeaderValue,
}

/// An assigned pack: in memory, or (a remote store) its length only.
#[derive(Debug, Clone)]
pub struct PackEntry {
    /// Its length in bytes.
    pub len: u64,
    /// Its bytes, when the store's packs are served from memory
    /// ([`PackStore::serve_from_memory`]); `None`: the device route streams them from the store.
    pub bytes: Option<Bytes>,
    /// Its canonical IO-bindings encoding, when it declares any.
    pub io: Option<Bytes>,
    /// `ETag` of its downloads: `"<sha256>"`.
    pub etag: HeaderValue,
    /// The open file the bytes were read and hashed from, when the store keeps packs as local
    /// files ([`PackStore::local_file`]): the device lane `sendfile`s downloads from it. Packs are
    /// never rewritten in place (a new pack is a new name; removal unlinks, and this descriptor
    /// keeps the inode while a snapshot holds it).
    pub file: Option<Arc<std::fs::File>>,
}

/// The keyring updates devices are sent (`keyring_updates`, by sequence): the 144-byte records
/// back to back, so that "every record after N" is one slice of one buffer.
#[derive(Debug, Clone)]
pub struct KeyringRecords {
    sequences: Vec<u64>,
    records: Bytes,
    /// [`Self::newest`] as a header value, built once per snapshot.
    newest_header: HeaderValue,
}

impl Default for KeyringRecords {
    fn default() -> Self {
        Self {
            sequences: Vec::new(),
            records: Bytes::new(),
            newest_header: HeaderValue::from_static("0"),
        }
    }
}

impl KeyringRecords {
    /// The newest record's sequence, 0 when there is none: `Npub-Keyring-Sequence`.
    pub fn newest(&self) -> u64 {
        self.sequences.last().copied().unwrap_or(0)
    }

    /// [`Self::newest`] as the `Npub-Keyring-Sequence` value (cloning it does not allocate).
    pub fn newest_header(&self) -> &HeaderValue {
        &self.newest_header
    }

    /// The records with a sequence above `after`, concatenated in order (empty: none).
    pub fn after(&self, after: u64) -> Bytes {
        let first = self.sequences.partition_point(|&s| s <= after);
        self.records.slice(first * ROTATION_BYTES..)
    }
}

/// A device as a poll finds it: its entry and its assignment.
#[derive(Debug)]
pub struct Polled {
    /// The device.
    pub entry: Arc<DeviceEntry>,
    /// What it is offered now (the same as [`Snapshot::assignment`] of its id).
    pub assignment: Option<Arc<Assignment>>,
}

/// SHA-256 of a device token: what the snapshot finds a device by.
pub type TokenDigest = [u8; 32];

/// One immutable view of the fleet.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The `fleet_generation` it was built from.
    pub generation: i64,
    /// Each device with its assignment beside it, so that a poll finds both with one lookup
    /// (at 100,000 devices every lookup is a cache miss or two).
    devices: TokenIndex,
    assignments: HashMap<Arc<str>, Arc<Assignment>>,
    packs: HashMap<String, PackEntry>,
    keyring: KeyringRecords,
    /// What the assignments were computed from, kept so that new devices alone
    /// ([`PollCache::add_devices`]) are assigned without reading deployments again.
    offers: Arc<Offers>,
}

/// The deployments a snapshot offers from, as read: highest sequence first, with their signed
/// manifests by (deployment, hardware class).
#[derive(Debug, Default)]
struct Offers {
    rows: Vec<OfferRow>,
    manifests: HashMap<(i64, u32), Bytes>,
}

/// The `fleet_generation` a committed change moved to ([`super::bump_generation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "the cache catches up to it after the commit (`fleet::refresh`)"]
pub struct Generation(pub(super) i64);

/// A device provisioned by a committed change, as the snapshot keeps it.
#[derive(Debug)]
pub struct Added {
    /// SHA-256 of its token.
    pub digest: TokenDigest,
    /// Its id.
    pub id: String,
    /// Its hardware class.
    pub hw_class: u32,
    /// Its accelerator's NPU1 accel word.
    pub accel: u32,
    /// Its group.
    pub group: String,
}

impl Snapshot {
    /// The device whose token is `secret`, unless unknown or revoked. Hashes on the stack and
    /// looks up the digest: no allocation, no scan.
    pub fn device(&self, secret: &str) -> Option<&Arc<DeviceEntry>> {
        self.polled(secret.as_bytes()).map(|p| &p.entry)
    }

    /// The device whose token is `secret` and what it is offered now, from one lookup.
    pub fn polled(&self, secret: &[u8]) -> Option<&Polled> {
        let digest: TokenDigest = Sha256::digest(secret).into();
        self.devices.get(&digest)
    }

    /// What `device` is offered now.
    pub fn assignment(&self, device: &str) -> Option<&Arc<Assignment>> {
        self.assignments.get(device)
    }

    /// An assigned pack's bytes.
    pub fn pack(&self, sha256: &str) -> Option<&PackEntry> {
        self.packs.get(sha256)
    }

    /// The keyring updates devices are sent.
    pub fn keyring(&self) -> &KeyringRecords {
        &self.keyring
    }
}

/// Why a snapshot could not be built.
#[derive(Debug)]
pub enum LoadError {
    /// The database failed.
    Db(sqlx::Error),
    /// A pack could not be read, or differs from its row.
    Pack(String),
    /// A stored keyring update is malformed.
    Keyring(String),
    /// A device row's token hash is not a SHA-256 in hex.
    TokenHash(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Db(e) => write!(f, "database: {e}"),
            Self::Pack(e) => write!(f, "pack store: {e}"),
            Self::Keyring(e) => write!(f, "keyring updates: {e}"),
            Self::TokenHash(id) => write!(
                f,
                "device {id:?}: token_hash is not 64 lowercase hex digits"
            ),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<sqlx::Error> for LoadError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e)
    }
}

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
}

impl PollCache {
    /// Builds the first snapshot.
    pub async fn load(db: &Db, store: &Arc<dyn PackStore>) -> Result<Self, LoadError> {
        let snapshot = build(db, store, &Snapshot::default()).await?;
        Ok(Self {
            current: RwLock::new(Arc::new(snapshot)),
            rebuild: tokio::sync::Mutex::new(()),
            read: AtomicU64::new(1),
            extended: AtomicU64::new(0),
            caught_up: AtomicU64::new(0),
        })
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

    /// Rebuilds if `fleet_generation` is past the current snapshot's, looked at again under the
    /// rebuild lock: a change of this server that committed just before the read, and whose
    /// own [`Self::add_devices`] or [`Self::catch_up`] took the lock first, needs no second
    /// snapshot (without the second look, every provisioning the periodic check or a
    /// notification saw between its commit and its extension cost a read of the whole fleet).
    pub async fn refresh_if_stale(
        &self,
        db: &Db,
        store: &Arc<dyn PackStore>,
    ) -> Result<bool, LoadError> {
        let (generation,): (i64,) =
            sqlx::query_as("SELECT value FROM fleet_generation WHERE id = 1")
                .fetch_one(db)
                .await?;
        if generation == self.get().generation {
            return Ok(false);
        }
        self.advance(db, store, Generation(generation), None).await
    }
}

/// A device row as targeting needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TargetRow {
    /// `devices.id`.
    pub id: String,
    /// NPU1 accel word.
    pub accel: i64,
    /// Group.
    pub grp: String,
}

/// What targeting reads of a device: a database row, or a snapshot's entry.
pub trait Target {
    /// Its id.
    fn id(&self) -> &str;
    /// Its NPU1 accel word.
    fn accel(&self) -> i64;
    /// Its group.
    fn group(&self) -> &str;
}

impl Target for TargetRow {
    fn id(&self) -> &str {
        &self.id
    }
    fn accel(&self) -> i64 {
        self.accel
    }
    fn group(&self) -> &str {
        &self.grp
    }
}

impl Target for Arc<DeviceEntry> {
    fn id(&self) -> &str {
        &self.id
    }
    fn accel(&self) -> i64 {
        i64::from(self.accel)
    }
    fn group(&self) -> &str {
        &self.group
    }
}

/// The ranked target ids of a deployment among `devices` (unrevoked), borrowed from them, and
/// how many of its group were skipped for another accelerator.
pub fn targets<'d, T: Target>(
    devices: &'d [T],
    group: Option<&str>,
    device: Option<&str>,
    pack_accel: i64,
) -> (Vec<&'d str>, u64) {
    let mut ids = Vec::new();
    let mut incompatible = 0;
    for d in devices {
        let member = match (group, device) {
            (Some(g), _) => d.group() == g,
            (None, Some(id)) => d.id() == id,
            (None, None) => false,
        };
        if !member {
            continue;
        }
        if d.accel() == pack_accel {
            ids.push(d.id());
        } else {
            incompatible += 1;
        }
    }
    rollout::rank(&mut ids);
    (ids, incompatible)
}

#[derive(sqlx::FromRow)]
struct DeviceRow {
    id: String,
    hw_class: i64,
    accel: i64,
    grp: String,
    token_hash: String,
}

#[derive(Debug, sqlx::FromRow)]
struct OfferRow {
    id: i64,
    sequence: i64,
    target_group: Option<String>,
    target_device: Option<String>,
    batches: String,
    open_batches: i64,
    sha256: String,
    accel: i64,
    io_bindings: Option<String>,
}

async fn build(
    db: &Db,
    store: &Arc<dyn PackStore>,
    previous: &Snapshot,
) -> Result<Snapshot, LoadError> {
    // One read transaction: every query below sees the same committed state (WAL snapshot).
    let mut conn = crate::db::begin_read(db).await?;
    // Read the generation first: a change committed during the build bumps it again, so the
    // next check rebuilds rather than trusting a snapshot that may predate the change.
    let (generation,): (i64,) = sqlx::query_as("SELECT value FROM fleet_generation WHERE id = 1")
        .fetch_one(&mut *conn)
        .await?;
    // Row by row: 100,000 rows held at once (four strings each) were freed around the entries
    // built from them, leaving holes the allocator kept (idle RSS after provisioning was
    // 130-152 MB against 57 MB after a restart over the same data).
    let mut devices = token_index::with_capacity(previous.devices.len());
    let mut entries: Vec<Arc<DeviceEntry>> = Vec::with_capacity(previous.devices.len());
    {
        let mut rows = sqlx::query_as::<_, DeviceRow>(
            "SELECT id, hw_class, accel, grp, token_hash FROM devices WHERE revoked_at IS NULL",
        )
        .fetch(&mut *conn);
        while let Some(d) = rows.try_next().await? {
            let digest: PackDigest = d
                .token_hash
                .parse()
                .map_err(|_| LoadError::TokenHash(d.id.clone()))?;
            // An unchanged device keeps its entry: a rebuild (every batch of a provisioning,
            // every deployment) then allocates for what changed, not 100,000 small objects whose
            // predecessors' holes fragment the heap (`malloc` was 24 % of a saturated poll run
            // after provisioning 100,000 devices through the API, 6 % after a restart).
            let entry = match previous.devices.get(&digest.0).map(|p| &p.entry) {
                Some(e)
                    if *e.id == *d.id
                        && e.hw_class == d.hw_class as u32
                        && e.accel == d.accel as u32
                        && e.group == d.grp =>
                {
                    Arc::clone(e)
                }
                _ => Arc::new(DeviceEntry::new(
                    Arc::from(d.id.as_str()),
                    d.hw_class as u32,
                    d.accel as u32,
                    d.grp,
                )),
            };
            entries.push(Arc::clone(&entry));
            devices.insert(
                digest.0,
                Polled {
                    entry,
                    assignment: None,
                },
            );
        }
    }
    let offers: Vec<OfferRow> = sqlx::query_as(
        "SELECT d.id, d.sequence, d.target_group, d.target_device, d.batches, d.open_batches, \
         v.sha256, v.accel, v.io_bindings \
         FROM deployments d JOIN versions v ON v.id = d.version_id \
         WHERE d.state <> 'aborted' ORDER BY d.sequence DESC",
    )
    .fetch_all(&mut *conn)
    .await?;
    let manifests: Vec<(i64, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT m.deployment_id, m.hw_class, m.manifest FROM deployment_manifests m \
         JOIN deployments d ON d.id = m.deployment_id WHERE d.state <> 'aborted'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let updates: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT sequence, record FROM keyring_updates ORDER BY sequence")
            .fetch_all(&mut *conn)
            .await?;
    conn.rollback().await?;
    let keyring = keyring_records(updates)?;
    let manifests: HashMap<(i64, u32), Bytes> = manifests
        .into_iter()
        .map(|(d, hw, m)| ((d, hw as u32), Bytes::from(m)))
        .collect();
    let offers = Arc::new(Offers {
        rows: offers,
        manifests,
    });
    let fleet = Fleet {
        generation,
        devices,
        entries,
        keyring,
        offers,
    };
    assemble(store, previous, fleet).await
}

/// `previous` with the devices of `added`, at `generation`.
async fn extend(
    store: &Arc<dyn PackStore>,
    previous: &Snapshot,
    generation: i64,
    added: Vec<Added>,
) -> Result<Snapshot, LoadError> {
    let len = previous.devices.len() + added.len();
    let mut devices = token_index::with_capacity(len);
    let mut entries = Vec::with_capacity(len);
    for (digest, polled) in &previous.devices {
        entries.push(Arc::clone(&polled.entry));
        devices.insert(
            *digest,
            Polled {
                entry: Arc::clone(&polled.entry),
                assignment: None,
            },
        );
    }
    for a in added {
        let entry = Arc::new(DeviceEntry::new(
            Arc::from(a.id),
            a.hw_class,
            a.accel,
            a.group,
        ));
        entries.push(Arc::clone(&entry));
        devices.insert(
            a.digest,
            Polled {
                entry,
                assignment: None,
            },
        );
    }
    let fleet = Fleet {
        generation,
        devices,
        entries,
        keyring: previous.keyring.clone(),
        offers: Arc::clone(&previous.offers),
    };
    assemble(store, previous, fleet).await
}

/// What a snapshot is assembled from: the unrevoked devices (by token digest, and as a list for
/// targeting), the keyring updates and the deployments, all of one generation.
struct Fleet {
    generation: i64,
    devices: TokenIndex,
    entries: Vec<Arc<DeviceEntry>>,
    keyring: KeyringRecords,
    offers: Arc<Offers>,
}

/// Assigns every device of `fleet` the newest deployment that offers it, and finds the packs
/// those assignments name (kept from `previous`, or read from the store).
async fn assemble(
    store: &Arc<dyn PackStore>,
    previous: &Snapshot,
    fleet: Fleet,
) -> Result<Snapshot, LoadError> {
    let Fleet {
        generation,
        mut devices,
        entries,
        keyring,
        offers,
    } = fleet;
    let manifests = &offers.manifests;
    let by_id: HashMap<&str, &Arc<DeviceEntry>> = entries.iter().map(|e| (&*e.id, e)).collect();

    // Highest sequence first: a device gets the newest deployment whose open batches hold it.
    let mut assignments: HashMap<Arc<str>, Arc<Assignment>> = HashMap::new();
    let mut shared: HashMap<(i64, u32), Arc<Assignment>> = HashMap::new();
    let mut wanted: HashMap<String, Option<String>> = HashMap::new();
    for offer in &offers.rows {
        let batches: Vec<u8> = serde_json::from_str(&offer.batches).unwrap_or_default();
        let (ranked, _) = targets(
            &entries,
            offer.target_group.as_deref(),
            offer.target_device.as_deref(),
            offer.accel,
        );
        let open = usize::try_from(offer.open_batches).unwrap_or(0);
        let offered = rollout::offered_count(&batches, open, ranked.len());
        for id in &ranked[..offered] {
            let Some(device) = by_id.get(id).copied() else {
                continue;
            };
            if assignments.contains_key(&device.id) {
                continue;
            }
            let key = (offer.id, device.hw_class);
            let Some(manifest) = manifests.get(&key) else {
                continue;
            };
            // Every device of a hardware class is offered the same bytes: one shared
            // assignment each, not one per device (100,000 devices, a handful of classes).
            let assignment = match shared.get(&key) {
                Some(a) => Arc::clone(a),
                None => {
                    let sequence = offer.sequence as u64;
                    let etag =
                        HeaderValue::from_str(&format!("\"m{sequence}-{}\"", device.hw_class))
                            .map_err(|e| LoadError::Pack(e.to_string()))?;
                    let a = Arc::new(Assignment {
                        deployment_id: offer.id,
                        sequence,
                        sha256: offer.sha256.clone(),
                        manifest: manifest.clone(),
                        etag,
                    });
                    shared.insert(key, Arc::clone(&a));
                    wanted
                        .entry(offer.sha256.clone())
                        .or_insert_with(|| offer.io_bindings.clone());
                    a
                }
            };
            assignments.insert(Arc::clone(&device.id), assignment);
        }
    }

    let mut packs = HashMap::with_capacity(wanted.len());
    for (sha, io_json) in wanted {
        let entry = match previous.packs.get(&sha) {
            Some(entry) => entry.clone(),
            None => load_pack(store.as_ref(), &sha, io_json.as_deref()).await?,
        };
        packs.insert(sha, entry);
    }
    for polled in devices.values_mut() {
        polled.assignment = assignments.get(&polled.entry.id).cloned();
    }
    Ok(Snapshot {
        generation,
        devices,
        assignments,
        packs,
        keyring,
        offers,
    })
}

/// The stored keyring updates as devices are sent them; a record of the wrong size is refused
/// (a device would stop at it and never apply the ones behind it).
fn keyring_records(rows: Vec<(i64, Vec<u8>)>) -> Result<KeyringRecords, LoadError> {
    let mut sequences = Vec::with_capacity(rows.len());
    let mut records = Vec::with_capacity(rows.len() * ROTATION_BYTES);
    for (sequence, record) in rows {
        if record.len() != ROTATION_BYTES {
            return Err(LoadError::Keyring(format!(
                "keyring update {sequence} is {} bytes, not {ROTATION_BYTES}",
                record.len()
            )));
        }
        sequences.push(sequence as u64);
        records.extend_from_slice(&record);
    }
    let newest_header = HeaderValue::from(sequences.last().copied().unwrap_or(0));
    Ok(KeyringRecords {
        sequences,
        records: Bytes::from(records),
        newest_header,
    })
}

/// Reads a pack, checking it against its name: a store that returned other bytes must not be
/// served under this digest. Kept in memory when the store serves from memory; otherwise it is
/// hashed as it streams by and only its length kept.
async fn load_pack(
    store: &dyn PackStore,
    sha: &str,
    io_json: Option<&str>,
) -> Result<PackEntry, LoadError> {
    let digest: PackDigest = sha
        .parse()
        .map_err(|_| LoadError::Pack(format!("{sha:?} is not a digest")))?;
    let opening = |e: std::io::Error| LoadError::Pack(format!("opening {sha}: {e}"));
    let keep = store.serve_from_memory();
    // A local file is hashed through the very descriptor downloads are sent from.
    let file = if keep {
        store.local_file(digest).await.map_err(opening)?
    } else {
        None
    };
    let mut reader = match &file {
        Some(f) => crate::store::PackReader {
            len: f.metadata().map_err(opening)?.len(),
            reader: Box::pin(tokio::fs::File::from_std(f.try_clone().map_err(opening)?)),
        },
        None => store
            .open(digest)
            .await
            .map_err(opening)?
            .ok_or_else(|| LoadError::Pack(format!("pack {sha} is missing")))?,
    };
    let mut bytes = Vec::with_capacity(if keep {
        usize::try_from(reader.len).unwrap_or(0)
    } else {
        0
    });
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut len = 0u64;
    loop {
        let n = reader
            .reader
            .read(&mut chunk)
            .await
            .map_err(|e| LoadError::Pack(format!("reading {sha}: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
        if keep {
            bytes.extend_from_slice(&chunk[..n]);
        }
        len += n as u64;
    }
    if len != reader.len {
        return Err(LoadError::Pack(format!(
            "pack {sha}: read {len} bytes, the store says {}",
            reader.len
        )));
    }
    if PackDigest::finish(hasher) != digest {
        return Err(LoadError::Pack(format!(
            "pack {sha} does not hash to its name"
        )));
    }
    let io = match io_json {
        None => None,
        Some(json) => {
            let (_, canonical) = npub_core::io_bindings::from_json(json)
                .map_err(|e| LoadError::Pack(format!("io bindings of {sha}: {e}")))?;
            Some(Bytes::from(canonical))
        }
    };
    let etag = crate::ranges::etag(sha)
        .ok_or_else(|| LoadError::Pack(format!("{sha:?} is not a header value")))?;
    Ok(PackEntry {
        len,
        bytes: keep.then(|| Bytes::from(bytes)),
        io,
        etag,
        file: file.map(Arc::new),
    })
}
