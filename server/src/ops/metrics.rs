//! Prometheus metrics, written in the text exposition format (0.0.4) by hand: a few counters and
//! one histogram do not justify a metrics framework.
//!
//! | Metric                                 | Type      | Labels                    |
//! |----------------------------------------|-----------|---------------------------|
//! | `npub_http_requests_total`             | counter   | `method`, `route`, `status` |
//! | `npub_http_request_duration_seconds`   | histogram | `method`, `route`          |
//! | `npub_auth_failures_total`             | counter   | `kind` (`operator`, `device`), `outcome` (`unauthorized`, `throttled`) |
//! | `npub_uploads_total`                   | counter   | `source`, `outcome`        |
//! | `npub_upload_bytes_total`              | counter   | (bytes of stored uploads)  |
//! | `npub_pack_bytes_served_total`         | counter   | (pack bytes sent)          |
//! | `npub_device_lane_answers_total`       | counter   | (requests the accept loop's device lane answered itself, `device/lane.rs`) |
//! | `npub_device_lane_handoffs_total`      | counter   | `reason`: why a connection went to hyper and the router |
//! | `npub_tls_handshakes_total`            | counter   | `outcome`: [`TLS_HANDSHAKE_OUTCOMES`] (`--tls-cert`, server/src/tls/) |
//! | `npub_tls_client_cert_rejections_total` | counter  | `reason`: [`CLIENT_CERT_REJECTIONS`] (`--client-ca`) |
//! | `npub_tls_reloads_total`               | counter   | `outcome` (`ok`, `failed`): certificate reloads on `SIGHUP` |
//!
//! Every label comes from a fixed set, so that no request can add a series (an attacker sending
//! 10,000 made-up methods once grew `/metrics` to 196 MB):
//!
//! | Label    | Values                                                                      |
//! |----------|-----------------------------------------------------------------------------|
//! | `method` | `GET` `HEAD` `POST` `PUT` `DELETE` `PATCH` `OPTIONS`; anything else `other`  |
//! | `route`  | the matched route's template (`/api/v1/models/{name}`), never the raw path; a request that matches no route is `other` |
//! | `status` | the status class: `1xx` … `5xx`                                              |
//! | `reason` | [`HANDOFF_REASONS`]                                                          |
//!
//! Latency is time to the response head (a pack download's body streams after it).
//!
//! The request path is lock-free once a route has been seen: a read lock to find the route's
//! counters, then atomic increments.
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// Upper bounds of the latency histogram's buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// The `method` label's values; a method not listed is counted as [`OTHER`].
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
/// The label value of everything outside a fixed set.
pub const OTHER: &str = "other";
/// The `status` label's values, by `status / 100 - 1`.
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The `method` label of `method`: itself when it is one of [`METHODS`], else [`OTHER`].
pub fn method_label(method: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or(OTHER)
}

/// Index into [`STATUS_CLASSES`]; `None` outside 100..=599 (which `http` allows up to 999).
fn status_class(status: u16) -> Option<usize> {
    match status / 100 {
        c @ 1..=5 => Some(usize::from(c - 1)),
        _ => None,
    }
}

/// The `reason` label of `npub_device_lane_handoffs_total`: why the device lane gave a
/// connection to hyper (at a request it does not answer itself; hyper and the router answer that
/// request and every later one on the connection).
pub const HANDOFF_REASONS: [&str; 6] = ["route", "token", "query", "headers", "answer", "unparsed"];

/// The `outcome` label of `npub_tls_handshakes_total`: a full handshake, a resumed one, one the
/// client did not finish within `--tls-handshake-timeout`, and one that failed (a bad record, an
/// alert, a refused client certificate).
pub const TLS_HANDSHAKE_OUTCOMES: [&str; 4] = ["full", "resumed", "timeout", "failed"];

/// The `reason` label of `npub_tls_client_cert_rejections_total`: why a device's client
/// certificate was refused (`crate::tls::client::Rejection`).
pub const CLIENT_CERT_REJECTIONS: [&str; 7] = [
    "unknown_ca",
    "expired",
    "not_yet_valid",
    "bad_certificate",
    "no_device_name",
    "device_mismatch",
    "unknown_device",
];

