//! One immutable view of the fleet, as the device API reads it: devices by token digest with
//! their assignments, assigned packs, and the keyring updates devices are sent.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use axum::http::HeaderValue;
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use npub_core::manifest::ROTATION_BYTES;

use crate::device::token_index::{TokenDigest, TokenIndex};
use crate::fleet::window::Window;

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
    /// (`crate::device::last_seen::LastSeen::seen`).
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
    /// The deployed version's release signatures, if any were stored.
    pub release: Option<ReleaseEntry>,
    /// The deployed version's self-test record ("NPS1"), when it has a golden vector: its
    /// manifests are then version 2 and sign this record's SHA-256.
    pub selftest: Option<SelfTestEntry>,
}

/// A deployed version's release signatures, as `GET /api/v1/device/packs/{sha256}/release`
/// sends them.
#[derive(Debug, Clone)]
pub struct ReleaseEntry {
    /// The stored NPRB bundle, byte for byte.
    pub bundle: Bytes,
    /// `"r-<SHA-256 of the bundle, hex>"`.
    pub etag: HeaderValue,
}

impl ReleaseEntry {
    /// The entry of `bundle`.
    pub fn of(bundle: Vec<u8>) -> Self {
        Self {
            etag: digest_etag('r', &bundle),
            bundle: Bytes::from(bundle),
        }
    }
}

/// A deployed version's self-test record, as `GET /api/v1/device/packs/{sha256}/selftest` sends
/// it; its `ETag` is found once, when the snapshot is built, not at every request.
#[derive(Debug, Clone)]
pub struct SelfTestEntry {
    /// The NPS1 record, byte for byte.
    pub record: Bytes,
    /// `"s-<SHA-256 of the record, hex>"`.
    pub etag: HeaderValue,
}

impl SelfTestEntry {
    /// The entry of `record`.
    pub fn of(record: Vec<u8>) -> Self {
        Self {
            etag: digest_etag('s', &record),
            record: Bytes::from(record),
        }
    }
}

/// `"<kind>-<SHA-256 of bytes, hex>"`: the `ETag` of a stored blob a device fetches.
fn digest_etag(kind: char, bytes: &[u8]) -> HeaderValue {
    let hex = crate::store::to_hex(&Sha256::digest(bytes));
    HeaderValue::from_str(&format!("\"{kind}-{hex}\"")).expect("hex digits are a header value")
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
    pub(super) sequences: Vec<u64>,
    pub(super) records: Bytes,
    /// [`Self::newest`] as a header value, built once per snapshot.
    pub(super) newest_header: HeaderValue,
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
pub struct Enrolled {
    /// The device.
    pub entry: Arc<DeviceEntry>,
    /// What it is offered now (the same as [`Snapshot::assignment`] of its id).
    pub assignment: Option<Arc<Assignment>>,
}

/// One immutable view of the fleet.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The `fleet_generation` it was built from.
    pub generation: i64,
    /// Each device with its assignment beside it, so that a poll finds both with one lookup
    /// (at 100,000 devices every lookup is a cache miss or two).
    pub(super) devices: TokenIndex<Enrolled>,
    /// Each device's token digest by its id: how a device that authenticates with its client
    /// certificate alone (`--client-ca`) is found. `None` on a server that takes no client
    /// certificates: nothing looks a device up by id there, and the index costs an entry per
    /// device. Kept from snapshot to snapshot (the first one's choice: [`Snapshot::empty`]).
    pub(super) by_id: Option<HashMap<Arc<str>, TokenDigest>>,
    pub(super) assignments: HashMap<Arc<str>, Arc<Assignment>>,
    pub(super) packs: HashMap<String, PackEntry>,
    pub(super) keyring: KeyringRecords,
    /// What the assignments were computed from, kept so that new devices alone
    /// ([`PollCache::add_devices`]) are assigned without reading deployments again.
    pub(super) offers: Arc<Offers>,
}

