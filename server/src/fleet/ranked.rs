//! One deployment's ranked targets, and how a change to the fleet moves them without ranking the
//! group again.
//!
//! A deployment reaches the unrevoked devices of its group (or its one device), narrowed to a
//! retry's members ([`Scope`]); those with the pack's accelerator are its targets, in the order
//! of SHA-256 of their id (`rollout::rank_key`, the same for every deployment), the others are
//! skipped for their accelerator. Ranking a group of 100,000 devices reads them all and sorts them
//! (a page that does it: 297–404 ms, docs/performance.md). A change to the fleet touches a few devices; every such write stamps the rows it
//! changes with the generation it commits as (`devices.changed_generation`, migration 0016), so
//! the ranking of an older generation is brought forward by reading those rows only and moving
//! each where its current row puts it ([`Ranked::apply`]): a binary search per moved device and
//! one pass over the list.
//!
//! | Field               | Order            | Holds                                              |
//! |---------------------|------------------|----------------------------------------------------|
//! | `ids`, `names`      | rank             | the targets and their names                        |
//! | `keys`              | rank             | the first 8 bytes of each target's rank key (big-endian): the binary search's probe, the full key read only on a tie |
//! | `index`             | —                | id → position in `ids` (moved, not rebuilt, by a change) |
//! | `other_accelerator` | id               | the devices of the scope skipped for their accelerator |
//! | `scope`             | —                | who the deployment reaches, shared by every ranking of it |
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::rollout::rank_key;

/// A device as targeting sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Candidate {
    /// `devices.id`.
    pub id: String,
    /// Its label.
    pub name: String,
    /// NPU1 accel word.
    pub accel: i64,
    /// Its group.
    pub grp: String,
}

/// Who a deployment reaches. Fixed when the deployment is made (its target, its pack's
/// accelerator, a retry's members).
#[derive(Debug)]
pub struct Scope {
    group: Option<String>,
    device: Option<String>,
    accel: i64,
    members: Option<HashSet<String>>,
}

impl Scope {
    /// A deployment of a pack of accel word `accel` to `group` (else to the one `device`),
    /// narrowed to `members` for a retry.
    pub fn new(
        group: Option<&str>,
        device: Option<&str>,
        accel: i64,
        members: Option<HashSet<String>>,
    ) -> Self {
        Self {
            group: group.map(str::to_owned),
            device: device.map(str::to_owned),
            accel,
            members,
        }
    }

    /// Whether an unrevoked device `id` of group `grp` is in reach (a target or skipped for its
    /// accelerator).
    fn reaches(&self, id: &str, grp: &str) -> bool {
        let in_target = match (&self.group, &self.device) {
            (Some(g), _) => grp == g,
            (None, Some(d)) => id == d,
            (None, None) => false,
        };
        in_target && self.members.as_ref().is_none_or(|m| m.contains(id))
    }
}

/// A device row as a change left it: what [`Ranked::apply`] needs to place it again.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Changed {
    /// `devices.id`.
    pub id: String,
    /// Its name now.
    pub name: String,
    /// Its group now.
    pub grp: String,
    /// Its accel word now.
    pub accel: i64,
    /// When it was revoked (unix ms), if it is.
    pub revoked_at: Option<i64>,
}

/// One deployment's ranked targets at one generation.
#[derive(Debug)]
pub struct Ranked {
    ids: Vec<Arc<str>>,
    names: Vec<Arc<str>>,
    keys: Vec<u64>,
    index: Index,
    other_accelerator: Vec<Candidate>,
    scope: Arc<Scope>,
}

/// Id → rank. Hashed with foldhash, seeded per process: built over every target at a full
/// ranking and probed for every report on each request, SipHash's cost showed (the ids are the
/// operators' own, not a stranger's).
type Index = HashMap<Arc<str>, usize, foldhash::fast::RandomState>;

/// The first 8 bytes of `id`'s rank key, as the order's first word.
fn prefix(key: &[u8; 32]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&key[..8]);
    u64::from_be_bytes(word)
}

