//! `tracing` to stderr, filtered by `--log` (no regex engine: a `Targets` list is enough).
use std::io::IsTerminal;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the global subscriber. `filter` is `level` or `level,target=level,…`.
pub fn init(filter: &str) -> Result<(), String> {
    let targets: Targets = filter.parse().map_err(|e| format!("{e}"))?;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colour only on a terminal: journald and log files get plain text.
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .with(targets)
        .try_init()
        .map_err(|e| e.to_string())
}
