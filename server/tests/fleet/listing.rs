//! Paged, filtered listings (issue 36 item 1): devices, a deployment's devices, the audit log and
//! a model's versions page by cursor, filter on the server, and every filter's statement uses an
//! index on the backend the tests run on (SQLite, or PostgreSQL with `NPUB_TEST_BACKEND`).
use std::collections::BTreeSet;

use npub_server::db::{Backend, Bind};
use npub_server::fleet::listing::{DeviceFilter, DeviceFilterInput};
use npub_server::ops::audit_log::{AuditQuery, audit_sql};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::support::{Sim, deploy, fleet};

async fn get(s: &TestServer, path: &str) -> (u16, Value) {
    let r = s.req(Method::GET, path).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Every id of a listing, page by page; asserts each page's size and that no id repeats.
async fn walk(s: &TestServer, path: &str, limit: usize, key: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let url = match &cursor {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
        };
        let (status, page) = get(s, &url).await;
        assert_eq!(status, 200, "{url}: {page}");
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= limit, "{page}");
        seen.extend(
            items
                .iter()
                .map(|d| d[key].to_string().trim_matches('"').to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(
                    items.len(),
                    limit,
                    "only a full page has a next one: {page}"
                );
                cursor = Some(c.to_owned());
            }
            None => break,
        }
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no item twice: {seen:?}");
    seen
}

