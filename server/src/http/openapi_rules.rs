//! What the generated OpenAPI document cannot learn from the handlers' types, added in one place
//! after every router has contributed its paths ([`complete`]).
//!
//! **Responses every route of a shape can give**, whatever its annotation lists:
//!
//! | Operation has                  | Added (JSON `ErrorBody`)                                   |
//! |--------------------------------|------------------------------------------------------------|
//! | a security requirement         | 401 (no or a wrong token), 429 (too many failed tokens from the peer) |
//! | path or query parameters       | 400 (a parameter that does not parse), 422 (a value out of range) |
//! | a JSON request body            | 400 (unreadable JSON), 413 (over 2 MiB), 415 (not `application/json`), 422 (a field is invalid) |
//! | any request body               | 408 (slower than `--body-min-rate`)                         |
//! | one of `idempotency::ROUTES`   | the optional `Idempotency-Key` header; 400 (not a key), 409 (its first request is still being answered), 422 (the key was used for another request) |
//!
//! **Value rules** the server enforces (patterns, lengths, ranges, enumerations), on path and
//! query parameters and on request-body properties, taken from the constants the checks use
//! (`names.rs`, `fleet/devices.rs`, `fleet/rollout.rs`, `ops/webhooks/kinds.rs`), so that a generator of schema-valid
//! requests (schemathesis) only sends what the server accepts, and schema-invalid ones only what
//! it refuses. A rule naming a parameter or property the document lacks is reported by
//! [`complete`]; the tests require none.
//!
//! Lengths are in characters, as JSON Schema counts them; the server counts free text in
//! characters too.
use std::collections::BTreeMap;

use serde_json::{Value, json};
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{Object, Schema, Type};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response};

use crate::device::routes::MAX_REASON_CHARS;
use crate::fleet::device_info::MAX_FIELD_BYTES;
use crate::fleet::devices::MAX_BATCH;
use crate::fleet::rollout::{DeviceState, MAX_BATCHES};
use crate::names;
use crate::ops::webhooks::kinds::{self as webhooks, EventKind};

/// A value rule for one schema.
#[derive(Debug, Clone)]
enum Rule {
    /// A string: a pattern (ECMA-262, anchored) and a length range in characters.
    Text {
        pattern: Option<String>,
        min: Option<usize>,
        max: Option<usize>,
    },
    /// An integer within `min..=max`.
    Int { min: i64, max: i64 },
    /// A number within `min..=max`.
    Range { min: f64, max: f64 },
    /// One of these strings (and `null` where the property is optional).
    OneOf(Vec<&'static str>),
    /// An array of `min..=max` items, each under the inner rule.
    Items {
        min: usize,
        max: usize,
        each: Option<Box<Rule>>,
    },
}

fn text(pattern: impl Into<String>, max: usize) -> Rule {
    Rule::Text {
        pattern: Some(pattern.into()),
        min: None,
        max: Some(max),
    }
}

/// Characters no free text may hold: C0 and C1 controls and DEL.
const CONTROL: &str = "\\u0000-\\u001F\\u007F-\\u009F";

/// A model name (`names::model`).
fn model_name() -> Rule {
    let max = npub_core::manifest::MODEL_NAME_BYTES;
    text(format!("^[A-Za-z0-9][A-Za-z0-9._-]{{0,{}}}$", max - 1), max)
}

/// A version (`names::version`).
fn version() -> Rule {
    let max = npub_core::manifest::MODEL_VERSION_BYTES;
    text(
        format!("^[A-Za-z0-9][A-Za-z0-9._+-]{{0,{}}}$", max - 1),
        max,
    )
}

/// A device id, group or tag (`fleet::device_info::check_field`).
fn field() -> Rule {
    text(
        format!("^[A-Za-z0-9._:-]{{1,{MAX_FIELD_BYTES}}}$"),
        MAX_FIELD_BYTES,
    )
}

/// One line of free text without control characters (`names::Lines::One`).
fn line(max: usize) -> Rule {
    text(format!("^[^{CONTROL}]*$"), max)
}

/// Several lines: `\n` and `\t` allowed (`names::Lines::Many`).
fn lines(max: usize) -> Rule {
    text(
        "^[^\\u0000-\\u0008\\u000B-\\u001F\\u007F-\\u009F]*$".to_owned(),
        max,
    )
}

/// Every accelerator name a model or device may name (not `unspecified`).
fn accelerators() -> Vec<&'static str> {
    npub_core::Accel::ALL[1..]
        .iter()
        .map(|a| a.name())
        .collect()
}

