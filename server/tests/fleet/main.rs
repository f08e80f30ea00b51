//! End-to-end tests of the fleet: devices, deployments, staged rollouts, rollback by version and
//! the device API, over real HTTP against a server on 127.0.0.1:0 with a fresh data dir and real
//! Vela fixture packs. Timers are never waited for: the tests drive the batched work explicitly.
#[path = "../common/mod.rs"]
mod common;
mod support;

mod access;
mod cached_targets;
mod control;
mod dashboard;
mod delivery;
mod device_edit;
mod device_page;
mod fast_poll;
mod last_seen;
mod listing;
mod rollback;
mod rollout;
mod targeting;