async fn provision(s: &TestServer, devices: Vec<Value>) -> Vec<String> {
    let r = s
        .req(Method::POST, "/api/v1/devices")
        .json(&json!({ "devices": devices }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Vec<Value> = r.json().await.unwrap();
    v.iter()
        .map(|d| d["token"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn devices_page_by_cursor_and_filter_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    // 25 devices: lab-00..lab-14 (u55-256), edge-00..edge-09 (u55-128, in group edge).
    let mut devices: Vec<Value> = (0..15)
        .map(|i| json!({"id": format!("lab-{i:02}"), "name": format!("Bench {i}"), "accelerator": "ethos-u55-256", "group": "lab"}))
        .collect();
    devices.extend((0..10).map(
        |i| json!({"id": format!("edge-{i:02}"), "accelerator": "ethos-u55-128", "group": "edge"}),
    ));
    let tokens = provision(&s, devices).await;

    // Pages of 10, 10 and 5, in id order, every device once.
    let all = walk(&s, "/api/v1/devices", 10, "id").await;
    assert_eq!(all.len(), 25);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    // A device added between pages comes in its place in the order, nothing repeats.
    let (_, first) = get(&s, "/api/v1/devices?limit=3").await;
    assert_eq!(first["items"][2]["id"], "edge-02");
    provision(
        &s,
        vec![json!({"id": "edge-02a", "group": "edge", "accelerator": "ethos-u55-128"})],
    )
    .await;
    let next = first["next_cursor"].as_str().unwrap();
    let (_, second) = get(&s, &format!("/api/v1/devices?limit=3&cursor={next}")).await;
    assert_eq!(second["items"][0]["id"], "edge-02a", "{second}");

    assert_eq!(
        walk(&s, "/api/v1/devices?group=edge", 4, "id").await.len(),
        11
    );
    let u128 = walk(&s, "/api/v1/devices?accelerator=ethos-u55-128", 100, "id").await;
    assert_eq!(u128.len(), 11);
    // Text on id or name, in any case; `_` and `%` are literal.
    assert_eq!(
        walk(&s, "/api/v1/devices?q=BENCH%201", 100, "id").await,
        ["lab-01", "lab-10", "lab-11", "lab-12", "lab-13", "lab-14"]
    );
    assert!(
        walk(&s, "/api/v1/devices?q=lab_0", 100, "id")
            .await
            .is_empty()
    );
    assert_eq!(walk(&s, "/api/v1/devices?q=b-0", 100, "id").await.len(), 10);

    // One device installs 1.0.0: the version filters find it, and it is no longer `new`.
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "device": "lab-03"}),
    )
    .await;
    assert!(d["id"].is_i64());
    let mut sim = Sim::new(&s, &tokens[3]).await;
    sim.install().await;
    for q in [
        "version=1.0.0",
        "model=kws&version=1.0.0",
        "model=kws",
        "status=installed",
    ] {
        assert_eq!(
            walk(&s, &format!("/api/v1/devices?{q}"), 10, "id").await,
            ["lab-03"],
            "{q}"
        );
    }
    for q in ["version=2.0.0", "model=nope", "model=kws&version=9"] {
        assert!(
            walk(&s, &format!("/api/v1/devices?{q}"), 10, "id")
                .await
                .is_empty(),
            "{q}"
        );
    }
    assert_eq!(
        walk(&s, "/api/v1/devices?status=new", 10, "id").await.len(),
        25
    );
    assert_eq!(
        walk(
            &s,
            "/api/v1/devices?status=new&group=lab&accelerator=ethos-u55-256",
            10,
            "id"
        )
        .await
        .len(),
        14
    );
    // Nobody has been away a day; all but the device that polled were never seen, counted
    // from provisioning, which was under a minute ago.
    assert!(
        walk(&s, "/api/v1/devices?not_seen_minutes=1440", 10, "id")
            .await
            .is_empty()
    );
    s.state.polling.flush_last_seen(&s.state.db).await.unwrap();
    let away = walk(&s, "/api/v1/devices?not_seen_minutes=0", 10, "id").await;
    assert_eq!(
        away.len(),
        26,
        "every device was last seen before now: {away:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn rejects_a_bad_cursor_limit_or_filter_naming_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    for (path, words) in [
        (
            "/api/v1/devices?cursor=zz",
            "cursor: \"zz\" is not a cursor this listing gave",
        ),
        ("/api/v1/devices?limit=0", "limit: 0 is not from 1 to 1000"),
        (
            "/api/v1/devices?limit=1001",
            "limit: 1001 is not from 1 to 1000",
        ),
        (
            "/api/v1/devices?status=happy",
            "status: \"happy\" is not a device status",
        ),
        (
            "/api/v1/devices?accelerator=u55",
            "accelerator: \"u55\" is not an NPU configuration",
        ),
        (
            "/api/v1/audit?since=yesterday",
            "since: \"yesterday\" is not an RFC 3339 instant",
        ),
        (
            "/api/v1/audit?cursor=6162",
            "cursor: \"6162\" is not a cursor this listing gave",
        ),
        (
            "/api/v1/models/kws/versions?cursor=6162",
            "is not a cursor this listing gave",
        ),
    ] {
        let (status, body) = get(&s, path).await;
        assert_eq!(status, 422, "{path}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(words), "{path}: {detail}");
    }
    s.stop().await;
}

#[tokio::test]
async fn the_audit_log_and_versions_page_and_filter_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    for i in 0..7 {
        provision(
            &s,
            vec![json!({"id": format!("d-{i}"), "accelerator": "ethos-u55-256"})],
        )
        .await;
    }
    let creates = walk(&s, "/api/v1/audit?action=device.create", 3, "id").await;
    assert_eq!(creates.len(), 7);
    let ids: Vec<i64> = creates.iter().map(|i| i.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    // A prefix ending in '.' is every action under it.
    let (_, versions) = get(&s, "/api/v1/audit?action=version.").await;
    assert_eq!(versions["items"].as_array().unwrap().len(), 2, "{versions}");
    let (_, one) = get(&s, "/api/v1/audit?object=devices/d-3").await;
    assert_eq!(one["items"].as_array().unwrap().len(), 1, "{one}");
    let (_, mine) = get(&s, "/api/v1/audit?actor=nobody").await;
    assert!(mine["items"].as_array().unwrap().is_empty());
    let (_, future) = get(&s, "/api/v1/audit?since=2999-01-01T00:00:00Z").await;
    assert!(future["items"].as_array().unwrap().is_empty());
    let (_, past) = get(&s, "/api/v1/audit?until=2000-01-01T00:00:00Z").await;
    assert!(past["items"].as_array().unwrap().is_empty());
    let (_, now) = get(
        &s,
        "/api/v1/audit?since=2000-01-01T00:00:00%2B01:00&action=model.create",
    )
    .await;
    assert_eq!(now["items"].as_array().unwrap().len(), 1, "{now}");
    // Versions, oldest first.
    assert_eq!(
        walk(&s, "/api/v1/models/kws/versions", 1, "version").await,
        ["1.0.0", "2.0.0"]
    );
    s.stop().await;
}

#[tokio::test]
async fn a_deployments_devices_page_in_rollout_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let devices: Vec<Value> = (0..12)
        .map(|i| json!({"id": format!("t-{i:02}"), "accelerator": "ethos-u55-256", "group": "lab"}))
        .collect();
    provision(&s, devices).await;
    let d = deploy(
        &s,
        json!({"model": "kws", "version": "1.0.0", "group": "lab", "rollout": {"batches": [25, 100]}}),
    )
    .await;
    let id = d["id"].as_i64().unwrap();
    let (_, whole) = get(&s, &format!("/api/v1/deployments/{id}/devices?limit=1000")).await;
    let whole: Vec<String> = whole["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device_id"].as_str().unwrap().to_owned())
        .collect();
    let paged = walk(
        &s,
        &format!("/api/v1/deployments/{id}/devices"),
        5,
        "device_id",
    )
    .await;
    assert_eq!(paged, whole, "pages follow the rollout's order");
    let skipped = walk(
        &s,
        &format!("/api/v1/deployments/{id}/devices?state=skipped"),
        4,
        "device_id",
    )
    .await;
    assert_eq!(skipped.len(), 9, "batch 2 is not open yet: {skipped:?}");
    s.stop().await;
}