/// `(path prefix, parameter, rule)`: the prefix picks the route family (an `id` is a device id
/// under `/api/v1/devices/`, a number elsewhere).
fn parameter_rules() -> Vec<(&'static str, &'static str, Rule)> {
    vec![
        ("/api/v1/models/", "name", model_name()),
        ("/api/v1/models/", "version", version()),
        ("/api/v1/devices/", "id", field()),
        ("/api/v1/groups/", "group", field()),
        (
            "/api/v1/device/packs/",
            "sha256",
            text("^[0-9a-f]{64}$", 64),
        ),
        // Every listing's page size and cursor (`http/page.rs`; a device's history pages alike).
        (
            "/api/v1/",
            "limit",
            Rule::Int {
                min: 1,
                max: i64::from(crate::http::page::MAX_LIMIT),
            },
        ),
        // A device's history pages by `before`, up to its own page size (after the rule above:
        // the later rule wins).
        (
            "/api/v1/devices/",
            "limit",
            Rule::Int {
                min: 1,
                max: i64::from(crate::fleet::history::MAX_PAGE),
            },
        ),
        // A cursor is the hex of a key: a listing by integer keys takes only digits' (`3[0-9]`),
        // the device listing (after this rule, so it wins) any bytes of an id's length.
        ("/api/v1/", "cursor", text("^(3[0-9]){1,18}$", 36)),
        (
            "/api/v1/devices",
            "cursor",
            text(
                format!("^([0-9a-f]{{2}}){{1,{MAX_FIELD_BYTES}}}$"),
                2 * MAX_FIELD_BYTES,
            ),
        ),
        (
            "/api/v1/devices",
            "status",
            Rule::OneOf(
                ["new", "revoked"]
                    .into_iter()
                    .chain(DeviceState::ALL.iter().map(|s| s.as_str()))
                    .collect(),
            ),
        ),
        (
            "/api/v1/devices",
            "accelerator",
            Rule::OneOf(accelerators()),
        ),
        ("/api/v1/devices", "group", field()),
        (
            "/api/v1/devices",
            "not_seen_minutes",
            Rule::Int {
                min: 0,
                max: i64::from(u32::MAX),
            },
        ),
        (
            "/api/v1/devices/",
            "before",
            Rule::Int {
                min: 1,
                max: i64::MAX,
            },
        ),
        (
            "/api/v1/deployments/",
            "state",
            Rule::OneOf(
                DeviceState::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .chain(["skipped", "cancelled"])
                    .collect(),
            ),
        ),
        (
            "/api/v1/fleet/summary",
            "offline_minutes",
            Rule::Int {
                min: 1,
                max: 525_600,
            },
        ),
        (
            "/api/v1/webhooks/",
            "id",
            Rule::Int {
                min: 1,
                max: i64::MAX,
            },
        ),
        (
            "/api/v1/device/manifest",
            "seq",
            Rule::Int {
                min: 0,
                max: i64::MAX,
            },
        ),
    ]
}

