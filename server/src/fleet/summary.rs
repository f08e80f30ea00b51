//! The dashboard's numbers, aggregated by the database: `GET /api/v1/fleet/summary` (the fleet at
//! a glance) and `GET /api/v1/deployments/{id}/timeline` (one rollout over time).
//!
//! | Figure                      | Statement                                                       | Index (`migrations/0011_rollout_control.sql`) |
//! |-----------------------------|-----------------------------------------------------------------|-------------------------------|
//! | devices by status           | `GROUP BY last_state` of the unrevoked                          | `devices_by_revoked_state` (covering) |
//! | revoked devices             | `COUNT(*)` where `revoked_at IS NOT NULL`                        | `devices_by_revoked_state`    |
//! | versions per model          | `GROUP BY current_version_id` of the unrevoked, then the few names | `devices_by_revoked_version` (covering) |
//! | offline                     | not seen (or, never seen, not provisioned) for `offline_minutes`, as the fleet list's `not_seen_minutes` | `devices_by_revoked_seen` |
//! | top failure reasons         | `GROUP BY last_reason` of the unrevoked whose last report failed | `devices_by_revoked_state` (covering) |
//! | active rollouts             | the newest `active` or `paused` deployments, with their progress; each one's ranked targets kept per fleet generation (`target_cache.rs`), its reports read per request | `deployments_by_state`; reports: `device_deployments`' primary key |
//! | a timeline's deployment     | as an active rollout's: ranked targets from `target_cache.rs`, reports read per request | as above |
//! | a timeline's installs and failures | each target's latest report, counted per time bucket     | `device_deployments_by_time` (covering) |
//! | a timeline's batches and holds | the deployment's audit entries                               | `audit_by_object`             |
//!
//! The statements are public ([`summary_statements`], [`timeline_statement`]) so that
//! `server/tests/fleet/dashboard.rs` can ask each backend for its plan of exactly what runs.
//!
//! A timeline places each device at the time of its **latest** report: the installed and failed
//! lines are how many of the devices in that state now had got there by then, so their last
//! points equal the deployment's progress counts (a device that failed and then installed a
//! retry of it is counted where it is now, not twice).
use std::collections::{BTreeMap, HashMap};

use axum::Json as JsonResponse;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::deployments::{self, Deployment};
use super::rollout;
use super::states::DeploymentState;
use crate::auth::Operator;
use crate::db::Bind;
use crate::db::bind::query_as;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Path, Query};
use crate::state::AppState;
use crate::time::{now_ms, rfc3339};

/// Failure reasons listed: the dashboard shows the few that explain most failures.
pub const TOP_REASONS: i64 = 5;
/// Rollouts listed: the newest active or paused; each is rendered with its progress.
pub const ROLLOUTS: i64 = 10;
/// Poll intervals a device may miss before it counts as offline (three: one lost poll, or one
/// slow one, is not an outage).
pub const OFFLINE_POLLS: u32 = 3;
/// Points of a timeline at most: enough for a chart a page wide, bounded whatever its length.
pub const TIMELINE_POINTS: i64 = 120;

/// `GET /api/v1/fleet/summary` query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SummaryQuery {
    /// Minutes without a poll after which a device counts as offline (default: three poll
    /// intervals, rounded up to whole minutes; 1 to 525600).
    pub offline_minutes: Option<u32>,
}

/// Devices in one status.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusCount {
    /// `new` (never reported), a reported state, or `revoked`.
    pub status: String,
    /// Devices.
    pub devices: i64,
}

/// Devices running one version.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionCount {
    /// The version.
    pub version: String,
    /// Unrevoked devices that last reported installing it.
    pub devices: i64,
}

/// A model's versions across the fleet.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelVersions {
    /// Model name.
    pub model: String,
    /// Its versions with devices, most devices first.
    pub versions: Vec<VersionCount>,
}

/// Devices not seen for a while.
#[derive(Debug, Serialize, ToSchema)]
pub struct Offline {
    /// The threshold, in minutes (the fleet list's `not_seen_minutes`).
    pub minutes: u32,
    /// Unrevoked devices not seen for longer (never seen: since they were provisioned).
    pub devices: i64,
}

/// Devices whose last report failed for one reason.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReasonCount {
    /// What they reported (`null`: no reason given).
    pub reason: Option<String>,
    /// Devices.
    pub devices: i64,
}

