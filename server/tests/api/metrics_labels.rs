//! Metrics label cardinality (issue #11 point 2): made-up methods and paths never become labels.
use reqwest::Method;

use crate::common::TestServer;

#[tokio::test]
async fn rejects_unknown_methods_and_paths_as_metric_labels() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for i in 0..200 {
        let method = Method::from_bytes(format!("X{i}").as_bytes()).unwrap();
        for path in ["/api/v1/models".to_owned(), format!("/nowhere/{i}")] {
            let r = s
                .http
                .request(method.clone(), format!("{}{path}", s.url))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_client_error(), "{path}: {}", r.status());
        }
    }
    let text = s
        .http
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("X1"), "a made-up method became a label");
    assert!(!text.contains("/nowhere"), "a raw path became a label");
    for line in [
        r#"npub_http_requests_total{method="other",route="/api/v1/models",status="4xx"} 200"#,
        r#"npub_http_requests_total{method="other",route="other",status="4xx"} 200"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(
        text.len() < 16 * 1024,
        "{} bytes of metrics after 400 requests",
        text.len()
    );
    s.stop().await;
}