/// `(component, property, rule)`.
fn property_rules() -> Vec<(&'static str, &'static str, Rule)> {
    let batch = Rule::Items {
        min: 1,
        max: MAX_BATCHES,
        each: Some(Box::new(Rule::Int { min: 1, max: 100 })),
    };
    let share = || Rule::Range { min: 0.0, max: 1.0 };
    vec![
        ("NewModel", "name", model_name()),
        (
            "NewModel",
            "description",
            lines(crate::catalog::models::DESCRIPTION_MAX_CHARS),
        ),
        ("NewModel", "accelerator", Rule::OneOf(accelerators())),
        (
            "NewToken",
            "name",
            Rule::Text {
                // Not blank: at least one character that is neither whitespace nor a control.
                pattern: Some(format!("^[^{CONTROL}]*[^\\s{CONTROL}][^{CONTROL}]*$")),
                min: Some(1),
                max: Some(names::TOKEN_NAME_MAX_CHARS),
            },
        ),
        (
            "StatusReport",
            "attempts",
            Rule::Int {
                min: 1,
                max: i64::from(crate::device::routes::MAX_ATTEMPTS),
            },
        ),
        ("NewDevice", "id", field()),
        ("NewDevice", "name", line(MAX_FIELD_BYTES)),
        (
            "NewDevice",
            "hw_class",
            Rule::Int {
                min: 1,
                max: i64::from(u32::MAX),
            },
        ),
        ("NewDevice", "accelerator", Rule::OneOf(accelerators())),
        ("NewDevice", "group", field()),
        (
            "NewDevice",
            "tags",
            Rule::Items {
                min: 0,
                max: usize::MAX,
                each: Some(Box::new(field())),
            },
        ),
        (
            "Provision",
            "devices",
            Rule::Items {
                min: 1,
                max: MAX_BATCH,
                each: None,
            },
        ),
        (
            "DevicePatch",
            "name",
            Rule::Text {
                pattern: Some(format!("^[^{CONTROL}]+$")),
                min: Some(1),
                max: Some(MAX_FIELD_BYTES),
            },
        ),
        ("DevicePatch", "group", field()),
        (
            "DevicePatch",
            "tags",
            Rule::Items {
                min: 0,
                max: usize::MAX,
                each: Some(Box::new(field())),
            },
        ),
        ("DevicePatch", "accelerator", Rule::OneOf(accelerators())),
        ("NewDeployment", "model", model_name()),
        ("NewDeployment", "version", version()),
        ("NewDeployment", "group", field()),
        ("NewDeployment", "device", field()),
        ("RollbackRequest", "model", model_name()),
        ("RollbackRequest", "version", version()),
        ("Rollout", "batches", batch),
        ("Rollout", "success_threshold", share()),
        ("Rollout", "failure_threshold", share()),
        (
            "WindowSpec",
            "start",
            text("^([01][0-9]|2[0-3]):[0-5][0-9]$", 5),
        ),
        (
            "WindowSpec",
            "end",
            text("^([01][0-9]|2[0-3]):[0-5][0-9]$", 5),
        ),
        (
            "WindowSpec",
            "time_zone",
            text("^[A-Za-z0-9_+/-]{1,64}$", 64),
        ),
        (
            "StatusReport",
            "sequence",
            Rule::Int {
                min: 0,
                max: i64::MAX,
            },
        ),
        (
            "StatusReport",
            "state",
            Rule::OneOf(vec![
                "downloading",
                "verified",
                "installed",
                "bound",
                "failed",
                "rolled_back",
            ]),
        ),
        ("StatusReport", "progress", share()),
        ("StatusReport", "reason", line(MAX_REASON_CHARS)),
        (
            "StatusReport",
            "events",
            Rule::Items {
                min: 0,
                max: crate::device::routes::MAX_AGENT_EVENTS,
                each: Some(Box::new(text(
                    "^[ -~]*$",
                    crate::device::routes::MAX_AGENT_EVENT_CHARS,
                ))),
            },
        ),
        (
            "NewWebhook",
            "url",
            text(
                format!("^https?://[^\\s{CONTROL}]+$"),
                webhooks::MAX_URL_CHARS,
            ),
        ),
        (
            "NewWebhook",
            "events",
            Rule::Items {
                min: 1,
                max: EventKind::SUBSCRIBABLE.len(),
                each: Some(Box::new(Rule::OneOf(
                    EventKind::SUBSCRIBABLE.iter().map(|k| k.as_str()).collect(),
                ))),
            },
        ),
        (
            "NewWebhook",
            "description",
            line(webhooks::MAX_DESCRIPTION_CHARS),
        ),
    ]
}

