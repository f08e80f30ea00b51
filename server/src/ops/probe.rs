//! The pack store's health, probed in the background so that readiness never waits on it.
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::PackStore;

/// How often the pack store is probed in the background.
pub const STORE_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// One dependency's state.
#[derive(Debug, Serialize, ToSchema)]
pub struct Check {
    /// Whether it works now.
    pub ok: bool,
    /// What is wrong, or what was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How long the check took, or (the pack store) how old its last probe is, in milliseconds.
    pub millis: u64,
}

/// The background probe's latest result.
#[derive(Debug)]
pub struct StoreProbe {
    latest: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Default for StoreProbe {
    fn default() -> Self {
        Self {
            latest: Mutex::new(None),
        }
    }
}

impl StoreProbe {
    fn record(&self, result: Result<(), String>) {
        let mut latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *latest = Some((Instant::now(), result));
    }

    pub(crate) fn check(&self) -> Check {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*latest {
            None => Check {
                ok: false,
                detail: Some("not probed yet".into()),
                millis: 0,
            },
            Some((at, result)) => Check {
                ok: result.is_ok(),
                detail: result.as_ref().err().cloned(),
                millis: millis(at.elapsed()),
            },
        }
    }
}

/// Probes `store` at once and every [`STORE_PROBE_INTERVAL`] (each probe bounded by the store's
/// own `--store-timeout`), recording each result in `probe`, until `stop` resolves.
pub async fn probe_store(
    store: std::sync::Arc<dyn PackStore>,
    probe: std::sync::Arc<StoreProbe>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut every = tokio::time::interval(STORE_PROBE_INTERVAL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = &mut stop => return,
        }
        let result = tokio::select! {
            r = store.probe() => r.map_err(|e| e.to_string()),
            () = &mut stop => return,
        };
        if let Err(e) = &result {
            tracing::warn!(error = %e, "pack store probe failed");
        }
        probe.record(result);
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