impl Ranked {
    /// The ranking of `candidates` (unrevoked devices, any order; those out of `scope` are left
    /// out) within `scope`.
    pub fn rank(scope: Arc<Scope>, candidates: Vec<Candidate>) -> Self {
        let mut targets = Vec::new();
        let mut other_accelerator = Vec::new();
        for c in candidates {
            if !scope.reaches(&c.id, &c.grp) {
                continue;
            }
            if c.accel == scope.accel {
                targets.push((
                    rank_key(&c.id),
                    Arc::<str>::from(c.id),
                    Arc::<str>::from(c.name),
                ));
            } else {
                other_accelerator.push(c);
            }
        }
        targets.sort_unstable_by_key(|t| t.0);
        other_accelerator.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let keys = targets.iter().map(|(k, _, _)| prefix(k)).collect();
        let (ids, names) = targets.into_iter().map(|(_, i, n)| (i, n)).unzip();
        Self::with(ids, names, keys, other_accelerator, scope)
    }

    fn with(
        ids: Vec<Arc<str>>,
        names: Vec<Arc<str>>,
        keys: Vec<u64>,
        other_accelerator: Vec<Candidate>,
        scope: Arc<Scope>,
    ) -> Self {
        let mut index = Index::with_capacity_and_hasher(ids.len(), Default::default());
        index.extend(ids.iter().enumerate().map(|(i, id)| (Arc::clone(id), i)));
        Self {
            ids,
            names,
            keys,
            index,
            other_accelerator,
            scope,
        }
    }

    /// This ranking with every `changed` device where its row puts it now: gone if it left the
    /// scope (revoked, moved, another device), a target or skipped for its accelerator, under
    /// its name now. Rows of devices out of scope before and after change nothing. The answer
    /// equals [`Ranked::rank`] over the devices as they are now, in O(n + k log n) for k rows.
    pub fn apply(&self, changed: &[Changed]) -> Self {
        // The current targets a change touches: they go, and come back below if still targets.
        let mut removed: Vec<usize> = changed
            .iter()
            .filter_map(|c| self.position(&c.id))
            .collect();
        removed.sort_unstable();
        removed.dedup();
        // Where each new target goes: before the current target at that position.
        let mut inserts: Vec<(usize, [u8; 32], &Changed)> = Vec::new();
        let mut others: Vec<Candidate> = Vec::new();
        for c in changed {
            if c.revoked_at.is_some() || !self.scope.reaches(&c.id, &c.grp) {
                continue;
            }
            if c.accel == self.scope.accel {
                let key = rank_key(&c.id);
                inserts.push((self.position_of_key(&key), key, c));
            } else {
                others.push(Candidate {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    accel: c.accel,
                    grp: c.grp.clone(),
                });
            }
        }
        inserts.sort_unstable_by_key(|i| i.1);
        let n = self.ids.len() - removed.len() + inserts.len();
        let (mut ids, mut names, mut keys) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut next = inserts.iter().peekable();
        let mut gone = removed.iter().peekable();
        let mut placed = Vec::with_capacity(inserts.len());
        for i in 0..=self.ids.len() {
            while let Some((_, key, c)) = next.next_if(|(at, _, _)| *at == i) {
                placed.push(ids.len());
                ids.push(Arc::<str>::from(c.id.as_str()));
                names.push(Arc::<str>::from(c.name.as_str()));
                keys.push(prefix(key));
            }
            if i < self.ids.len() && gone.next_if(|&&at| at == i).is_none() {
                ids.push(Arc::clone(&self.ids[i]));
                names.push(Arc::clone(&self.names[i]));
                keys.push(self.keys[i]);
            }
        }
        // The index moved rather than built again (no id hashed but the changed ones): a target
        // that stays at `v` moves back by the removals before it and on by the insertions at or
        // before it.
        let mut index = self.index.clone();
        for c in changed {
            index.remove(c.id.as_str());
        }
        if !removed.is_empty() || !inserts.is_empty() {
            let at: Vec<usize> = inserts.iter().map(|i| i.0).collect();
            for v in index.values_mut() {
                *v = *v - removed.partition_point(|&p| p < *v) + at.partition_point(|&p| p <= *v);
            }
        }
        for pos in placed {
            index.insert(Arc::clone(&ids[pos]), pos);
        }
        let touched: HashSet<&str> = changed.iter().map(|c| c.id.as_str()).collect();
        let mut other_accelerator: Vec<Candidate> = self
            .other_accelerator
            .iter()
            .filter(|c| !touched.contains(c.id.as_str()))
            .cloned()
            .chain(others)
            .collect();
        other_accelerator.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        Self {
            ids,
            names,
            keys,
            index,
            other_accelerator,
            scope: Arc::clone(&self.scope),
        }
    }

