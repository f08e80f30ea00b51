//! Staged rollouts: who is in which batch, how far a deployment got, when the next batch opens
//! and when the deployment aborts itself.
//!
//! * **Targets**: the unrevoked devices of the deployment's group (or its one device) whose
//!   accelerator is the pack's; others are counted as `incompatible` and never offered it.
//! * **Batch membership is deterministic**: targets are ordered by SHA-256 of their id, and batch
//!   `k` is the first `ceil(batches[k] × n / 100)` of them (cumulative percentages, at least one
//!   device). The same devices are the canaries of every deployment to a group, so a bad build
//!   reaches the same few devices first, and a restart cannot reshuffle a rollout.
//! * **Advance**: while the deployment is `active`, the next batch opens when the share of
//!   offered devices (every open batch) that reported `installed` or `bound` reaches
//!   `success_threshold`.
//! * **Auto-abort**: when the share of offered devices that reported `failed` or `rolled_back`
//!   exceeds `failure_threshold`, the deployment is aborted: it is no longer offered; devices that
//!   installed it keep it. With `on_failure: pause` it is paused instead (it holds, as an
//!   operator's pause does); resuming it acknowledges the failures counted then, and it pauses
//!   again only when a failure comes after the resume with the share still above the threshold.
//!
//! ## Exactly one replica acts on each transition
//! Several replicas may evaluate the same deployment at once (reports for it arrive at each).
//! A transition is therefore applied only through a **claim**: a conditional
//! `UPDATE … WHERE open_batches = <what was read> AND state = <what was read> RETURNING id`
//! ([`claim_open`], [`claim_abort`]). Whoever's update matches the row as it was read made the
//! transition and writes its audit row (`deployment.batch_open`, `deployment.auto_abort`) in the
//! same transaction; anyone else's matches nothing, changes nothing and writes nothing. The
//! claim holds on its own: on PostgreSQL the second `UPDATE` waits for the first one's row lock
//! and then re-checks its `WHERE` against the committed row (READ COMMITTED), on SQLite the
//! write transaction is already alone. That the evaluation *sees* every committed report comes
//! from the write transaction it runs in (`crate::db::begin_write`), so a transition is never
//! missed either: the last report to commit evaluates with all the others counted.
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use utoipa::ToSchema;

use super::states::DeploymentState;
pub use super::states::DeviceState;
use crate::db::Conn;
use crate::http::error::ApiError;

/// Most batches a rollout may have: more would only add waiting, and bounds the progress JSON.
pub const MAX_BATCHES: usize = 10;
/// Default batches when a `rollout` object omits them: 5 %, then 25 %, then everyone.
pub const DEFAULT_BATCHES: [u8; 3] = [5, 25, 100];
/// Default success threshold: 90 % of the offered devices installed it.
pub const DEFAULT_SUCCESS_THRESHOLD: f64 = 0.9;
/// Default failure threshold: abort when more than 20 % of the offered devices failed.
pub const DEFAULT_FAILURE_THRESHOLD: f64 = 0.2;

/// A staged-rollout policy. Omitted from a deployment request: one batch of 100 % (still
/// auto-aborted at the default failure threshold). Each omitted field takes its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollout {
    /// Cumulative percentages of the targets, strictly increasing, ending at 100.
    /// Default `[5, 25, 100]`.
    #[serde(
        default = "default_batches",
        deserialize_with = "crate::http::extract::integrals"
    )]
    pub batches: Vec<u8>,
    /// Share (0..=1) of offered devices that must report success before the next batch opens.
    /// Default 0.9.
    #[serde(default = "default_success")]
    pub success_threshold: f64,
    /// Share (0..=1) of offered devices whose failure aborts the deployment when exceeded.
    /// Default 0.2.
    #[serde(default = "default_failure")]
    pub failure_threshold: f64,
    /// What happens when the failures exceed `failure_threshold`: `abort` (default) or `pause`.
    #[serde(default)]
    pub on_failure: OnFailure,
}