/// The fleet at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub struct FleetSummary {
    /// Unrevoked devices.
    pub devices: i64,
    /// Devices per status, in display order (`new`, the reported states, `revoked`), zeros
    /// included.
    pub by_status: Vec<StatusCount>,
    /// Per model, the versions devices run; devices that have installed nothing are `none`.
    pub versions: Vec<ModelVersions>,
    /// Unrevoked devices that have installed nothing yet.
    pub no_version: i64,
    /// Devices not seen for longer than a few poll intervals.
    pub offline: Offline,
    /// The most frequent reasons of the devices whose last report was `failed` or
    /// `rolled_back`, most devices first.
    pub failure_reasons: Vec<ReasonCount>,
    /// The newest deployments still rolling out (active or paused, not completed), newest first.
    pub rollouts: Vec<Deployment>,
    /// When this was computed (RFC 3339).
    pub generated_at: String,
}

/// One point of a timeline: the state at the end of a time bucket.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelinePoint {
    /// The end of the bucket (RFC 3339).
    pub at: String,
    /// The same, in unix milliseconds (what the chart's x axis is drawn from).
    pub at_ms: i64,
    /// Devices now `installed` or `bound` whose latest report came by then.
    pub installed: u64,
    /// Devices now `failed` or `rolled_back` whose latest report came by then.
    pub failed: u64,
    /// Devices in open batches then.
    pub offered: u64,
    /// The failures the threshold allowed then: `failure_threshold × offered`; more stops the
    /// rollout (aborts or pauses it).
    pub failure_limit: f64,
}

/// When one batch opened.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchOpened {
    /// 0-based.
    pub index: usize,
    /// Cumulative percentage of the targets.
    pub percent: u8,
    /// Devices in this batch alone.
    pub devices: u64,
    /// When it opened (RFC 3339); `null`: not yet.
    pub opened_at: Option<String>,
    /// The same, in unix milliseconds.
    pub opened_at_ms: Option<i64>,
}

/// A hold, a resume, an abort or the completion, as the chart marks it.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelineEvent {
    /// RFC 3339.
    pub at: String,
    /// Unix milliseconds.
    pub at_ms: i64,
    /// The audit action (`deployment.pause`, `deployment.auto_pause`, `deployment.resume`,
    /// `deployment.abort`, `deployment.auto_abort`, `deployment.completed`).
    pub action: String,
    /// Who (`server` for the rollout's own decisions).
    pub actor: String,
}

/// One rollout over time.
#[derive(Debug, Serialize, ToSchema)]
pub struct Timeline {
    /// The deployment, with its progress now.
    pub deployment: Deployment,
    /// Installed and failed devices over time, oldest first; the first point is its creation.
    pub points: Vec<TimelinePoint>,
    /// Each batch of its rollout and when it opened.
    pub batches: Vec<BatchOpened>,
    /// Its holds, resumes and aborts, oldest first.
    pub events: Vec<TimelineEvent>,
}

/// Routes: the summary and a deployment's timeline.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(fleet_summary))
        .routes(routes!(timeline))
}

/// Devices by status (the unrevoked, by their last report).
pub const STATUS_SQL: &str = "SELECT d.last_state, COUNT(*) FROM devices d \
     WHERE d.revoked_at IS NULL GROUP BY d.last_state";
/// Revoked devices.
pub const REVOKED_SQL: &str = "SELECT COUNT(*) FROM devices d WHERE d.revoked_at IS NOT NULL";
/// Unrevoked devices by the version they run.
pub const VERSIONS_SQL: &str = "SELECT d.current_version_id, COUNT(*) FROM devices d \
     WHERE d.revoked_at IS NULL GROUP BY d.current_version_id";
/// Unrevoked devices not seen since `$1` (the fleet list's `not_seen_minutes` clause).
pub const OFFLINE_SQL: &str = "SELECT COUNT(*) FROM devices d \
     WHERE COALESCE(d.last_seen, d.created_at) < $1 AND d.revoked_at IS NULL";
/// The most frequent failure reasons (`$1`: how many).
pub const REASONS_SQL: &str = "SELECT d.last_reason, COUNT(*) AS n FROM devices d \
     WHERE d.revoked_at IS NULL AND d.last_state IN ('failed', 'rolled_back') \
     GROUP BY d.last_reason ORDER BY n DESC, d.last_reason LIMIT $1";