    /// The first position whose target ranks after `key` (the full key is computed only where
    /// the first 8 bytes tie).
    fn position_of_key(&self, key: &[u8; 32]) -> usize {
        let first = prefix(key);
        let (mut lo, mut hi) = (0, self.keys.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let before = match self.keys[mid].cmp(&first) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => rank_key(&self.ids[mid]) < *key,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Targets.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it has no target.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The target ids in rank order.
    pub fn ids(&self) -> &[Arc<str>] {
        &self.ids
    }

    /// The name of the target at `rank`.
    pub fn name(&self, rank: usize) -> &str {
        &self.names[rank]
    }

    /// The rank of target `id`, if it is one.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Devices of its scope skipped for another accelerator, by id.
    pub fn other_accelerator(&self) -> &[Candidate] {
        &self.other_accelerator
    }

    /// How many devices of its scope are skipped for another accelerator.
    pub fn incompatible(&self) -> u64 {
        self.other_accelerator.len() as u64
    }

    /// What this entry counts against the cache's bound (`target_cache::KEPT_TARGETS`): its
    /// targets, its skipped devices and a retry's members.
    pub fn weight(&self) -> usize {
        self.ids.len()
            + self.other_accelerator.len()
            + self.scope.members.as_ref().map_or(0, HashSet::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), so that a failure replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A device of the fleet as the database holds it.
    #[derive(Clone, Debug)]
    struct Row {
        id: String,
        name: String,
        grp: String,
        accel: i64,
        revoked: bool,
    }

    fn candidates(rows: &[Row]) -> Vec<Candidate> {
        rows.iter()
            .filter(|r| !r.revoked)
            .map(|r| Candidate {
                id: r.id.clone(),
                name: r.name.clone(),
                accel: r.accel,
                grp: r.grp.clone(),
            })
            .collect()
    }

    fn changed(r: &Row) -> Changed {
        Changed {
            id: r.id.clone(),
            name: r.name.clone(),
            grp: r.grp.clone(),
            accel: r.accel,
            revoked_at: r.revoked.then_some(1),
        }
    }

    fn view(r: &Ranked) -> (Vec<(String, String)>, Vec<String>) {
        (
            r.ids
                .iter()
                .zip(&r.names)
                .map(|(i, n)| (i.to_string(), n.to_string()))
                .collect(),
            r.other_accelerator.iter().map(|c| c.id.clone()).collect(),
        )
    }

    fn assert_same(moved: &Ranked, fresh: &Ranked, what: &str) {
        assert_eq!(view(moved), view(fresh), "{what}");
        assert_eq!(moved.keys, fresh.keys, "{what}: key words");
        for (i, id) in fresh.ids.iter().enumerate() {
            assert_eq!(moved.position(id), Some(i), "{what}: index of {id}");
        }
        assert_eq!(moved.index.len(), fresh.index.len(), "{what}: index size");
    }

    /// Random changes (new devices, renames, moves in and out, accelerator changes, revocations)
    /// applied to a ranking give what ranking the rows afresh gives, for a group, one device and
    /// a retry's members.
    #[test]
    fn a_moved_ranking_equals_a_fresh_one() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let scopes = [
            Scope::new(Some("lab"), None, 1, None),
            Scope::new(None, Some("d-7"), 1, None),
            Scope::new(
                Some("lab"),
                None,
                1,
                Some((0..60).step_by(3).map(|i| format!("d-{i}")).collect()),
            ),
        ];
        for scope in scopes {
            let scope = Arc::new(scope);
            let mut rows: Vec<Row> = (0..60)
                .map(|i| Row {
                    id: format!("d-{i}"),
                    name: format!("n-{i}"),
                    grp: ["lab", "lab", "other"][i % 3].into(),
                    accel: if i % 7 == 0 { 2 } else { 1 },
                    revoked: i % 11 == 0,
                })
                .collect();
            let mut ranked = Ranked::rank(Arc::clone(&scope), candidates(&rows));
            for round in 0..200 {
                let mut touched = Vec::new();
                for _ in 0..=rng.below(6) {
                    let which = rng.below(rows.len() as u64 + 3) as usize;
                    if which >= rows.len() {
                        let i = rows.len();
                        rows.push(Row {
                            id: format!("d-{i}"),
                            name: format!("n-{i}"),
                            grp: "lab".into(),
                            accel: 1,
                            revoked: false,
                        });
                        touched.push(i);
                        continue;
                    }
                    let r = &mut rows[which];
                    match rng.below(4) {
                        0 => r.name = format!("renamed-{round}"),
                        1 => r.grp = if r.grp == "lab" { "other" } else { "lab" }.into(),
                        2 => r.accel = 3 - r.accel,
                        _ => r.revoked = true,
                    }
                    touched.push(which);
                }
                // A device touched twice in one generation is one row.
                touched.sort_unstable();
                touched.dedup();
                let rows_changed: Vec<Changed> =
                    touched.iter().map(|&i| changed(&rows[i])).collect();
                ranked = ranked.apply(&rows_changed);
                let fresh = Ranked::rank(Arc::clone(&scope), candidates(&rows));
                assert_same(&ranked, &fresh, &format!("round {round}"));
                // Applying the same rows again changes nothing (a ranking that had seen them).
                assert_same(&ranked.apply(&rows_changed), &fresh, "applied twice");
            }
        }
    }

    /// The snapshot's ranking (`device::targets::targets`, which decides what a device is
    /// offered) and this one (what the pages, progress and the rollout rules count) agree on
    /// the targets and their order.
    #[test]
    fn the_snapshots_ranking_and_this_one_agree() {
        use crate::device::targets::{TargetRow, targets};
        let rows: Vec<TargetRow> = (0..500)
            .map(|i| TargetRow {
                id: format!("dev-{i:03}"),
                accel: if i % 9 == 0 { 2 } else { 1 },
                grp: if i % 4 == 0 { "other" } else { "lab" }.into(),
            })
            .collect();
        let members: HashSet<String> = (0..500).step_by(2).map(|i| format!("dev-{i:03}")).collect();
        for m in [None, Some(&members)] {
            let (theirs, incompatible) = targets(&rows, Some("lab"), None, m, 1);
            let scope = Arc::new(Scope::new(Some("lab"), None, 1, m.cloned()));
            let ours = Ranked::rank(
                scope,
                rows.iter()
                    .map(|r| Candidate {
                        id: r.id.clone(),
                        name: r.id.clone(),
                        accel: r.accel,
                        grp: r.grp.clone(),
                    })
                    .collect(),
            );
            let ours_ids: Vec<&str> = ours.ids().iter().map(|i| &**i).collect();
            assert_eq!(ours_ids, theirs);
            assert_eq!(ours.incompatible(), incompatible);
        }
    }

    #[test]
    fn a_tie_on_the_key_word_is_broken_by_the_full_key() {
        // Every key word forced equal to the probe's: the full key decides, as the fresh sort
        // does.
        let scope = Arc::new(Scope::new(Some("g"), None, 1, None));
        let c = |id: &str| Candidate {
            id: id.into(),
            name: id.into(),
            accel: 1,
            grp: "g".into(),
        };
        let mut r = Ranked::rank(
            Arc::clone(&scope),
            (0..40).map(|i| c(&format!("x{i}"))).collect(),
        );
        for i in 40..50 {
            let key = rank_key(&format!("x{i}"));
            r.keys.iter_mut().for_each(|k| *k = prefix(&key));
            let at = r.position_of_key(&key);
            let expected = r.ids.iter().filter(|id| rank_key(id) < key).count();
            assert_eq!(at, expected, "x{i}");
        }
    }
}
