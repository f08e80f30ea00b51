//! A device as operators see it: the row, the listing shape, and the field rule their names,
//! groups and tags follow.
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use npub_core::Accel;

use crate::time::rfc3339;

/// Longest device id, name, group or tag, in bytes.
pub const MAX_FIELD_BYTES: usize = 128;

/// A device, as listed.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceInfo {
    /// Its id.
    pub id: String,
    /// Its label.
    pub name: String,
    /// Hardware class.
    pub hw_class: u32,
    /// NPU configuration, e.g. `ethos-u55-256`.
    pub accelerator: String,
    /// Group.
    pub group: String,
    /// Tags.
    pub tags: Vec<String>,
    /// `revoked`, `new` (never reported), or the state it last reported.
    pub status: String,
    /// RFC 3339; absent until it first polled (written in batches, so up to a flush interval old).
    pub last_seen: Option<String>,
    /// Model of the pack it last reported installed.
    pub current_model: Option<String>,
    /// Version of that pack.
    pub current_version: Option<String>,
    /// Sequence of the deployment it last reported installed (0: none).
    pub current_sequence: i64,
    /// Last reported state.
    pub last_state: Option<String>,
    /// Reason given with the last report.
    pub last_reason: Option<String>,
    /// RFC 3339 of the last report.
    pub last_status_at: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, when revoked.
    pub revoked_at: Option<String>,
}

/// A provisioned device: the only response that carries its token.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceCreated {
    /// The device.
    #[serde(flatten)]
    pub device: DeviceInfo,
    /// Its token, for `Authorization: Bearer` on the device API. Shown once.
    pub token: String,
}

/// Checks a device id, group or tag: 1 to [`MAX_FIELD_BYTES`] letters, digits, `-`, `_`, `.`, `:`;
/// 422 naming `field` otherwise.
pub fn check_field(field: &str, value: &str) -> Result<(), ApiError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_FIELD_BYTES
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "{field}: {value:?} is not allowed: use 1 to {MAX_FIELD_BYTES} letters, digits, \
             '-', '_', '.' or ':' (no spaces)"
        )))
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct DeviceRow {
    id: String,
    name: String,
    hw_class: i64,
    accel: i64,
    grp: String,
    tags: String,
    last_seen: Option<i64>,
    current_sequence: i64,
    current_model: Option<String>,
    current_version: Option<String>,
    last_state: Option<String>,
    last_reason: Option<String>,
    last_status_at: Option<i64>,
    created_at: i64,
    revoked_at: Option<i64>,
}

/// The columns of [`DeviceRow`]; a macro so that `concat!` can finish the query.
macro_rules! select_device {
    () => {
        "SELECT d.id, d.name, d.hw_class, d.accel, d.grp, d.tags, d.last_seen, \
     d.current_sequence, m.name AS current_model, v.version AS current_version, d.last_state, \
     d.last_reason, d.last_status_at, d.created_at, d.revoked_at \
     FROM devices d LEFT JOIN versions v ON v.id = d.current_version_id \
     LEFT JOIN models m ON m.id = v.model_id"
    };
}

impl DeviceRow {
    pub(super) fn info(self) -> DeviceInfo {
        let status = if self.revoked_at.is_some() {
            "revoked".to_owned()
        } else {
            self.last_state.clone().unwrap_or_else(|| "new".into())
        };
        DeviceInfo {
            id: self.id,
            name: self.name,
            hw_class: self.hw_class as u32,
            accelerator: Accel::from_word(self.accel as u32).name().to_owned(),
            group: self.grp,
            tags: serde_json::from_str(&self.tags).unwrap_or_default(),
            status,
            last_seen: self.last_seen.map(rfc3339),
            current_model: self.current_model,
            current_version: self.current_version,
            current_sequence: self.current_sequence,
            last_state: self.last_state,
            last_reason: self.last_reason,
            last_status_at: self.last_status_at.map(rfc3339),
            created_at: rfc3339(self.created_at),
            revoked_at: self.revoked_at.map(rfc3339),
        }
    }
}

/// Device `id` as listed, 404 when unknown.
pub async fn load_info(conn: &mut crate::db::Conn, id: &str) -> Result<DeviceInfo, ApiError> {
    let row: Option<DeviceRow> = sqlx::query_as(concat!(select_device!(), " WHERE d.id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(DeviceRow::info)
        .ok_or_else(|| ApiError::NotFound(format!("device {id:?}")))
}

pub(crate) use select_device;
