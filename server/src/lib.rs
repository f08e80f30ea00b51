//! # npub-server
//!
//! The versioned pack store and operator REST API of npub: operators upload `.npub` packs (or
//! Vela's `*_vela.tflite` / `.npz`, imported by npub-core), every upload is validated by
//! npub-core before anything is stored, and packs are kept content-addressed by SHA-256.
//!
//! [`app`] builds the whole HTTP surface from one `router()` per module; [`Server`] opens the
//! data directory, the database and the pack store, and serves [`app`] on a listener. `main.rs`
//! only parses the configuration and calls them; the tests call them directly.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod app;
pub mod auth;
pub mod catalog;
pub mod cidr;
pub mod config;
mod conn;
pub mod db;
pub mod device;
pub mod fleet;
pub mod http;
pub mod keys;
pub mod names;
pub mod ops;
pub mod peer;
mod server;
pub mod state;
pub mod store;
pub mod time;
pub mod tls;

pub use app::app;
pub use config::Config;
pub use server::{Server, StartError, shutdown_signal};
pub use state::AppState;
