//! Who a deployment reaches, device by device: the plan a preview shows before it is made, and
//! the per-device list of a deployment once it is.
//!
//! | Device of the target                      | In the plan                                    |
//! |-------------------------------------------|------------------------------------------------|
//! | unrevoked, the pack's accelerator         | a target, in batch `k` by its rank (`rollout`) |
//! | unrevoked, another accelerator            | skipped: `other_accelerator`                   |
//! | a target whose batch is not open yet      | skipped: `batch_not_open` (listing only)       |
//! | reported on it, but no longer a target    | skipped: `not_a_target` (moved or revoked; listing only) |
//!
//! A deployment's list ([`Listing`]) is built from its [`Ranked`] targets, which the fleet keeps
//! per generation (`target_cache.rs`), and its reports read per request; it is walked entry by
//! entry without allocating, and only the page asked for is rendered.
use std::collections::HashMap;

use npub_core::Accel;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use super::ranked::{Candidate, Ranked};
use super::rollout::{self, DeviceState};
use super::states::TargetState;
use crate::db::Conn;
use crate::http::error::ApiError;

/// Why a device of the target does not get (or has not got yet) the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Skip {
    /// Its accelerator is not the one the pack was compiled for.
    OtherAccelerator,
    /// Its batch of the staged rollout is not open yet.
    BatchNotOpen,
    /// It reported on the deployment but is no longer a target (moved to another group, or
    /// revoked).
    NotATarget,
}

/// The devices a target (a group, or one device) names, unrevoked, by id.
pub async fn candidates(
    conn: &mut Conn,
    group: Option<&str>,
    device: Option<&str>,
) -> Result<Vec<Candidate>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, name, accel, grp FROM devices WHERE revoked_at IS NULL \
         AND (grp = $1 OR id = $2) ORDER BY id",
    )
    .bind(group)
    .bind(device)
    .fetch_all(&mut *conn)
    .await
}

/// A deployment's reach: targets by batch, and the devices skipped for their accelerator.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Target ids in rank order.
    pub ranked: Vec<String>,
    /// Cumulative batch sizes over `ranked`.
    pub sizes: Vec<usize>,
    /// Devices of the target with another accelerator, by id.
    pub other_accelerator: Vec<Candidate>,
}

impl Plan {
    /// The plan for a pack of accel word `pack_accel` over `candidates` with `batches`.
    pub fn new(candidates: &[Candidate], pack_accel: i64, batches: &[u8]) -> Self {
        let (mut ranked, mut other_accelerator) = (Vec::new(), Vec::new());
        for c in candidates {
            if c.accel == pack_accel {
                ranked.push(c.id.clone());
            } else {
                other_accelerator.push(c.clone());
            }
        }
        rollout::rank(&mut ranked);
        let sizes = rollout::cumulative_sizes(batches, ranked.len());
        Self {
            ranked,
            sizes,
            other_accelerator,
        }
    }

    /// The ids of each batch (its own devices, not cumulative).
    pub fn batches(&self) -> Vec<&[String]> {
        let mut start = 0;
        self.sizes
            .iter()
            .map(|&end| {
                let end = end.max(start);
                let batch = &self.ranked[start..end];
                start = end;
                batch
            })
            .collect()
    }

    /// 422/404 unless the deployment reaches at least one device: a deployment with no
    /// compatible target would consume a sequence and sit `active` with nobody to offer it to.
    pub fn require_targets(
        &self,
        what: &str,
        pack_accel: i64,
        candidates: usize,
    ) -> Result<(), ApiError> {
        if !self.ranked.is_empty() {
            return Ok(());
        }
        if candidates == 0 {
            return Err(ApiError::NotFound(format!("{what}: no unrevoked device")));
        }
        let pack = Accel::from_word(pack_accel as u32).name();
        let mut theirs: Vec<&str> = self
            .other_accelerator
            .iter()
            .map(|c| Accel::from_word(c.accel as u32).name())
            .collect();
        theirs.sort_unstable();
        theirs.dedup();
        Err(ApiError::invalid(format!(
            "{what} has no device for this pack: the pack is compiled for {pack}, and its {} \
             device{} {} {}; deploy a version compiled for {} instead",
            candidates,
            if candidates == 1 { "" } else { "s" },
            if candidates == 1 { "is" } else { "are" },
            theirs.join(", "),
            theirs.join(" or "),
        )))
    }
}

/// One device of a deployment.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentDevice {
    /// Device id.
    pub device_id: String,
    /// Its label.
    pub name: String,
    /// Its NPU configuration.
    pub accelerator: String,
    /// Its batch (0-based), for targets.
    pub batch: Option<usize>,
    /// Whether it is offered the deployment now.
    pub offered: bool,
    /// What it last reported for this deployment, `pending` if nothing, `skipped` when skipped
    /// before it reported.
    pub state: TargetState,
    /// Why it does not get the deployment (yet).
    pub skipped: Option<Skip>,
    /// The reason it gave with its last report, or what the skip means for it.
    pub reason: Option<String>,
    /// RFC 3339 of its last report on this deployment.
    pub updated_at: Option<String>,
}