/// The fleet generation, read first: the rollouts' cached targets are filed under it.
pub const GENERATION_SQL: &str = "SELECT value FROM fleet_generation WHERE id = 1";
/// The newest active or paused deployments (`$1`: how many to look at).
pub const ROLLOUTS_SQL: &str = "SELECT d.id FROM deployments d \
     WHERE d.state IN ('active', 'paused') ORDER BY d.sequence DESC LIMIT $1";
/// A deployment's reports per time bucket: `$1` the deployment, `$2` its creation, `$3` the
/// bucket width (ms).
pub const TIMELINE_SQL: &str = "SELECT (dd.updated_at - $2) / $3 AS bucket, \
     SUM(CASE WHEN dd.state IN ('installed', 'bound') THEN 1 ELSE 0 END), \
     SUM(CASE WHEN dd.state IN ('failed', 'rolled_back') THEN 1 ELSE 0 END) \
     FROM device_deployments dd WHERE dd.deployment_id = $1 GROUP BY bucket ORDER BY bucket";
/// The span of a deployment's reports.
pub const SPAN_SQL: &str = "SELECT MAX(dd.updated_at) FROM device_deployments dd \
     WHERE dd.deployment_id = $1";
/// A deployment's audit entries, oldest first (`$1`: `deployments/<id>`).
pub const EVENTS_SQL: &str = "SELECT a.at, a.action, a.actor, a.detail FROM audit a \
     WHERE a.object = $1 ORDER BY a.id";

/// Every statement of the summary with its binds, by name: what the route runs.
pub fn summary_statements(offline_since: i64) -> Vec<(&'static str, String, Vec<Bind>)> {
    vec![
        ("status", STATUS_SQL.into(), vec![]),
        ("revoked", REVOKED_SQL.into(), vec![]),
        ("versions", VERSIONS_SQL.into(), vec![]),
        (
            "offline",
            OFFLINE_SQL.into(),
            vec![Bind::Int(offline_since)],
        ),
        ("reasons", REASONS_SQL.into(), vec![Bind::Int(TOP_REASONS)]),
        (
            "rollouts",
            ROLLOUTS_SQL.into(),
            vec![Bind::Int(ROLLOUTS * 2)],
        ),
    ]
}

/// Every statement of a timeline with its binds, by name.
pub fn timeline_statements(
    id: i64,
    created_at: i64,
    width: i64,
) -> Vec<(&'static str, String, Vec<Bind>)> {
    vec![
        ("span", SPAN_SQL.into(), vec![Bind::Int(id)]),
        (
            "buckets",
            TIMELINE_SQL.into(),
            vec![Bind::Int(id), Bind::Int(created_at), Bind::Int(width)],
        ),
        (
            "events",
            EVENTS_SQL.into(),
            vec![Bind::Text(format!("deployments/{id}"))],
        ),
    ]
}

/// The default offline threshold: [`OFFLINE_POLLS`] poll intervals, in whole minutes.
pub fn default_offline_minutes(poll_interval_secs: u32) -> u32 {
    (poll_interval_secs.saturating_mul(OFFLINE_POLLS))
        .div_ceil(60)
        .max(1)
}