/// The `kind` label of `npub_auth_failures_total` (`crate::auth::guard::Kind`).
const AUTH_KINDS: [&str; 2] = ["operator", "device"];
/// Its `outcome` label: answered 401, or 429 (the peer's allowance was spent).
const AUTH_OUTCOMES: [&str; 2] = ["unauthorized", "throttled"];

/// Everything the server counts.
#[derive(Debug, Default)]
pub struct Metrics {
    /// By `method` label, then route template: both from fixed sets. Two levels so that a lookup
    /// borrows the route instead of building a key.
    routes: RwLock<HashMap<&'static str, ByRoute>>,
    uploads: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    upload_bytes: AtomicU64,
    pack_bytes_served: AtomicU64,
    auth_failures: [[AtomicU64; AUTH_OUTCOMES.len()]; AUTH_KINDS.len()],
    lane_answers: AtomicU64,
    lane_handoffs: [AtomicU64; HANDOFF_REASONS.len()],
    /// Connections closed to make room (`conn/table.rs`), by reason: peer, full.
    connections_shed: [AtomicU64; 2],
    /// Connections refused for want of room, by reason: peer, full.
    connections_refused: [AtomicU64; 2],
    /// Background sweeps of the pack store (`store/gc.rs`): succeeded, failed.
    store_sweeps: [AtomicU64; 2],
    orphans_removed: AtomicU64,
    tls_handshakes: [AtomicU64; TLS_HANDSHAKE_OUTCOMES.len()],
    client_cert_rejections: [AtomicU64; CLIENT_CERT_REJECTIONS.len()],
    /// Certificate reloads: succeeded, failed.
    tls_reloads: [AtomicU64; 2],
}

/// One method's routes' counters, by route template.
type ByRoute = HashMap<Box<str>, Arc<RouteStats>>;

/// One route's counters, found once and kept by a caller that counts many requests on it (the
/// device lane): counting through it is atomic increments only.
#[derive(Debug, Clone)]
pub struct RouteCounter(Arc<RouteStats>);