/// What a deployment does when its failures exceed its threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Abort it: final; it is no longer offered.
    #[default]
    Abort,
    /// Pause it: it holds until an operator resumes it (or retries its failed devices).
    Pause,
}

impl OnFailure {
    /// The database spelling (`deployments.on_failure`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Abort => "abort",
            OnFailure::Pause => "pause",
        }
    }

    /// From the database spelling (unknown: abort, the safe side).
    pub fn from_db(s: &str) -> Self {
        if s == "pause" {
            OnFailure::Pause
        } else {
            OnFailure::Abort
        }
    }
}

fn default_batches() -> Vec<u8> {
    DEFAULT_BATCHES.to_vec()
}
fn default_success() -> f64 {
    DEFAULT_SUCCESS_THRESHOLD
}
fn default_failure() -> f64 {
    DEFAULT_FAILURE_THRESHOLD
}

impl Rollout {
    /// What a deployment without a `rollout` gets: everyone at once.
    pub fn immediate() -> Self {
        Self {
            batches: vec![100],
            success_threshold: DEFAULT_SUCCESS_THRESHOLD,
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            on_failure: OnFailure::Abort,
        }
    }

    /// 422 naming the field unless the policy is usable.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.batches.is_empty() || self.batches.len() > MAX_BATCHES {
            return Err(ApiError::invalid(format!(
                "rollout.batches: 1 to {MAX_BATCHES} percentages expected, got {}",
                self.batches.len()
            )));
        }
        if self.batches.windows(2).any(|w| w[0] >= w[1]) || self.batches[0] == 0 {
            return Err(ApiError::invalid(
                "rollout.batches: percentages must be strictly increasing and above 0",
            ));
        }
        if self.batches.last() != Some(&100) {
            return Err(ApiError::invalid(
                "rollout.batches: the last batch must be 100",
            ));
        }
        for (name, v) in [
            ("success_threshold", self.success_threshold),
            ("failure_threshold", self.failure_threshold),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(ApiError::invalid(format!(
                    "rollout.{name}: must be from 0 to 1, got {v}"
                )));
            }
        }
        Ok(())
    }
}

/// Orders target ids by SHA-256 of the id (batch order).
pub fn rank<T: AsRef<str>>(ids: &mut [T]) {
    ids.sort_by_cached_key(|id| rank_key(id.as_ref()));
}

/// What [`rank`] orders a device by: the SHA-256 of its id.
pub fn rank_key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// Devices in batches `0..=k` of `n` targets, for each `k`: `ceil(batches[k] × n / 100)`, but
/// at least one more than the batch before while devices remain, so that no batch is empty while
/// a later one has devices (a rollout never waits on a batch with nobody in it). A device's batch
/// only ever moves earlier under this rule compared with the bare percentage, so an offered
/// device stays offered.
pub fn cumulative_sizes(batches: &[u8], n: usize) -> Vec<usize> {
    let mut before = 0usize;
    batches
        .iter()
        .map(|&pct| {
            let size = (usize::from(pct) * n).div_ceil(100).max(before + 1).min(n);
            before = size;
            size
        })
        .collect()
}

/// How many of `n` ranked targets the first `open_batches` batches offer.
pub fn offered_count(batches: &[u8], open_batches: usize, n: usize) -> usize {
    open_batches
        .checked_sub(1)
        .and_then(|last| cumulative_sizes(batches, n).get(last).copied())
        .unwrap_or(0)
}

/// Devices per state.
#[derive(Debug, Clone, Default, Serialize, ToSchema, PartialEq, Eq)]
pub struct StateCounts {
    /// Nothing reported yet.
    pub pending: u64,
    /// `downloading`.
    pub downloading: u64,
    /// `verified`.
    pub verified: u64,
    /// `installed`.
    pub installed: u64,
    /// `bound`.
    pub bound: u64,
    /// `failed`.
    pub failed: u64,
    /// `rolled_back`.
    pub rolled_back: u64,
    /// Nothing reported, and never will be: the deployment was aborted first.
    pub cancelled: u64,
}

