//! Starting and running: data directory, database, bootstrap token, signing key, start-up sweep,
//! listener; then serving until a shutdown signal.
use std::collections::HashSet;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::auth::guard::{Guard, Limits as GuardLimits};
use crate::auth::token::{self, Bootstrap};
use crate::config::Config;
use crate::datadir::DataDir;
use crate::keys::Keys;
use crate::metrics::Metrics;
use crate::state::{AppState, Limits};
use crate::store::{PackStore, Staging};
use crate::{app, conn, db};

/// Why the server could not start.
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

fn fail(what: &str) -> impl FnOnce(String) -> StartError + '_ {
    move |e| StartError(format!("{what}: {e}"))
}

/// A started server: everything opened and checked, the listener bound, not yet serving.
#[derive(Debug)]
pub struct Server {
    state: AppState,
    listener: TcpListener,
    conn_limits: conn::Limits,
    data_dir: DataDir,
    bootstrap: Bootstrap,
    generated_key: bool,
    pack_store: Option<String>,
    /// `--database-url` with any password replaced, for the banner; `None`: the SQLite default.
    database: Option<String>,
}

impl Server {
    /// Opens the data directory (taking its lock), the database (migrating it), creates the
    /// bootstrap token and the signing key on a first start, sweeps interrupted uploads and
    /// orphaned packs, and binds the listener.
    pub async fn start(config: Config) -> Result<Self, StartError> {
        let nofile = conn::raise_nofile();
        let data_dir = DataDir::open(&config.data_dir)
            .map_err(|e| StartError(format!("data dir {}: {e}", config.data_dir.display())))?;
        let database = data_dir.database();
        let location = db::Location::parse(config.database_url.as_deref(), &database)
            .map_err(fail("--database-url"))?;
        let db = db::open(&location)
            .await
            .map_err(|e| fail("database")(e.to_string()))?;
        let staging = Staging::new(data_dir.tmp());
        let store = crate::store::open(
            config.pack_store.as_deref(),
            data_dir.packs(),
            config.presign_downloads,
            &config.aws_overrides,
        )
        .map_err(fail("--pack-store"))?;
        sweep(&db, &staging, store.as_ref()).await?;
        let bootstrap = token::bootstrap(&db, config.admin_token.as_deref())
            .await
            .map_err(|e| StartError(e.to_string()))?;
        let kek = config
            .key_encryption_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(crate::key_store::Kek::parse)
            .transpose()
            .map_err(fail("--key-encryption-key"))?;
        let shared = db::Backend::of(&db) == db::Backend::Postgres;
        let key_store = crate::key_store::KeyStore::choose(kek, data_dir.keys(), shared)
            .map_err(fail("keys"))?;
        let (keys, generated_key) = Keys::load_or_generate(&db, key_store)
            .await
            .map_err(fail("signing key"))?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| StartError(format!("listen on {}: {e}", config.listen)))?;
        let timers = crate::fleet::FleetTimers {
            poll_interval_secs: config.poll_interval,
            last_seen_flush: std::time::Duration::from_secs(config.last_seen_flush.max(1)),
            cache_check: std::time::Duration::from_secs(config.cache_check.max(1)),
        };
        let fleet = crate::fleet::Fleet::load(&db, &store, timers)
            .await
            .map_err(StartError)?;
        let metrics = Arc::new(Metrics::default());
        let auth_guard = Arc::new(Guard::new(
            GuardLimits {
                burst: config.auth_failure_burst,
                refill_per_sec: config.auth_failure_refill,
            },
            Arc::clone(&metrics),
        ));
        let state = AppState {
            fleet: Arc::new(fleet),
            db,
            store,
            staging,
            metrics,
            auth_guard,
            keys: Arc::new(keys),
            limits: Limits {
                max_upload_bytes: config.max_upload_bytes,
                body_rate: crate::body_rate::MinRateRule {
                    min_rate: config.body_min_rate,
                    grace: std::time::Duration::from_secs(config.body_grace),
                },
                max_uploads: config.max_uploads.max(1),
            },
            uploads: Arc::new(tokio::sync::Semaphore::new(config.max_uploads.max(1))),
            validations: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            )),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
        };
        Ok(Self {
            state,
            listener,
            conn_limits: conn::Limits {
                header_timeout: std::time::Duration::from_secs(config.header_timeout.max(1)),
                idle_timeout: std::time::Duration::from_secs(config.idle_timeout.max(1)),
                max_connections: conn::fit_connections(config.max_connections, nofile),
            },
            data_dir,
            bootstrap,
            generated_key,
            pack_store: config.pack_store.filter(|s| !s.is_empty()),
            database: match location {
                db::Location::Sqlite(path) if path.as_ref() == database.as_path() => None,
                db::Location::Sqlite(path) => Some(format!("sqlite://{}", path.display())),
                db::Location::Postgres(url) => Some(db::redact(url)),
            },
        })
    }

    /// The bound address (the real port when `--listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound TCP listener has an address")
    }

    /// The shared state (for tests that look behind the API).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// What to tell the person who started the server: where it listens, where its data is, and
    /// how to authenticate. The first line is `npub-server listening on http://ADDR`, which
    /// scripts (and the tests) read to learn the port.
    pub fn banner(&self) -> String {
        let addr = self.local_addr();
        let url = format!("http://{addr}");
        let root = self.data_dir.root();
        let key = self.state.keys.active().key_id();
        let mut out = String::new();
        let _ = writeln!(out, "npub-server listening on {url}");
        let database = self.database.as_deref().unwrap_or("npub.db");
        match &self.pack_store {
            None if self.database.is_some() => {
                let _ = writeln!(
                    out,
                    "  data dir:     {} (packs in packs/)\n  database:     {database}",
                    root.display()
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  data dir:     {} (database npub.db, packs in packs/)",
                    root.display()
                );
            }
            Some(url) => {
                let _ = writeln!(
                    out,
                    "  data dir:     {} (database {database})",
                    root.display()
                );
                let _ = writeln!(out, "  pack store:   {url}");
            }
        }
        let _ = writeln!(
            out,
            "  signing key:  {key}{}",
            if self.generated_key {
                " (generated now)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            out,
            "  connections:  up to {}; headers within {} s, idle {} s",
            self.conn_limits.max_connections,
            self.conn_limits.header_timeout.as_secs(),
            self.conn_limits.idle_timeout.as_secs()
        );
        match &self.bootstrap {
            Bootstrap::Generated(secret) => {
                let _ = writeln!(
                    out,
                    "  admin token:  {secret}\n                (shown only this once: store it now; \
                     create more with POST /api/v1/tokens)"
                );
            }
            Bootstrap::FromEnvironment => {
                let _ = writeln!(out, "  admin token:  the value of NPUB_ADMIN_TOKEN");
            }
            Bootstrap::Existing => {
                let _ = writeln!(out, "  tokens:       use an existing operator token");
            }
        }
        let _ = writeln!(
            out,
            "  try:          curl -H \"Authorization: Bearer $NPUB_TOKEN\" {url}/api/v1/models\n  \
             upload:       curl -H \"Authorization: Bearer $NPUB_TOKEN\" --data-binary @model_vela.tflite \
             {url}/api/v1/models/NAME/versions/1.0.0\n  \
             API:          {url}/api/v1/openapi.json"
        );
        out
    }

    /// Serves until `shutdown` resolves, then finishes the requests in flight, closes the
    /// database and releases the data directory.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let Server {
            state,
            listener,
            conn_limits,
            data_dir,
            ..
        } = self;
        let db = state.db.clone();
        let fleet = Arc::clone(&state.fleet);
        let (stop_background, stopped) = tokio::sync::oneshot::channel::<()>();
        let background = tokio::spawn(Arc::clone(&fleet).run_background(
            db.clone(),
            Arc::clone(&state.store),
            async move {
                let _ = stopped.await;
            },
        ));
        let result = conn::serve(listener, app(state.clone()), state, conn_limits, shutdown).await;
        let _ = stop_background.send(());
        let _ = background.await;
        if let Err(e) = fleet.flush_last_seen(&db).await {
            tracing::error!(error = %e, "writing last-seen times at shutdown");
        }
        db.close().await;
        drop(data_dir);
        tracing::info!("stopped");
        result
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (systemd stop).
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutdown signal received; finishing requests in flight");
}

