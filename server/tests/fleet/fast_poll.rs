//! The accept loop answers `GET /api/v1/device/manifest` without the router's layers
//! (`conn.rs`, `device_api::poll`): every answer it gives over a real socket is compared with what
//! the router itself answers to the same request, for each kind of answer.
use std::collections::HashMap;
use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode, header};
use reqwest::Method;
use serde_json::json;
use tempfile::TempDir;
use tower_service::Service as _;

use crate::common::TestServer;
use crate::support::{deploy, fleet, provision};

/// Failures before throttling, kept small so that the burst is quick.
const BURST: u32 = 3;

/// Status, headers (without those hyper adds on the wire) and body.
type Answer = (StatusCode, HeaderMap, Vec<u8>);

fn comparable(mut headers: HeaderMap) -> HeaderMap {
    headers.remove(header::DATE);
    headers.remove(header::CONTENT_LENGTH);
    headers
}

/// The router's answer, with the peer address the accept loop would put in.
async fn by_router(s: &TestServer, method: Method, uri: &str, headers: &HeaderMap) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut request = request.body(Body::empty()).unwrap();
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    let response = npub_server::app(s.state.clone())
        .call(request)
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status, comparable(parts.headers), body.to_vec())
}

/// The answer over the server's socket (the fast path for `GET /api/v1/device/manifest`).
async fn by_socket(s: &TestServer, method: Method, uri: &str, headers: &HeaderMap) -> Answer {
    let r = s
        .http
        .request(method, format!("{}{uri}", s.url))
        .headers(headers.clone())
        .send()
        .await
        .unwrap();
    let status = r.status();
    let headers = comparable(r.headers().clone());
    (status, headers, r.bytes().await.unwrap().to_vec())
}

/// Sends the request both ways, asserts the answers are the same and returns the status; counts
/// the manifest GETs by status class in `tally` (both ways count).
async fn same(
    s: &TestServer,
    tally: &mut HashMap<&'static str, u64>,
    method: Method,
    uri: &str,
    headers: &HeaderMap,
) -> Answer {
    let socket = by_socket(s, method.clone(), uri, headers).await;
    let router = by_router(s, method.clone(), uri, headers).await;
    assert_eq!(
        socket, router,
        "{method} {uri} {headers:?}: socket vs router"
    );
    if method == Method::GET && uri.starts_with("/api/v1/device/manifest") {
        let class = match socket.0.as_u16() {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        *tally.entry(class).or_default() += 2;
    }
    socket
}

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    h
}

#[tokio::test]
async fn survives_every_manifest_answer_the_same_without_the_router() {
    let dir = TempDir::new().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.auth_failure_burst = BURST).await;
    fleet(&s).await;
    let token = provision(&s, "field", &["d-1"]).await.remove(0);
    let seq = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await["sequence"]
        .as_u64()
        .unwrap();
    let mut tally = HashMap::new();
    let t = &mut tally;
    let auth = bearer(&token);
    let manifest = |q: &str| format!("/api/v1/device/manifest{q}");

    let (status, _, body) =
        same(&s, t, Method::GET, &manifest(&format!("?seq={seq}")), &auth).await;
    assert_eq!((status, body.len()), (StatusCode::NO_CONTENT, 0));

    let (status, headers, body) = same(&s, t, Method::GET, &manifest("?seq=0"), &auth).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 280));
    assert!(headers.contains_key("npub-poll-interval"), "{headers:?}");
    assert!(headers.contains_key("npub-keyring-sequence"), "{headers:?}");
    let (status, _, _) = same(&s, t, Method::GET, &manifest(""), &auth).await;
    assert_eq!(status, StatusCode::OK, "seq defaults to 0");

    let mut cached = auth.clone();
    cached.insert(header::IF_NONE_MATCH, headers[header::ETAG].clone());
    let (status, _, _) = same(&s, t, Method::GET, &manifest("?seq=0"), &cached).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);

    for (query, want) in [
        ("?seq=abc", StatusCode::BAD_REQUEST),
        ("?seq=-1", StatusCode::BAD_REQUEST),
        ("?seq=18446744073709551616", StatusCode::BAD_REQUEST),
        ("?seq=9223372036854775808", StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let (status, _, body) = same(&s, t, Method::GET, &manifest(query), &auth).await;
        assert_eq!(status, want, "{query}: {}", String::from_utf8_lossy(&body));
    }

    let (status, _, _) = same(&s, t, Method::POST, &manifest("?seq=0"), &auth).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // Failures: the first is a 401 both ways; then a burst over the socket alone until the
    // peer's allowance is gone, after which both ways answer 429.
    let (status, _, _) = same(&s, t, Method::GET, &manifest("?seq=0"), &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no token");
    let wrong = bearer("npub_dev_0000");
    let mut failures = 2;
    loop {
        let (status, _, _) = by_socket(&s, Method::GET, &manifest("?seq=0"), &wrong).await;
        *t.entry("4xx").or_default() += 1;
        failures += 1;
        if status == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        assert_eq!(status, StatusCode::UNAUTHORIZED, "unknown token");
        assert!(failures <= BURST, "still 401 after {failures} failures");
    }
    assert_eq!(failures, BURST + 1, "throttled once the burst is spent");
    let (status, headers, _) = same(&s, t, Method::GET, &manifest("?seq=0"), &wrong).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(headers.contains_key(header::RETRY_AFTER), "{headers:?}");
    // A valid token is never throttled.
    let (status, _, _) = same(&s, t, Method::GET, &manifest(&format!("?seq={seq}")), &auth).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Both ways counted the same, under the matched route.
    let metrics = s.state.metrics.render();
    for (class, n) in tally {
        let line = format!(
            "npub_http_requests_total{{method=\"GET\",route=\"/api/v1/device/manifest\",status=\"{class}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    s.stop().await;
}