impl StateCounts {
    fn add(&mut self, s: DeviceState) {
        let slot = match s {
            DeviceState::Pending => &mut self.pending,
            DeviceState::Downloading => &mut self.downloading,
            DeviceState::Verified => &mut self.verified,
            DeviceState::Installed => &mut self.installed,
            DeviceState::Bound => &mut self.bound,
            DeviceState::Failed => &mut self.failed,
            DeviceState::RolledBack => &mut self.rolled_back,
        };
        *slot += 1;
    }

    /// Devices that succeeded.
    pub fn successes(&self) -> u64 {
        self.installed + self.bound
    }

    /// Devices that failed.
    pub fn failures(&self) -> u64 {
        self.failed + self.rolled_back
    }

    /// Every device counted.
    pub fn total(&self) -> u64 {
        self.pending
            + self.downloading
            + self.verified
            + self.installed
            + self.bound
            + self.failed
            + self.rolled_back
            + self.cancelled
    }

    fn cancel_pending(&mut self) {
        self.cancelled += std::mem::take(&mut self.pending);
    }
}

/// One batch's progress.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchProgress {
    /// 0-based.
    pub index: usize,
    /// Cumulative percentage of the targets this batch reaches.
    pub percent: u8,
    /// Devices in this batch alone.
    pub devices: u64,
    /// Whether it is offered.
    pub open: bool,
    /// Its devices per state.
    pub counts: StateCounts,
}

/// A deployment's progress.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Progress {
    /// Target devices (compatible, unrevoked).
    pub targets: u64,
    /// Devices of the target group skipped because their accelerator is not the pack's.
    pub incompatible: u64,
    /// Devices in open batches: the denominator of both rates.
    pub offered: u64,
    /// Every target per state.
    pub counts: StateCounts,
    /// Per batch.
    pub batches: Vec<BatchProgress>,
    /// Successes among offered devices (0 when none is offered).
    pub success_rate: f64,
    /// Failures among offered devices.
    pub failure_rate: f64,
}

impl Progress {
    /// An aborted deployment's progress: the devices that had reported nothing are `cancelled`,
    /// not `pending` (nothing will be offered to them).
    pub fn cancel_pending(&mut self) {
        self.counts.cancel_pending();
        for b in &mut self.batches {
            b.counts.cancel_pending();
        }
    }
}

/// Computes the progress of `ranked` targets (in batch order) with their states.
pub fn progress(
    batches: &[u8],
    open_batches: usize,
    ranked: &[DeviceState],
    incompatible: u64,
) -> Progress {
    let sizes = cumulative_sizes(batches, ranked.len());
    let mut counts = StateCounts::default();
    for &s in ranked {
        counts.add(s);
    }
    let mut out_batches = Vec::with_capacity(sizes.len());
    let mut start = 0;
    let mut offered = StateCounts::default();
    for (index, (&end, &percent)) in sizes.iter().zip(batches).enumerate() {
        let mut c = StateCounts::default();
        for &s in &ranked[start..end.max(start)] {
            c.add(s);
        }
        let open = index < open_batches;
        if open {
            for &s in &ranked[start..end.max(start)] {
                offered.add(s);
            }
        }
        out_batches.push(BatchProgress {
            index,
            percent,
            devices: c.total(),
            open,
            counts: c,
        });
        start = end.max(start);
    }
    let n = offered.total();
    let rate = |k: u64| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    Progress {
        targets: ranked.len() as u64,
        incompatible,
        offered: n,
        success_rate: rate(offered.successes()),
        failure_rate: rate(offered.failures()),
        counts,
        batches: out_batches,
    }
}

