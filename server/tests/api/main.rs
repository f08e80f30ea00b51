//! End-to-end tests of the operator API: a real server on 127.0.0.1:0 per test, over a fresh
//! temp data dir, driven with reqwest. One file per idea.
#[path = "../common/mod.rs"]
mod common;

mod auth;
mod connections;
mod keys;
mod malformed;
mod operations;
mod restart;
mod uploads;