/// What a device reported on one deployment.
pub struct Reported {
    /// What it reported.
    pub state: DeviceState,
    /// Its reason.
    pub reason: Option<String>,
    /// Unix ms.
    pub updated_at: i64,
}

/// What a deployment's state does to its devices as listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Active: as the batches say.
    None,
    /// Paused: only a device that had started on it is still offered it.
    Paused,
    /// Aborted: nobody is offered it, and a device that had reported nothing never will be.
    Aborted,
}

/// One device of a deployment before it is rendered: enough to filter and page on, without an
/// allocation (a deployment's list is walked whole for a filter, one page of it is rendered).
pub struct Entry<'a> {
    id: &'a str,
    name: &'a str,
    /// Its accel word.
    accel: i64,
    batch: Option<usize>,
    offered: bool,
    /// What the listing shows as its state.
    pub state: TargetState,
    /// Why it does not get the deployment (yet).
    pub skipped: Option<Skip>,
    report: Option<&'a Reported>,
    held: bool,
}

/// A deployment's devices as its targets page lists them: targets in rank order, then the
/// devices skipped for their accelerator by id, then the devices that reported on it but are no
/// longer targets, by id.
pub struct Listing<'a> {
    ranked: &'a Ranked,
    sizes: Vec<usize>,
    reports: &'a HashMap<String, Reported>,
    names: &'a HashMap<String, String>,
    gone: Vec<&'a str>,
    open_batches: usize,
    pack_accel: i64,
    hold: Hold,
}

impl<'a> Listing<'a> {
    /// The listing of `ranked` targets with `batches`, their `reports` (with the reporting
    /// devices' `names`), `open_batches` open, a pack of accel word `pack_accel`, held as `hold`.
    pub fn new(
        ranked: &'a Ranked,
        batches: &[u8],
        reports: &'a HashMap<String, Reported>,
        names: &'a HashMap<String, String>,
        open_batches: usize,
        pack_accel: i64,
        hold: Hold,
    ) -> Self {
        let mut gone: Vec<&str> = reports
            .keys()
            .map(String::as_str)
            .filter(|id| ranked.position(id).is_none())
            .collect();
        gone.sort_unstable();
        Self {
            ranked,
            sizes: rollout::cumulative_sizes(batches, ranked.len()),
            reports,
            names,
            gone,
            open_batches,
            pack_accel,
            hold,
        }
    }

    /// Every device, in the listing's order.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'_>> + '_ {
        let targets = (0..self.ranked.len()).map(|rank| self.target(rank));
        let others = self.ranked.other_accelerator().iter().map(|c| Entry {
            id: &c.id,
            name: &c.name,
            accel: c.accel,
            batch: None,
            offered: false,
            state: TargetState::Skipped,
            skipped: Some(Skip::OtherAccelerator),
            report: None,
            held: false,
        });
        let gone = self.gone.iter().map(|&id| self.gone(id));
        let hold = self.hold;
        targets
            .chain(others)
            .chain(gone)
            .map(move |e| e.held_by(hold))
    }

    /// The devices listed as having reported `state` last, in the listing's order: the
    /// [`Listing::entries`] of that state, found from the reports rather than by walking every
    /// target (a reported state is never derived: pending, skipped and cancelled are, and a hold
    /// changes only those).
    pub fn reported(&self, state: DeviceState) -> impl Iterator<Item = Entry<'_>> + '_ {
        let mut targets: Vec<usize> = self
            .reports
            .iter()
            .filter(|(_, r)| r.state == state)
            .filter_map(|(id, _)| self.ranked.position(id))
            .collect();
        targets.sort_unstable();
        let gone = self
            .gone
            .iter()
            .filter(move |id| self.reports[**id].state == state)
            .map(|&id| self.gone(id));
        let hold = self.hold;
        targets
            .into_iter()
            .map(|rank| self.target(rank))
            .chain(gone)
            .map(move |e| e.held_by(hold))
    }

    /// The target at `rank`, before the hold.
    fn target(&self, rank: usize) -> Entry<'_> {
        let id = &self.ranked.ids()[rank];
        let batch = self.sizes.iter().position(|&end| rank < end).unwrap_or(0);
        let offered = batch < self.open_batches;
        let report = self.reports.get(&**id);
        let (state, skipped) = match report {
            Some(r) => (r.state.into(), None),
            None if offered => (TargetState::Pending, None),
            None => (TargetState::Skipped, Some(Skip::BatchNotOpen)),
        };
        Entry {
            id,
            name: self.ranked.name(rank),
            accel: self.pack_accel,
            batch: Some(batch),
            offered,
            state,
            skipped,
            report,
            held: false,
        }
    }

    /// Device `id`, which reported on the deployment and is no longer a target, before the hold.
    fn gone<'s>(&'s self, id: &'s str) -> Entry<'s> {
        let report = &self.reports[id];
        Entry {
            id,
            name: self.names.get(id).map_or(id, String::as_str),
            accel: self.pack_accel,
            batch: None,
            offered: false,
            state: report.state.into(),
            skipped: Some(Skip::NotATarget),
            report: Some(report),
            held: false,
        }
    }

    /// `entry` as the listing shows it.
    pub fn render(&self, e: Entry<'_>) -> DeploymentDevice {
        let pack = Accel::from_word(self.pack_accel as u32).name();
        let theirs = Accel::from_word(e.accel as u32).name();
        let reason = if e.held {
            Some("held: the deployment is paused (resume offers it again)".into())
        } else {
            match (e.skipped, e.report) {
                (Some(Skip::NotATarget), Some(r)) => r.reason.clone().or_else(|| {
                    Some("no longer a target (moved to another group, or revoked)".into())
                }),
                (_, Some(r)) => r.reason.clone(),
                (Some(Skip::BatchNotOpen), None) => Some(format!(
                    "in batch {} of {}, not open yet",
                    e.batch.unwrap_or(0) + 1,
                    self.sizes.len()
                )),
                (Some(Skip::OtherAccelerator), None) => {
                    Some(format!("it is {theirs}; the pack is compiled for {pack}"))
                }
                _ => None,
            }
        };
        DeploymentDevice {
            device_id: e.id.to_owned(),
            name: e.name.to_owned(),
            accelerator: theirs.to_owned(),
            batch: e.batch,
            offered: e.offered,
            state: e.state,
            skipped: e.skipped,
            reason,
            updated_at: e.report.map(|r| crate::time::rfc3339(r.updated_at)),
        }
    }
}