/// What the rollout should do next, given its progress.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing changes.
    Stay,
    /// Open batches up to this count.
    Open(usize),
    /// Abort, for this reason.
    Abort(String),
    /// Pause (the rollout's `on_failure: pause`), for this reason.
    Pause(String),
}

/// Decides from `progress`: abort (or pause) first when failures exceed the threshold, then open
/// as many batches as the success rate allows (several at once when a batch adds no device).
/// `acknowledged`: the failures among offered devices an operator resumed it over; with
/// `on_failure: pause` it pauses only once there are more.
pub fn decide(
    rollout: &Rollout,
    open_batches: usize,
    paused: bool,
    acknowledged: u64,
    ranked: &[DeviceState],
) -> Decision {
    let p = progress(&rollout.batches, open_batches, ranked, 0);
    if p.offered > 0 && p.failure_rate > rollout.failure_threshold {
        let failed = p.failures_offered();
        let why = format!(
            "{failed} of {} offered devices failed ({:.2} > failure_threshold {:.2})",
            p.offered, p.failure_rate, rollout.failure_threshold
        );
        match rollout.on_failure {
            OnFailure::Abort => return Decision::Abort(format!("auto-abort: {why}")),
            OnFailure::Pause if paused => return Decision::Stay,
            OnFailure::Pause if failed > acknowledged => {
                return Decision::Pause(format!("auto-pause: {why}"));
            }
            OnFailure::Pause => {}
        }
    }
    if paused {
        return Decision::Stay;
    }
    let mut open = open_batches;
    while open < rollout.batches.len() {
        let p = progress(&rollout.batches, open, ranked, 0);
        if p.offered == 0 || p.success_rate < rollout.success_threshold {
            break;
        }
        open += 1;
    }
    if open > open_batches {
        Decision::Open(open)
    } else {
        Decision::Stay
    }
}

impl Progress {
    /// Failures among the devices of open batches.
    pub fn failures_offered(&self) -> u64 {
        self.batches
            .iter()
            .filter(|b| b.open)
            .map(|b| b.counts.failures())
            .sum()
    }
}

/// Claims the transition of deployment `id` from `from` open batches to `to`, while it is
/// `active`: true when this caller made it (and must audit it), false when another evaluation
/// already did, or the deployment was paused or aborted meanwhile.
pub(crate) async fn claim_open(
    conn: &mut Conn,
    id: i64,
    from: usize,
    to: usize,
) -> Result<bool, sqlx::Error> {
    let claimed: Option<(i64,)> = sqlx::query_as(
        "UPDATE deployments SET open_batches = $1 \
         WHERE id = $2 AND open_batches = $3 AND state = 'active' RETURNING id",
    )
    .bind(to as i64)
    .bind(id)
    .bind(from as i64)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(claimed.is_some())
}

/// Claims the auto-pause of deployment `id` while it is `active`: true when this caller paused
/// it (and must audit it).
pub(crate) async fn claim_pause(
    conn: &mut Conn,
    id: i64,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    let claimed: Option<(i64,)> = sqlx::query_as(
        "UPDATE deployments SET state = 'paused', abort_reason = $1 \
         WHERE id = $2 AND state = 'active' RETURNING id",
    )
    .bind(reason)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(claimed.is_some())
}