/// The fleet at a glance: devices by status, the versions each model runs, offline devices, the
/// top failure reasons and the rollouts in progress. Every figure is counted by the database
/// through an index.
#[utoipa::path(
    get,
    path = "/api/v1/fleet/summary",
    tag = "devices",
    params(SummaryQuery),
    security(("token" = [])),
    responses(
        (status = 200, body = FleetSummary),
        (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a bad `offline_minutes`"),
    )
)]
async fn fleet_summary(
    State(state): State<AppState>,
    _op: Operator,
    Query(q): Query<SummaryQuery>,
) -> Result<JsonResponse<FleetSummary>, ApiError> {
    let minutes = match q.offline_minutes {
        None => default_offline_minutes(state.polling.timers.poll_interval_secs),
        Some(m) if (1..=525_600).contains(&m) => m,
        Some(m) => {
            return Err(ApiError::invalid(format!(
                "offline_minutes: {m} is not from 1 to 525600 (a year)"
            )));
        }
    };
    let now = now_ms();
    let offline_since = now - i64::from(minutes) * 60_000;
    let mut conn = crate::db::begin_read(&state.db).await?;

    let statuses: Vec<(Option<String>, i64)> =
        sqlx::query_as(STATUS_SQL).fetch_all(&mut *conn).await?;
    let (revoked,): (i64,) = sqlx::query_as(REVOKED_SQL).fetch_one(&mut *conn).await?;
    let per_version: Vec<(Option<i64>, i64)> =
        sqlx::query_as(VERSIONS_SQL).fetch_all(&mut *conn).await?;
    let (offline,): (i64,) = query_as(OFFLINE_SQL.into(), vec![Bind::Int(offline_since)])
        .fetch_one(&mut *conn)
        .await?;
    let reasons: Vec<(Option<String>, i64)> = sqlx::query_as(REASONS_SQL)
        .bind(TOP_REASONS)
        .fetch_all(&mut *conn)
        .await?;
    let (generation,): (i64,) = sqlx::query_as(GENERATION_SQL).fetch_one(&mut *conn).await?;
    let rollout_ids: Vec<(i64,)> = sqlx::query_as(ROLLOUTS_SQL)
        .bind(ROLLOUTS * 2)
        .fetch_all(&mut *conn)
        .await?;

    let devices: i64 = statuses.iter().map(|(_, n)| n).sum();
    let by_state: HashMap<Option<String>, i64> = statuses.into_iter().collect();
    let mut by_status = vec![StatusCount {
        status: "new".into(),
        devices: by_state.get(&None).copied().unwrap_or(0),
    }];
    for st in super::states::DeviceState::ALL.iter().skip(1) {
        by_status.push(StatusCount {
            status: st.as_str().into(),
            devices: by_state
                .get(&Some(st.as_str().to_owned()))
                .copied()
                .unwrap_or(0),
        });
    }
    by_status.push(StatusCount {
        status: "revoked".into(),
        devices: revoked,
    });

    let (versions, no_version) = name_versions(&mut conn, per_version).await?;

    // Each rollout's ranked targets come from the cache while the fleet generation stands
    // (`fleet/target_cache.rs`); its reports are read now.
    let mut rollouts = Vec::new();
    for (id,) in rollout_ids {
        let d = deployments::load_cached(&mut conn, id, &state.rollout_targets, generation).await?;
        if d.phase != "completed" {
            rollouts.push(d);
        }
        if rollouts.len() as i64 == ROLLOUTS {
            break;
        }
    }
    conn.rollback().await?;
    Ok(JsonResponse(FleetSummary {
        devices,
        by_status,
        versions,
        no_version,
        offline: Offline {
            minutes,
            devices: offline,
        },
        failure_reasons: reasons
            .into_iter()
            .map(|(reason, devices)| ReasonCount { reason, devices })
            .collect(),
        rollouts,
        generated_at: rfc3339(now),
    }))
}

/// Device counts by version id, named and grouped by model; and the count of devices with none.
async fn name_versions(
    conn: &mut crate::db::Conn,
    per_version: Vec<(Option<i64>, i64)>,
) -> Result<(Vec<ModelVersions>, i64), ApiError> {
    let no_version = per_version
        .iter()
        .filter(|(v, _)| v.is_none())
        .map(|(_, n)| n)
        .sum();
    let counted: Vec<(i64, i64)> = per_version
        .into_iter()
        .filter_map(|(v, n)| v.map(|v| (v, n)))
        .collect();
    if counted.is_empty() {
        return Ok((Vec::new(), no_version));
    }
    let placeholders: Vec<String> = (1..=counted.len()).map(|i| format!("${i}")).collect();
    let names: Vec<(i64, String, String)> = query_as(
        format!(
            "SELECT v.id, m.name, v.version FROM versions v JOIN models m ON m.id = v.model_id \
             WHERE v.id IN ({})",
            placeholders.join(", ")
        ),
        counted.iter().map(|(v, _)| Bind::Int(*v)).collect(),
    )
    .fetch_all(&mut *conn)
    .await?;
    let names: HashMap<i64, (String, String)> =
        names.into_iter().map(|(id, m, v)| (id, (m, v))).collect();
    let mut models: BTreeMap<String, Vec<VersionCount>> = BTreeMap::new();
    for (id, devices) in counted {
        let Some((model, version)) = names.get(&id).cloned() else {
            continue;
        };
        models
            .entry(model)
            .or_default()
            .push(VersionCount { version, devices });
    }
    Ok((
        models
            .into_iter()
            .map(|(model, mut versions)| {
                versions.sort_by(|a, b| {
                    b.devices
                        .cmp(&a.devices)
                        .then_with(|| a.version.cmp(&b.version))
                });
                ModelVersions { model, versions }
            })
            .collect(),
        no_version,
    ))
}

