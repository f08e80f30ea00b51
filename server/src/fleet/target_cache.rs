//! The ranked targets of the deployments the dashboard lists, kept per fleet generation.
//!
//! Who a deployment targets (its group's unrevoked devices with the pack's accelerator, a
//! retry's members) and in which order (`rollout::rank`, a SHA-256 per device) change only with a
//! change that bumps the fleet generation (`device/generation.rs`: a device added, moved or
//! revoked, a deployment created); device reports do not change them. So
//! `GET /api/v1/fleet/summary`, asked again and again while the dashboard is open, reads a
//! rollout's group and ranks it once per generation, and per request reads only its reports.
//!
//! | Bound                | Value                                   | Why                             |
//! |----------------------|-----------------------------------------|---------------------------------|
//! | deployments kept     | [`KEPT`] (the summary's 2 × 10 looked at) | the summary's list, no more    |
//! | memory per entry     | one `Arc<str>` and one index slot per target | ~60 bytes × targets        |
//! | stale entry          | replaced at first use with a newer generation | never answered               |
//!
//! The generation is read in the same read transaction as the rows an entry is built from, and
//! before them: an entry is never older than the generation it is filed under.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Deployments kept: the summary looks at twice as many as it lists (completed ones are skipped).
pub const KEPT: usize = 20;

/// One deployment's ranked targets at one generation.
#[derive(Debug)]
pub struct Ranked {
    /// The target ids, ranked (batch order).
    pub ids: Vec<Arc<str>>,
    /// Each id's position in `ids`.
    pub index: HashMap<Arc<str>, usize>,
    /// Devices of its group skipped for another accelerator.
    pub incompatible: u64,
}

impl Ranked {
    /// The entry of ranked `ids`.
    pub fn new(ids: Vec<Arc<str>>, incompatible: u64) -> Self {
        let index = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (Arc::clone(id), i))
            .collect();
        Self {
            ids,
            index,
            incompatible,
        }
    }
}

/// The cache: deployment id → (generation, its ranked targets).
#[derive(Debug, Default)]
pub struct TargetCache {
    entries: Mutex<HashMap<i64, (i64, Arc<Ranked>)>>,
}

impl TargetCache {
    /// Deployment `id`'s ranked targets at `generation`, if kept.
    pub fn get(&self, id: i64, generation: i64) -> Option<Arc<Ranked>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&id)
            .filter(|(g, _)| *g == generation)
            .map(|(_, r)| Arc::clone(r))
    }

    /// Keeps `ranked` for deployment `id` at `generation`; `keep`: the deployments still worth
    /// keeping (the others are dropped first), at most [`KEPT`] in all.
    pub fn put(&self, id: i64, generation: i64, ranked: Arc<Ranked>, keep: &[i64]) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|k, (g, _)| keep.contains(k) && *g <= generation);
        if entries.len() >= KEPT && !entries.contains_key(&id) {
            return;
        }
        entries.insert(id, (generation, ranked));
    }

    /// Deployments kept now (for tests).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(ids: &[&str]) -> Arc<Ranked> {
        Arc::new(Ranked::new(ids.iter().map(|&i| Arc::from(i)).collect(), 0))
    }

    #[test]
    fn an_entry_answers_only_at_its_generation() {
        let c = TargetCache::default();
        c.put(1, 7, ranked(&["b", "a"]), &[1]);
        let got = c.get(1, 7).expect("kept");
        assert_eq!(got.index[&Arc::<str>::from("a")], 1);
        assert!(c.get(1, 8).is_none());
        assert!(c.get(2, 7).is_none());
    }

    #[test]
    fn entries_not_listed_any_more_are_dropped_and_the_count_is_bounded() {
        let c = TargetCache::default();
        c.put(1, 1, ranked(&["a"]), &[1]);
        c.put(2, 1, ranked(&["a"]), &[2]);
        assert!(c.get(1, 1).is_none(), "1 is no longer listed");
        let all: Vec<i64> = (0..100).collect();
        for id in 0..100 {
            c.put(id, 1, ranked(&["a"]), &all);
        }
        assert_eq!(c.len(), KEPT);
    }
}
