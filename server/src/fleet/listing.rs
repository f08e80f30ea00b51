//! `GET /api/v1/devices`'s filters as one SQL statement, built only from the filters given so that
//! each one can use its index (`migrations/0009_listing_indexes.sql`): a `$n IS NULL OR …` form
//! would keep SQLite from using any.
//!
//! | filter               | SQL                                                            | index                      |
//! |----------------------|----------------------------------------------------------------|----------------------------|
//! | `group`              | `d.grp = $n`                                                   | `devices_by_group_id`      |
//! | `status`             | `revoked`: `d.revoked_at IS NOT NULL`; `new`: no report; else `d.last_state = $n` | `devices_by_state` |
//! | `model`, `version`   | `d.current_version_id = $n` (or `IN (…)` when a version string names several models' versions), the ids looked up first | `devices_by_version` |
//! | `accelerator`        | `d.accel = $n`                                                 | `devices_by_accel`         |
//! | `not_seen_minutes`   | `COALESCE(d.last_seen, d.created_at) < $n` (never seen counts from provisioning; revoked devices are not offline) | `devices_by_seen` |
//! | `q`                  | SQLite: `d.id LIKE $n OR d.name LIKE $n` (its `LIKE` folds ASCII case, as its `lower()` does; without `lower()` a scan of 100,000 rows took 35–50 ms instead of 107 ms in a sqlite3 probe, not yet through `bench/listing.sh`); PostgreSQL: `lower(d.id) LIKE $n OR lower(d.name) LIKE $n` (substring) | none: the id order's scan  |
//! | `cursor`             | `d.id > $n`, always `ORDER BY d.id LIMIT $n`                   | the primary key            |
//!
//! The statement is public so that `server/tests/fleet/listing_plans.rs` can ask each backend for
//! its plan of exactly what the route runs.
use npub_core::Accel;

use crate::db::{Backend, Bind};
use crate::http::error::ApiError;

/// The device listing's filters as the query gave them, not yet checked: named fields, so that a
/// call site cannot swap two of them. [`DeviceFilter::new`] checks them.
#[derive(Debug, Clone, Default)]
pub struct DeviceFilterInput<'a> {
    /// Only this group.
    pub group: Option<String>,
    /// `revoked`, `new`, or a reported state.
    pub status: Option<String>,
    /// Only devices running one of these versions (row ids; empty: none can match).
    pub versions: Option<Vec<i64>>,
    /// Only this NPU configuration, by name (`ethos-u55-256`).
    pub accelerator: Option<&'a str>,
    /// Only devices not seen for more than this many minutes.
    pub not_seen_minutes: Option<u32>,
    /// Only devices whose id or name contains this (any case).
    pub text: Option<String>,
    /// Only devices after this id (the decoded cursor).
    pub after: Option<String>,
}

/// The device listing's filters, checked: only [`DeviceFilter::new`] makes one (the fields are
/// private), so every statement [`DeviceFilter::sql`] builds is from values that passed the checks.
#[derive(Debug, Clone, Default)]
pub struct DeviceFilter {
    group: Option<String>,
    status: Option<String>,
    versions: Option<Vec<i64>>,
    accel: Option<u32>,
    /// Unix ms.
    not_seen_since: Option<i64>,
    /// Lower case.
    text: Option<String>,
    after: Option<String>,
}

/// The states a device can report, besides `new` and `revoked` (`fleet::states::DeviceState`).
fn is_status(s: &str) -> bool {
    s == "new"
        || s == "revoked"
        || super::states::DeviceState::ALL
            .iter()
            .any(|st| st.as_str() == s)
}

impl DeviceFilter {
    /// Checks the query's raw values, `now_ms` the instant "not seen for" counts from: 422 naming
    /// the parameter that is wrong.
    pub fn new(input: DeviceFilterInput<'_>, now_ms: i64) -> Result<Self, ApiError> {
        let DeviceFilterInput {
            group,
            status,
            versions,
            accelerator,
            not_seen_minutes,
            text,
            after,
        } = input;
        if let Some(s) = &status
            && !is_status(s)
        {
            let states: Vec<&str> = super::states::DeviceState::ALL
                .iter()
                .map(|st| st.as_str())
                .collect();
            return Err(ApiError::invalid(format!(
                "status: {s:?} is not a device status (new, revoked, {})",
                states.join(", ")
            )));
        }
        let accel = match accelerator {
            None => None,
            Some(name) => Some(
                Accel::from_name(name)
                    .ok_or_else(|| {
                        ApiError::invalid(format!(
                            "accelerator: {name:?} is not an NPU configuration (e.g. ethos-u55-256)"
                        ))
                    })?
                    .word(),
            ),
        };
        if let Some(t) = &text
            && (t.is_empty() || t.len() > super::device_info::MAX_FIELD_BYTES)
        {
            return Err(ApiError::invalid(format!(
                "q: give 1 to {} characters of a device's id or name",
                super::device_info::MAX_FIELD_BYTES
            )));
        }
        let not_seen_since = not_seen_minutes.map(|m| now_ms.saturating_sub(i64::from(m) * 60_000));
        Ok(DeviceFilter {
            group,
            status,
            versions,
            accel,
            not_seen_since,
            text: text.map(|t| t.to_lowercase()),
            after,
        })
    }

    /// The statement the listing runs, and its binds in order. `limit` is the page size plus
    /// one (the extra row says there is a next page).
    pub fn sql(&self, limit: u32, backend: Backend) -> (String, Vec<Bind>) {
        self.sql_after(super::device_info::select_device!(), limit, backend)
    }

