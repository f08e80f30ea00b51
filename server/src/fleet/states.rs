//! The states a deployment and each of its targets can be in: enums in Rust, the same spellings
//! in the database, where a `CHECK` on both backends (`migrations/0002_fleet.sql`,
//! `migrations/postgres/0002_fleet.sql`) refuses any other.
//!
//! | `deployments.state` | Offered to devices | Can become            |
//! |---------------------|--------------------|-----------------------|
//! | `active`            | its open batches   | `paused`, `aborted`   |
//! | `paused`            | only the devices of its open batches that had started on it | `active`, `aborted` |
//! | `aborted`           | nothing            | — (final)             |
//!
//! A target's state is what its device last reported ([`DeviceState`]), `pending` before any
//! report, `skipped` for a device the deployment does not reach (yet), or `cancelled` for one
//! that had reported nothing when the deployment was aborted.
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A device's state for one deployment, as reported (or `pending`: nothing reported yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Hash)]
#[serde(rename_all = "snake_case")]
pub enum DeviceState {
    /// Offered or waiting for its batch; nothing reported.
    Pending,
    /// Downloading the pack.
    Downloading,
    /// The pack verified against the manifest.
    Verified,
    /// Installed in the inactive slot and made active.
    Installed,
    /// Bound to the NPU and self-tested.
    Bound,
    /// Failed; `reason` says why.
    Failed,
    /// Installed, then reverted to the previous pack.
    RolledBack,
}

impl DeviceState {
    /// Every state, in display order.
    pub const ALL: [DeviceState; 7] = [
        DeviceState::Pending,
        DeviceState::Downloading,
        DeviceState::Verified,
        DeviceState::Installed,
        DeviceState::Bound,
        DeviceState::Failed,
        DeviceState::RolledBack,
    ];

    /// The database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceState::Pending => "pending",
            DeviceState::Downloading => "downloading",
            DeviceState::Verified => "verified",
            DeviceState::Installed => "installed",
            DeviceState::Bound => "bound",
            DeviceState::Failed => "failed",
            DeviceState::RolledBack => "rolled_back",
        }
    }

    /// From the database spelling (unknown: pending).
    pub fn from_db(s: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .unwrap_or(DeviceState::Pending)
    }

    /// Counts towards opening the next batch.
    pub fn is_success(self) -> bool {
        matches!(self, DeviceState::Installed | DeviceState::Bound)
    }

    /// Counts towards auto-abort.
    pub fn is_failure(self) -> bool {
        matches!(self, DeviceState::Failed | DeviceState::RolledBack)
    }
}

/// A deployment's state (`deployments.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentState {
    /// Offered to the devices of its open batches; batches open as they succeed.
    Active,
    /// Held: offered only to the devices that had started on it; no new batch opens.
    Paused,
    /// Offered to nobody, for good.
    Aborted,
}

impl DeploymentState {
    /// Every state.
    pub const ALL: [DeploymentState; 3] = [
        DeploymentState::Active,
        DeploymentState::Paused,
        DeploymentState::Aborted,
    ];

    /// The database (and API) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Active => "active",
            DeploymentState::Paused => "paused",
            DeploymentState::Aborted => "aborted",
        }
    }
}

impl std::fmt::Display for DeploymentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for DeploymentState {
    type Error = UnknownState;

    /// From the database spelling; another is a row the schema's `CHECK` should have refused.
    fn try_from(s: String) -> Result<Self, UnknownState> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or(UnknownState {
                what: "deployment",
                spelling: s,
            })
    }
}

/// A state column holding a spelling no enum variant has.
#[derive(Debug)]
pub struct UnknownState {
    what: &'static str,
    spelling: String,
}

impl std::fmt::Display for UnknownState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown {} state {:?} in the database",
            self.what, self.spelling
        )
    }
}

impl std::error::Error for UnknownState {}

/// A device's state as a deployment's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetState {
    /// Offered or waiting for its batch; nothing reported.
    Pending,
    /// Downloading the pack.
    Downloading,
    /// The pack verified against the manifest.
    Verified,
    /// Installed in the inactive slot and made active.
    Installed,
    /// Bound to the NPU and self-tested.
    Bound,
    /// Failed; `reason` says why.
    Failed,
    /// Installed, then reverted to the previous pack.
    RolledBack,
    /// Not reached by the deployment (yet): `skipped` says why.
    Skipped,
    /// Nothing reported, and nothing will be offered: the deployment was aborted.
    Cancelled,
}

impl TargetState {
    /// The API spelling (a [`DeviceState`]'s, or `skipped`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Skipped => "skipped",
            TargetState::Cancelled => "cancelled",
            TargetState::Pending => DeviceState::Pending.as_str(),
            TargetState::Downloading => DeviceState::Downloading.as_str(),
            TargetState::Verified => DeviceState::Verified.as_str(),
            TargetState::Installed => DeviceState::Installed.as_str(),
            TargetState::Bound => DeviceState::Bound.as_str(),
            TargetState::Failed => DeviceState::Failed.as_str(),
            TargetState::RolledBack => DeviceState::RolledBack.as_str(),
        }
    }
}

impl From<DeviceState> for TargetState {
    fn from(s: DeviceState) -> Self {
        match s {
            DeviceState::Pending => TargetState::Pending,
            DeviceState::Downloading => TargetState::Downloading,
            DeviceState::Verified => TargetState::Verified,
            DeviceState::Installed => TargetState::Installed,
            DeviceState::Bound => TargetState::Bound,
            DeviceState::Failed => TargetState::Failed,
            DeviceState::RolledBack => TargetState::RolledBack,
        }
    }
}

/// A reported state from `device_deployments.state`.
pub fn reported(s: String) -> Result<DeviceState, UnknownState> {
    DeviceState::ALL
        .into_iter()
        .find(|st| *st != DeviceState::Pending && st.as_str() == s)
        .ok_or(UnknownState {
            what: "target",
            spelling: s,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_spelling_the_schema_does_not_allow() {
        for st in DeploymentState::ALL {
            assert_eq!(
                DeploymentState::try_from(st.as_str().to_owned()).unwrap(),
                st
            );
            assert_eq!(
                serde_json::to_value(st).unwrap(),
                serde_json::json!(st.as_str())
            );
        }
        let e = DeploymentState::try_from("Active".to_owned()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown deployment state \"Active\" in the database"
        );
        // `pending` is never stored: a target without a report has no row.
        assert!(reported("pending".into()).is_err());
        assert_eq!(
            reported("rolled_back".into()).unwrap(),
            DeviceState::RolledBack
        );
        for st in DeviceState::ALL {
            assert_eq!(TargetState::from(st).as_str(), st.as_str());
            assert_eq!(
                serde_json::to_value(TargetState::from(st)).unwrap(),
                serde_json::json!(st.as_str())
            );
        }
        assert_eq!(
            serde_json::to_value(TargetState::Skipped).unwrap(),
            serde_json::json!("skipped")
        );
    }
}