/// Claims the auto-abort of deployment `id`, read in state `from` (`active` or `paused`): true
/// when this caller aborted it (and must audit it), false when it had already left that state.
pub(crate) async fn claim_abort(
    conn: &mut Conn,
    id: i64,
    from: DeploymentState,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    let claimed: Option<(i64,)> = sqlx::query_as(
        "UPDATE deployments SET state = 'aborted', abort_reason = $1 \
         WHERE id = $2 AND state = $3 RETURNING id",
    )
    .bind(reason)
    .bind(id)
    .bind(from.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    Ok(claimed.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeviceState::*;

    fn policy() -> Rollout {
        Rollout {
            batches: vec![5, 25, 100],
            success_threshold: 0.9,
            failure_threshold: 0.2,
            on_failure: OnFailure::Abort,
        }
    }

    #[test]
    fn batch_sizes_are_cumulative_and_at_least_one() {
        assert_eq!(cumulative_sizes(&[5, 25, 100], 100), [5, 25, 100]);
        assert_eq!(cumulative_sizes(&[5, 25, 100], 10), [1, 3, 10]);
        assert_eq!(cumulative_sizes(&[5, 25, 100], 1), [1, 1, 1]);
        // 2 devices: 5 % and 25 % both round up to 1, which left batch 1 empty before batch 2.
        assert_eq!(cumulative_sizes(&[5, 25, 100], 2), [1, 2, 2]);
        assert_eq!(cumulative_sizes(&[1, 2, 3, 100], 3), [1, 2, 3, 3]);
        assert_eq!(cumulative_sizes(&[5, 25, 100], 0), [0, 0, 0]);
    }

    #[test]
    fn ranking_is_deterministic() {
        let mut a = vec!["d1".to_owned(), "d2".into(), "d3".into()];
        let mut b = vec!["d3".to_owned(), "d1".into(), "d2".into()];
        rank(&mut a);
        rank(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn opens_the_next_batch_on_success_and_skips_empty_batches() {
        let mut states = vec![Pending; 10];
        assert_eq!(decide(&policy(), 1, false, 0, &states), Decision::Stay);
        states[0] = Installed;
        assert_eq!(decide(&policy(), 1, false, 0, &states), Decision::Open(2));
        assert_eq!(decide(&policy(), 1, true, 0, &states), Decision::Stay);
        // 10 targets: batches [1, 3, 10]; one bound of the first three is not enough.
        assert_eq!(decide(&policy(), 2, false, 0, &states), Decision::Stay);
        let one = vec![Bound];
        assert_eq!(decide(&policy(), 1, false, 0, &one), Decision::Open(3));
    }

    #[test]
    fn aborts_when_failures_exceed_the_threshold() {
        let mut states = vec![Pending; 10];
        states[0] = Failed;
        assert!(matches!(
            decide(&policy(), 1, false, 0, &states),
            Decision::Abort(_)
        ));
        assert!(matches!(
            decide(&policy(), 1, true, 0, &states),
            Decision::Abort(_)
        ));
        let mut states = vec![Installed; 10];
        states[9] = RolledBack;
        states[8] = Failed;
        // 2 of 10 = 0.2: not above the threshold.
        assert_eq!(decide(&policy(), 3, false, 0, &states), Decision::Stay);
    }

    #[test]
    fn pauses_instead_when_asked_and_again_only_on_a_new_failure() {
        let pausing = Rollout {
            on_failure: OnFailure::Pause,
            ..policy()
        };
        let mut states = vec![Pending; 10];
        states[0] = Failed;
        assert!(matches!(
            decide(&pausing, 1, false, 0, &states),
            Decision::Pause(why) if why.starts_with("auto-pause: 1 of 1")
        ));
        // Already paused: it stays paused, never aborts.
        assert_eq!(decide(&pausing, 1, true, 0, &states), Decision::Stay);
        // Resumed over that one failure: no pause until another comes.
        assert_eq!(decide(&pausing, 1, false, 1, &states), Decision::Stay);
        states[1] = RolledBack;
        assert!(matches!(
            decide(&pausing, 2, false, 1, &states),
            Decision::Pause(_)
        ));
    }

    #[test]
    fn rejects_bad_policies() {
        for batches in [vec![], vec![50], vec![25, 25, 100], vec![0, 100]] {
            let r = Rollout {
                batches,
                ..policy()
            };
            assert!(r.check().is_err(), "{r:?}");
        }
        let r = Rollout {
            success_threshold: 1.5,
            ..policy()
        };
        assert!(r.check().is_err());
    }
}