/// Adds the responses and value rules above to `api`; returns the rules that found nothing to
/// apply to (empty unless a parameter or property was renamed without its rule).
pub fn complete(api: &mut OpenApi) -> Vec<String> {
    let mut unused = Vec::new();
    let params = parameter_rules();
    let mut param_used = vec![false; params.len()];
    for (path, item) in api.paths.paths.iter_mut() {
        if crate::http::idempotency::honours("POST", path)
            && let Some(op) = item.post.as_mut()
        {
            add_idempotency_key(op);
        }
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            add_responses(op);
            for p in op.parameters.iter_mut().flatten() {
                let RefOr::T(p) = p else { continue };
                for (i, (prefix, name, rule)) in params.iter().enumerate() {
                    if path.starts_with(prefix)
                        && p.name == *name
                        && let Some(RefOr::T(schema)) = p.schema.as_mut()
                        && apply(schema, rule, false)
                    {
                        param_used[i] = true;
                    }
                }
            }
        }
    }
    for ((prefix, name, _), used) in params.iter().zip(param_used) {
        if !used {
            unused.push(format!("parameter {name} under {prefix}"));
        }
    }
    let schemas = api
        .components
        .as_mut()
        .map(|c| &mut c.schemas)
        .expect("the routers register their schemas");
    for (component, property, rule) in property_rules() {
        if !apply_to_property(schemas, component, property, &rule) {
            unused.push(format!("{component}.{property}"));
        }
    }
    unused
}

fn error_response(description: &str) -> RefOr<Response> {
    let mut response = Response::new(description);
    response.content.insert(
        "application/json".to_owned(),
        RefOr::T(Content::new(Some(Ref::from_schema_name("ErrorBody")))),
    );
    RefOr::T(response)
}

/// The `Idempotency-Key` header and what it adds to an operation's answers (`idempotency.rs`).
fn add_idempotency_key(op: &mut Operation) {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    let header = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(utoipa::openapi::Required::False)
        .description(Some(
            "A key of the client's (1 to 255 visible ASCII characters, e.g. a UUID): the same key \
             with the same request within 24 h answers the first 2xx answer again \
             (`Idempotent-Replayed: true`) instead of running it twice.",
        ))
        .schema(Some(
            utoipa::openapi::ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[!-~]{1,255}$"))
                .min_length(Some(1))
                .max_length(Some(crate::http::idempotency::KEY_MAX)),
        ))
        .build();
    op.parameters
        .get_or_insert_with(Vec::new)
        .push(RefOr::T(header));
    for (code, description) in [
        (
            "400",
            "the Idempotency-Key is not 1 to 255 visible ASCII characters",
        ),
        (
            "409",
            "the first request with this Idempotency-Key is still being answered",
        ),
        ("422", "this Idempotency-Key was used for another request"),
    ] {
        op.responses
            .responses
            .entry(code.to_owned())
            .or_insert_with(|| error_response(description));
    }
}

fn add_responses(op: &mut Operation) {
    let mut add = |code: &str, description: &str| {
        op.responses
            .responses
            .entry(code.to_owned())
            .or_insert_with(|| error_response(description));
    };
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let body_types: Vec<String> = match &op.request_body {
        Some(RefOr::T(body)) => body.content.keys().cloned().collect(),
        _ => Vec::new(),
    };
    if secured {
        add("401", "no token, or a wrong or revoked one");
        add(
            "429",
            "too many failed authentications from this address (`Retry-After`)",
        );
    }
    if has_params {
        add("400", "a path or query parameter does not parse");
        add("422", "a parameter's value is out of range");
    }
    if body_types.iter().any(|t| t == "application/json") {
        add("400", "the body is not readable JSON");
        add("413", "the body is over the 2 MiB JSON limit");
        add("415", "the body is not `application/json`");
        add("422", "a field is missing or invalid");
    }
    if !body_types.is_empty() {
        add(
            "408",
            "the body arrived slower than the server's minimum rate",
        );
    }
}