/// The deployments a snapshot offers from, as read: highest sequence first, with their signed
/// manifests by (deployment, hardware class).
#[derive(Debug, Default)]
pub(super) struct Offers {
    pub(super) rows: Vec<OfferRow>,
    pub(super) manifests: HashMap<(i64, u32), Bytes>,
    /// For each paused deployment, the devices that had started on it (any report): the only
    /// ones it is still offered to. A paused deployment holds: a device that has not started is
    /// offered what it would be without it.
    pub(super) started: HashMap<i64, std::collections::HashSet<String>>,
    /// For each retry deployment, the devices it retries: the only ones it targets.
    pub(super) members: HashMap<i64, std::collections::HashSet<String>>,
    /// Maintenance windows by group (`crate::fleet::window`), checked at each poll.
    pub(super) windows: HashMap<String, Window>,
}

/// The `fleet_generation` a committed change moved to ([`crate::device::generation::bump_generation`]).
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
        self.enrolled(secret.as_bytes()).map(|p| &p.entry)
    }

    /// The device whose token is `secret` and what it is offered now, from one lookup.
    pub fn enrolled(&self, secret: &[u8]) -> Option<&Enrolled> {
        let digest: TokenDigest = Sha256::digest(secret).into();
        self.devices.get(&digest)
    }

    /// The device `id` and what it is offered now, unless unknown or revoked (a device that
    /// authenticates with a client certificate naming it).
    pub fn enrolled_by_id(&self, id: &str) -> Option<&Enrolled> {
        self.by_id
            .as_ref()?
            .get(id)
            .and_then(|digest| self.devices.get(digest))
    }

    /// A snapshot of no devices to build the first one from: with the index by id when
    /// `by_certificate` (the server takes client certificates), and so every one after it.
    pub(super) fn empty(by_certificate: bool) -> Self {
        Self {
            by_id: by_certificate.then(HashMap::new),
            ..Self::default()
        }
    }

    /// What `device` is offered now.
    pub fn assignment(&self, device: &str) -> Option<&Arc<Assignment>> {
        self.assignments.get(device)
    }

    /// The maintenance window of `group`, if it has one.
    pub fn window(&self, group: &str) -> Option<&Window> {
        if self.offers.windows.is_empty() {
            return None;
        }
        self.offers.windows.get(group)
    }

    /// An assigned pack's bytes.
    pub fn pack(&self, sha256: &str) -> Option<&PackEntry> {
        self.packs.get(sha256)
    }

    /// The keyring updates devices are sent.
    pub fn keyring(&self) -> &KeyringRecords {
        &self.keyring
    }

    /// A snapshot of one device (`d-1`) assigned one pack of `len` bytes, named `sha256`, whose
    /// `ETag` is `etag`: for the decision's tests.
    #[cfg(test)]
    pub(crate) fn for_tests(sha256: &str, etag: &str, len: u64) -> (Self, Arc<DeviceEntry>) {
        let device = Arc::new(DeviceEntry::new(Arc::from("d-1"), 1, 0, "lab".into()));
        let assignment = Arc::new(Assignment {
            deployment_id: 1,
            sequence: 1,
            sha256: sha256.into(),
            manifest: Bytes::new(),
            etag: HeaderValue::from_static("\"m1-1\""),
            release: Some(ReleaseEntry::of(b"NPRB-for-tests".to_vec())),
            selftest: None,
        });
        let mut snapshot = Self::default();
        snapshot
            .assignments
            .insert(Arc::clone(&device.id), assignment);
        snapshot.packs.insert(
            sha256.into(),
            PackEntry {
                len,
                bytes: None,
                io: None,
                etag: HeaderValue::from_str(etag).unwrap(),
                file: None,
            },
        );
        (snapshot, device)
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

#[derive(Debug, sqlx::FromRow)]
pub(super) struct OfferRow {
    pub(super) id: i64,
    pub(super) sequence: i64,
    pub(super) target_group: Option<String>,
    pub(super) target_device: Option<String>,
    pub(super) batches: String,
    pub(super) open_batches: i64,
    /// `deployments.state`: `active` or `paused` (aborted ones are not read).
    pub(super) state: String,
    pub(super) sha256: String,
    pub(super) size: i64,
    pub(super) accel: i64,
    pub(super) io_bindings: Option<String>,
    /// `versions.release_bundle`.
    pub(super) release_bundle: Option<Vec<u8>>,
    /// `versions.golden_input`.
    pub(super) golden_input: Option<Vec<u8>>,
    /// `versions.golden_sha256`.
    pub(super) golden_sha256: Option<String>,
}
