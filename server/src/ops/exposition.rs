//! `GET /metrics`: the Prometheus text exposition of every counter ([`super::metrics`]), the poll
//! snapshot's figures and the data directory's disk.
use std::fmt::Write as _;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The data directory's disk: free and total bytes, and the uploads' reserve.
fn render_disk(disk: &crate::ops::disk::DataDisk, out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP npub_data_dir_min_free_bytes --min-free-space: what uploads leave free on the data directory's disk.\n\
         # TYPE npub_data_dir_min_free_bytes gauge\n\
         npub_data_dir_min_free_bytes {}",
        disk.reserve()
    );
    if let Ok(space) = disk.space() {
        let _ = writeln!(
            out,
            "# HELP npub_data_dir_free_bytes Bytes free on the data directory's disk.\n\
             # TYPE npub_data_dir_free_bytes gauge\n\
             npub_data_dir_free_bytes {}\n\
             # HELP npub_data_dir_size_bytes Size of the data directory's disk.\n\
             # TYPE npub_data_dir_size_bytes gauge\n\
             npub_data_dir_size_bytes {}",
            space.free, space.total
        );
    }
}

/// `GET /metrics`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// Prometheus metrics (text exposition format). Unauthenticated, like every scrape target: it
/// names routes and counts, never objects or tokens.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String))
)]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = state.metrics.render();
    state.polling.cache.render(&mut text);
    render_disk(&state.disk, &mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}
