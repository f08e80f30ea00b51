//! Two real `npub-server` processes on one PostgreSQL and one S3 bucket (`s3s-fs`), as an
//! operator runs replicas behind a load balancer: deployments made through both at once get
//! unique manifest sequences in commit order, the first start creates one admin token, one root
//! key and one signing key between them, a key rotated through one is the key the other signs
//! with, and one version uploaded through both at once is stored once (one 201, one 409).
//!
//! Skipped with a message outside CI when PostgreSQL or s3s-fs is not installed (`.ci/run`
//! installs both); runs whatever `NPUB_TEST_BACKEND` says, since it needs PostgreSQL anyway.
#[path = "s3/bucket.rs"]
mod bucket;
#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use reqwest::Method;
use serde_json::{Value, json};

use bucket::{BUCKET, S3Server};
use common::{conv1_npub, postgres};

/// The key-encryption key both replicas are given.
const KEK: &str = "5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e";
/// Concurrent clients per replica, and deployments each creates.
const CLIENTS: usize = 4;
const PER_CLIENT: usize = 12;

/// One `npub-server` process.
struct Replica {
    child: Child,
    url: String,
    banner: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a replica over its own data dir `dir` (staging only: the database and the bucket are
/// shared), without reading its banner yet.
fn spawn(dir: &Path, db: &str, s3: &S3Server) -> Child {
    Command::new(env!("CARGO_BIN_EXE_npub-server"))
        .args(["--listen", "127.0.0.1:0", "--log", "warn"])
        .arg("--data-dir")
        .arg(dir)
        .env_remove("NPUB_ADMIN_TOKEN")
        .env("NPUB_DATABASE_URL", db)
        .env("NPUB_PACK_STORE", format!("s3://{BUCKET}/replicas"))
        .env("NPUB_KEY_ENCRYPTION_KEY", KEK)
        .envs(s3.settings())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("npub-server starts")
}

/// Reads the banner up to its last line (`API:`), then keeps draining stdout.
fn banner(mut child: Child) -> Replica {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut banner = String::new();
    let mut url = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(u) = line.strip_prefix("npub-server listening on ") {
            url = Some(u.trim().to_owned());
        }
        banner.push_str(&line);
        banner.push('\n');
        if line.trim_start().starts_with("API:") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let url = url.unwrap_or_else(|| panic!("no listening line in {banner:?}"));
    Replica { child, url, banner }
}

/// Two replicas started at the same moment on a fresh database `name`; returns them with the
/// admin token exactly one of them printed.
async fn pair(tmp: &Path, s3: &S3Server, name: &str) -> (Replica, Replica, String) {
    let db = postgres::fresh_database(name, true).await;
    let a = spawn(&tmp.join("a"), &db, s3);
    let b = spawn(&tmp.join("b"), &db, s3);
    let (a, b) = (banner(a), banner(b));
    let printed: Vec<&str> = [&a.banner, &b.banner]
        .into_iter()
        .filter_map(|b| b.split_once("admin token:  ").map(|(_, t)| t))
        .map(|t| t.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        printed.len(),
        1,
        "exactly one replica creates and prints the first admin token:\n{}\n{}",
        a.banner,
        b.banner
    );
    let token = printed[0].to_owned();
    (a, b, token)
}

async fn call(http: &reqwest::Client, token: &str, method: Method, url: String) -> Value {
    call_with(http, token, method, url, None).await
}

async fn call_with(
    http: &reqwest::Client,
    token: &str,
    method: Method,
    url: String,
    body: Option<Value>,
) -> Value {
    let mut req = http.request(method.clone(), &url).bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{method} {url}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The model `m` version `1`, uploaded through `a`, and devices `d1`, `d2` in group `g`.
async fn fleet(http: &reqwest::Client, token: &str, a: &Replica) {
    let url = &a.url;
    call_with(
        http,
        token,
        Method::POST,
        format!("{url}/api/v1/models"),
        Some(json!({"name": "m"})),
    )
    .await;
    let r = http
        .post(format!("{url}/api/v1/models/m/versions/1"))
        .bearer_auth(token)
        .body(conv1_npub())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    call_with(
        http,
        token,
        Method::POST,
        format!("{url}/api/v1/devices"),
        Some(json!({"devices": [
            {"id": "d1", "accelerator": "ethos-u55-256", "group": "g"},
            {"id": "d2", "accelerator": "ethos-u55-256", "group": "g"},
        ]})),
    )
    .await;
}

async fn deploy(http: &reqwest::Client, token: &str, replica: &str) -> i64 {
    let d = call_with(
        http,
        token,
        Method::POST,
        format!("{replica}/api/v1/deployments"),
        Some(json!({"model": "m", "version": "1", "group": "g"})),
    )
    .await;
    d["sequence"].as_i64().unwrap()
}

fn prerequisites(tmp: &Path) -> Option<S3Server> {
    if !postgres::available() {
        return None;
    }
    S3Server::start(&tmp.join("s3"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn survives_two_replicas_creating_deployments_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = prerequisites(tmp.path()) else {
        return;
    };
    let (a, b, token) = pair(tmp.path(), &s3, "npub_replicas_hammer").await;
    let http = reqwest::Client::new();
    fleet(&http, &token, &a).await;

    // Every client alternates between the replicas, starting on its own one, and waits for
    // each answer before the next request: its deployments are ordered in real time, so their
    // sequences must rise (a sequence issued out of commit order would show up here).
    let mut clients = Vec::new();
    for c in 0..2 * CLIENTS {
        let (http, token) = (http.clone(), token.clone());
        let urls = [a.url.clone(), b.url.clone()];
        clients.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..PER_CLIENT {
                got.push(deploy(&http, &token, &urls[(c + i) % 2]).await);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for (c, client) in clients.into_iter().enumerate() {
        let got = client.await.unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "client {c} saw sequences out of order: {got:?}"
        );
        all.extend(got);
    }
    all.sort_unstable();
    let total = (2 * CLIENTS * PER_CLIENT) as i64;
    assert_eq!(
        all,
        (1..=total).collect::<Vec<_>>(),
        "each sequence issued once, none skipped"
    );

    // Both replicas list every deployment once (strictly falling sequence), and the stored
    // order (ids, assigned inside the same serialised transactions) agrees with the sequences.
    for r in [&a, &b] {
        let list = call(
            &http,
            &token,
            Method::GET,
            format!("{}/api/v1/deployments", r.url),
        )
        .await;
        let seqs: Vec<i64> = list
            .as_array()
            .or_else(|| list["deployments"].as_array())
            .unwrap_or_else(|| panic!("deployments list: {list}"))
            .iter()
            .map(|d| d["sequence"].as_i64().unwrap())
            .collect();
        assert_eq!(
            seqs.len() as i64,
            total,
            "{}: every deployment listed",
            r.url
        );
        assert!(
            seqs.windows(2).all(|w| w[0] > w[1]),
            "{}: the list is not strictly ordered: {seqs:?}",
            r.url
        );
    }
    let url = postgres::cluster().url("npub_replicas_hammer");
    let db = npub_server::db::open(&npub_server::db::Location::Postgres(&url))
        .await
        .unwrap();
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT id, sequence FROM deployments ORDER BY id")
        .fetch_all(&db)
        .await
        .unwrap();
    assert_eq!(rows.len() as i64, total);
    assert!(rows.windows(2).all(|w| w[0].1 < w[1].1), "{rows:?}");
    for (table, one) in [("tokens", 1), ("root_keys", 1), ("signing_keys", 1)] {
        let (n,): (i64,) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(&db)
                .await
                .unwrap();
        assert_eq!(
            n, one,
            "{table}: two replicas starting at once made {n} rows"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_key_rotation_through_the_other_replica() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = prerequisites(tmp.path()) else {
        return;
    };
    let (a, b, token) = pair(tmp.path(), &s3, "npub_replicas_rotate").await;
    let http = reqwest::Client::new();
    fleet(&http, &token, &a).await;
    let keys = |r: &Replica| call(&http, &token, Method::GET, format!("{}/api/v1/keys", r.url));
    let before = keys(&b).await["active"]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        keys(&a).await["active"]["key_id"],
        before.as_str(),
        "one signing key"
    );
    assert_eq!(
        keys(&a).await["root"],
        keys(&b).await["root"],
        "one root key"
    );

    let rotated = call_with(
        &http,
        &token,
        Method::POST,
        format!("{}/api/v1/keys/rotate", a.url),
        Some(json!({"revoke_previous": true})),
    )
    .await;
    let new = rotated["key"]["key_id"].as_str().unwrap().to_owned();
    assert_ne!(new, before);
    assert_eq!(keys(&b).await["active"]["key_id"], new.as_str());

    let sequence = deploy(&http, &token, &b.url).await;
    let url = postgres::cluster().url("npub_replicas_rotate");
    let db = npub_server::db::open(&npub_server::db::Location::Postgres(&url))
        .await
        .unwrap();
    let signed: Vec<(String,)> = sqlx::query_as(
        "SELECT m.key_id FROM deployment_manifests m JOIN deployments d ON d.id = m.deployment_id \
         WHERE d.sequence = $1",
    )
    .bind(sequence)
    .fetch_all(&db)
    .await
    .unwrap();
    assert!(!signed.is_empty());
    assert!(
        signed.iter().all(|(k,)| *k == new),
        "replica B signed with {signed:?} after A rotated to {new} and revoked {before}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_the_same_version_uploaded_through_both_replicas_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = prerequisites(tmp.path()) else {
        return;
    };
    let (a, b, token) = pair(tmp.path(), &s3, "npub_replicas_upload").await;
    let http = reqwest::Client::new();
    call_with(
        &http,
        &token,
        Method::POST,
        format!("{}/api/v1/models", a.url),
        Some(json!({"name": "m"})),
    )
    .await;
    // Several rounds, each version raced through both replicas: one 201 and one 409 every time,
    // never two rows, and the bucket holds the pack once.
    for round in 0..6 {
        let upload = |url: String| {
            let (http, token) = (http.clone(), token.clone());
            async move {
                http.post(format!("{url}/api/v1/models/m/versions/{round}"))
                    .bearer_auth(&token)
                    .body(conv1_npub())
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        let (x, y) = tokio::join!(upload(a.url.clone()), upload(b.url.clone()));
        let mut got = [x, y];
        got.sort_unstable();
        assert_eq!(got, [201, 409], "round {round}");
    }
    let versions = call(
        &http,
        &token,
        Method::GET,
        format!("{}/api/v1/models/m/versions", b.url),
    )
    .await;
    let listed = versions["items"]
        .as_array()
        .unwrap_or_else(|| panic!("versions list: {versions}"))
        .len();
    assert_eq!(listed, 6);
    assert_eq!(
        s3.objects("replicas").len(),
        1,
        "{:?}",
        s3.objects("replicas")
    );
}
