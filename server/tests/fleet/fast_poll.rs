//! The accept loop's device lane (`server/src/device/lane.rs`) answers manifest polls and pack
//! downloads itself and hands every other request to hyper and the router: every answer the
//! server gives over a real socket is compared with what the router itself answers to the same
//! request, for each kind of answer, and each comparison also says which of the two answered
//! (the lane's own counter), so that a lane that quietly stopped answering fails here.
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

/// A client that opens a new connection for every request: a connection handed to the router
/// stays the router's, so reusing one would leave later requests untested by the lane.
fn fresh_connections() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// The answer over the server's socket, on a new connection.
async fn by_socket(s: &TestServer, method: Method, uri: &str, headers: &HeaderMap) -> Answer {
    let r = fresh_connections()
        .request(method, format!("{}{uri}", s.url))
        .headers(headers.clone())
        .send()
        .await
        .unwrap();
    let status = r.status();
    let headers = comparable(r.headers().clone());
    (status, headers, r.bytes().await.unwrap().to_vec())
}

/// Who answered over the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Lane,
    Router,
}

/// Sends the request both ways, asserts the answers are the same and that `by` answered it over
/// the socket, and returns the answer; counts the manifest GETs by status class in `tally` (both
/// ways count).
async fn same(
    s: &TestServer,
    tally: &mut HashMap<&'static str, u64>,
    by: By,
    method: Method,
    uri: &str,
    headers: &HeaderMap,
) -> Answer {
    let before = s.state.metrics.lane_answers();
    let socket = by_socket(s, method.clone(), uri, headers).await;
    let answered = match s.state.metrics.lane_answers() - before {
        0 => By::Router,
        1 => By::Lane,
        n => panic!("{n} lane answers for one request"),
    };
    assert_eq!(answered, by, "{method} {uri} {headers:?}: who answered");
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

    let (status, _, body) = same(
        &s,
        t,
        By::Lane,
        Method::GET,
        &manifest(&format!("?seq={seq}")),
        &auth,
    )
    .await;
    assert_eq!((status, body.len()), (StatusCode::NO_CONTENT, 0));

    let (status, headers, body) =
        same(&s, t, By::Lane, Method::GET, &manifest("?seq=0"), &auth).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 280));
    assert!(headers.contains_key("npub-poll-interval"), "{headers:?}");
    assert!(headers.contains_key("npub-keyring-sequence"), "{headers:?}");
    let (status, _, _) = same(&s, t, By::Lane, Method::GET, &manifest(""), &auth).await;
    assert_eq!(status, StatusCode::OK, "seq defaults to 0");

    let mut cached = auth.clone();
    cached.insert(header::IF_NONE_MATCH, headers[header::ETAG].clone());
    let (status, _, _) = same(&s, t, By::Lane, Method::GET, &manifest("?seq=0"), &cached).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);

    for (query, want) in [
        ("?seq=abc", StatusCode::BAD_REQUEST),
        ("?seq=-1", StatusCode::BAD_REQUEST),
        ("?seq=18446744073709551616", StatusCode::BAD_REQUEST),
        ("?seq=9223372036854775808", StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let (status, _, body) = same(&s, t, By::Router, Method::GET, &manifest(query), &auth).await;
        assert_eq!(status, want, "{query}: {}", String::from_utf8_lossy(&body));
    }

    let (status, _, _) = same(&s, t, By::Router, Method::POST, &manifest("?seq=0"), &auth).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // Failures: the first is a 401 both ways; then a burst over the socket alone until the
    // peer's allowance is gone, after which both ways answer 429.
    let (status, _, _) = same(
        &s,
        t,
        By::Router,
        Method::GET,
        &manifest("?seq=0"),
        &HeaderMap::new(),
    )
    .await;
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
    let (status, headers, _) =
        same(&s, t, By::Router, Method::GET, &manifest("?seq=0"), &wrong).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(headers.contains_key(header::RETRY_AFTER), "{headers:?}");
    // A valid token is never throttled.
    let (status, _, _) = same(
        &s,
        t,
        By::Lane,
        Method::GET,
        &manifest(&format!("?seq={seq}")),
        &auth,
    )
    .await;
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

fn with(mut headers: HeaderMap, name: header::HeaderName, value: &str) -> HeaderMap {
    headers.append(name, value.parse().unwrap());
    headers
}

#[tokio::test]
async fn survives_every_pack_answer_the_same_without_the_router() {
    let dir = TempDir::new().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let token = provision(&s, "field", &["d-1"]).await.remove(0);
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await;
    let sha = d["sha256"].as_str().unwrap().to_owned();
    let mut tally = HashMap::new();
    let t = &mut tally;
    let auth = bearer(&token);
    let path = format!("/api/v1/device/packs/{sha}");
    let served = |s: &TestServer| {
        let m = s.state.metrics.render();
        m.lines()
            .find_map(|l| l.strip_prefix("npub_pack_bytes_served_total "))
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };

    // The whole pack, by sendfile, is the stored pack.
    let before = served(&s);
    let (status, headers, whole) = same(&s, t, By::Lane, Method::GET, &path, &auth).await;
    assert_eq!(status, StatusCode::OK);
    let len = whole.len() as u64;
    assert_eq!(served(&s) - before, 2 * len, "counted both ways");
    assert_eq!(headers[header::ETAG], format!("\"{sha}\"").as_str());
    let stored = s
        .state
        .store
        .open(sha.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.len, len);

    // One range, in each form a client sends.
    for (spec, start, end) in [
        ("bytes=0-9", 0, 9),
        ("bytes=100-", 100, len - 1),
        ("bytes=-10", len - 10, len - 1),
        ("bytes=5-99999999", 5, len - 1),
        ("BYTES=1-1", 1, 1),
    ] {
        let (status, headers, body) = same(
            &s,
            t,
            By::Lane,
            Method::GET,
            &path,
            &with(auth.clone(), header::RANGE, spec),
        )
        .await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT, "{spec}");
        assert_eq!(body, whole[start as usize..=end as usize], "{spec}");
        assert_eq!(
            headers[header::CONTENT_RANGE],
            format!("bytes {start}-{end}/{len}").as_str()
        );
    }
    // Ranges the parser ignores are the whole pack, both ways.
    for spec in ["items=0-9", "bytes=9-1", "bytes=0-1,5-6", "bytes=x"] {
        let (status, _, body) = same(
            &s,
            t,
            By::Lane,
            Method::GET,
            &path,
            &with(auth.clone(), header::RANGE, spec),
        )
        .await;
        assert_eq!((status, body.len() as u64), (StatusCode::OK, len), "{spec}");
    }

    // What the lane leaves to the router: past the end (416), conditionals, another pack, no
    // or a wrong token, the IO route, two ranges.
    let etag = format!("\"{sha}\"");
    for (headers, uri, want) in [
        (
            with(auth.clone(), header::RANGE, &format!("bytes={len}-")),
            path.clone(),
            StatusCode::RANGE_NOT_SATISFIABLE,
        ),
        (
            with(auth.clone(), header::IF_NONE_MATCH, &etag),
            path.clone(),
            StatusCode::NOT_MODIFIED,
        ),
        (
            with(
                with(auth.clone(), header::RANGE, "bytes=0-9"),
                header::IF_RANGE,
                "\"other\"",
            ),
            path.clone(),
            StatusCode::OK,
        ),
        (
            with(
                with(auth.clone(), header::RANGE, "bytes=0-9"),
                header::RANGE,
                "bytes=10-19",
            ),
            path.clone(),
            StatusCode::PARTIAL_CONTENT,
        ),
        (
            auth.clone(),
            format!("/api/v1/device/packs/{}", "0".repeat(64)),
            StatusCode::NOT_FOUND,
        ),
        (auth.clone(), format!("{path}/io"), StatusCode::NOT_FOUND),
        (HeaderMap::new(), path.clone(), StatusCode::UNAUTHORIZED),
        (
            auth.clone(),
            format!("/api/v1/device/packs/{}", sha.to_uppercase()),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (status, _, body) = same(&s, t, By::Router, Method::GET, &uri, &headers).await;
        assert_eq!(
            status,
            want,
            "{uri} {headers:?}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    s.stop().await;
}

/// Writes `requests` on one connection at once and reads until `answers` responses are complete
/// (each a head, then `content-length` bytes); returns them as text.
async fn pipelined(s: &TestServer, requests: &str, answers: usize) -> Vec<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = s.url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket.write_all(requests.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < answers {
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed after {} answers: {out:?}", out.len());
        got.extend_from_slice(&chunk[..n]);
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(got[..end + 4].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() < end + 4 + len {
                break;
            }
            out.push(head);
            got.drain(..end + 4 + len);
        }
    }
    out
}

/// Group `field` with device `d-1` in it and a deployment to the group: the device's token and
/// the deployment's sequence.
async fn one_device_deployed(s: &TestServer) -> (String, u64) {
    fleet(s).await;
    let token = provision(s, "field", &["d-1"]).await.remove(0);
    let seq = deploy(
        s,
        json!({"model": "kws", "version": "1.0.0", "group": "field"}),
    )
    .await["sequence"]
        .as_u64()
        .unwrap();
    (token, seq)
}

#[tokio::test]
async fn survives_pipelined_requests_and_a_handoff_in_the_middle() {
    let dir = TempDir::new().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (token, seq) = one_device_deployed(&s).await;
    let poll = |q: u64| {
        format!(
            "GET /api/v1/device/manifest?seq={q} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
    };
    let before = s.state.metrics.lane_answers();
    // Three polls in one write: each answered in order by the lane.
    let answers = pipelined(&s, &format!("{}{}{}", poll(seq), poll(0), poll(seq)), 3).await;
    let statuses: Vec<_> = answers.iter().map(|h| &h[..12]).collect();
    assert_eq!(statuses, ["HTTP/1.1 204", "HTTP/1.1 200", "HTTP/1.1 204"]);
    assert_eq!(s.state.metrics.lane_answers() - before, 3);

    // A poll, a request the router answers (the lane hands the connection over with the bytes
    // it read, this request's and the one pipelined after it), then a poll the router answers.
    let whoami =
        format!("GET /api/v1/device HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    let before = s.state.metrics.lane_answers();
    let handoffs = |s: &TestServer| {
        let m = s.state.metrics.render();
        m.lines()
            .find_map(|l| l.strip_prefix("npub_device_lane_handoffs_total{reason=\"route\"} "))
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let handoffs_before = handoffs(&s);
    let answers = pipelined(&s, &format!("{}{whoami}{}", poll(seq), poll(0)), 3).await;
    let statuses: Vec<_> = answers.iter().map(|h| &h[..12]).collect();
    assert_eq!(statuses, ["HTTP/1.1 204", "HTTP/1.1 200", "HTTP/1.1 200"]);
    assert!(answers[1].contains("application/json"), "{}", answers[1]);
    assert_eq!(s.state.metrics.lane_answers() - before, 1);
    assert_eq!(handoffs(&s) - handoffs_before, 1, "one hand-off, by reason");

    // `Connection: close` is answered, said back, and the connection closed.
    let close = poll(seq).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let answers = pipelined(&s, &close, 1).await;
    assert!(
        answers[0].contains("connection: close\r\n"),
        "{}",
        answers[0]
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_head_that_never_ends_by_closing_at_the_header_timeout() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = TempDir::new().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.header_timeout = 1).await;
    let addr = s.url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"GET /api/v1/device/manifest HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // No answer, and the server closes: read returns end-of-stream (within the test's timeout).
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(std::time::Duration::from_secs(20), socket.read(&mut buf))
        .await
        .expect("the server closed the connection")
        .unwrap_or(0);
    assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&buf[..n]));
    s.stop().await;
}

#[tokio::test]
async fn survives_heads_longer_than_the_first_buffer_and_many_pipelined() {
    let dir = TempDir::new().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (token, seq) = one_device_deployed(&s).await;
    let poll = |pad: usize| {
        format!(
            "GET /api/v1/device/manifest?seq={seq} HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
            "p".repeat(pad)
        )
    };
    // One head of 3 KiB (the buffer starts at 1 KiB and grows), then twenty pipelined polls
    // (3 KiB in all, read in several pieces): every one answered by the lane.
    let before = s.state.metrics.lane_answers();
    let answers = pipelined(&s, &poll(3000), 1).await;
    assert!(answers[0].starts_with("HTTP/1.1 204"), "{}", answers[0]);
    let many: String = (0..20).map(|_| poll(40)).collect();
    assert!(many.len() > 3000);
    let answers = pipelined(&s, &many, 20).await;
    assert!(answers.iter().all(|a| a.starts_with("HTTP/1.1 204")));
    assert_eq!(s.state.metrics.lane_answers() - before, 21);
    // A head longer than the lane reads is hyper's, which refuses it as too large or answers
    // it; either way the lane does not.
    let before = s.state.metrics.lane_answers();
    let _ = pipelined(&s, &poll(5000), 1).await;
    assert_eq!(s.state.metrics.lane_answers() - before, 0);
    s.stop().await;
}

/// A poll of device `d-1` (group `field`, nothing deployed: answered 204), as one request head.
async fn undeployed_poll(s: &TestServer) -> String {
    fleet(s).await;
    let token = provision(s, "field", &["d-1"]).await.remove(0);
    format!(
        "GET /api/v1/device/manifest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
}

#[tokio::test]
async fn survives_keep_alive_past_the_first_header_deadline_then_closes_when_idle() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = TempDir::new().unwrap();
    let s = TestServer::start_with(dir.path(), |c| c.header_timeout = 1).await;
    let poll = undeployed_poll(&s).await;
    let addr = s.url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 1024];
    // A poll every 0.4 s for 2 s: the connection outlives the deadline its first timer was set
    // to, because each answer moved it.
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(2) {
        socket.write_all(poll.as_bytes()).await.unwrap();
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed while polling, after {:?}", start.elapsed());
        assert!(buf.starts_with(b"HTTP/1.1 204"));
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }
    // Then idle: closed about a second after the last answer.
    let idle = std::time::Instant::now();
    let n = tokio::time::timeout(std::time::Duration::from_secs(20), socket.read(&mut buf))
        .await
        .expect("the server closed the idle connection")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(idle.elapsed() < std::time::Duration::from_secs(10));
    s.stop().await;
}

#[tokio::test]
async fn survives_a_stop_with_idle_keep_alive_connections_by_closing_them() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = TempDir::new().unwrap();
    // The header timeout (also the keep-alive limit) far longer than the test may wait.
    let s = TestServer::start_with(dir.path(), |c| c.header_timeout = 300).await;
    let poll = undeployed_poll(&s).await;
    let addr = s.url.trim_start_matches("http://").to_owned();
    let mut sockets = Vec::new();
    for _ in 0..3 {
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        socket.write_all(poll.as_bytes()).await.unwrap();
        let mut buf = [0u8; 1024];
        assert!(socket.read(&mut buf).await.unwrap() > 0);
        sockets.push(socket);
    }
    // Each connection now waits in the lane for its next request; the stop must end them.
    tokio::time::timeout(std::time::Duration::from_secs(20), s.stop())
        .await
        .expect("the stop closed the idle lane connections");
    for mut socket in sockets {
        let mut buf = [0u8; 64];
        assert_eq!(socket.read(&mut buf).await.unwrap_or(0), 0);
    }
}
