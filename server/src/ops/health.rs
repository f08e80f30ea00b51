//! Health, as orchestrators and load balancers ask for it.
//!
//! | Route      | Answers                                                                 | Use it for |
//! |------------|-------------------------------------------------------------------------|------------|
//! | `/livez`   | 200 whenever the process answers HTTP; it looks at nothing else          | liveness (a restart helps only a process that stopped answering) |
//! | `/readyz`  | JSON, one entry per dependency; 503 only when the server can serve nothing: neither polls nor writes | readiness (route traffic here or not) |
//! | `/healthz` | `/readyz`'s status code with a short body (`{"status","version"}`): kept for load balancers that know that name | readiness |
//!
//! What `/readyz` reports and how each check is bounded:
//!
//! | Check        | How                                                                                 | Bound |
//! |--------------|-------------------------------------------------------------------------------------|-------|
//! | `database`   | `SELECT 1` on a pooled connection                                                   | [`CHECK_TIMEOUT`] |
//! | `pack_store` | the latest background probe ([`probe_store`], every [`STORE_PROBE_INTERVAL`]): a cheap request, never a listing | none here: readiness never waits on the store |
//! | `disk`       | free bytes on the data directory's disk against `--min-free-space`                  | a `statvfs` |
//! | `snapshot`   | the poll snapshot's generation, and when it was last confirmed current against the database | memory |
//! | `transport`  | whether the listeners speak TLS, and a warning when plain HTTP listens on an address other than loopback (it never makes the server unready) | memory |
//!
//! `can_serve_polls`: the snapshot is confirmed current now or within [`SNAPSHOT_TRUST`] (polls
//! are answered from memory, so a database outage costs them nothing for that long; past it, a
//! deployment aborted through another replica might still be offered here, and the server says
//! it should not be routed polls). `can_accept_writes`: the database answers and the disk is
//! above its reserve. `can_accept_uploads`: writes, and the pack store answered its last probe.
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ops::probe::{Check, millis};
use crate::state::AppState;

/// How long `/readyz` waits for the database.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a snapshot confirmed current keeps polls "servable" while the database does not
/// answer.
pub const SNAPSHOT_TRUST: Duration = Duration::from_secs(5 * 60);

/// The short health answer of `/healthz` and `/livez`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `"ok"` in a 200, `"unavailable"` in a 503.
    pub status: &'static str,
    /// The server's version.
    pub version: &'static str,
}

/// The data directory's disk.
#[derive(Debug, Serialize, ToSchema)]
pub struct DiskCheck {
    /// Free bytes are at or above `--min-free-space`.
    pub ok: bool,
    /// Bytes free (absent if they cannot be read).
    pub free_bytes: Option<u64>,
    /// `--min-free-space`.
    pub min_free_bytes: u64,
}

/// The poll snapshot.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotCheck {
    /// Confirmed current within the trust period.
    pub ok: bool,
    /// Its fleet generation.
    pub generation: i64,
    /// Milliseconds since it was last confirmed current against the database.
    pub confirmed_ms_ago: u64,
}

/// How devices and operators reach the server.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransportCheck {
    /// The listeners speak TLS (`--tls-cert`).
    pub tls: bool,
    /// Devices may authenticate with client certificates (`--client-ca`).
    pub client_certificates: bool,
    /// Set when plain HTTP listens on an address other than loopback: tokens and packs cross
    /// the network in clear unless a TLS-terminating proxy is in front.
    pub warning: Option<String>,
}

/// Every dependency.
#[derive(Debug, Serialize, ToSchema)]
pub struct Checks {
    /// The database.
    pub database: Check,
    /// The pack store's last probe.
    pub pack_store: Check,
    /// The data directory's disk.
    pub disk: DiskCheck,
    /// The poll snapshot.
    pub snapshot: SnapshotCheck,
    /// TLS or plain HTTP.
    pub transport: TransportCheck,
}

