//! Webhooks: operators register URLs for the fleet's events; each event is queued in the
//! transaction that caused it and sent, signed as the Standard Webhooks specification says, by
//! a background task that retries with backoff and disables an endpoint that keeps failing.
//! `docs/webhooks.md` is the operator's page.
//!
//! Bottom-up: `kinds.rs` (event kinds, limits, settings), `sign.rs` (headers and signature) →
//! `secret.rs` (the secret sealed at rest), `emit.rs` (events into the queue), `reach.rs` (the
//! addresses a delivery may go to) → `sender.rs` (the queue to the receivers), `routes.rs` (`/api/v1/webhooks`).
pub mod emit;
pub mod kinds;
pub mod reach;
pub mod routes;
pub mod secret;
pub mod sender;
pub mod sign;
