//! Prometheus metrics, written in the text exposition format (0.0.4) by hand: a few counters and
//! one histogram do not justify a metrics framework.
//!
//! | Metric                                 | Type      | Labels                    |
//! |----------------------------------------|-----------|---------------------------|
//! | `npub_http_requests_total`             | counter   | `method`, `route`, `status` |
//! | `npub_http_request_duration_seconds`   | histogram | `method`, `route`          |
//! | `npub_uploads_total`                   | counter   | `source`, `outcome`        |
//! | `npub_upload_bytes_total`              | counter   | (bytes of stored uploads)  |
//! | `npub_pack_bytes_served_total`         | counter   | (pack bytes sent)          |
//!
//! `route` is the route's pattern (`/api/v1/models/{name}`), never the raw path, so the label set
//! stays bounded whatever clients send; requests that match no route are not recorded. Latency is
//! time to the response head (a pack download's body streams after it).
//!
//! The request path is lock-free once a route has been seen: a read lock to find the route's
//! counters, then atomic increments.
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// Upper bounds of the latency histogram's buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// HTTP status codes are three digits, 100..=599.
const STATUS_MIN: u16 = 100;
const STATUS_SLOTS: usize = 500;

/// Everything the server counts.
#[derive(Debug, Default)]
pub struct Metrics {
    routes: RwLock<HashMap<(String, String), Arc<RouteStats>>>,
    uploads: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    upload_bytes: AtomicU64,
    pack_bytes_served: AtomicU64,
}

#[derive(Debug)]
struct RouteStats {
    by_status: Box<[AtomicU64; STATUS_SLOTS]>,
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl RouteStats {
    fn new() -> Self {
        Self {
            by_status: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one answered request.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let stats = self.route_stats(method, route);
        if let Some(slot) = status
            .checked_sub(STATUS_MIN)
            .and_then(|i| stats.by_status.get(usize::from(i)))
        {
            slot.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(i) = BUCKETS.iter().position(|&le| seconds <= le) {
            stats.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        stats.count.fetch_add(1, Ordering::Relaxed);
        stats
            .sum_nanos
            .fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }

    /// Counts one upload attempt; `bytes` is added to the stored-bytes counter when it was stored.
    pub fn observe_upload(&self, source: &'static str, outcome: &'static str, bytes: u64) {
        *self
            .uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((source, outcome))
            .or_default() += 1;
        if outcome == "stored" {
            self.upload_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Counts pack bytes sent to a client.
    pub fn add_pack_bytes_served(&self, bytes: u64) {
        self.pack_bytes_served.fetch_add(bytes, Ordering::Relaxed);
    }

    fn route_stats(&self, method: &str, route: &str) -> Arc<RouteStats> {
        let read = self.routes.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(stats) = read.get(&(method.to_owned(), route.to_owned())) {
            return Arc::clone(stats);
        }
        drop(read);
        let mut write = self.routes.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            write
                .entry((method.to_owned(), route.to_owned()))
                .or_insert_with(|| Arc::new(RouteStats::new())),
        )
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let routes: Vec<_> = {
            let map = self.routes.read().unwrap_or_else(PoisonError::into_inner);
            let mut v: Vec<_> = map
                .iter()
                .map(|(k, s)| (k.clone(), Arc::clone(s)))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        out.push_str(
            "# HELP npub_http_requests_total HTTP requests answered, by method, route and status.\n\
             # TYPE npub_http_requests_total counter\n",
        );
        for ((method, route), stats) in &routes {
            for (i, slot) in stats.by_status.iter().enumerate() {
                let n = slot.load(Ordering::Relaxed);
                if n > 0 {
                    let status = usize::from(STATUS_MIN) + i;
                    let _ = writeln!(
                        out,
                        "npub_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                        escape(method),
                        escape(route)
                    );
                }
            }
        }
        out.push_str(
            "# HELP npub_http_request_duration_seconds Time from request to response head.\n\
             # TYPE npub_http_request_duration_seconds histogram\n",
        );
        for ((method, route), stats) in &routes {
            let labels = format!("method=\"{}\",route=\"{}\"", escape(method), escape(route));
            let mut cumulative = 0;
            for (le, bucket) in BUCKETS.iter().zip(&stats.buckets) {
                cumulative += bucket.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "npub_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                );
            }
            let count = stats.count.load(Ordering::Relaxed);
            let sum = stats.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(
                out,
                "npub_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}\n\
                 npub_http_request_duration_seconds_sum{{{labels}}} {sum}\n\
                 npub_http_request_duration_seconds_count{{{labels}}} {count}"
            );
        }
        out.push_str(
            "# HELP npub_uploads_total Pack uploads, by source format and outcome.\n\
             # TYPE npub_uploads_total counter\n",
        );
        for ((source, outcome), n) in self
            .uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = writeln!(
                out,
                "npub_uploads_total{{source=\"{source}\",outcome=\"{outcome}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP npub_upload_bytes_total Bytes of uploads that were stored.\n\
             # TYPE npub_upload_bytes_total counter\n\
             npub_upload_bytes_total {}\n\
             # HELP npub_pack_bytes_served_total Pack bytes sent to clients.\n\
             # TYPE npub_pack_bytes_served_total counter\n\
             npub_pack_bytes_served_total {}",
            self.upload_bytes.load(Ordering::Relaxed),
            self.pack_bytes_served.load(Ordering::Relaxed)
        );
        out
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware (a route layer, so the matched route is known) that counts every answered request.
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let Some(route) = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
    else {
        return next.run(request).await;
    };
    let method = request.method().as_str().to_owned();
    let start = Instant::now();
    let response = next.run(request).await;
    metrics.observe_request(
        &method,
        &route,
        response.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    response
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
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cumulative_buckets_and_escaped_labels() {
        let m = Metrics::default();
        m.observe_request("GET", "/a\"b", 200, 0.0001);
        m.observe_request("GET", "/a\"b", 404, 0.2);
        m.observe_upload("npub", "stored", 10);
        m.observe_upload("npub", "rejected", 99);
        let text = m.render();
        assert!(
            text.contains(r#"npub_http_requests_total{method="GET",route="/a\"b",status="200"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"npub_http_requests_total{method="GET",route="/a\"b",status="404"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"_bucket{method="GET",route="/a\"b",le="0.0005"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"_bucket{method="GET",route="/a\"b",le="0.25"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"_bucket{method="GET",route="/a\"b",le="+Inf"} 2"#),
            "{text}"
        );
        assert!(text.contains("npub_upload_bytes_total 10\n"), "{text}");
        assert!(
            text.contains(r#"npub_uploads_total{source="npub",outcome="rejected"} 1"#),
            "{text}"
        );
    }
}
