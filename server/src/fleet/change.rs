//! After a committed change to the fleet: this replica's snapshot brought up to it.
use crate::device::snapshot::{Added, Generation};
use crate::state::AppState;

/// Brings this replica's cache up to a committed change ([`PollCache::catch_up`]); a failure is
/// logged (the periodic generation check retries) rather than failing a request whose change is
/// already committed.
pub async fn refresh(state: &AppState, committed: Generation) {
    if let Err(e) = state
        .polling
        .cache
        .catch_up(&state.db, &state.store, committed)
        .await
    {
        tracing::error!(error = %e, "rebuilding the fleet cache");
    }
}

/// [`refresh`] after a change that only provisioned `added` ([`PollCache::add_devices`]).
pub async fn refresh_provisioned(state: &AppState, committed: Generation, added: Vec<Added>) {
    if let Err(e) = state
        .polling
        .cache
        .add_devices(&state.db, &state.store, committed, added)
        .await
    {
        tracing::error!(error = %e, "rebuilding the fleet cache");
    }
}