/// A statement and its binds.
type Statement = (String, Vec<Bind>);

/// What the backend's planner says it would do for `sql`, one line per step.
pub(crate) async fn plan(s: &TestServer, sql: &str, binds: Vec<Bind>) -> Vec<String> {
    let mut conn = s.state.db.acquire().await.unwrap();
    match Backend::of(&s.state.db) {
        Backend::Sqlite => {
            let rows: Vec<(i64, i64, i64, String)> =
                npub_server::db::bind::query_as(format!("EXPLAIN QUERY PLAN {sql}"), binds)
                    .fetch_all(&mut *conn)
                    .await
                    .unwrap();
            rows.into_iter().map(|r| r.3).collect()
        }
        Backend::Postgres => {
            // With sequential scans, bitmap scans (which lose the index's order) and sorts priced
            // out, the plan shows whether an index can serve the statement, and in its order: on
            // a table this small the planner would otherwise choose by its estimates.
            for set in [
                "SET enable_seqscan = off",
                "SET enable_bitmapscan = off",
                "SET enable_sort = off",
            ] {
                sqlx::query(set).execute(&mut *conn).await.unwrap();
            }
            let rows: Vec<(String,)> =
                npub_server::db::bind::query_as(format!("EXPLAIN {sql}"), binds)
                    .fetch_all(&mut *conn)
                    .await
                    .unwrap();
            sqlx::query("RESET ALL").execute(&mut *conn).await.unwrap();
            rows.into_iter().map(|r| r.0).collect()
        }
    }
}

/// Asserts that `table` (as `alias`) is read through an index (`index` when given) and, unless
/// `sorts`, that no sort by id follows: a keyset page stops at its end.
pub(crate) fn assert_indexed(
    what: &str,
    plan: &[String],
    (table, alias): (&str, &str),
    index: Option<&str>,
    sorts: bool,
) {
    let text = plan.join("\n");
    // SQLite's bare `SCAN audit` reads the audit table in its rowid order, which is `id`'s (an
    // INTEGER PRIMARY KEY is the rowid): the primary key's scan, stopping at the page's end. A
    // bare `SCAN d` reads devices in rowid order, which is not `id`'s: a full scan.
    let rowid_is_key = table == "audit";
    let full_scan = plan.iter().any(|l| {
        let l = l.trim();
        (!rowid_is_key && (l == format!("SCAN {alias}") || l == format!("SCAN {table}")))
            || l.contains(&format!("Seq Scan on {table}"))
    });
    assert!(!full_scan, "{what}: a full scan of {table}:\n{text}");
    // Which index: SQLite, without statistics, always takes the filter's own; PostgreSQL picks by
    // its estimates (on a near-empty table, often the primary key's scan with the filter applied,
    // which is also an index read in page order).
    let postgres = plan.iter().any(|l| l.contains("cost="));
    if postgres {
        // The table itself is read through an index (any: a join's index scan does not count).
        let through_index = plan.iter().any(|l| {
            (l.contains("Index Scan") || l.contains("Index Only Scan"))
                && (l.contains(&format!(" on {table} "))
                    || l.trim_end().ends_with(&format!(" on {table}")))
        });
        assert!(
            through_index,
            "{what}: {table} is not read through an index:\n{text}"
        );
    } else if let Some(index) = index {
        assert!(text.contains(index), "{what}: {index} is not used:\n{text}");
    }
    if !sorts {
        let sorted = plan.iter().any(|l| {
            let l = l.trim_end();
            l.contains("TEMP B-TREE FOR ORDER BY")
                || (l.contains("Sort Key:")
                    && (l.contains(&format!("{alias}.id"))
                        || l.ends_with(" id DESC")
                        || l.ends_with(" id")))
        });
        assert!(
            !sorted,
            "{what}: sorts what the index could give in order:\n{text}"
        );
    }
}

