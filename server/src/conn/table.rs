//! Which connections the accept loop holds, and who gives way when there is no room.
//!
//! A limit that is first come, first served lets one peer hold every permit: 1,100 idle
//! connections from one address kept `/healthz` answering 503 (issue #31). Two rules make it
//! fair:
//!
//! | Situation on accepting a connection          | What happens                                                 |
//! |----------------------------------------------|--------------------------------------------------------------|
//! | its peer holds `--max-connections-per-peer`  | that peer's connection idle the longest is closed for it; if none of its connections is idle, the newcomer is refused (503) |
//! | the server holds `--max-connections`         | the connection idle the longest, anyone's, is closed for it; if none is idle, the newcomer is refused (503) |
//! | otherwise                                    | admitted                                                      |
//!
//! *Idle* means no request is being answered on it: waiting for a request (including one whose
//! head is still trickling in), never in the middle of a response, so a slow download is never
//! cut off to make room. Among idle connections the one whose last byte moved longest ago goes
//! first: a flood of connections that never speak sheds its own oldest members, while a client
//! that connects and sends its request at once is answered. A trusted proxy
//! (`--trusted-proxy`) carries many clients' connections and is exempt from the per-peer cap.
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::activity::Activity;
use crate::ops::metrics::Metrics;
use crate::peer::{self, TrustedProxies};

/// Default for `--max-connections-per-peer`: a NAT of a few dozen devices, or a browser's
/// handful of connections many times over; far below `--max-connections`.
pub const DEFAULT_MAX_PER_PEER: usize = 64;

/// The limits one listener's connections share.
#[derive(Debug, Clone)]
pub struct Caps {
    /// Connections at once (after fitting under the open-file limit).
    pub total: usize,
    /// Connections at once from one peer.
    pub per_peer: usize,
    /// Peers exempt from `per_peer`.
    pub trusted: TrustedProxies,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its peer holds its cap and none of those connections is idle.
    Peer,
    /// The server holds its cap and no connection is idle.
    Full,
}

impl Refused {
    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Peer => "peer",
            Refused::Full => "full",
        }
    }
}

struct Entry {
    key: IpAddr,
    activity: Arc<Activity>,
    shed: Arc<Notify>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    conns: HashMap<u64, Entry>,
    /// Each capped peer's connections (trusted proxies are not in here).
    by_peer: HashMap<IpAddr, Vec<u64>>,
}

impl Inner {
    /// The idle connection among `ids` whose last byte moved longest ago.
    fn oldest_idle(&self, ids: impl Iterator<Item = u64>) -> Option<u64> {
        ids.filter_map(|id| {
            let e = self.conns.get(&id)?;
            (e.activity.responding.load(Ordering::Relaxed) == 0).then(|| (e.activity.last(), id))
        })
        .min()
        .map(|(_, id)| id)
    }

    /// Forgets `id` and tells its task to close it.
    fn shed(&mut self, id: u64) {
        if let Some(e) = self.remove(id) {
            e.shed.notify_one();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.conns.remove(&id)?;
        if let Some(ids) = self.by_peer.get_mut(&e.key) {
            ids.retain(|&other| other != id);
            if ids.is_empty() {
                self.by_peer.remove(&e.key);
            }
        }
        Some(e)
    }
}

/// The connections of one listener.
pub struct Table {
    caps: Caps,
    inner: Mutex<Inner>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// An empty table under `caps`.
    pub fn new(caps: Caps, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            caps,
            inner: Mutex::new(Inner::default()),
            metrics,
        })
    }

    /// Admits a connection from `peer`, closing an idle one if that is what makes room.
    pub(super) fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        activity: Arc<Activity>,
    ) -> Result<Slot, Refused> {
        let capped = !self.caps.trusted.contains(peer);
        let key = peer::key(peer);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if capped {
            let held = inner.by_peer.get(&key).map_or(0, Vec::len);
            if held >= self.caps.per_peer {
                let ids = inner.by_peer.get(&key).cloned().unwrap_or_default();
                let Some(victim) = inner.oldest_idle(ids.into_iter()) else {
                    self.metrics
                        .observe_connection_refused(Refused::Peer.label());
                    return Err(Refused::Peer);
                };
                inner.shed(victim);
                self.metrics.observe_connection_shed(Refused::Peer.label());
            }
        }
        if inner.conns.len() >= self.caps.total {
            let ids: Vec<u64> = inner.conns.keys().copied().collect();
            let Some(victim) = inner.oldest_idle(ids.into_iter()) else {
                self.metrics
                    .observe_connection_refused(Refused::Full.label());
                return Err(Refused::Full);
            };
            inner.shed(victim);
            self.metrics.observe_connection_shed(Refused::Full.label());
        }
        let id = inner.next;
        inner.next += 1;
        let shed = Arc::new(Notify::new());
        inner.conns.insert(
            id,
            Entry {
                key,
                activity,
                shed: Arc::clone(&shed),
            },
        );
        if capped {
            inner.by_peer.entry(key).or_default().push(id);
        }
        Ok(Slot {
            table: Arc::clone(self),
            id,
            shed,
        })
    }

    /// Its limits.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// Connections held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .conns
            .len()
    }
}