/// `/readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` (everything works), `degraded` (something does not, but polls or writes are
    /// served) or `unavailable` (nothing is: the answer is 503).
    pub status: &'static str,
    /// The server's version.
    pub version: &'static str,
    /// Device polls are answered from a snapshot known to be current.
    pub can_serve_polls: bool,
    /// Operator and device writes can commit.
    pub can_accept_writes: bool,
    /// Uploads can be stored (writes, and a pack store that answers).
    pub can_accept_uploads: bool,
    /// Each dependency.
    pub checks: Checks,
}

/// Health routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(livez))
        .routes(routes!(readyz))
}

/// Looks at every dependency, each bounded.
pub async fn readiness(state: &AppState) -> Readiness {
    let started = Instant::now();
    let database =
        match tokio::time::timeout(CHECK_TIMEOUT, sqlx::query("SELECT 1").execute(&state.db)).await
        {
            Ok(Ok(_)) => Check {
                ok: true,
                detail: None,
                millis: millis(started.elapsed()),
            },
            Ok(Err(e)) => Check {
                ok: false,
                detail: Some(format!("not answering: {e}")),
                millis: millis(started.elapsed()),
            },
            Err(_) => Check {
                ok: false,
                detail: Some(format!(
                    "no answer within {} s",
                    CHECK_TIMEOUT.as_secs_f64()
                )),
                millis: millis(started.elapsed()),
            },
        };
    let pack_store = state.store_probe.check();
    let space = state.disk.space().ok();
    let disk = DiskCheck {
        ok: space.is_none_or(|s| s.free >= state.disk.reserve()),
        free_bytes: space.map(|s| s.free),
        min_free_bytes: state.disk.reserve(),
    };
    let confirmed_ago = state.polling.confirmed_ago();
    let snapshot = SnapshotCheck {
        ok: confirmed_ago <= SNAPSHOT_TRUST,
        generation: state.polling.cache.get().generation,
        confirmed_ms_ago: millis(confirmed_ago),
    };
    let can_serve_polls = snapshot.ok;
    let can_accept_writes = database.ok && disk.ok;
    let can_accept_uploads = can_accept_writes && pack_store.ok;
    let status = if can_accept_uploads && can_serve_polls {
        "ready"
    } else if can_serve_polls || can_accept_writes {
        "degraded"
    } else {
        "unavailable"
    };
    Readiness {
        status,
        version: env!("CARGO_PKG_VERSION"),
        can_serve_polls,
        can_accept_writes,
        can_accept_uploads,
        checks: Checks {
            database,
            pack_store,
            disk,
            snapshot,
            transport: TransportCheck {
                tls: state.exposure.tls,
                client_certificates: state.exposure.client_certificates,
                warning: state.exposure.warning(),
            },
        },
    }
}

fn code(r: &Readiness) -> StatusCode {
    if r.status == "unavailable" {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

/// Readiness: 200 unless the server can serve neither polls nor writes (then 503), with every
/// dependency's state. Unauthenticated; it names no secret.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (status = 200, body = Readiness, description = "polls or writes (or both) can be served; `status` says whether everything works"),
        (status = 503, body = Readiness, description = "neither polls nor writes can be served"),
    )
)]
async fn readyz(State(state): State<AppState>) -> Response {
    let r = readiness(&state).await;
    (code(&r), Json(r)).into_response()
}

/// Liveness: 200 whenever the process answers. Unauthenticated.
#[utoipa::path(
    get,
    path = "/livez",
    tag = "operations",
    responses((status = 200, body = Health))
)]
async fn livez() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// `/readyz`'s status code with a short body, for load balancers configured with this name.
/// Unauthenticated.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses(
        (status = 200, body = Health),
        (status = 503, body = Health, description = "neither polls nor writes can be served (see /readyz)"),
    )
)]
async fn healthz(State(state): State<AppState>) -> Response {
    let r = readiness(&state).await;
    let status = code(&r);
    let body = Health {
        status: if status.is_success() {
            "ok"
        } else {
            "unavailable"
        },
        version: env!("CARGO_PKG_VERSION"),
    };
    (status, Json(body)).into_response()
}