#[tokio::test]
async fn every_listing_filter_uses_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    fleet(&s).await;
    let filter = |group: Option<&str>,
                  status: Option<&str>,
                  versions: Option<Vec<i64>>,
                  accel: Option<&str>,
                  minutes: Option<u32>,
                  text: Option<&str>,
                  after: Option<&str>| {
        DeviceFilter::new(
            DeviceFilterInput {
                group: group.map(str::to_owned),
                status: status.map(str::to_owned),
                versions,
                accelerator: accel,
                not_seen_minutes: minutes,
                text: text.map(str::to_owned),
                after: after.map(str::to_owned),
            },
            1_800_000_000_000,
        )
        .unwrap()
        .sql(101, npub_server::db::Backend::of(&s.state.db))
    };
    let cases: Vec<(&str, Statement, Option<&str>, bool)> = vec![
        (
            "every device",
            filter(None, None, None, None, None, None, Some("d-1")),
            None,
            false,
        ),
        (
            "group",
            filter(Some("lab"), None, None, None, None, None, Some("d-1")),
            Some("devices_by_group_id"),
            false,
        ),
        (
            "status",
            filter(None, Some("failed"), None, None, None, None, None),
            Some("devices_by_state"),
            false,
        ),
        (
            "new",
            filter(None, Some("new"), None, None, None, None, None),
            Some("devices_by_state"),
            false,
        ),
        (
            "version",
            filter(None, None, Some(vec![1]), None, None, None, Some("d-1")),
            Some("devices_by_version"),
            false,
        ),
        (
            "accelerator",
            filter(None, None, None, Some("ethos-u55-128"), None, None, None),
            Some("devices_by_accel"),
            false,
        ),
        // A range of last-seen instants: either the id order's scan, stopping at the page's end
        // (SQLite's choice: offline devices are usually many), or their index and a sort of
        // what matches (PostgreSQL's, priced without sequential scans).
        (
            "not seen",
            filter(None, None, None, None, Some(60), None, None),
            None,
            true,
        ),
        // A substring cannot seek: the scan follows the id order and stops at the page's end.
        (
            "text",
            filter(None, None, None, None, None, Some("cam"), None),
            None,
            false,
        ),
    ];
    for (what, (sql, binds), index, sorts) in cases {
        let p = plan(&s, &sql, binds).await;
        assert_indexed(what, &p, ("devices", "d"), index, sorts);
    }
    // A deployment's devices page by state: what its devices reported, by deployment.
    let p = plan(
        &s,
        npub_server::fleet::deployments::REPORTED_SQL,
        vec![Bind::Int(1)],
    )
    .await;
    assert_indexed(
        "a deployment's reports",
        &p,
        ("device_deployments", "dd"),
        None,
        true,
    );
    assert_indexed("their devices", &p, ("devices", "d"), None, true);
    // A deployment's ranking moved forward reads the devices changed since its generation.
    let p = plan(
        &s,
        npub_server::fleet::ranking::CHANGED_SQL,
        vec![Bind::Int(5), Bind::Int(10_001)],
    )
    .await;
    assert_indexed(
        "devices changed since a generation",
        &p,
        ("devices", "devices"),
        Some("devices_by_change"),
        true,
    );
    let audit =
        |action: Option<&str>, actor: Option<&str>, since: Option<&str>, cursor: Option<&str>| {
            audit_sql(
                &AuditQuery {
                    limit: None,
                    cursor: cursor.map(str::to_owned),
                    action: action.map(str::to_owned),
                    actor: actor.map(str::to_owned),
                    object: None,
                    since: since.map(str::to_owned),
                    until: None,
                },
                100,
            )
            .unwrap()
        };
    for (what, (sql, binds), index, sorts) in [
        ("audit", audit(None, None, None, Some("3132")), None, false),
        (
            "audit by action",
            audit(Some("deployment.create"), None, None, None),
            Some("audit_by_action"),
            false,
        ),
        (
            "audit by action prefix",
            audit(Some("deployment."), None, None, None),
            Some("audit_by_action"),
            true,
        ),
        (
            "audit by actor",
            audit(None, Some("ci"), None, None),
            Some("audit_by_actor"),
            false,
        ),
        (
            "audit since",
            audit(None, None, Some("2026-01-01T00:00:00Z"), None),
            None,
            true,
        ),
    ] {
        let p = plan(&s, &sql, binds).await;
        assert_indexed(what, &p, ("audit", "audit"), index, sorts);
    }
    s.stop().await;
}
