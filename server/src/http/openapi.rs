//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document, generated from the handlers' own
//! `#[utoipa::path]` annotations as the routes are registered (utoipa-axum), so a route cannot
//! be served without being documented.
use std::sync::Arc;

use axum::Extension;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The document's fixed parts; paths and schemas are added by the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "npub-server",
        description = "Versioned NPU1 pack store and operator API for OTA delivery of neural-network \
                       packs to Ethos-U55 devices. Errors are JSON `{\"error\": code, \"detail\": text}`."
    ),
    modifiers(&BearerToken),
    tags(
        (name = "models", description = "Named models"),
        (name = "versions", description = "Uploaded, validated, immutable packs"),
        (name = "tokens", description = "Operator API tokens (admin)"),
        (name = "keys", description = "Manifest signing keys"),
        (name = "audit", description = "Who did what, when"),
        (name = "webhooks", description = "Signed event deliveries to operators' URLs (admin changes)"),
        (name = "operations", description = "Health, metrics, this document"),
    )
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An operator API token (`npub_op_…`)"))
                    .build(),
            ),
        );
    }
}

/// The finished document, serialised once.
#[derive(Clone, Debug)]
pub struct Document(Arc<String>);

impl Document {
    /// Serialises `api`.
    pub fn new(api: &utoipa::openapi::OpenApi) -> Self {
        Self(Arc::new(api.to_json().unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot serialise the OpenAPI document");
            "{}".into()
        })))
    }
}

/// `GET /api/v1/openapi.json`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(openapi_json))
}

/// This API's OpenAPI document. Unauthenticated.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "operations",
    responses((status = 200, description = "the OpenAPI 3.1 document", content_type = "application/json"))
)]
async fn openapi_json(Extension(doc): Extension<Document>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.as_str().to_owned(),
    )
}