    /// [`Self::sql`]'s `WHERE … ORDER BY d.id LIMIT $n` after `select`.
    fn sql_after(&self, select: &str, limit: u32, backend: Backend) -> (String, Vec<Bind>) {
        let mut sql = String::from(select);
        let mut binds = Vec::new();
        let and = |sql: &mut String, clause: &str| {
            sql.push_str(if sql.contains(" WHERE ") {
                " AND "
            } else {
                " WHERE "
            });
            sql.push_str(clause);
        };
        let next = |binds: &mut Vec<Bind>, b: Bind| {
            binds.push(b);
            format!("${}", binds.len())
        };
        if let Some(g) = &self.group {
            let p = next(&mut binds, Bind::Text(g.clone()));
            and(&mut sql, &format!("d.grp = {p}"));
        }
        match self.status.as_deref() {
            None => {}
            Some("revoked") => and(&mut sql, "d.revoked_at IS NOT NULL"),
            Some("new") => and(&mut sql, "d.last_state IS NULL AND d.revoked_at IS NULL"),
            Some(s) => {
                let p = next(&mut binds, Bind::Text(s.to_owned()));
                and(
                    &mut sql,
                    &format!("d.last_state = {p} AND d.revoked_at IS NULL"),
                );
            }
        }
        if let Some(versions) = &self.versions {
            match versions.as_slice() {
                [] => and(&mut sql, "1 = 0"),
                [one] => {
                    let p = next(&mut binds, Bind::Int(*one));
                    and(&mut sql, &format!("d.current_version_id = {p}"));
                }
                several => {
                    let ps: Vec<String> = several
                        .iter()
                        .map(|v| next(&mut binds, Bind::Int(*v)))
                        .collect();
                    and(
                        &mut sql,
                        &format!("d.current_version_id IN ({})", ps.join(", ")),
                    );
                }
            }
        }
        if let Some(a) = self.accel {
            let p = next(&mut binds, Bind::Int(i64::from(a)));
            and(&mut sql, &format!("d.accel = {p}"));
        }
        if let Some(t) = self.not_seen_since {
            let p = next(&mut binds, Bind::Int(t));
            and(
                &mut sql,
                &format!("COALESCE(d.last_seen, d.created_at) < {p} AND d.revoked_at IS NULL"),
            );
        }
        if let Some(t) = &self.text {
            let escaped: String = t
                .chars()
                .flat_map(|c| match c {
                    '%' | '_' | '\\' => vec!['\\', c],
                    c => vec![c],
                })
                .collect();
            let p = next(&mut binds, Bind::Text(format!("%{escaped}%")));
            // The pattern is lower case. SQLite's `LIKE` ignores ASCII case and its `lower()`
            // folds only ASCII, so `lower()` there changes no answer and made a scan 2–3 times slower
            // (a rare text at 100,000 devices reads every row); PostgreSQL's `LIKE` is case
            // sensitive and its `lower()` folds Unicode.
            let (id, name) = match backend {
                Backend::Sqlite => ("d.id", "d.name"),
                Backend::Postgres => ("lower(d.id)", "lower(d.name)"),
            };
            and(
                &mut sql,
                &format!("({id} LIKE {p} ESCAPE '\\' OR {name} LIKE {p} ESCAPE '\\')"),
            );
        }
        if let Some(after) = &self.after {
            let p = next(&mut binds, Bind::Text(after.clone()));
            and(&mut sql, &format!("d.id > {p}"));
        }
        let p = next(&mut binds, Bind::Int(i64::from(limit)));
        sql.push_str(&format!(" ORDER BY d.id LIMIT {p}"));
        (sql, binds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_filters_given_reach_the_statement() {
        let f = DeviceFilter::new(
            DeviceFilterInput {
                group: Some("lab".into()),
                status: Some("failed".into()),
                versions: Some(vec![7]),
                accelerator: Some("ethos-u55-256"),
                not_seen_minutes: Some(10),
                text: Some("Cam_%".into()),
                after: Some("dev-9".into()),
            },
            1_000_000,
        )
        .unwrap();
        let (sql, binds) = f.sql_after("SELECT d.id FROM devices d", 101, Backend::Postgres);
        assert!(sql.starts_with("SELECT d.id FROM devices d WHERE d.grp = $1 AND "));
        assert!(sql.contains("d.current_version_id = $3"), "{sql}");
        assert!(sql.ends_with("d.id > $7 ORDER BY d.id LIMIT $8"), "{sql}");
        assert_eq!(binds[5], Bind::Text("%cam\\_\\%%".into()));
        assert_eq!(binds[4], Bind::Int(1_000_000 - 600_000));
        let (bare, binds) =
            DeviceFilter::default().sql_after("SELECT d.id FROM devices d", 101, Backend::Sqlite);
        assert_eq!(bare, "SELECT d.id FROM devices d ORDER BY d.id LIMIT $1");
        assert_eq!(binds, [Bind::Int(101)]);
    }

    #[test]
    fn rejects_an_unknown_status_or_accelerator_naming_the_parameter() {
        let status = DeviceFilter::new(
            DeviceFilterInput {
                status: Some("broken".into()),
                ..Default::default()
            },
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(
            status.contains("status: \"broken\" is not a device status"),
            "{status}"
        );
        let accel = DeviceFilter::new(
            DeviceFilterInput {
                accelerator: Some("npu"),
                ..Default::default()
            },
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(accel.contains("accelerator: \"npu\""), "{accel}");
    }
}
