//! End-to-end tests of the operators' web UI (`web/`, served by `npub_server::http::web`) in headless
//! Chromium: a real server on 127.0.0.1:0 over a temp data dir per test, a real browser driven
//! over WebDriver, and for the fleet a simulated device talking to the device API with reqwest.
//! Every test leaves a screenshot in `<target>/screenshots/`. One file per idea.
#[path = "../common/mod.rs"]
mod common;

mod harness;

mod admin;
mod audit;
mod completion;
mod dashboard;
mod deployment_devices;
mod device;
mod device_log;
mod device_page;
mod exposure;
mod finished;
mod fleet;
mod fleet_scale;
mod keyboard;
mod layout;
mod models;
mod navigation;
mod previews;
mod proof;
mod release;
mod serving;
mod signin;
mod webhooks;
mod wording;
