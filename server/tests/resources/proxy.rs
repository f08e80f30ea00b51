//! Behind a load balancer (issue #31 point 7): with `--trusted-proxy`, the client a trusted
//! proxy names is who authentication failures are throttled against and who per-peer limits
//! count; from anyone else `Forwarded` / `X-Forwarded-For` are ignored.
use std::net::{IpAddr, SocketAddr};

use reqwest::StatusCode;
use tokio::net::TcpSocket;

use crate::common::TestServer;

/// Wrong-token requests to `/api/v1/models` from a client bound to `from`, claiming to forward
/// for `client`: the statuses.
async fn failures(s: &TestServer, from: IpAddr, client: &str, n: usize) -> Vec<StatusCode> {
    let http = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let r = http
            .get(format!("{}/api/v1/models", s.url))
            .bearer_auth(format!("npub_op_wrong{i}"))
            .header("x-forwarded-for", client)
            .send()
            .await
            .unwrap();
        out.push(r.status());
    }
    out
}

#[tokio::test]
async fn survives_a_throttled_client_behind_a_trusted_proxy_without_throttling_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| {
        c.auth_failure_burst = 3;
        c.auth_failure_refill = 1;
        c.trusted_proxies = vec!["127.0.0.2".into()];
    })
    .await;
    let proxy: IpAddr = "127.0.0.2".parse().unwrap();
    // One client behind the proxy spends its allowance...
    let a = failures(&s, proxy, "203.0.113.1", 10).await;
    assert_eq!(a.last(), Some(&StatusCode::TOO_MANY_REQUESTS), "{a:?}");
    // ...another behind the same proxy has its own.
    let b = failures(&s, proxy, "203.0.113.2", 2).await;
    assert_eq!(b, [StatusCode::UNAUTHORIZED; 2]);
    // A client claiming an address left of the proxy's entry is still itself.
    let b = failures(&s, proxy, "203.0.113.2, 203.0.113.1", 1).await;
    assert_eq!(
        b,
        [StatusCode::TOO_MANY_REQUESTS],
        "the rightmost entry is believed"
    );

    // From an address that is not a trusted proxy the header is ignored: every request is that
    // address's own, whatever client it names.
    let stranger: IpAddr = "127.0.0.3".parse().unwrap();
    let mut answers = Vec::new();
    for n in 0..10 {
        answers.extend(failures(&s, stranger, &format!("198.51.100.{n}"), 1).await);
    }
    assert_eq!(
        answers.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{answers:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn survives_a_trusted_proxy_holding_more_connections_than_one_peer_may() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| {
        c.max_connections_per_peer = 4;
        c.trusted_proxies = vec!["127.0.0.2/32".into()];
    })
    .await;
    let to: SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    let connect = |from: [u8; 4]| async move {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind((from, 0).into()).unwrap();
        socket.connect(to).await.unwrap()
    };
    // Twenty connections from the proxy are all kept: none is closed to make room.
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(connect([127, 0, 0, 2]).await);
    }
    for c in &mut held {
        let mut b = [0u8; 1];
        let read = tokio::time::timeout(std::time::Duration::from_millis(50), c.peek(&mut b)).await;
        assert!(
            read.is_err(),
            "a trusted proxy's connection was closed: {read:?}"
        );
    }
    // An ordinary peer is held to four: its first is closed once it opens a fifth.
    let first = connect([127, 0, 0, 3]).await;
    let mut others = Vec::new();
    for _ in 0..4 {
        others.push(connect([127, 0, 0, 3]).await);
    }
    let mut b = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), first.peek(&mut b))
        .await
        .expect("the oldest idle connection of the peer was closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    drop((held, others));
    s.stop().await;
}