/// A connection's place in its [`Table`]; dropping it frees the place.
pub struct Slot {
    table: Arc<Table>,
    id: u64,
    shed: Arc<Notify>,
}

impl Slot {
    /// Resolves when the table closes this connection to make room for another.
    pub async fn shed(&self) {
        self.shed.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self
            .table
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        inner.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(total: usize, per_peer: usize, trusted: &[&str]) -> Arc<Table> {
        let trusted: Vec<String> = trusted.iter().map(|s| (*s).to_owned()).collect();
        Table::new(
            Caps {
                total,
                per_peer,
                trusted: TrustedProxies::parse(&trusted).unwrap(),
            },
            Arc::default(),
        )
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn busy() -> Arc<Activity> {
        let a = Arc::new(Activity::new());
        a.responding.fetch_add(1, Ordering::Relaxed);
        a
    }

    #[tokio::test]
    async fn survives_a_peer_at_its_cap_by_closing_its_oldest_idle_connection() {
        let t = table(100, 2, &[]);
        let first = t.admit(ip("192.0.2.1"), Arc::new(Activity::new())).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let second = Arc::new(Activity::new());
        second.touch();
        let _second = t.admit(ip("192.0.2.1"), second).unwrap();
        // A third from the same peer: the first (idle longest) makes room.
        let _third = t.admit(ip("192.0.2.1"), Arc::new(Activity::new())).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(1), first.shed())
            .await
            .expect("the oldest idle connection was told to close");
        assert_eq!(t.len(), 2);
        // Another peer is not affected by this one's cap.
        let _other = t.admit(ip("192.0.2.2"), Arc::new(Activity::new())).unwrap();
        assert_eq!(t.len(), 3);
        drop(first);
        assert_eq!(t.len(), 3, "a shed connection is not counted twice");
    }

    #[test]
    fn rejects_a_newcomer_when_every_connection_of_its_peer_is_answering() {
        let t = table(100, 2, &[]);
        let _a = t.admit(ip("192.0.2.1"), busy()).unwrap();
        let _b = t.admit(ip("192.0.2.1"), busy()).unwrap();
        assert!(matches!(
            t.admit(ip("192.0.2.1"), Arc::new(Activity::new())),
            Err(Refused::Peer)
        ));
        // A trusted proxy is not held to the per-peer cap.
        let t = table(100, 2, &["192.0.2.0/24"]);
        let held: Vec<Slot> = (0..10)
            .map(|_| t.admit(ip("192.0.2.1"), busy()).unwrap())
            .collect();
        assert_eq!(held.len(), 10);
    }

    #[test]
    fn rejects_a_newcomer_when_the_server_is_full_of_busy_connections() {
        let t = table(3, 64, &[]);
        let held: Vec<Slot> = (1..=3)
            .map(|n| t.admit(ip(&format!("192.0.2.{n}")), busy()).unwrap())
            .collect();
        assert!(matches!(
            t.admit(ip("192.0.2.9"), Arc::new(Activity::new())),
            Err(Refused::Full)
        ));
        drop(held);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn survives_a_full_server_by_closing_the_connection_idle_longest() {
        let t = table(3, 64, &[]);
        let _busy = t.admit(ip("192.0.2.1"), busy()).unwrap();
        let idle = t.admit(ip("192.0.2.2"), Arc::new(Activity::new())).unwrap();
        let fresh = Arc::new(Activity::new());
        fresh.last_ms.store(1_000, Ordering::Relaxed);
        let _fresh = t.admit(ip("192.0.2.3"), fresh).unwrap();
        let _new = t.admit(ip("192.0.2.4"), Arc::new(Activity::new())).unwrap();
        assert_eq!(t.len(), 3);
        // The idle one went, not the busy one nor the one that spoke last.
        let inner = t.inner.lock().unwrap();
        assert!(!inner.conns.contains_key(&idle.id));
    }
}
