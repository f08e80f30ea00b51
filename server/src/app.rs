//! The HTTP application: every module's routes merged in one place, the OpenAPI document built
//! from them, and the layers every request goes through.
use axum::handler::Handler as _;
use axum::http::{Method, StatusCode, Uri};
use axum::{Extension, Router, middleware};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::http::error::ApiError;
use crate::state::AppState;
use crate::{auth, catalog, device, fleet, http, keys, ops};

/// The HTTP application: every module's routes, the OpenAPI document built from them, request
/// metrics and tracing. Add a module's routes here (and nowhere else).
pub fn app(state: AppState) -> Router {
    let (router, mut api) = routes().split_for_parts();
    for unused in http::openapi_rules::complete(&mut api) {
        tracing::error!(rule = %unused, "an OpenAPI value rule names nothing in the document");
    }
    let track = || middleware::from_fn_with_state(state.metrics.clone(), ops::metrics::track);
    router
        .merge(http::web::router())
        .method_not_allowed_fallback(no_method)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            http::idempotency::layer,
        ))
        .route_layer(track())
        // After `route_layer`, which does not reach the fallback: unmatched requests are
        // counted too, under the route `other`.
        .fallback(no_route.layer(track()))
        .layer(middleware::from_fn_with_state(
            state.limits.body_rate,
            http::body_rate::enforce,
        ))
        .layer(middleware::from_fn_with_state(
            state.disk.clone(),
            ops::disk::name_the_disk,
        ))
        .layer(Extension(http::openapi::Document::new(&api)))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Every documented route, from one `router()` per module.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(http::openapi::ApiDoc::openapi())
        .merge(ops::health::router())
        .merge(ops::exposition::router())
        .merge(http::openapi::router())
        .merge(auth::router())
        .merge(ops::audit_log::router())
        .merge(ops::webhooks::routes::router())
        .merge(catalog::models::router())
        .merge(catalog::versions::router())
        .merge(catalog::release::router())
        .merge(keys::routes::router())
        .merge(fleet::router())
        .merge(device::router())
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
