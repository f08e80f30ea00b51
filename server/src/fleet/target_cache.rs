//! Deployments' ranked targets, kept per fleet generation.
//!
//! Who a deployment targets (its group's unrevoked devices with the pack's accelerator, a
//! retry's members), in which order (`rollout::rank`, a SHA-256 per device), under which names,
//! and which devices of its group it skips for their accelerator change only with a change that
//! bumps the fleet generation (`device/generation.rs`: a device added, edited, moved or revoked, a
//! deployment created); device reports do not change them. So the requests asked again and
//! again while an operator watches a rollout (`GET /api/v1/fleet/summary`,
//! `GET /api/v1/deployments/{id}`, its `…/timeline` and its `…/devices` pages) read a
//! deployment's group and rank it once, and per request read only its reports.
//!
//! | Bound                | Value                                              | Why                               |
//! |----------------------|----------------------------------------------------|-----------------------------------|
//! | deployments kept     | [`KEPT`] (the summary looks at 2 × 10)             | the dashboard's list and the pages open beside it |
//! | targets kept in all  | [`KEPT_TARGETS`] (an estimated ~140 bytes each: id, name, key word, index slot; not measured) | ~140 MB at most, whatever the fleet |
//! | which goes first     | the least recently used                            | what is asked again stays         |
//! | entry of an older generation | never answered as it is: the base a newer one is moved forward from (`ranking.rs`) | a result is never older than its transaction |
//!
//! The generation is read in the same read transaction as the rows an entry is built from, and
//! before them: an entry is never older than the generation it is filed under.
//!
//! A change to the fleet makes every entry stale at once. The first request after it moves the
//! entry of the older generation forward by the devices the change touched
//! (`ranking.rs`, `ranked.rs`), and the requests that come at the same time (every open
//! dashboard, every page an operator watches) wait for that one answer:
//! [`TargetCache::get_or_rank`] lets one of them bring a deployment to a generation and the others
//! wait for it. No lock is held while it reads: the others wait on a [`tokio::sync::OnceCell`];
//! if the request doing it goes away (its client leaves), the next waiter does it instead, and if
//! it fails (a statement timeout), every waiter is answered at once.
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::OnceCell;

pub use super::ranked::Ranked;

/// Deployments kept: the summary looks at twice as many as it lists (completed ones are skipped).
pub const KEPT: usize = 20;
/// Targets kept over every entry: ten rollouts of 100,000 devices.
pub const KEPT_TARGETS: usize = 1_000_000;

struct Entry {
    generation: i64,
    ranked: Arc<Ranked>,
    /// The cache's clock at its last use: the smallest goes first.
    used: u64,
}

#[derive(Default)]
struct Entries {
    map: HashMap<i64, Entry>,
    clock: u64,
}

/// A ranking under way: the cell its waiters share, by (deployment id, generation). Weak, so a
/// ranking nobody waits for any more leaves nothing behind.
type Filling = HashMap<(i64, i64), Weak<Cell>>;

/// What the callers of one ranking wait on: its answer, or `None` when it failed.
type Cell = OnceCell<Option<Arc<Ranked>>>;

/// The cache: deployment id → (generation, its ranked targets).
#[derive(Default)]
pub struct TargetCache {
    entries: Mutex<Entries>,
    filling: Mutex<Filling>,
    /// Rankings made from the group's rows.
    ranked: AtomicU64,
    /// Rankings moved forward from an older generation's.
    moved: AtomicU64,
}

/// How a ranking was made (counted by [`TargetCache::note`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// From every row of the deployment's scope.
    Ranked,
    /// From an older ranking and the rows changed since.
    Moved,
}

impl std::fmt::Debug for TargetCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetCache")
            .field("kept", &self.len())
            .finish()
    }
}