/// One rollout over time: its installed and failed devices with the failure threshold's limit,
/// when each batch opened, and its holds, resumes and aborts. Counted by the database per time
/// bucket (at most 120 points, however long it ran).
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/timeline",
    tag = "deployments",
    params(("id" = i64, Path, description = "deployment id")),
    security(("token" = [])),
    responses(
        (status = 200, body = Timeline),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
async fn timeline(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<i64>,
) -> Result<JsonResponse<Timeline>, ApiError> {
    let mut conn = crate::db::begin_read(&state.db).await?;
    // The ranked targets from the cache while the fleet generation stands, as the summary's.
    let generation = deployments::generation(&mut conn).await?;
    let deployment =
        deployments::load_cached(&mut conn, id, &state.rollout_targets, generation).await?;
    let created = deployments::created_ms(&mut conn, id).await?;
    let now = now_ms();
    let (last,): (Option<i64>,) = sqlx::query_as(SPAN_SQL)
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    let end = last.unwrap_or(created).max(created);
    let width = ((end - created) / TIMELINE_POINTS + 1).max(1);
    let buckets: Vec<(i64, i64, i64)> = sqlx::query_as(TIMELINE_SQL)
        .bind(id)
        .bind(created)
        .bind(width)
        .fetch_all(&mut *conn)
        .await?;
    let events: Vec<(i64, String, String, Option<String>)> = sqlx::query_as(EVENTS_SQL)
        .bind(format!("deployments/{id}"))
        .fetch_all(&mut *conn)
        .await?;
    conn.rollback().await?;

    let rollout = &deployment.rollout;
    // When each count of open batches began: 1 at creation, then each `batch_open`.
    let mut opened: Vec<(i64, usize)> = vec![(created, 1)];
    let mut marks = Vec::new();
    for (at, action, actor, detail) in &events {
        if action == "deployment.batch_open" {
            let n = detail
                .as_deref()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .and_then(|d| d["open_batches"].as_u64())
                .and_then(|n| usize::try_from(n).ok());
            if let Some(n) = n {
                opened.push((*at, n));
            }
        } else if action != "deployment.create"
            && action != "deployment.rollback"
            && action != "deployment.retry"
        {
            marks.push(TimelineEvent {
                at: rfc3339(*at),
                at_ms: *at,
                action: action.clone(),
                actor: actor.clone(),
            });
        }
    }
    let targets = usize::try_from(deployment.progress.targets).unwrap_or(usize::MAX);
    let open_at = |t: i64| {
        opened
            .iter()
            .take_while(|(at, _)| *at <= t)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(1)
    };
    let point = |at_ms: i64, installed: u64, failed: u64| {
        let offered = rollout::offered_count(&rollout.batches, open_at(at_ms), targets) as u64;
        TimelinePoint {
            at: rfc3339(at_ms),
            at_ms,
            installed,
            failed,
            offered,
            failure_limit: rollout.failure_threshold * offered as f64,
        }
    };
    let mut points = vec![point(created, 0, 0)];
    let (mut installed, mut failed) = (0u64, 0u64);
    for (bucket, ok, bad) in buckets {
        installed += u64::try_from(ok).unwrap_or(0);
        failed += u64::try_from(bad).unwrap_or(0);
        let at = (created + (bucket + 1) * width - 1).min(end);
        points.push(point(at, installed, failed));
    }
    // A rollout still going on is drawn up to now.
    if deployment.state != DeploymentState::Aborted && deployment.phase != "completed" {
        points.push(point(now.max(end), installed, failed));
    }
    let batches = deployment
        .progress
        .batches
        .iter()
        .map(|b| {
            let at = opened
                .iter()
                .filter(|(_, n)| *n > b.index)
                .map(|(at, _)| *at)
                .min();
            BatchOpened {
                index: b.index,
                percent: b.percent,
                devices: b.devices,
                opened_at: at.map(rfc3339),
                opened_at_ms: at,
            }
        })
        .collect();
    Ok(JsonResponse(Timeline {
        deployment,
        points,
        batches,
        events: marks,
    }))
}
