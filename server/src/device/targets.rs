//! Who a deployment reaches, from the snapshot's devices or from rows: the same ranking and
//! accelerator filter for both.
use std::collections::HashSet;
use std::sync::Arc;

use crate::device::snapshot::DeviceEntry;
use crate::fleet::rollout;

/// A device row as targeting needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TargetRow {
    /// `devices.id`.
    pub id: String,
    /// NPU1 accel word.
    pub accel: i64,
    /// Group.
    pub grp: String,
}

/// What targeting reads of a device: a database row, or a snapshot's entry.
pub trait Target {
    /// Its id.
    fn id(&self) -> &str;
    /// Its NPU1 accel word.
    fn accel(&self) -> i64;
    /// Its group.
    fn group(&self) -> &str;
}

impl Target for TargetRow {
    fn id(&self) -> &str {
        &self.id
    }
    fn accel(&self) -> i64 {
        self.accel
    }
    fn group(&self) -> &str {
        &self.grp
    }
}

impl Target for Arc<DeviceEntry> {
    fn id(&self) -> &str {
        &self.id
    }
    fn accel(&self) -> i64 {
        i64::from(self.accel)
    }
    fn group(&self) -> &str {
        &self.group
    }
}

/// The ranked target ids of a deployment among `devices` (unrevoked), borrowed from them, and
/// how many of its group were skipped for another accelerator. `members`: a retry's devices, the
/// only ones of its group (or device) it targets.
pub fn targets<'d, T: Target>(
    devices: &'d [T],
    group: Option<&str>,
    device: Option<&str>,
    members: Option<&HashSet<String>>,
    pack_accel: i64,
) -> (Vec<&'d str>, u64) {
    let mut ids = Vec::new();
    let mut incompatible = 0;
    for d in devices {
        let member = match (group, device) {
            (Some(g), _) => d.group() == g,
            (None, Some(id)) => d.id() == id,
            (None, None) => false,
        } && members.is_none_or(|m| m.contains(d.id()));
        if !member {
            continue;
        }
        if d.accel() == pack_accel {
            ids.push(d.id());
        } else {
            incompatible += 1;
        }
    }
    rollout::rank(&mut ids);
    (ids, incompatible)
}