impl TargetCache {
    /// Deployment `id`'s ranked targets at `generation`, if kept.
    pub fn get(&self, id: i64, generation: i64) -> Option<Arc<Ranked>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.clock += 1;
        let now = entries.clock;
        let entry = entries
            .map
            .get_mut(&id)
            .filter(|e| e.generation == generation)?;
        entry.used = now;
        Some(Arc::clone(&entry.ranked))
    }

    /// Keeps `ranked` for deployment `id` at `generation` (in place of its entry of an older
    /// one), then drops the least recently used until both bounds hold. An entry larger than
    /// [`KEPT_TARGETS`] alone is not kept.
    pub fn put(&self, id: i64, generation: i64, ranked: Arc<Ranked>) {
        if ranked.weight() > KEPT_TARGETS {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries
            .map
            .get(&id)
            .is_some_and(|e| e.generation > generation)
        {
            return;
        }
        entries.map.remove(&id);
        loop {
            let weight: usize = entries.map.values().map(|e| e.ranked.weight()).sum();
            if entries.map.len() < KEPT && weight + ranked.weight() <= KEPT_TARGETS {
                break;
            }
            let Some(oldest) = entries
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            entries.map.remove(&oldest);
        }
        entries.clock += 1;
        let used = entries.clock;
        entries.map.insert(
            id,
            Entry {
                generation,
                ranked,
                used,
            },
        );
    }

    /// Deployment `id`'s entry of the newest generation kept, whatever it is: the base a
    /// ranking inside a write transaction is moved forward from (never kept: what that
    /// transaction reads is not committed).
    pub fn latest(&self, id: i64) -> Option<(i64, Arc<Ranked>)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .map
            .get(&id)
            .map(|e| (e.generation, Arc::clone(&e.ranked)))
    }

    /// Deployment `id`'s ranked targets at `generation`: kept, or made by `rank` and kept.
    /// `rank` is given the entry of an older generation, if one is kept, to move forward.
    /// Concurrent callers for the same deployment and generation share one ranking: one runs
    /// `rank`, the others wait for its answer. If it fails, it returns its own error and the
    /// callers waiting on it at that moment get `failed()` at once (rather than each trying in
    /// turn, the k-th answering after k failures' time); a later caller ranks afresh. If it is
    /// dropped (its client left), the next waiter ranks instead. Every caller must have read
    /// `generation` first in the transaction `rank` reads in, so that any caller's ranking is
    /// every caller's answer.
    pub async fn get_or_rank<F, Fut, E>(
        &self,
        id: i64,
        generation: i64,
        rank: F,
        failed: impl FnOnce() -> E,
    ) -> Result<Arc<Ranked>, E>
    where
        F: FnOnce(Option<(i64, Arc<Ranked>)>) -> Fut,
        Fut: Future<Output = Result<Arc<Ranked>, E>>,
    {
        if let Some(r) = self.get(id, generation) {
            return Ok(r);
        }
        let cell = self.filling_cell(id, generation);
        let mut own_error = None;
        let ranked = cell
            .get_or_init(|| async {
                // One that ranked just before this cell was made has put it already.
                if let Some(r) = self.get(id, generation) {
                    return Some(r);
                }
                let base = self.latest(id).filter(|(g, _)| *g < generation);
                match rank(base).await {
                    Ok(r) => {
                        self.put(id, generation, Arc::clone(&r));
                        Some(r)
                    }
                    Err(e) => {
                        own_error = Some(e);
                        // A caller arriving from now on ranks afresh.
                        self.forget(id, generation, &cell);
                        None
                    }
                }
            })
            .await
            .clone();
        drop(cell);
        self.forget_filled();
        match (ranked, own_error) {
            (Some(r), _) => Ok(r),
            (None, Some(e)) => Err(e),
            (None, None) => Err(failed()),
        }
    }

    /// Forgets `cell` as the ranking under way of `id` at `generation`.
    fn forget(&self, id: i64, generation: i64, cell: &Arc<Cell>) {
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        if filling
            .get(&(id, generation))
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(cell)))
        {
            filling.remove(&(id, generation));
        }
    }

    /// The cell the callers ranking `id` at `generation` share: the one under way, or a new one.
    fn filling_cell(&self, id: i64, generation: i64) -> Arc<Cell> {
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cell) = filling.get(&(id, generation)).and_then(Weak::upgrade) {
            return cell;
        }
        let cell = Arc::new(OnceCell::new());
        filling.insert((id, generation), Arc::downgrade(&cell));
        cell
    }

    /// Drops the cells nobody holds any more (bounded by the requests in flight).
    fn forget_filled(&self) {
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        filling.retain(|_, cell| cell.strong_count() > 0);
    }

    /// Counts a ranking made as `made` (see [`TargetCache::rankings`]).
    pub fn note(&self, made: Made) {
        match made {
            Made::Ranked => &self.ranked,
            Made::Moved => &self.moved,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// Rankings made so far: (from every row of a scope, moved forward from an older one).
    pub fn rankings(&self) -> (u64, u64) {
        (
            self.ranked.load(Ordering::Relaxed),
            self.moved.load(Ordering::Relaxed),
        )
    }

    /// Rankings under way now (for tests).
    pub fn filling(&self) -> usize {
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        filling.retain(|_, cell| cell.strong_count() > 0);
        filling.len()
    }

    /// Deployments kept now (for tests).
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::ranked::Scope;
    use crate::fleet::targeting::Candidate;

    fn unranked<S: AsRef<str>>(ids: &[S]) -> Ranked {
        let scope = Arc::new(Scope::new(Some("g"), None, 1, None));
        let candidates = ids
            .iter()
            .map(|i| Candidate {
                id: i.as_ref().to_owned(),
                name: i.as_ref().to_owned(),
                accel: 1,
                grp: "g".into(),
            })
            .collect();
        Ranked::rank(scope, candidates)
    }

    fn ranked(ids: &[&str]) -> Arc<Ranked> {
        Arc::new(unranked(ids))
    }

    /// Four concurrent callers for deployment 1 at generation 5 whose ranking, held until all
    /// four wait on it, answers `answer`: how many rankings ran, and each caller's answer.
    async fn four_callers(
        c: &TargetCache,
        answer: Result<Arc<Ranked>, &'static str>,
    ) -> (usize, Vec<Result<Arc<Ranked>, &'static str>>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let ranks = AtomicUsize::new(0);
        let (go, wait) = tokio::sync::watch::channel(false);
        let ranks = &ranks;
        let call = || {
            let mut wait = wait.clone();
            let answer = answer.clone();
            c.get_or_rank(
                1,
                5,
                move |_| async move {
                    ranks.fetch_add(1, Ordering::SeqCst);
                    // Held until every caller has arrived and is waiting on this one.
                    wait.wait_for(|g| *g).await.unwrap();
                    answer
                },
                || "the ranking waited for failed",
            )
        };
        let callers = futures_join(vec![call(), call(), call(), call()]);
        let release = async {
            while ranks.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            go.send(true).unwrap();
        };
        let (answers, ()) = tokio::join!(callers, release);
        (ranks.load(Ordering::SeqCst), answers)
    }

    #[tokio::test]
    async fn concurrent_callers_at_one_generation_rank_once() {
        let c = TargetCache::default();
        let (ranks, answers) = four_callers(&c, Ok(ranked(&["b", "a"]))).await;
        assert_eq!(ranks, 1, "one ranking for four callers");
        let first = answers[0].as_ref().unwrap();
        for a in &answers {
            assert!(Arc::ptr_eq(first, a.as_ref().unwrap()), "the same answer");
        }
        assert_eq!(c.filling(), 0, "nothing left under way");
        assert!(c.get(1, 5).is_some(), "kept");
    }

    #[tokio::test]
    async fn a_failed_or_dropped_ranking_lets_the_next_caller_rank() {
        let c = TargetCache::default();
        let failed = c.get_or_rank(
            1,
            5,
            |_| async { Err::<Arc<Ranked>, _>("db gone") },
            Default::default,
        );
        assert_eq!(failed.await.unwrap_err(), "db gone");
        // A caller dropped mid-ranking (its client left) holds nothing up.
        let dropped = c.get_or_rank(
            1,
            5,
            |_| std::future::pending::<Result<Arc<Ranked>, ()>>(),
            Default::default,
        );
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(1), dropped)
                .await
                .is_err()
        );
        assert_eq!(c.filling(), 0);
        let first = c
            .get_or_rank(
                1,
                5,
                |base| async move {
                    assert!(base.is_none(), "nothing kept yet");
                    Ok::<_, ()>(ranked(&["a"]))
                },
                Default::default,
            )
            .await
            .unwrap();
        assert_eq!(first.len(), 1);
        // Another generation is another ranking, given the older one to move forward.
        let later = c
            .get_or_rank(
                1,
                6,
                |base| async move {
                    let (generation, base) = base.expect("the older entry");
                    assert_eq!((generation, base.len()), (5, 1));
                    Ok::<_, ()>(ranked(&["a", "b"]))
                },
                Default::default,
            )
            .await
            .unwrap();
        assert_eq!(later.len(), 2);
        // A reader of an older generation is not given a newer entry as its base.
        c.get_or_rank(
            1,
            4,
            |base| async move {
                assert!(base.is_none(), "generation 6 is newer than 4");
                Ok::<_, ()>(ranked(&["a"]))
            },
            Default::default,
        )
        .await
        .unwrap();
        assert_eq!(c.latest(1).unwrap().0, 6, "the newer entry stays");
    }

    #[tokio::test]
    async fn the_waiters_of_a_failed_ranking_are_answered_at_once() {
        let c = TargetCache::default();
        let (ranks, answers) = four_callers(&c, Err("statement timeout")).await;
        assert_eq!(ranks, 1, "one attempt, not one per waiter");
        let mut errors: Vec<&str> = answers.iter().map(|a| *a.as_ref().unwrap_err()).collect();
        errors.sort_unstable();
        assert_eq!(
            errors,
            [
                "statement timeout",
                "the ranking waited for failed",
                "the ranking waited for failed",
                "the ranking waited for failed"
            ]
        );
        assert_eq!(c.filling(), 0);
        // A later caller ranks afresh.
        let r = c
            .get_or_rank(1, 5, |_| async { Ok::<_, &str>(ranked(&["a"])) }, || "")
            .await
            .unwrap();
        assert_eq!(r.len(), 1);
    }

    /// Polls every future together (one task), answers in order.
    async fn futures_join<F: Future>(fs: Vec<F>) -> Vec<F::Output> {
        let mut fs: Vec<_> = fs.into_iter().map(Box::pin).collect();
        let mut out: Vec<Option<F::Output>> = fs.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut done = true;
            for (f, o) in fs.iter_mut().zip(out.iter_mut()) {
                if o.is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => *o = Some(v),
                        std::task::Poll::Pending => done = false,
                    }
                }
            }
            if done {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        out.into_iter().map(Option::unwrap).collect()
    }

    #[test]
    fn an_entry_answers_only_at_its_generation() {
        let c = TargetCache::default();
        c.put(1, 7, ranked(&["b", "a"]));
        let got = c.get(1, 7).expect("kept");
        assert_eq!(got.position("a"), Some(1));
        assert!(c.get(1, 8).is_none());
        assert!(c.get(2, 7).is_none());
    }

    #[test]
    fn an_older_generations_entry_stays_as_a_base_and_answers_no_more() {
        let c = TargetCache::default();
        c.put(1, 1, ranked(&["a"]));
        c.put(2, 2, ranked(&["a"]));
        assert_eq!(
            c.len(),
            2,
            "1 is kept at generation 1: a base to move forward"
        );
        assert!(c.get(1, 2).is_none(), "it answers only at its generation");
        assert_eq!(c.latest(1).map(|(g, _)| g), Some(1));
        // A reader still in generation 1's transaction does not replace the newer entry.
        c.put(2, 1, ranked(&["b"]));
        assert!(c.get(2, 2).is_some());
        // A newer generation's entry takes the older one's place.
        c.put(1, 3, ranked(&["a", "b"]));
        assert_eq!(c.len(), 2);
        assert!(c.get(1, 1).is_none());
    }

    #[test]
    fn the_least_recently_used_goes_first_and_the_count_is_bounded() {
        let c = TargetCache::default();
        for id in 0..KEPT as i64 {
            c.put(id, 1, ranked(&["a"]));
        }
        assert!(c.get(0, 1).is_some(), "0 is used again");
        c.put(100, 1, ranked(&["a"]));
        assert_eq!(c.len(), KEPT);
        assert!(c.get(0, 1).is_some(), "0 was used last but one");
        assert!(c.get(1, 1).is_none(), "1 was the least recently used");
    }

    #[test]
    fn the_targets_kept_in_all_are_bounded() {
        let c = TargetCache::default();
        let big = |n: usize| {
            let ids: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            Arc::new(unranked(&ids))
        };
        c.put(1, 1, big(KEPT_TARGETS / 2));
        c.put(2, 1, big(KEPT_TARGETS / 2));
        c.put(3, 1, big(1));
        assert!(c.get(1, 1).is_none(), "1 made room");
        assert!(c.get(2, 1).is_some() && c.get(3, 1).is_some());
        c.put(4, 1, big(KEPT_TARGETS + 1));
        assert!(
            c.get(4, 1).is_none(),
            "larger than the whole budget: not kept"
        );
    }
}
