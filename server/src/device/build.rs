//! Building a snapshot: read from the database in one read transaction, or extended with
//! provisioned devices; every assignment computed and every assigned pack found.
use std::collections::HashMap;
use std::sync::Arc;

use axum::http::HeaderValue;
use bytes::Bytes;
use futures_util::TryStreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt;

use npub_core::manifest::ROTATION_BYTES;

use crate::db::Db;
use crate::device::snapshot::{
    Added, Assignment, DeviceEntry, Enrolled, KeyringRecords, LoadError, OfferRow, Offers,
    PackEntry, ReleaseEntry, SelfTestEntry, Snapshot,
};
use crate::device::targets::targets;
use crate::device::token_index::{self, TokenIndex};
use crate::fleet::rollout;
use crate::fleet::window::Window;
use crate::store::{PackDigest, PackStore};

#[derive(sqlx::FromRow)]
struct DeviceRow {
    id: String,
    hw_class: i64,
    accel: i64,
    grp: String,
    token_hash: String,
}

pub(super) async fn build(
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
                Enrolled {
                    entry,
                    assignment: None,
                },
            );
        }
    }
    let offers: Vec<OfferRow> = sqlx::query_as(
        "SELECT d.id, d.sequence, d.target_group, d.target_device, d.batches, d.open_batches, \
         d.state, v.sha256, v.size, v.accel, v.io_bindings, v.release_bundle, \
         v.golden_input, v.golden_sha256 \
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
    let started: Vec<(i64, String)> = sqlx::query_as(
        "SELECT dd.deployment_id, dd.device_id FROM device_deployments dd \
         JOIN deployments d ON d.id = dd.deployment_id WHERE d.state = 'paused'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let members: Vec<(i64, String)> = sqlx::query_as(
        "SELECT m.deployment_id, m.device_id FROM deployment_members m \
         JOIN deployments d ON d.id = m.deployment_id WHERE d.state <> 'aborted'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let windows: Vec<(String, i64, i64, i64, String)> =
        sqlx::query_as("SELECT grp, start_minute, end_minute, days, time_zone FROM group_windows")
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
    let mut started_by: HashMap<i64, std::collections::HashSet<String>> = HashMap::new();
    for (deployment, device) in started {
        started_by.entry(deployment).or_default().insert(device);
    }
    let mut members_of: HashMap<i64, std::collections::HashSet<String>> = HashMap::new();
    for (deployment, device) in members {
        members_of.entry(deployment).or_default().insert(device);
    }
    let windows = windows
        .into_iter()
        .filter_map(|(grp, start, end, days, zone)| match Window::new(start, end, days, &zone) {
            Some(w) => Some((grp, w)),
            None => {
                // Offered as if it had none rather than held forever by a window nobody can read.
                tracing::error!(group = %grp, zone = %zone, days, "maintenance window: unknown time zone or no day");
                None
            }
        })
        .collect();
    let offers = Arc::new(Offers {
        rows: offers,
        manifests,
        started: started_by,
        members: members_of,
        windows,
    });
    let fleet = Gathered {
        generation,
        devices,
        entries,
        keyring,
        offers,
    };
    assemble(store, previous, fleet).await
}

/// `previous` with the devices of `added`, at `generation`.
pub(super) async fn extend(
    store: &Arc<dyn PackStore>,
    previous: &Snapshot,
    generation: i64,
    added: Vec<Added>,
) -> Result<Snapshot, LoadError> {
    let len = previous.devices.len() + added.len();
    let mut devices = token_index::with_capacity(len);
    let mut entries = Vec::with_capacity(len);
    for (digest, enrolled) in &previous.devices {
        entries.push(Arc::clone(&enrolled.entry));
        devices.insert(
            *digest,
            Enrolled {
                entry: Arc::clone(&enrolled.entry),
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
            Enrolled {
                entry,
                assignment: None,
            },
        );
    }
    let fleet = Gathered {
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
struct Gathered {
    generation: i64,
    devices: TokenIndex<Enrolled>,
    entries: Vec<Arc<DeviceEntry>>,
    keyring: KeyringRecords,
    offers: Arc<Offers>,
}

/// Assigns every device of `fleet` the newest deployment that offers it, and finds the packs
/// those assignments name (kept from `previous`, or read from the store).
async fn assemble(
    store: &Arc<dyn PackStore>,
    previous: &Snapshot,
    fleet: Gathered,
) -> Result<Snapshot, LoadError> {
    let Gathered {
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
    // Each wanted pack: its length as recorded at upload, and its IO bindings.
    let mut wanted: HashMap<String, (i64, Option<String>)> = HashMap::new();
    for offer in &offers.rows {
        let batches: Vec<u8> = serde_json::from_str(&offer.batches).unwrap_or_default();
        let (ranked, _) = targets(
            &entries,
            offer.target_group.as_deref(),
            offer.target_device.as_deref(),
            offers.members.get(&offer.id),
            offer.accel,
        );
        let open = usize::try_from(offer.open_batches).unwrap_or(0);
        let offered = rollout::offered_count(&batches, open, ranked.len());
        // Paused: held for every device that had not started on it.
        let held = (offer.state == "paused").then(|| offers.started.get(&offer.id));
        for id in &ranked[..offered] {
            if let Some(started) = held
                && !started.is_some_and(|s| s.contains(*id))
            {
                continue;
            }
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
                        release: offer.release_bundle.clone().map(ReleaseEntry::of),
                        selftest: offer.golden_input.as_deref().and_then(|input| {
                            let sha = offer.golden_sha256.as_deref()?;
                            crate::catalog::proof::selftest_record(input, sha)
                                .map(SelfTestEntry::of)
                        }),
                    });
                    shared.insert(key, Arc::clone(&a));
                    wanted
                        .entry(offer.sha256.clone())
                        .or_insert_with(|| (offer.size, offer.io_bindings.clone()));
                    a
                }
            };
            assignments.insert(Arc::clone(&device.id), assignment);
        }
    }

    let mut packs = HashMap::with_capacity(wanted.len());
    for (sha, (size, io_json)) in wanted {
        let entry = match previous.packs.get(&sha) {
            Some(entry) => entry.clone(),
            None => load_pack(store.as_ref(), &sha, size, io_json.as_deref()).await?,
        };
        packs.insert(sha, entry);
    }
    let mut ids = previous
        .by_id
        .is_some()
        .then(|| HashMap::with_capacity(devices.len()));
    for (digest, enrolled) in &mut devices {
        enrolled.assignment = assignments.get(&enrolled.entry.id).cloned();
        if let Some(ids) = &mut ids {
            ids.insert(Arc::clone(&enrolled.entry.id), *digest);
        }
    }
    Ok(Snapshot {
        generation,
        devices,
        by_id: ids,
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

/// An assigned pack's entry. A store that serves from memory (the local one) has the pack read
/// and checked against its name (a store that returned other bytes must not be served under
/// this digest); any other store is not contacted at all: its length is the one recorded at
/// upload (`size`), and a download streams the object, which the device checks against the
/// signed digest. A snapshot, and so every poll, therefore never waits on a remote store
/// (a replica starts and serves polls while its bucket cannot be reached).
async fn load_pack(
    store: &dyn PackStore,
    sha: &str,
    size: i64,
    io_json: Option<&str>,
) -> Result<PackEntry, LoadError> {
    let digest: PackDigest = sha
        .parse()
        .map_err(|_| LoadError::Pack(format!("{sha:?} is not a digest")))?;
    let io = match io_json {
        None => None,
        Some(json) => {
            let (_, canonical) = npub_core::io_bindings::from_json(json)
                .map_err(|e| LoadError::Pack(format!("io bindings of {sha}: {e}")))?;
            Some(Bytes::from(canonical))
        }
    };
    let etag = crate::http::ranges::etag(sha)
        .ok_or_else(|| LoadError::Pack(format!("{sha:?} is not a header value")))?;
    if !store.serve_from_memory() {
        let len = u64::try_from(size)
            .map_err(|_| LoadError::Pack(format!("pack {sha}: recorded size {size}")))?;
        return Ok(PackEntry {
            len,
            bytes: None,
            io,
            etag,
            file: None,
        });
    }
    let opening = |e: std::io::Error| LoadError::Pack(format!("opening {sha}: {e}"));
    // A local file is hashed through the very descriptor downloads are sent from.
    let file = store.local_file(digest).await.map_err(opening)?;
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
    let mut bytes = Vec::with_capacity(usize::try_from(reader.len).unwrap_or(0));
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
        bytes.extend_from_slice(&chunk[..n]);
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
    Ok(PackEntry {
        len,
        bytes: Some(Bytes::from(bytes)),
        io,
        etag,
        file: file.map(Arc::new),
    })
}
