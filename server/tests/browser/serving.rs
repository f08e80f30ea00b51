//! How the UI's files are served (no browser needed): content types, the Content-Security-Policy,
//! revalidation with the ETag, and unknown assets.
use crate::common::TestServer;

#[tokio::test]
async fn serves_the_ui_with_types_a_strict_policy_and_revalidation() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/style.css", "text/css; charset=utf-8"),
        ("/assets/icon.svg", "image/svg+xml"),
    ] {
        let r = s.http.get(format!("{}{path}", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        assert_eq!(h["content-type"], content_type, "{path}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self';"), "{path}: {csp}");
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        let etag = h["etag"].clone();
        let body = r.bytes().await.unwrap();
        assert!(!body.is_empty());
        // A browser that has the file revalidates and gets no body.
        let again = s
            .http
            .get(format!("{}{path}", s.url))
            .header("if-none-match", etag.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.headers()["etag"], etag);
        assert!(again.bytes().await.unwrap().is_empty());
    }
    // The page needs no token; the API behind it does.
    let page = s.http.get(format!("{}/", s.url)).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("/assets/app.js"));
    let r = s
        .http
        .get(format!("{}/assets/nope.js", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"],
        "not_found"
    );
    s.stop().await;
}