/// Restores "every pack file has a row and every row has a pack file" after a crash: removes
/// staged uploads (a crash mid-upload) and pack files no version names (a crash between the
/// rename into the store and the commit). Runs before the listener accepts anything.
async fn sweep(db: &db::Db, staging: &Staging, store: &dyn PackStore) -> Result<(), StartError> {
    let staged = staging
        .sweep()
        .map_err(|e| StartError(format!("sweeping upload staging: {e}")))?;
    if staged > 0 {
        tracing::info!(files = staged, "removed interrupted uploads");
    }
    let referenced: HashSet<String> =
        sqlx::query_as::<_, (String,)>("SELECT DISTINCT sha256 FROM versions")
            .fetch_all(db)
            .await
            .map_err(|e| StartError(format!("reading versions: {e}")))?
            .into_iter()
            .map(|(s,)| s)
            .collect();
    let stored = store
        .list()
        .await
        .map_err(|e| StartError(format!("listing the pack store: {e}")))?;
    let grace = store.orphan_grace();
    let now = std::time::SystemTime::now();
    for listed in &stored {
        let digest = listed.digest;
        if referenced.contains(&digest.hex()) {
            continue;
        }
        // Without a time the orphan counts as old (the sweep must still work); a time in the
        // future (the bucket's clock ahead of this host's) as young.
        let young = grace > std::time::Duration::ZERO
            && listed
                .modified
                .is_some_and(|m| now.duration_since(m).map_or(true, |age| age < grace));
        if young {
            tracing::info!(%digest, "a pack no version refers to is recent; left for now");
            continue;
        }
        store
            .remove(digest)
            .await
            .map_err(|e| StartError(format!("removing orphaned pack {digest}: {e}")))?;
        tracing::info!(%digest, "removed a pack no version refers to");
    }
    let stored: HashSet<String> = stored.iter().map(|l| l.digest.hex()).collect();
    for missing in referenced.difference(&stored) {
        tracing::error!(sha256 = %missing, "a version's pack is missing from the store");
    }
    Ok(())
}
