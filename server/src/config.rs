//! Configuration: every setting is a command-line flag with an environment-variable fallback
//! (flag wins), so the same binary runs from a shell, from systemd's `EnvironmentFile=` and from a
//! container.
//!
//! | Flag                 | Variable                | Default          | Meaning                                   |
//! |----------------------|-------------------------|------------------|-------------------------------------------|
//! | `--data-dir`         | `NPUB_DATA_DIR`         | `./npub-data`    | database, pack store, staging, keys       |
//! | `--listen`           | `NPUB_LISTEN`           | `127.0.0.1:8080` | address to serve HTTP on (port 0: any)    |
//! | `--max-upload-bytes` | `NPUB_MAX_UPLOAD_BYTES` | 64 MiB           | largest `.npub` / `.tflite` / `.npz` body  |
//! | `--max-uploads`      | `NPUB_MAX_UPLOADS`      | 16               | uploads in flight at once; one more gets 503 with `Retry-After` |
//! | `--admin-token`      | `NPUB_ADMIN_TOKEN`      | (generated)      | bootstrap admin token, first start only   |
//! | `--log`              | `NPUB_LOG`              | `info`           | log filter, e.g. `info,sqlx=warn`         |
//! | `--poll-interval`    | `NPUB_POLL_INTERVAL`    | 60               | seconds devices are told to wait between manifest polls (`Npub-Poll-Interval`) |
//! | `--last-seen-flush`  | `NPUB_LAST_SEEN_FLUSH`  | 10               | seconds between batched writes of devices' last-seen times |
//! | `--header-timeout`   | `NPUB_HEADER_TIMEOUT`   | 30               | seconds a connection may take to send a request's headers, and may sit idle between keep-alive requests |
//! | `--idle-timeout`     | `NPUB_IDLE_TIMEOUT`     | 60               | seconds a connection may move no byte while no request is being handled (a client that stopped reading) |
//! | `--body-min-rate`    | `NPUB_BODY_MIN_RATE`    | 512              | bytes/s a request body must average once its grace is over (0: no minimum); slower gets 408 |
//! | `--body-grace`       | `NPUB_BODY_GRACE`       | 10               | seconds a request body may take before its rate is measured |
//! | `--max-connections`  | `NPUB_MAX_CONNECTIONS`  | 4096             | connections served at once; one more closes the connection idle the longest, or gets 503 if none is idle (lowered to fit the open-file limit) |
//! | `--max-connections-per-peer` | `NPUB_MAX_CONNECTIONS_PER_PEER` | 64 | connections one address (an IPv6 /64) holds at once; its next closes its own oldest idle one, or gets 503 |
//! | `--admin-listen`     | `NPUB_ADMIN_LISTEN`     | (none)           | a second address serving the same API with its own 256 connections: health, metrics and the operator API stay reachable while devices flood the main one |
//! | `--trusted-proxy`    | `NPUB_TRUSTED_PROXIES`  | (none)           | CIDR (repeatable, comma-separated in the variable) of reverse proxies whose `Forwarded` / `X-Forwarded-For` name the client, for logs and throttles; exempt from the per-peer cap |
//! | `--cache-check`      | `NPUB_CACHE_CHECK`      | 1                | seconds between checks for fleet changes made by another replica |
//! | `--auth-failure-burst` | `NPUB_AUTH_FAILURE_BURST` | 30           | failed authentications a peer may make in a row before it gets 429 |
//! | `--auth-failure-refill` | `NPUB_AUTH_FAILURE_REFILL` | 1          | failed authentications per second a peer's allowance regains |
//! | `--pack-store`       | `NPUB_PACK_STORE`       | (`<data-dir>/packs`) | `s3://bucket/prefix`: packs in an S3-compatible bucket; endpoint, region, credentials from `AWS_*` |
//! | `--database-url`     | `NPUB_DATABASE_URL`     | (`<data-dir>/npub.db`) | `postgres://…`: a PostgreSQL database several replicas share; `sqlite://PATH`: that SQLite file |
//! | `--database-statement-timeout` | `NPUB_DATABASE_STATEMENT_TIMEOUT` | 20 | PostgreSQL: seconds one statement may run (lock waits included); then 503 |
//! | `--database-lock-timeout` | `NPUB_DATABASE_LOCK_TIMEOUT` | 10 | PostgreSQL: seconds a statement may wait for a lock (the write lock, a row); then 503 |
//! | `--database-idle-transaction-timeout` | `NPUB_DATABASE_IDLE_TRANSACTION_TIMEOUT` | 30 | PostgreSQL: seconds a session may sit inside a transaction between statements before PostgreSQL ends it, freeing its locks |
//! | `--key-encryption-key` | `NPUB_KEY_ENCRYPTION_KEY` | (none: key files in `<data-dir>/keys/`) | 64 hex digits: keep the signing and root keys in the database, sealed with this key (required with `postgres://`; the same on every replica) |
//! | `--presign-downloads` | `NPUB_PRESIGN_DOWNLOADS` | off            | with an `s3://` store: device downloads answer `307` to a presigned URL |
//! | `--store-timeout`    | `NPUB_STORE_TIMEOUT`    | 30               | seconds one pack-store call may take (a put: per started 8 MiB); then 503 with `Retry-After` |
//! | `--tls-cert`         | `NPUB_TLS_CERT`         | (none: plain HTTP) | PEM: the server's certificate, then its chain; with `--tls-key`, `--listen` speaks TLS (`--admin-listen` stays plain) |
//! | `--tls-key`          | `NPUB_TLS_KEY`          | (none)           | PEM: its private key                      |
//! | `--tls12`            | `NPUB_TLS12`            | off              | accept TLS 1.2 as well as 1.3             |
//! | `--tls-ticket-key`   | `NPUB_TLS_TICKET_KEY`   | (none: a key of this process's own) | session-ticket keys the replicas share, one a line (`server/src/tls/tickets.rs`) |
//! | `--client-ca`        | `NPUB_CLIENT_CA`        | (none)           | PEM: the CA of device client certificates |
//! | `--tls-handshake-timeout` | `NPUB_TLS_HANDSHAKE_TIMEOUT` | 10     | seconds a client may take over its TLS handshake |
//! | `--min-free-space`   | `NPUB_MIN_FREE_SPACE`   | 256 MiB          | bytes an upload must leave free on the data directory's disk (room for the database to commit); below it uploads get 507 |
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

    /// Uploads in flight at once (receiving, validating, storing); one more is answered 503 with
    /// `Retry-After: 1` before its body is read. Bodies stream to disk; only as many uploads as
    /// there are CPUs are validated (held in memory) at a time, whatever this says.
    #[arg(long, env = "NPUB_MAX_UPLOADS", default_value_t = DEFAULT_MAX_UPLOADS)]
    pub max_uploads: usize,

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
    #[arg(long, env = "NPUB_POLL_INTERVAL", default_value_t = crate::device::polling::DEFAULT_POLL_INTERVAL_SECS)]
    pub poll_interval: u32,

    /// Seconds between batched writes of devices' last-seen times (also written at shutdown).
    #[arg(long, env = "NPUB_LAST_SEEN_FLUSH", default_value_t = crate::device::polling::DEFAULT_LAST_SEEN_FLUSH_SECS)]
    pub last_seen_flush: u64,

    /// Seconds between checks of the fleet generation row, which picks up deployments and device
    /// changes made through another replica sharing the database.
    #[arg(long, env = "NPUB_CACHE_CHECK", default_value_t = crate::device::polling::DEFAULT_CACHE_CHECK_SECS)]
    pub cache_check: u64,

    /// Seconds a client may take to send a request's headers; the same clock runs while a
    /// keep-alive connection sits idle waiting for its next request. Past it the connection is
    /// closed. Bodies are not covered: a 2G modem downloading a 1 MB pack is never cut off.
    #[arg(long, env = "NPUB_HEADER_TIMEOUT", default_value_t = DEFAULT_HEADER_TIMEOUT_SECS)]
    pub header_timeout: u64,

    /// Seconds a connection may go without a byte moving either way while none of its requests
    /// is being handled; past it the connection is closed. Catches a client that stopped reading
    /// a response. A slow but live download (a 2G modem) moves bytes every few seconds and is
    /// never cut off; a request whose handler is still working is never idle.
    #[arg(long, env = "NPUB_IDLE_TIMEOUT", default_value_t = DEFAULT_IDLE_TIMEOUT_SECS)]
    pub idle_timeout: u64,

    /// Bytes per second a request body (an upload, a JSON body) must average once its grace is
    /// over; a slower one is answered 408 and its staged upload removed. 0: no minimum. The
    /// default lets a 2G uplink (a few kB/s) through.
    #[arg(long, env = "NPUB_BODY_MIN_RATE", default_value_t = crate::http::body_rate::DEFAULT_MIN_RATE)]
    pub body_min_rate: u64,

    /// Seconds a request body may take before `--body-min-rate` is measured (a slow start).
    #[arg(long, env = "NPUB_BODY_GRACE", default_value_t = crate::http::body_rate::DEFAULT_GRACE.as_secs())]
    pub body_grace: u64,

    /// Connections served at once. A connection beyond it is answered 503 and closed instead of
    /// exhausting file descriptors. Lowered at start to fit the open-file limit (the soft
    /// `RLIMIT_NOFILE`, which the server raises to the hard one) with 128 descriptors to spare.
    #[arg(long, env = "NPUB_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Connections one peer (an IPv4 address, an IPv6 /64) may hold at once. Its next connection
    /// closes its own connection that has been idle the longest (one waiting for a request), or
    /// is answered 503 if all of them are answering. Trusted proxies are exempt.
    #[arg(long, env = "NPUB_MAX_CONNECTIONS_PER_PEER", default_value_t = crate::conn::table::DEFAULT_MAX_PER_PEER)]
    pub max_connections_per_peer: usize,

    /// A second address to serve the same API on, with connection limits of its own (256
    /// connections, the same per-peer cap): bind it to a management network or loopback, and
    /// health checks, metrics and operators reach the server however many devices hold the main
    /// address.
    #[arg(long, env = "NPUB_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,

    /// A reverse proxy (an address or a CIDR; repeat the flag, or separate with commas in the
    /// variable) whose `Forwarded` / `X-Forwarded-For` headers are believed: a request it
    /// carries is attributed, in logs and in authentication throttling, to the client it names.
    /// Such headers from anyone else are ignored. A trusted proxy's connections are exempt from
    /// `--max-connections-per-peer`.
    #[arg(
        long = "trusted-proxy",
        env = "NPUB_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,

    /// Failed authentications (no token, a wrong or revoked one) a peer (an IPv4 address or an
    /// IPv6 /64) may make in a row; past it, failures get 429 with `Retry-After` instead of 401.
    /// A valid token is never refused or slowed, whatever its peer did.
    #[arg(long, env = "NPUB_AUTH_FAILURE_BURST", default_value_t = crate::auth::guard::DEFAULT_BURST)]
    pub auth_failure_burst: u32,

    /// Failed authentications per second a throttled peer's allowance regains.
    #[arg(long, env = "NPUB_AUTH_FAILURE_REFILL", default_value_t = crate::auth::guard::DEFAULT_REFILL_PER_SEC)]
    pub auth_failure_refill: u32,

    /// Where packs are stored. Unset: files under `<data-dir>/packs/`. `s3://bucket/prefix`: objects
    /// `prefix/<sha256>` in an S3-compatible bucket, reached with the usual `AWS_*` variables
    /// (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`; `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint). Uploads are staged
    /// and validated in `<data-dir>/tmp/` either way.
    #[arg(long, env = "NPUB_PACK_STORE")]
    pub pack_store: Option<String>,

    /// The database. Unset (or `sqlite://` with no path): the SQLite file `<data-dir>/npub.db`,
    /// the embedded default. `sqlite://PATH`: that SQLite file. `postgres://user:pass@host/db`
    /// (or `postgresql://`, with libpq-style `?sslmode=…&host=/socket/dir` parameters): a
    /// PostgreSQL database, migrated at start, which any number of replicas may share (each with
    /// its own `--data-dir` for staging; packs then belong in an `s3://` store).
    #[arg(long, env = "NPUB_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// PostgreSQL: seconds one statement of the server's may run, waiting for locks included,
    /// before PostgreSQL cancels it and the request is answered 503. Above the longest legitimate
    /// statement, below `--header-timeout` (server/src/db/timeouts.rs argues the defaults).
    /// Migrations at start have no such limit. The URL's own `options` win over this flag.
    #[arg(long, env = "NPUB_DATABASE_STATEMENT_TIMEOUT", default_value_t = crate::db::DEFAULT_STATEMENT_TIMEOUT_SECS)]
    pub database_statement_timeout: u64,

    /// Seconds a write may wait for a lock before it fails and the request is answered 503: on
    /// PostgreSQL a statement's wait (the write lock every replica's writes queue on, a row
    /// another session holds); on both backends a writer's wait for its turn in this process.
    #[arg(long, env = "NPUB_DATABASE_LOCK_TIMEOUT", default_value_t = crate::db::DEFAULT_LOCK_TIMEOUT_SECS)]
    pub database_lock_timeout: u64,

    /// PostgreSQL: seconds a session of the server's may sit inside a transaction between two
    /// statements before PostgreSQL ends the session, freeing its locks (a process that stopped
    /// holding the write lock stops every replica's writes until then).
    #[arg(long, env = "NPUB_DATABASE_IDLE_TRANSACTION_TIMEOUT", default_value_t = crate::db::DEFAULT_IDLE_TRANSACTION_TIMEOUT_SECS)]
    pub database_idle_transaction_timeout: u64,

    /// 64 hex digits (`openssl rand -hex 32`): the key-encryption key. Given, the signing keys and
    /// the root key are kept in the database (`key_secrets`), each sealed with AES-256-GCM under
    /// it, so that every replica on one database signs with the same keys and follows rotations
    /// made through the others (server/src/keys/secrets.rs). Required with a `postgres://`
    /// database; unset on SQLite, the keys are files in `<data-dir>/keys/` as before. Prefer the
    /// environment variable (a command line is visible to every local user).
    #[arg(long, env = "NPUB_KEY_ENCRYPTION_KEY", hide_env_values = true)]
    pub key_encryption_key: Option<String>,

    /// With an `s3://` pack store: answer a device's pack download with `307 Temporary Redirect`
    /// to a presigned URL of the object (valid 10 minutes), so the bytes flow from the bucket to
    /// the device directly. The device must follow the redirect (device-agent does). Off: the
    /// server streams the pack from the bucket itself.
    #[arg(long, env = "NPUB_PRESIGN_DOWNLOADS")]
    pub presign_downloads: bool,

    /// Seconds any one call to the pack store may take (a put gets this much for every started
    /// 8 MiB); past it the call fails and the request answers 503 with `Retry-After`. A store
    /// that accepts connections and never answers then costs each request this long, and
    /// holds no lock meanwhile.
    #[arg(long, env = "NPUB_STORE_TIMEOUT", default_value_t = crate::store::DEFAULT_STORE_TIMEOUT.as_secs())]
    pub store_timeout: u64,

    /// Bytes an upload must leave free on the data directory's disk: an upload that would
    /// leave less is answered 507 (before its body is read when it declares its length, else as
    /// soon as it crosses the line), so that the database always has room to commit. Other
    /// writes are not held to it. Free space is in `/metrics` and `/readyz`.
    #[arg(long, env = "NPUB_MIN_FREE_SPACE", default_value_t = crate::ops::disk::DEFAULT_MIN_FREE_SPACE)]
    pub min_free_space: u64,

    /// PEM file: the server's TLS certificate, then the intermediates of its chain. With
    /// `--tls-key`, `--listen` speaks TLS 1.3 (ALPN `http/1.1`) instead of plain HTTP
    /// (`--admin-listen` stays plain: keep it on loopback or a management network);
    /// `SIGHUP` reads the files again (connections open keep theirs). Without it, a listener on
    /// an address other than loopback is plain HTTP, and the log, `/readyz` and the web UI say so.
    #[arg(long, env = "NPUB_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM file: the private key of `--tls-cert` (PKCS#8, SEC1 or PKCS#1).
    #[arg(long, env = "NPUB_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Accept TLS 1.2 clients as well (off: TLS 1.3 only).
    #[arg(long, env = "NPUB_TLS12")]
    pub tls12: bool,

    /// File of session-ticket keys, one a line (64 hex digits, `openssl rand -hex 32`): the
    /// first seals tickets, all open them. Give every replica the same file and a device resumes
    /// its TLS session on any of them. Rotate by adding the new key second, then moving it
    /// first, then removing the old one (a `SIGHUP` to every replica after each step). Unset:
    /// keys of this process's own.
    #[arg(long, env = "NPUB_TLS_TICKET_KEY", requires = "tls_cert")]
    pub tls_ticket_key: Option<PathBuf>,

    /// PEM file of CA certificates that issue device client certificates (P-256, the device id
    /// as the subject's CN or a SAN). A device may then authenticate with its certificate
    /// instead of or besides its token; one from another CA, expired, naming another device
    /// than its token's, or naming no enrolled device is refused.
    #[arg(long, env = "NPUB_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,

    /// Seconds a client may take over its TLS handshake; a client that stalls is closed and
    /// counted (`npub_tls_handshakes_total{outcome="timeout"}`).
    #[arg(long, env = "NPUB_TLS_HANDSHAKE_TIMEOUT", default_value_t = crate::tls::DEFAULT_HANDSHAKE_TIMEOUT_SECS)]
    pub tls_handshake_timeout: u64,

    /// Seconds one webhook delivery attempt may take, from connecting to the answer's head (and
    /// the first 64 KiB of its body); a receiver that takes longer has failed that attempt.
    #[arg(long, env = "NPUB_WEBHOOK_TIMEOUT", default_value_t = crate::ops::webhooks::kinds::DEFAULT_TIMEOUT_SECS)]
    pub webhook_timeout: u64,

    /// Milliseconds before a failed webhook delivery is tried again; each next wait is 4 times
    /// longer, up to an hour (docs/webhooks.md has the schedule).
    #[arg(long, env = "NPUB_WEBHOOK_RETRY_BASE_MS", default_value_t = crate::ops::webhooks::kinds::DEFAULT_RETRY_BASE_MS)]
    pub webhook_retry_base_ms: u64,

    /// Networks (CIDR or one address, repeatable or comma-separated) that webhook deliveries may
    /// reach although they are refused by default: loopback, link-local (the cloud metadata
    /// service), unspecified, multicast (docs/webhooks.md). E.g. `127.0.0.1` for a receiver on
    /// the same host. Private networks need no entry.
    #[arg(
        long = "webhook-allow-address",
        env = "NPUB_WEBHOOK_ALLOW_ADDRESSES",
        value_delimiter = ','
    )]
    pub webhook_allow_addresses: Vec<String>,

    /// Failed delivery attempts in a row after which a webhook is disabled (until an operator
    /// enables it again).
    #[arg(long, env = "NPUB_WEBHOOK_DISABLE_AFTER", default_value_t = crate::ops::webhooks::kinds::DEFAULT_DISABLE_AFTER)]
    pub webhook_disable_after: u32,

    /// `AWS_*` settings applied over the process environment's when the pack store is `s3://`
    /// (for embedders and tests, which should not change their process's environment).
    #[arg(skip)]
    pub aws_overrides: Vec<(String, String)>,

    /// The Python interpreter with tflite-runtime 2.14 and numpy < 2 that runs an upload's source
    /// model (multipart part `source`) with TFLite's reference kernels, for the proof
    /// (`catalog/proof.rs`). Unset, or missing at the time of an upload: the server runs and
    /// stores uploads as before, and records the proof as "not run" with the reason.
    #[arg(long, env = "NPUB_REFERENCE_PYTHON")]
    pub reference_python: Option<PathBuf>,

    /// Seconds the reference run of a proof may take before it is killed (the proof is then
    /// recorded as not run).
    #[arg(long, env = "NPUB_PROOF_TIMEOUT", default_value_t = crate::catalog::proof::DEFAULT_TIMEOUT_SECS)]
    pub proof_timeout: u64,

    /// Seeded random input sets a proof compares the pack and its source model on.
    #[arg(long, env = "NPUB_PROOF_INPUTS", default_value_t = crate::catalog::proof::DEFAULT_INPUTS)]
    pub proof_inputs: u32,
}

