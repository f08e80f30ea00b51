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

/// The unrevoked devices a deployment of `group` (else of the one `device`) can reach, read
/// through the group's index (`devices_by_group_id`) or the primary key: the group's rows, not
/// the fleet's (a status report runs this inside its write transaction).
pub async fn target_rows(
    conn: &mut crate::db::Conn,
    group: Option<&str>,
    device: Option<&str>,
) -> Result<Vec<TargetRow>, sqlx::Error> {
    let (sql, key) = match (group, device) {
        (Some(g), _) => (
            "SELECT id, accel, grp FROM devices WHERE grp = $1 AND revoked_at IS NULL",
            g,
        ),
        (None, Some(id)) => (
            "SELECT id, accel, grp FROM devices WHERE id = $1 AND revoked_at IS NULL",
            id,
        ),
        (None, None) => return Ok(Vec::new()),
    };
    sqlx::query_as(sql).bind(key).fetch_all(&mut *conn).await
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
