//! The `Device` extractor: a device token, checked against the poll cache (no database access),
//! failing closed. Operator tokens are not in the cache, so they get 401 here, and device tokens
//! are not in the `tokens` table, so they get 401 on operator routes.
//!
//! On a connection whose client certificate names a device (`--client-ca`, `crate::tls::client`),
//! the token must be that device's: one of another device is refused (401, logged, and counted
//! as `npub_tls_client_cert_rejections_total{reason="device_mismatch"}`), whoever holds it.
//! Without a token the certificate alone authenticates its device; one naming no enrolled device
//! (unknown, or revoked) is refused the same way (`unknown_device`).
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::guard::Kind;
use crate::auth::{bearer, peer};
use crate::device::snapshot::{DeviceEntry, Snapshot};
use crate::http::error::ApiError;
use crate::state::AppState;
use crate::tls::client::{DeviceName, Rejection};

/// Every device token starts with this (operator tokens with `npub_op_`).
pub const DEVICE_TOKEN_PREFIX: &str = "npub_dev_";

/// The authenticated device, with the snapshot its request is answered from (one snapshot per
/// request, so the device, its assignment and the pack bytes always agree).
#[derive(Debug, Clone)]
pub struct Device {
    /// The device.
    pub entry: Arc<DeviceEntry>,
    /// The snapshot it was found in.
    pub snapshot: Arc<Snapshot>,
}

impl FromRequestParts<AppState> for Device {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let failed = || state.auth_guard.failed(peer(parts), Kind::Device);
        let certified = parts.extensions.get::<DeviceName>().cloned();
        let Some(secret) = bearer(parts) else {
            // No token: the client certificate alone names the device, if there is one.
            let name = certified.ok_or_else(failed)?;
            let snapshot = state.polling.cache.get();
            let Some(enrolled) = snapshot.enrolled_by_id(&name.0) else {
                let why = Rejection::UnknownDevice;
                state.metrics.observe_client_cert_rejection(why.label());
                tracing::warn!(peer = ?peer(parts), certificate = %name.0, reason = why.reason(), "client certificate refused");
                return Err(failed());
            };
            let entry = Arc::clone(&enrolled.entry);
            return Ok(Device { entry, snapshot });
        };
        if !secret.starts_with(DEVICE_TOKEN_PREFIX) {
            return Err(failed());
        }
        let snapshot = state.polling.cache.get();
        let entry = snapshot.device(secret).cloned().ok_or_else(failed)?;
        if let Some(certified) = &certified
            && *certified.0 != *entry.id
        {
            let why = Rejection::DeviceMismatch;
            state.metrics.observe_client_cert_rejection(why.label());
            tracing::warn!(
                peer = ?peer(parts),
                certificate = %certified.0,
                token = %entry.id,
                reason = why.reason(),
                "client certificate refused"
            );
            return Err(failed());
        }
        Ok(Device { entry, snapshot })
    }
}

/// A fresh device token.
pub fn generate() -> std::io::Result<String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!(
        "{DEVICE_TOKEN_PREFIX}{}",
        crate::store::to_hex(&secret)
    ))
}