/// Default for `--max-uploads`: more operators uploading at once than a fleet has.
pub const DEFAULT_MAX_UPLOADS: usize = 16;

/// Default for `--header-timeout`: generous for a slow link, short enough that idle sockets do not
/// pile up.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 30;

/// Default for `--idle-timeout`: a minute without a byte is no slow link, it is a dead or a
/// hostile one.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;

/// Default for `--max-connections`: a fleet polling every minute, and 1,100 idle sockets an
/// attacker opens, fit (an idle connection costs some kB); the unit's `LimitNOFILE=65536` leaves
/// room for it and for the database, pack files and staging.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

impl Config {
    /// The defaults, with `data_dir` and `listen` given: what tests and embedders start from.
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> Self {
        Self {
            data_dir: data_dir.into(),
            listen,
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            max_uploads: DEFAULT_MAX_UPLOADS,
            admin_token: None,
            log: "info".into(),
            poll_interval: crate::device::polling::DEFAULT_POLL_INTERVAL_SECS,
            last_seen_flush: crate::device::polling::DEFAULT_LAST_SEEN_FLUSH_SECS,
            cache_check: crate::device::polling::DEFAULT_CACHE_CHECK_SECS,
            header_timeout: DEFAULT_HEADER_TIMEOUT_SECS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT_SECS,
            body_min_rate: crate::http::body_rate::DEFAULT_MIN_RATE,
            body_grace: crate::http::body_rate::DEFAULT_GRACE.as_secs(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: crate::conn::table::DEFAULT_MAX_PER_PEER,
            admin_listen: None,
            trusted_proxies: Vec::new(),
            auth_failure_burst: crate::auth::guard::DEFAULT_BURST,
            auth_failure_refill: crate::auth::guard::DEFAULT_REFILL_PER_SEC,
            pack_store: None,
            database_url: None,
            database_statement_timeout: crate::db::DEFAULT_STATEMENT_TIMEOUT_SECS,
            database_lock_timeout: crate::db::DEFAULT_LOCK_TIMEOUT_SECS,
            database_idle_transaction_timeout: crate::db::DEFAULT_IDLE_TRANSACTION_TIMEOUT_SECS,
            key_encryption_key: None,
            presign_downloads: false,
            min_free_space: crate::ops::disk::DEFAULT_MIN_FREE_SPACE,
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT.as_secs(),
            aws_overrides: Vec::new(),
            reference_python: None,
            proof_timeout: crate::catalog::proof::DEFAULT_TIMEOUT_SECS,
            proof_inputs: crate::catalog::proof::DEFAULT_INPUTS,
            tls_cert: None,
            tls_key: None,
            tls12: false,
            tls_ticket_key: None,
            client_ca: None,
            tls_handshake_timeout: crate::tls::DEFAULT_HANDSHAKE_TIMEOUT_SECS,
            webhook_timeout: crate::ops::webhooks::kinds::DEFAULT_TIMEOUT_SECS,
            webhook_retry_base_ms: crate::ops::webhooks::kinds::DEFAULT_RETRY_BASE_MS,
            webhook_disable_after: crate::ops::webhooks::kinds::DEFAULT_DISABLE_AFTER,
            webhook_allow_addresses: Vec::new(),
        }
    }

    /// The limits of the server's PostgreSQL sessions (`--database-*-timeout`).
    pub fn database_timeouts(&self) -> crate::db::PgTimeouts {
        crate::db::PgTimeouts::from_secs(
            self.database_statement_timeout,
            self.database_lock_timeout,
            self.database_idle_transaction_timeout,
        )
    }

    /// The TLS settings, when `--tls-cert` and `--tls-key` are given.
    pub fn tls(&self) -> Result<Option<crate::tls::Settings>, crate::tls::TlsError> {
        match (&self.tls_cert, &self.tls_key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => Ok(Some(crate::tls::Settings {
                cert: cert.clone(),
                key: key.clone(),
                tls12: self.tls12,
                ticket_key: self.tls_ticket_key.clone(),
                client_ca: self.client_ca.clone(),
                handshake_timeout: std::time::Duration::from_secs(
                    self.tls_handshake_timeout.max(1),
                ),
            })),
            _ => Err(crate::tls::TlsError::Unpaired),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_certificate_without_its_key() {
        let mut config = Config::new("/tmp", "127.0.0.1:0".parse().unwrap());
        assert!(config.tls().unwrap().is_none());
        config.tls_cert = Some("cert.pem".into());
        assert!(matches!(config.tls(), Err(crate::tls::TlsError::Unpaired)));
    }
}
