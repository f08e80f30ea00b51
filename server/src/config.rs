//! Configuration: every setting is a command-line flag with an environment-variable fallback
//! (flag wins), so the same binary runs from a shell, from systemd's `EnvironmentFile=` and from a
//! container.
//!
//! | Flag                 | Variable                | Default          | Meaning                                   |
//! |----------------------|-------------------------|------------------|-------------------------------------------|
//! | `--data-dir`         | `NPUB_DATA_DIR`         | `./npub-data`    | database, pack store, staging, keys       |
//! | `--listen`           | `NPUB_LISTEN`           | `127.0.0.1:8080` | address to serve HTTP on (port 0: any)    |
//! | `--max-upload-bytes` | `NPUB_MAX_UPLOAD_BYTES` | 64 MiB           | largest `.npub` / `.tflite` / `.npz` body  |
//! | `--admin-token`      | `NPUB_ADMIN_TOKEN`      | (generated)      | bootstrap admin token, first start only   |
//! | `--log`              | `NPUB_LOG`              | `info`           | log filter, e.g. `info,sqlx=warn`         |
//! | `--poll-interval`    | `NPUB_POLL_INTERVAL`    | 60               | seconds devices are told to wait between manifest polls (`Npub-Poll-Interval`) |
//! | `--last-seen-flush`  | `NPUB_LAST_SEEN_FLUSH`  | 10               | seconds between batched writes of devices' last-seen times |
//! | `--header-timeout`   | `NPUB_HEADER_TIMEOUT`   | 30               | seconds a connection may take to send a request's headers, and may sit idle between keep-alive requests |
//! | `--max-connections`  | `NPUB_MAX_CONNECTIONS`  | 512              | connections served at once; more get 503 and are closed |
//! | `--cache-check`      | `NPUB_CACHE_CHECK`      | 1                | seconds between checks for fleet changes made by another replica |
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// Default for `--max-upload-bytes`. The largest pack an RA8P1 can hold is bounded by its external
/// OSPI flash slot (tens of MiB); a Vela `.tflite`/`.npz` is the pack plus a little framing.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 64 * 1024 * 1024;

/// npub-server: stores versioned NPU1 packs and serves the operator REST API.
#[derive(Debug, Clone, Parser)]
#[command(name = "npub-server", version, about)]
pub struct Config {
    /// Directory holding the SQLite database (`npub.db`), the content-addressed pack store
    /// (`packs/`), upload staging (`tmp/`, emptied at start) and the signing key (`keys/`).
    /// Created (mode 0700) if missing. One server per directory: a lock file enforces it.
    #[arg(long, env = "NPUB_DATA_DIR", default_value = "./npub-data")]
    pub data_dir: PathBuf,

    /// Address and port to listen on. Port 0 picks a free port; the chosen address is printed.
    #[arg(long, env = "NPUB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Largest accepted upload body (a `.npub`, a Vela `*_vela.tflite` or `.npz`), in bytes.
    /// Larger uploads are refused with 413 before anything is stored.
    #[arg(long, env = "NPUB_MAX_UPLOAD_BYTES", default_value_t = DEFAULT_MAX_UPLOAD_BYTES)]
    pub max_upload_bytes: u64,

    /// Bootstrap admin token, used only on the first start (when the database holds no token):
    /// at least 32 characters. If unset on first start, one is generated and printed once.
    /// Prefer the environment variable: command lines are visible to every local user.
    #[arg(long, env = "NPUB_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    /// Log filter: a level (`info`), or a default level and `target=level` pairs
    /// (`info,sqlx=warn,tower_http=debug`). Logs go to stderr.
    #[arg(long, env = "NPUB_LOG", default_value = "info")]
    pub log: String,

    /// Seconds devices are told to wait before their next manifest poll (`Npub-Poll-Interval`).
    #[arg(long, env = "NPUB_POLL_INTERVAL", default_value_t = crate::fleet::DEFAULT_POLL_INTERVAL_SECS)]
    pub poll_interval: u32,

    /// Seconds between batched writes of devices' last-seen times (also written at shutdown).
    #[arg(long, env = "NPUB_LAST_SEEN_FLUSH", default_value_t = crate::fleet::DEFAULT_LAST_SEEN_FLUSH_SECS)]
    pub last_seen_flush: u64,

    /// Seconds between checks of the fleet generation row, which picks up deployments and device
    /// changes made through another replica sharing the database.
    #[arg(long, env = "NPUB_CACHE_CHECK", default_value_t = crate::fleet::DEFAULT_CACHE_CHECK_SECS)]
    pub cache_check: u64,

    /// Seconds a client may take to send a request's headers; the same clock runs while a
    /// keep-alive connection sits idle waiting for its next request. Past it the connection is
    /// closed. Bodies are not covered: a 2G modem downloading a 1 MB pack is never cut off.
    #[arg(long, env = "NPUB_HEADER_TIMEOUT", default_value_t = DEFAULT_HEADER_TIMEOUT_SECS)]
    pub header_timeout: u64,

    /// Connections served at once. A connection beyond it is answered 503 and closed instead of
    /// exhausting file descriptors (keep it well below `LimitNOFILE=`).
    #[arg(long, env = "NPUB_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
}

/// Default for `--header-timeout`: generous for a slow link, short enough that idle sockets do not
/// pile up.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 30;

/// Default for `--max-connections`: half of the service's `LimitNOFILE=1024` floor, leaving room for
/// the database, pack files and staging.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

impl Config {
    /// The defaults, with `data_dir` and `listen` given: what tests and embedders start from.
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> Self {
        Self {
            data_dir: data_dir.into(),
            listen,
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            admin_token: None,
            log: "info".into(),
            poll_interval: crate::fleet::DEFAULT_POLL_INTERVAL_SECS,
            last_seen_flush: crate::fleet::DEFAULT_LAST_SEEN_FLUSH_SECS,
            cache_check: crate::fleet::DEFAULT_CACHE_CHECK_SECS,
            header_timeout: DEFAULT_HEADER_TIMEOUT_SECS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}
