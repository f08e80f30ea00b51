//! The operators' web UI (`web/` in the repository), compiled into the binary.
//!
//! The UI is plain HTML, CSS and JavaScript modules with no build step, so `include_bytes!` is the
//! whole packaging: `cargo build` embeds the files (and rebuilds when one changes), and the server
//! needs nothing on disk to serve them. The UI talks to the server through the public
//! `/api/v1` REST API only; this module serves files and nothing else.
//!
//! | Path              | What                              | `Cache-Control` |
//! |-------------------|-----------------------------------|-----------------|
//! | `/`               | `web/index.html`                  | `no-cache`      |
//! | `/assets/<file>`  | `web/assets/<file>` (flat list)   | `no-cache`      |
//!
//! File names carry no content hash (there is no build step to add one), so every response is
//! `no-cache` with a strong `ETag` (SHA-256 of the file): a browser revalidates and gets a body-less
//! 304 until the binary changes, and never runs a stale script against a newer API.
//!
//! Every response carries a Content-Security-Policy that allows nothing but this origin: no
//! inline script or style, no `eval`, no other host, no framing. Server-provided strings reach
//! the page only as text nodes (the UI never assigns `innerHTML`), and the policy is the second
//! wall if that rule is ever broken.
use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest as _, Sha256};

use crate::http::error::ApiError;
use crate::http::extract::Path;
use crate::state::AppState;
use crate::store::to_hex;

/// Only this origin, for everything; `base-uri`, `form-action` and `frame-ancestors` do not fall
/// back to `default-src`, so they are spelt out.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'; object-src 'none'";

/// One embedded file.
struct Asset {
    /// Its name under `/assets/` (`index.html` is served at `/`).
    name: &'static str,
    /// `Content-Type`.
    content_type: &'static str,
    /// The bytes.
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the UI. A file added to `web/assets/` must be listed here to be served.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("assets/style.css", "text/css; charset=utf-8"),
    asset!("assets/icon.svg", "image/svg+xml"),
    asset!("assets/app.js", JS),
    asset!("assets/api.js", JS),
    asset!("assets/dom.js", JS),
    asset!("assets/dialog.js", JS),
    asset!("assets/format.js", JS),
    asset!("assets/signin.js", JS),
    asset!("assets/models.js", JS),
    asset!("assets/upload.js", JS),
    asset!("assets/version.js", JS),
    asset!("assets/deploy.js", JS),
    asset!("assets/device.js", JS),
    asset!("assets/deployments.js", JS),
    asset!("assets/deployment_devices.js", JS),
    asset!("assets/fleet.js", JS),
    asset!("assets/audit.js", JS),
    asset!("assets/admin.js", JS),
    asset!("assets/dashboard.js", JS),
    asset!("assets/charts.js", JS),
    asset!("assets/webhooks.js", JS),
];

/// `"<sha256>"` of each asset, in [`ASSETS`] order, computed on first use.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| format!("\"{}\"", to_hex(&Sha256::digest(a.body))))
        .collect()
});

/// `/` and `/assets/…`. Not part of the OpenAPI document: these are not API routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{*file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let wanted = format!("assets/{file}");
    match ASSETS.iter().position(|a| a.name == wanted) {
        Some(i) => serve(i, &headers),
        None => ApiError::NotFound(format!("/assets/{file}")).into_response(),
    }
}

fn serve(i: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let etag = &ETAGS[i];
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == etag
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let headers = response.headers_mut();
    if !fresh {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, v);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_ui_imports_is_embedded() {
        // A module imported but not listed would 404 in the browser; catch it at `cargo test`.
        for a in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(a.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let from = line.rsplit_once(" from '").map(|(_, f)| f).unwrap_or(line);
                let file = from
                    .trim_start_matches("import '")
                    .trim_end_matches("';")
                    .trim_start_matches("./");
                let name = format!("assets/{file}");
                assert!(
                    ASSETS.iter().any(|x| x.name == name),
                    "{} imports {file}, which is not in ASSETS",
                    a.name
                );
            }
        }
    }

    #[test]
    fn every_file_under_web_assets_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../web/assets");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = format!("assets/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "{name} is in web/ but not in ASSETS, so it would never be served"
            );
        }
    }

    #[test]
    fn no_asset_assigns_html_or_loads_from_elsewhere() {
        for a in ASSETS {
            let text = std::str::from_utf8(a.body).unwrap();
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "http://",
                "https://",
                "//cdn",
            ] {
                // The SVG's XML namespace is an identifier, not something loaded (in the icon's
                // markup, and in charts.js's `createElementNS`).
                let text = text
                    .replace("xmlns=\"http://www.w3.org/2000/svg\"", "")
                    .replace("'http://www.w3.org/2000/svg'", "");
                assert!(!text.contains(banned), "{} contains {banned:?}", a.name);
            }
        }
    }
}
