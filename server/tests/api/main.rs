//! End-to-end tests of the operator API: a real server on 127.0.0.1:0 per test, over a fresh
//! temp data dir, driven with reqwest. One file per idea.
#[path = "../common/mod.rs"]
mod common;
/// A webhook receiver on loopback, for the tests of webhooks and of what they carry.
#[path = "../common/webhook_receiver.rs"]
mod receiver;
/// The fleet tests' simulated device, for the tests here that need a deployment.
#[path = "../fleet/support.rs"]
#[allow(dead_code)]
mod support;

mod auth;
mod auth_failures;
mod banner;
mod binary;
mod completion;
mod connections;
mod contention;
mod device_events;
mod errors;
mod fd_limit;
mod holes;
mod idempotency;
mod keys;
mod malformed;
mod metrics_labels;
mod npz_claims;
mod openapi_doc;
mod operations;
mod proof;
mod ranges;
mod release;
mod restart;
mod timeouts;
mod upload_limits;
mod uploads;
mod webhooks;
