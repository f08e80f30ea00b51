//! The device side: what devices call, answered from an in-memory snapshot of the fleet.
//!
//! | Module           | Role                                                                      |
//! |------------------|---------------------------------------------------------------------------|
//! | [`decide`]       | the device API's rules, once: facts and the snapshot in, an answer out    |
//! | [`routes`]       | the device API through the router (`GET /api/v1/device…`, `POST …/status`) |
//! | [`lane`]         | the accept loop's own HTTP/1.1 for polls and downloads (`conn/`)           |
//! | [`auth`]         | the device-token extractor                                                |
//! | [`poll_cache`]   | the current snapshot, and how it follows changes                          |
//! | [`snapshot`]     | one immutable view of the fleet: devices, assignments, packs, keyring     |
//! | `build`          | a snapshot read from the database, or extended with new devices           |
//! | [`targets`]      | who a deployment reaches                                                   |
//! | [`token_index`]  | device tokens to snapshot entries                                         |
//! | [`polling`]      | the snapshot, last-seen times and timers together ([`Fleet`])             |
//! | [`last_seen`]    | batched `devices.last_seen` updates (and first offers)                    |
//! | [`generation`]   | the counter a fleet change bumps                                          |
//! | [`notify`]       | PostgreSQL `LISTEN/NOTIFY`: other replicas' changes, at once              |
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub mod auth;
mod build;
pub mod decide;
pub mod generation;
pub mod lane;
pub mod last_seen;
pub mod notify;
pub mod poll_cache;
pub mod polling;
pub mod routes;
pub mod snapshot;
pub mod targets;
pub mod token_index;

pub use generation::bump_generation;
pub use poll_cache::PollCache;
pub use polling::{
    DEFAULT_CACHE_CHECK_SECS, DEFAULT_LAST_SEEN_FLUSH_SECS, DEFAULT_POLL_INTERVAL_SECS,
    FleetTimers, Polling,
};
pub use snapshot::{Added, Generation, Snapshot};

/// Every device route, with the device-token security scheme.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(routes::DeviceDoc::openapi()).merge(routes::router())
}
