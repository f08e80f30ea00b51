//! Running the server: health, metrics, logging, the audit log, the data directory and its disk,
//! and the threads CPU-bound work runs on.
pub mod audit;
pub mod audit_log;
pub mod cpu;
pub mod datadir;
pub mod disk;
pub mod exposition;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod probe;
pub mod webhooks;
