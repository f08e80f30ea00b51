//! The OpenAPI document says where every parameter is and what every route can answer (issue #11
//! point 6): path parameters are exactly the route template's, the rest are query parameters,
//! and every JSON route documents 400 and 415. schemathesis runs against the live server in
//! `.ci/run` (`server/tests/schemathesis/run.sh`).
use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::TestServer;

async fn document(s: &TestServer) -> Value {
    s.http
        .get(format!("{}/api/v1/openapi.json", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn template_names(path: &str) -> BTreeSet<String> {
    path.split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_owned()))
        .collect()
}

#[tokio::test]
async fn rejects_a_parameter_documented_anywhere_but_where_the_route_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let doc = document(&s).await;
    let mut problems = Vec::new();
    let mut queries = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let template = template_names(path);
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{} {path}", method.to_uppercase());
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let in_path: BTreeSet<String> = params
                .iter()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            if in_path != template {
                problems.push(format!(
                    "{what}: path parameters {in_path:?}, template {template:?}"
                ));
            }
            for p in &params {
                match p["in"].as_str().unwrap() {
                    "path" => {}
                    "query" => {
                        queries.insert(format!("{what} ?{}", p["name"].as_str().unwrap()));
                        if template.contains(p["name"].as_str().unwrap()) {
                            problems.push(format!("{what}: {} is in the template", p["name"]));
                        }
                    }
                    // The one header a route reads as a parameter (server/src/http/idempotency.rs).
                    "header" if p["name"] == "Idempotency-Key" && method == "post" => {}
                    other => problems.push(format!("{what}: a parameter in {other}")),
                }
            }
            let responses = op["responses"].as_object().unwrap();
            let documents = |code: &str| responses.contains_key(code);
            if op["requestBody"]["content"]["application/json"].is_object() {
                for code in ["400", "415", "422"] {
                    if !documents(code) {
                        problems.push(format!("{what}: a JSON route without {code}"));
                    }
                }
            }
            if op["security"].as_array().is_some_and(|s| !s.is_empty()) && !documents("401") {
                problems.push(format!("{what}: a secured route without 401"));
            }
            if !params.is_empty() && !documents("400") {
                problems.push(format!("{what}: parameters without 400"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let expected: BTreeSet<String> = [
        "GET /api/v1/audit ?limit",
        "GET /api/v1/audit ?cursor",
        "GET /api/v1/audit ?action",
        "GET /api/v1/audit ?actor",
        "GET /api/v1/audit ?object",
        "GET /api/v1/audit ?since",
        "GET /api/v1/audit ?until",
        "GET /api/v1/deployments ?group",
        "GET /api/v1/deployments ?state",
        "GET /api/v1/deployments/{id}/devices ?state",
        "GET /api/v1/deployments/{id}/devices ?limit",
        "GET /api/v1/deployments/{id}/devices ?cursor",
        "GET /api/v1/device/keys ?after",
        "GET /api/v1/device/manifest ?seq",
        "GET /api/v1/devices ?group",
        "GET /api/v1/devices ?status",
        "GET /api/v1/devices ?model",
        "GET /api/v1/devices ?version",
        "GET /api/v1/devices ?accelerator",
        "GET /api/v1/devices ?not_seen_minutes",
        "GET /api/v1/devices ?q",
        "GET /api/v1/devices ?limit",
        "GET /api/v1/devices ?cursor",
        "GET /api/v1/models/{name}/versions ?limit",
        "GET /api/v1/models/{name}/versions ?cursor",
        "GET /api/v1/devices/{id} ?before",
        "GET /api/v1/devices/{id} ?limit",
        "GET /api/v1/fleet/summary ?offline_minutes",
        "GET /api/v1/webhooks/{id}/deliveries ?limit",
        "GET /api/v1/webhooks/{id}/deliveries ?cursor",
        "POST /api/v1/deployments ?dry_run",
        "POST /api/v1/groups/{group}/rollback ?dry_run",
        "POST /api/v1/models/{name}/versions/{version}/release-signatures ?replace",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(queries, expected);
    s.stop().await;
}

#[tokio::test]
async fn survives_what_the_documented_rules_allow_and_states_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let doc = document(&s).await;
    let schemas = &doc["components"]["schemas"];
    let name = &schemas["NewModel"]["properties"]["name"];
    assert_eq!(name["pattern"], "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
    assert_eq!(name["maxLength"], 64);
    let limit = doc["paths"]["/api/v1/audit"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap()
        .clone();
    assert_eq!(
        (
            limit["schema"]["minimum"].clone(),
            limit["schema"]["maximum"].clone()
        ),
        (1.into(), 1000.into())
    );
    let batches = &schemas["Rollout"]["properties"]["batches"];
    assert_eq!(batches["items"]["maximum"], 100);
    let state = &schemas["StatusReport"]["properties"]["state"]["enum"];
    assert!(
        !state.as_array().unwrap().contains(&"pending".into()),
        "{state}"
    );
    // What the document allows, the server takes: a 64-character name of the pattern, a
    // description of 4096 characters of two bytes each.
    let r = s
        .req(reqwest::Method::POST, "/api/v1/models")
        .json(&serde_json::json!({"name": "m".repeat(64), "description": "é".repeat(4096)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    s.stop().await;
}