impl Entry<'_> {
    fn held_by(mut self, hold: Hold) -> Self {
        match hold {
            Hold::None => {}
            Hold::Aborted => {
                self.offered = false;
                let untouched = self.state == TargetState::Pending
                    || (self.state == TargetState::Skipped
                        && self.skipped == Some(Skip::BatchNotOpen));
                if untouched {
                    self.state = TargetState::Cancelled;
                }
            }
            Hold::Paused => {
                if self.offered && self.state == TargetState::Pending {
                    self.offered = false;
                    self.held = true;
                }
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fleet::ranked::Scope;

    /// Every reported state's devices, found from the reports, are the walk's devices of that
    /// state in the same order, whatever the hold: targets in and out of open batches, devices
    /// that reported and then left.
    #[test]
    fn the_devices_of_a_reported_state_are_the_walks() {
        let scope = Arc::new(Scope::new(Some("g"), None, 1, None));
        let candidates = (0..200)
            .map(|i| Candidate {
                id: format!("d{i:03}"),
                name: format!("n{i}"),
                accel: if i % 13 == 0 { 2 } else { 1 },
                grp: "g".into(),
            })
            .collect();
        let ranked = Ranked::rank(scope, candidates);
        let mut reports = HashMap::new();
        let mut names = HashMap::new();
        // Reports from targets, in turn through every reported state, and from devices gone.
        let reported: Vec<DeviceState> = DeviceState::ALL
            .into_iter()
            .filter(|s| *s != DeviceState::Pending)
            .collect();
        for (i, id) in ranked.ids().iter().enumerate().step_by(3) {
            reports.insert(
                id.to_string(),
                Reported {
                    state: reported[i % reported.len()],
                    reason: None,
                    updated_at: i as i64,
                },
            );
        }
        for i in 0..12 {
            let id = format!("gone{i}");
            names.insert(id.clone(), format!("was {i}"));
            reports.insert(
                id,
                Reported {
                    state: reported[i % reported.len()],
                    reason: None,
                    updated_at: 0,
                },
            );
        }
        for hold in [Hold::None, Hold::Paused, Hold::Aborted] {
            for open in 0..=3 {
                let listing = Listing::new(&ranked, &[5, 25, 100], &reports, &names, open, 1, hold);
                for &state in &reported {
                    let walked: Vec<(&str, TargetState, bool)> = listing
                        .entries()
                        .filter(|e| e.state.as_str() == state.as_str())
                        .map(|e| (e.id, e.state, e.offered))
                        .collect();
                    let found: Vec<(&str, TargetState, bool)> = listing
                        .reported(state)
                        .map(|e| (e.id, e.state, e.offered))
                        .collect();
                    assert!(!found.is_empty(), "{state:?}");
                    assert_eq!(found, walked, "{state:?}, {hold:?}, {open} open");
                }
            }
        }
    }
}
