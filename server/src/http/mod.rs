//! HTTP plumbing the routes share: the one error type and its JSON shape, extractors, the
//! body-rate rule, header text, ranges and conditional requests, `Idempotency-Key`, cursor paging, names'
//! rules, the OpenAPI document and the web UI's files.
pub mod body_rate;
pub mod error;
pub mod extract;
pub mod header_text;
pub mod idempotency;
pub mod openapi;
pub mod openapi_rules;
pub mod page;
pub mod ranges;
pub mod web;
