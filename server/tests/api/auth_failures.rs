//! Failed authentication (issue #11 point 9): counted, logged with the peer address at a bounded
//! rate, and throttled per peer with 429 + `Retry-After`, while a valid token from the same peer
//! is never refused.
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::binary::spawn;
use crate::common::TestServer;

#[tokio::test]
async fn rejects_a_wrong_token_flood_with_429_and_never_a_valid_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(dir.path(), |c| {
        c.auth_failure_burst = 5;
        c.auth_failure_refill = 1;
    })
    .await;
    let mut answers = Vec::new();
    for i in 0..60 {
        let wrong = s
            .req_as(&format!("npub_op_wrong{i}"), Method::GET, "/api/v1/models")
            .send()
            .await
            .unwrap();
        answers.push(wrong.status());
        if wrong.status() == StatusCode::TOO_MANY_REQUESTS {
            let retry: u64 = wrong.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=2).contains(&retry), "Retry-After {retry}");
            let body: Value = wrong.json().await.unwrap();
            assert_eq!(body["error"], "too_many_requests");
        }
        // The valid token, from the same peer, in the middle of the flood.
        let valid = s.req(Method::GET, "/api/v1/models").send().await.unwrap();
        assert_eq!(
            valid.status(),
            200,
            "a valid token was refused after {i} failures"
        );
    }
    let unauthorized = answers.iter().filter(|s| **s == 401).count();
    let throttled = answers.iter().filter(|s| **s == 429).count();
    assert_eq!(unauthorized + throttled, 60, "{answers:?}");
    // The burst, plus what refilled while the loop ran (a second at most on a slow machine).
    assert!((5..=15).contains(&unauthorized), "{answers:?}");
    // Device routes share the peer's allowance.
    let r = s
        .req_as("npub_dev_wrong", Method::GET, "/api/v1/device/manifest")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let text = s
        .http
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        format!(
            r#"npub_auth_failures_total{{kind="operator",outcome="unauthorized"}} {unauthorized}"#
        ),
        format!(r#"npub_auth_failures_total{{kind="operator",outcome="throttled"}} {throttled}"#),
        r#"npub_auth_failures_total{kind="device",outcome="throttled"} 1"#.to_owned(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert_eq!(
        s.req(Method::GET, "/api/v1/tokens")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_wrong_tokens_with_a_log_line_naming_the_peer_at_a_bounded_rate() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = spawn(dir.path(), &["--log", "info"], None).await;
    let http = reqwest::Client::new();
    for i in 0..200 {
        let r = http
            .get(format!("{}/api/v1/models", server.url))
            .bearer_auth(format!("npub_op_wrong{i}"))
            .send()
            .await
            .unwrap();
        assert!(matches!(r.status().as_u16(), 401 | 429), "{}", r.status());
    }
    let first = server
        .wait_for_log(&["authentication failed", "peer=127.0.0.1:"])
        .await;
    assert!(first.contains("operator"), "{first}");
    let rest = server.stop().await;
    // One line per peer per 10 s: 200 failures in well under that are one line, two at most on
    // a machine slow enough to straddle an interval.
    let more = rest
        .iter()
        .filter(|l| l.contains("authentication failed"))
        .count();
    assert!(more <= 1, "{more} more lines:\n{}", rest.join("\n"));
}
