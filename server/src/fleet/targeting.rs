//! Who a deployment reaches, device by device: the plan a preview shows before it is made, and
//! the per-device list of a deployment once it is.
//!
//! | Device of the target                      | In the plan                                    |
//! |-------------------------------------------|------------------------------------------------|
//! | unrevoked, the pack's accelerator         | a target, in batch `k` by its rank (`rollout`) |
//! | unrevoked, another accelerator            | skipped: `other_accelerator`                   |
//! | a target whose batch is not open yet      | skipped: `batch_not_open` (listing only)       |
//! | reported on it, but no longer a target    | skipped: `not_a_target` (moved or revoked; listing only) |
use std::collections::HashMap;

use npub_core::Accel;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

/// A device as targeting sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Candidate {
    /// `devices.id`.
    pub id: String,
    /// Its label.
    pub name: String,
    /// NPU1 accel word.
    pub accel: i64,
}

/// The devices a target (a group, or one device) names, unrevoked, by id.
pub async fn candidates(
    conn: &mut Conn,
    group: Option<&str>,
    device: Option<&str>,
) -> Result<Vec<Candidate>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, name, accel FROM devices WHERE revoked_at IS NULL \
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

    /// The 0-based batch of the target at `rank`.
    pub fn batch_of(&self, rank: usize) -> usize {
        self.sizes.iter().position(|&end| rank < end).unwrap_or(0)
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

/// Every device of a deployment: targets in rank order, then skipped devices by id.
pub fn list(
    plan: &Plan,
    names: &HashMap<String, String>,
    mut reports: HashMap<String, Reported>,
    open_batches: usize,
    pack_accel: i64,
) -> Vec<DeploymentDevice> {
    let pack = Accel::from_word(pack_accel as u32).name();
    let mut out = Vec::with_capacity(plan.ranked.len() + plan.other_accelerator.len());
    for (rank, id) in plan.ranked.iter().enumerate() {
        let batch = plan.batch_of(rank);
        let offered = batch < open_batches;
        let report = reports.remove(id);
        let (state, reason, updated_at, skipped) = match report {
            Some(r) => (r.state.into(), r.reason, Some(r.updated_at), None),
            None if offered => (TargetState::Pending, None, None, None),
            None => (
                TargetState::Skipped,
                Some(format!(
                    "in batch {} of {}, not open yet",
                    batch + 1,
                    plan.sizes.len()
                )),
                None,
                Some(Skip::BatchNotOpen),
            ),
        };
        out.push(DeploymentDevice {
            device_id: id.clone(),
            name: names.get(id).cloned().unwrap_or_else(|| id.clone()),
            accelerator: pack.to_owned(),
            batch: Some(batch),
            offered,
            state,
            skipped,
            reason,
            updated_at: updated_at.map(crate::time::rfc3339),
        });
    }
    for c in &plan.other_accelerator {
        let theirs = Accel::from_word(c.accel as u32).name();
        out.push(DeploymentDevice {
            device_id: c.id.clone(),
            name: c.name.clone(),
            accelerator: theirs.to_owned(),
            batch: None,
            offered: false,
            state: TargetState::Skipped,
            skipped: Some(Skip::OtherAccelerator),
            reason: Some(format!("it is {theirs}; the pack is compiled for {pack}")),
            updated_at: None,
        });
    }
    let mut gone: Vec<(String, Reported)> = reports.into_iter().collect();
    gone.sort_by(|a, b| a.0.cmp(&b.0));
    for (id, r) in gone {
        out.push(DeploymentDevice {
            name: names.get(&id).cloned().unwrap_or_else(|| id.clone()),
            device_id: id,
            accelerator: pack.to_owned(),
            batch: None,
            offered: false,
            state: r.state.into(),
            skipped: Some(Skip::NotATarget),
            reason: r
                .reason
                .or_else(|| Some("no longer a target (moved to another group, or revoked)".into())),
            updated_at: Some(crate::time::rfc3339(r.updated_at)),
        });
    }
    out
}