/// Applies `rule` to the property of `component` (looking into a `oneOf`'s inline objects, as
/// an untagged enum's variants are); `false` if there is no such property.
fn apply_to_property(
    schemas: &mut BTreeMap<String, RefOr<Schema>>,
    component: &str,
    property: &str,
    rule: &Rule,
) -> bool {
    let Some(RefOr::T(schema)) = schemas.get_mut(component) else {
        return false;
    };
    let mut objects: Vec<&mut Object> = Vec::new();
    match schema {
        Schema::Object(o) => objects.push(o),
        Schema::OneOf(one_of) => {
            for item in &mut one_of.items {
                if let RefOr::T(Schema::Object(o)) = item {
                    objects.push(o);
                }
            }
        }
        _ => {}
    }
    let mut found = false;
    for o in objects {
        let required = o.required.iter().any(|r| r == property);
        if let Some(slot) = o.properties.get_mut(property) {
            found |= match slot {
                RefOr::T(s) => apply(s, rule, !required),
                // A reference (an enum type) is replaced by the rule's own inline schema.
                RefOr::Ref(_) => {
                    *slot = RefOr::T(inline(rule, !required));
                    true
                }
            };
        }
    }
    found
}

/// A fresh string schema for a [`Rule::OneOf`] standing in for a referenced enum.
fn inline(rule: &Rule, optional: bool) -> Schema {
    let mut schema = Schema::Object(Object::with_type(Type::String));
    apply(&mut schema, rule, optional);
    schema
}

/// Applies `rule` to `schema`; `false` when the rule does not fit the schema's kind.
fn apply(schema: &mut Schema, rule: &Rule, optional: bool) -> bool {
    match (schema, rule) {
        (Schema::Object(o), Rule::Text { pattern, min, max }) => {
            o.pattern = pattern.clone();
            o.min_length = *min;
            o.max_length = *max;
            true
        }
        (Schema::Object(o), Rule::Range { min, max }) => {
            o.minimum = Some((*min).into());
            o.maximum = Some((*max).into());
            true
        }
        (Schema::Object(o), Rule::Int { min, max }) => {
            // Exact integers: a float bound of 2^63 - 1 would round up to 2^63.
            let exact = |v: i64| utoipa::Number::Int(isize::try_from(v).unwrap_or(isize::MAX));
            o.minimum = Some(exact(*min));
            o.maximum = Some(exact(*max));
            true
        }
        (Schema::Object(o), Rule::OneOf(values)) => {
            let mut enumerated: Vec<Value> = values.iter().map(|v| json!(v)).collect();
            if optional {
                enumerated.push(Value::Null);
            }
            o.enum_values = Some(enumerated);
            true
        }
        (Schema::Array(a), Rule::Items { min, max, each }) => {
            a.min_items = (*min > 0).then_some(*min);
            a.max_items = (*max < usize::MAX).then_some(*max);
            match (each, &mut a.items) {
                (None, _) => true,
                (Some(each), utoipa::openapi::schema::ArrayItems::RefOrSchema(item)) => {
                    match item.as_mut() {
                        RefOr::T(item) => apply(item, each, false),
                        RefOr::Ref(_) => false,
                    }
                }
                (Some(_), _) => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_finds_its_parameter_or_property() {
        let (_, mut api) = crate::app::routes().split_for_parts();
        assert_eq!(complete(&mut api), Vec::<String>::new());
    }
}
