//! # npub-server
//!
//! The versioned pack store and operator REST API of npub: operators upload `.npub` packs (or
//! Vela's `*_vela.tflite` / `.npz`, imported by npub-core), every upload is validated by
//! npub-core before anything is stored, and packs are kept content-addressed by SHA-256.
//!
//! [`app`] builds the whole HTTP surface from one `router()` per module; [`Server`] opens the
//! data directory, the database and the pack store, and serves [`app`] on a listener. `main.rs`
//! only parses the configuration and calls them; the tests call them directly.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use axum::handler::Handler as _;
use axum::http::{Method, StatusCode, Uri};
use axum::{Extension, Router, middleware};
use error::ApiError;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub mod audit;
pub mod auth;
pub mod body_rate;
pub mod config;
mod conn;
pub mod datadir;
pub mod db;
pub mod error;
pub mod extract;
pub mod fleet;
pub mod header_text;
pub mod health;
pub mod key_store;
pub mod keys;
pub mod logging;
pub mod metrics;
pub mod models;
pub mod names;
pub mod openapi;
mod openapi_rules;
pub mod ranges;
mod server;
pub mod state;
pub mod store;
pub mod time;
mod upload;
pub mod validate;
pub mod versions;
pub mod web;

pub use config::Config;
pub use server::{Server, StartError, shutdown_signal};
pub use state::AppState;

/// The HTTP application: every module's routes, the OpenAPI document built from them, request
/// metrics and tracing. Add a module's routes here (and nowhere else).
pub fn app(state: AppState) -> Router {
    let (router, mut api) = routes().split_for_parts();
    for unused in openapi_rules::complete(&mut api) {
        tracing::error!(rule = %unused, "an OpenAPI value rule names nothing in the document");
    }
    let track = || middleware::from_fn_with_state(state.metrics.clone(), metrics::track);
    router
        .merge(web::router())
        .method_not_allowed_fallback(no_method)
        .route_layer(track())
        // After `route_layer`, which does not reach the fallback: unmatched requests are
        // counted too, under the route `other`.
        .fallback(no_route.layer(track()))
        .layer(middleware::from_fn_with_state(
            state.limits.body_rate,
            body_rate::enforce,
        ))
        .layer(Extension(openapi::Document::new(&api)))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Every documented route, from one `router()` per module.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(health::router())
        .merge(metrics::router())
        .merge(openapi::router())
        .merge(auth::router())
        .merge(audit::router())
        .merge(models::router())
        .merge(versions::router())
        .merge(keys::router())
        .merge(fleet::router())
}

/// Unknown paths get the same JSON error shape as everything else.
async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("route {method} {}", uri.path()))
}

/// A known path with a method it does not serve.
async fn no_method(method: Method, uri: Uri) -> ApiError {
    ApiError::InvalidRequest {
        status: StatusCode::METHOD_NOT_ALLOWED,
        detail: format!("{} does not serve {method}", uri.path()),
    }
}