impl RouteCounter {
    /// Counts one answered request.
    pub fn observe(&self, status: u16, seconds: f64) {
        let stats = &self.0;
        if let Some(slot) = status_class(status).and_then(|i| stats.by_status.get(i)) {
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
}

#[derive(Debug)]
struct RouteStats {
    by_status: [AtomicU64; STATUS_CLASSES.len()],
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl RouteStats {
    fn new() -> Self {
        Self {
            by_status: std::array::from_fn(|_| AtomicU64::new(0)),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one answered request. `route` must be a route template or [`OTHER`], never a
    /// path a client chose; `method` is mapped onto [`METHODS`].
    pub fn observe_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.route(method, route).observe(status, seconds);
    }

    /// The counters of `route` (a route template or [`OTHER`]) for `method` (mapped onto
    /// [`METHODS`]).
    pub fn route(&self, method: &str, route: &str) -> RouteCounter {
        RouteCounter(self.route_stats(method_label(method), route))
    }

    /// Counts a request the device lane answered.
    pub fn observe_lane_answer(&self) {
        self.lane_answers.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection the device lane handed to hyper, by one of [`HANDOFF_REASONS`]
    /// (anything else is not a label and is dropped).
    pub fn observe_handoff(&self, reason: &str) {
        if let Some(n) = HANDOFF_REASONS
            .iter()
            .position(|r| *r == reason)
            .and_then(|i| self.lane_handoffs.get(i))
        {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests the device lane answered so far.
    pub fn lane_answers(&self) -> u64 {
        self.lane_answers.load(Ordering::Relaxed)
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

    /// Counts one failed authentication on `kind`'s routes (`operator` or `device`; anything else
    /// is not a label and is dropped).
    pub fn observe_auth_failure(&self, kind: &str, throttled: bool) {
        if let Some(row) = AUTH_KINDS
            .iter()
            .position(|k| *k == kind)
            .and_then(|i| self.auth_failures.get(i))
        {
            row[usize::from(throttled)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts pack bytes sent to a client.
    pub fn add_pack_bytes_served(&self, bytes: u64) {
        self.pack_bytes_served.fetch_add(bytes, Ordering::Relaxed);
    }

    fn route_stats(&self, method: &'static str, route: &str) -> Arc<RouteStats> {
        let read = self.routes.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(stats) = read.get(method).and_then(|by_route| by_route.get(route)) {
            return Arc::clone(stats);
        }
        drop(read);
        let mut write = self.routes.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            write
                .entry(method)
                .or_default()
                .entry(route.into())
                .or_insert_with(|| Arc::new(RouteStats::new())),
        )
    }

    /// Counts a connection closed to make room for another (`reason`: `peer` or `full`).
    pub fn observe_connection_shed(&self, reason: &str) {
        self.connections_shed[usize::from(reason != "peer")].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection refused for want of room (`reason`: `peer` or `full`).
    pub fn observe_connection_refused(&self, reason: &str) {
        self.connections_refused[usize::from(reason != "peer")].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one background sweep of the pack store and the orphans it removed.
    pub fn observe_store_sweep(&self, ok: bool, removed: usize) {
        self.store_sweeps[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
        self.orphans_removed
            .fetch_add(removed as u64, Ordering::Relaxed);
    }

    /// Counts one TLS handshake by one of [`TLS_HANDSHAKE_OUTCOMES`] (anything else is dropped).
    pub fn observe_tls_handshake(&self, outcome: &str) {
        count_label(&TLS_HANDSHAKE_OUTCOMES, &self.tls_handshakes, outcome);
    }

    /// Counts one refused client certificate by one of [`CLIENT_CERT_REJECTIONS`].
    pub fn observe_client_cert_rejection(&self, reason: &str) {
        count_label(
            &CLIENT_CERT_REJECTIONS,
            &self.client_cert_rejections,
            reason,
        );
    }

    /// Counts one certificate reload.
    pub fn observe_tls_reload(&self, ok: bool) {
        self.tls_reloads[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// TLS handshakes so far with `outcome`.
    pub fn tls_handshakes(&self, outcome: &str) -> u64 {
        TLS_HANDSHAKE_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .map_or(0, |i| self.tls_handshakes[i].load(Ordering::Relaxed))
    }

    /// Background sweeps of the pack store that succeeded.
    pub fn store_sweeps_ok(&self) -> u64 {
        self.store_sweeps[0].load(Ordering::Relaxed)
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let routes: Vec<_> = {
            let map = self.routes.read().unwrap_or_else(PoisonError::into_inner);
            let mut v: Vec<_> = map
                .iter()
                .flat_map(|(method, by_route)| {
                    by_route
                        .iter()
                        .map(|(route, s)| ((*method, route.clone()), Arc::clone(s)))
                })
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        out.push_str(
            "# HELP npub_http_requests_total HTTP requests answered, by method, route and status.\n\
             # TYPE npub_http_requests_total counter\n",
        );
        for ((method, route), stats) in &routes {
            for (status, slot) in STATUS_CLASSES.iter().zip(&stats.by_status) {
                let n = slot.load(Ordering::Relaxed);
                if n > 0 {
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
        out.push_str(
            "# HELP npub_auth_failures_total Failed authentications, by route kind and answer.\n\
             # TYPE npub_auth_failures_total counter\n",
        );
        for (kind, row) in AUTH_KINDS.iter().zip(&self.auth_failures) {
            for (outcome, n) in AUTH_OUTCOMES.iter().zip(row) {
                let _ = writeln!(
                    out,
                    "npub_auth_failures_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} {}",
                    n.load(Ordering::Relaxed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP npub_upload_bytes_total Bytes of uploads that were stored.\n\
             # TYPE npub_upload_bytes_total counter\n\
             npub_upload_bytes_total {}\n\
             # HELP npub_pack_bytes_served_total Pack bytes sent to clients.\n\
             # TYPE npub_pack_bytes_served_total counter\n\
             npub_pack_bytes_served_total {}\n\
             # HELP npub_device_lane_answers_total Requests the accept loop's device lane answered itself.\n\
             # TYPE npub_device_lane_answers_total counter\n\
             npub_device_lane_answers_total {}\n\
             # HELP npub_device_lane_handoffs_total Connections the device lane gave to the router, by reason.\n\
             # TYPE npub_device_lane_handoffs_total counter",
            self.upload_bytes.load(Ordering::Relaxed),
            self.pack_bytes_served.load(Ordering::Relaxed),
            self.lane_answers.load(Ordering::Relaxed),
        );
        for (reason, n) in HANDOFF_REASONS.iter().zip(&self.lane_handoffs) {
            let _ = writeln!(
                out,
                "npub_device_lane_handoffs_total{{reason=\"{reason}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP npub_connections_shed_total Idle connections closed to make room for a new one, by the cap that was full.\n\
             # TYPE npub_connections_shed_total counter\n\
             npub_connections_shed_total{{reason=\"peer\"}} {}\n\
             npub_connections_shed_total{{reason=\"full\"}} {}\n\
             # HELP npub_connections_refused_total Connections answered 503 for want of room (no idle one to close), by the cap that was full.\n\
             # TYPE npub_connections_refused_total counter\n\
             npub_connections_refused_total{{reason=\"peer\"}} {}\n\
             npub_connections_refused_total{{reason=\"full\"}} {}",
            self.connections_shed[0].load(Ordering::Relaxed),
            self.connections_shed[1].load(Ordering::Relaxed),
            self.connections_refused[0].load(Ordering::Relaxed),
            self.connections_refused[1].load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP npub_store_sweeps_total Background sweeps of the pack store, by outcome.\n\
             # TYPE npub_store_sweeps_total counter\n\
             npub_store_sweeps_total{{outcome=\"ok\"}} {}\n\
             npub_store_sweeps_total{{outcome=\"failed\"}} {}\n\
             # HELP npub_store_orphans_removed_total Packs no version named, removed by the sweeps.\n\
             # TYPE npub_store_orphans_removed_total counter\n\
             npub_store_orphans_removed_total {}",
            self.store_sweeps[0].load(Ordering::Relaxed),
            self.store_sweeps[1].load(Ordering::Relaxed),
            self.orphans_removed.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP npub_tls_handshakes_total TLS handshakes on the listeners, by outcome.\n\
             # TYPE npub_tls_handshakes_total counter"
        );
        for (outcome, n) in TLS_HANDSHAKE_OUTCOMES.iter().zip(&self.tls_handshakes) {
            let n = n.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "npub_tls_handshakes_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP npub_tls_client_cert_rejections_total Device client certificates refused, by reason.\n\
             # TYPE npub_tls_client_cert_rejections_total counter"
        );
        for (reason, n) in CLIENT_CERT_REJECTIONS
            .iter()
            .zip(&self.client_cert_rejections)
        {
            let n = n.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "npub_tls_client_cert_rejections_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP npub_tls_reloads_total Certificate reloads on SIGHUP, by outcome.\n\
             # TYPE npub_tls_reloads_total counter\n\
             npub_tls_reloads_total{{outcome=\"ok\"}} {}\n\
             npub_tls_reloads_total{{outcome=\"failed\"}} {}",
            self.tls_reloads[0].load(Ordering::Relaxed),
            self.tls_reloads[1].load(Ordering::Relaxed),
        );
        out
    }
}

/// Adds one to the counter of `label` among `labels` (a label outside them is dropped).
fn count_label(labels: &[&str], counters: &[AtomicU64], label: &str) {
    if let Some(n) = labels
        .iter()
        .position(|l| *l == label)
        .and_then(|i| counters.get(i))
    {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware that counts every answered request: a route layer, so that the matched route is
/// known, and a layer on the fallback, whose requests match no route and count as [`OTHER`].
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    // A clone of the matched path is a reference count, not a copy of the string.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or(OTHER, MatchedPath::as_str);
    let method = method_label(request.method().as_str());
    let start = Instant::now();
    let response = next.run(request).await;
    metrics.observe_request(
        method,
        route,
        response.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    response
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
            text.contains(r#"npub_http_requests_total{method="GET",route="/a\"b",status="2xx"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"npub_http_requests_total{method="GET",route="/a\"b",status="4xx"} 1"#),
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
        assert!(!text.contains("5xx"), "{text}");
        assert!(
            text.contains(r#"npub_uploads_total{source="npub",outcome="rejected"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn rejects_unknown_methods_and_statuses_as_labels() {
        let m = Metrics::default();
        for i in 0..100 {
            m.observe_request(&format!("X{i}"), "/r", 200 + i, 0.001);
        }
        m.observe_request("get", "/r", 999, 0.001);
        let text = m.render();
        assert_eq!(method_label("DELETE"), "DELETE");
        assert!(!text.contains("X1"), "{text}");
        assert!(
            text.contains(
                r#"npub_http_requests_total{method="other",route="/r",status="2xx"} 100"#
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("npub_http_requests_total{").count(),
            1,
            "{text}"
        );
    }
}
