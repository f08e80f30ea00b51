//! Starting and running: data directory, database, bootstrap token, signing key, start-up sweep,
//! listener; then serving until a shutdown signal.
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::app::app;
use crate::auth::guard::{Guard, Limits as GuardLimits};
use crate::auth::token::{self, Bootstrap};
use crate::config::Config;
use crate::keys::signing::Keys;
use crate::ops::datadir::DataDir;
use crate::ops::metrics::Metrics;
use crate::state::{AppState, Limits};
use crate::store::Staging;
use crate::{conn, db};

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
    /// The main listener's connections.
    table: Arc<conn::table::Table>,
    /// `--admin-listen`: its listener and connections.
    admin: Option<(TcpListener, Arc<conn::table::Table>)>,
    trusted: Arc<crate::peer::TrustedProxies>,
    data_dir: DataDir,
    bootstrap: Bootstrap,
    generated_key: bool,
    pack_store: Option<String>,
    /// `--database-url` with any password replaced, for the banner; `None`: the SQLite default.
    database: Option<String>,
    /// `--tls-cert`: the listeners speak TLS.
    tls: Option<Arc<crate::tls::Tls>>,
}

impl Server {
    /// Opens the data directory (taking its lock), the database (migrating it), creates the
    /// bootstrap token and the signing key on a first start, sweeps interrupted uploads and
    /// orphaned packs, and binds the listener.
    pub async fn start(config: Config) -> Result<Self, StartError> {
        let nofile = conn::raise_nofile();
        // The TLS files first: a typo in a path is found before anything is opened.
        let tls = config
            .tls()
            .and_then(|s| s.map(crate::tls::Tls::load).transpose())
            .map_err(|e| StartError(e.to_string()))?
            .map(Arc::new);
        let data_dir = DataDir::open(&config.data_dir)
            .map_err(|e| StartError(format!("data dir {}: {e}", config.data_dir.display())))?;
        let database = data_dir.database();
        let location = db::Location::parse(config.database_url.as_deref(), &database)
            .map_err(fail("--database-url"))?;
        let db = db::open_with(&location, &config.database_timeouts())
            .await
            .map_err(|e| fail("database")(e.to_string()))?;
        let staging = Staging::new(data_dir.tmp());
        let store = crate::store::open(
            config.pack_store.as_deref(),
            data_dir.packs(),
            config.presign_downloads,
            &config.aws_overrides,
            std::time::Duration::from_secs(config.store_timeout.max(1)),
        )
        .map_err(fail("--pack-store"))?;
        sweep_staging(&staging)?;
        let bootstrap = token::bootstrap(&db, config.admin_token.as_deref())
            .await
            .map_err(|e| StartError(e.to_string()))?;
        let kek = config
            .key_encryption_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(crate::keys::secrets::Kek::parse)
            .transpose()
            .map_err(fail("--key-encryption-key"))?;
        let shared = db::Backend::of(&db) == db::Backend::Postgres;
        let key_store = crate::keys::secrets::KeyStore::choose(kek, data_dir.keys(), shared)
            .map_err(fail("keys"))?;
        let (keys, generated_key) = Keys::load_or_generate(&db, key_store)
            .await
            .map_err(fail("signing key"))?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| StartError(format!("listen on {}: {e}", config.listen)))?;
        let admin_listener = match config.admin_listen {
            None => None,
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|e| StartError(format!("--admin-listen {addr}: {e}")))?,
            ),
        };
        let trusted = Arc::new(
            crate::peer::TrustedProxies::parse(&config.trusted_proxies)
                .map_err(fail("--trusted-proxy"))?,
        );
        let webhook_reach = crate::ops::webhooks::reach::Reach::new(
            crate::cidr::Networks::parse(&config.webhook_allow_addresses)
                .map_err(fail("--webhook-allow-address"))?,
        );
        let timers = crate::device::polling::FleetTimers {
            poll_interval_secs: config.poll_interval,
            last_seen_flush: std::time::Duration::from_secs(config.last_seen_flush.max(1)),
            cache_check: std::time::Duration::from_secs(config.cache_check.max(1)),
        };
        let by_certificate = tls.as_ref().is_some_and(|t| t.client_certificates());
        let fleet = crate::device::polling::Polling::load(&db, &store, timers, by_certificate)
            .await
            .map_err(StartError)?;
        let metrics = Arc::new(Metrics::default());
        let exposure = crate::tls::Exposure {
            tls: tls.is_some(),
            client_certificates: tls.as_ref().is_some_and(|t| t.client_certificates()),
            // `--admin-listen` is plain HTTP whatever `--tls-cert` says: a management network's.
            plain_exposed: tls
                .is_none()
                .then_some(&listener)
                .into_iter()
                .chain(admin_listener.as_ref())
                .filter_map(|l| l.local_addr().ok())
                .filter(|a| !a.ip().is_loopback())
                .collect(),
        };
        if let Some(warning) = exposure.warning() {
            tracing::warn!("{warning}");
        }
        let auth_guard = Arc::new(Guard::new(
            GuardLimits {
                burst: config.auth_failure_burst,
                refill_per_sec: config.auth_failure_refill,
            },
            Arc::clone(&metrics),
        ));
        let state = AppState {
            store_probe: Arc::default(),
            rollout_targets: Arc::default(),
            disk: Arc::new(crate::ops::disk::DataDisk::new(
                data_dir.root().to_owned(),
                config.min_free_space,
            )),
            polling: Arc::new(fleet),
            db,
            store,
            staging,
            metrics,
            auth_guard,
            keys: Arc::new(keys),
            limits: Limits {
                max_upload_bytes: config.max_upload_bytes,
                body_rate: crate::http::body_rate::MinRateRule {
                    min_rate: config.body_min_rate,
                    grace: std::time::Duration::from_secs(config.body_grace),
                },
                max_uploads: config.max_uploads.max(1),
                gc: crate::store::gc::Gc::new(std::time::Duration::from_secs(
                    config.store_timeout.max(1),
                )),
                write_wait: config.database_timeouts().lock(),
            },
            uploads: Arc::new(tokio::sync::Semaphore::new(config.max_uploads.max(1))),
            cpu: crate::ops::cpu::CpuPool::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            ),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            exposure: Arc::new(exposure),
            proof: Arc::new(crate::catalog::proof::Settings {
                python: config.reference_python.clone(),
                timeout: std::time::Duration::from_secs(config.proof_timeout.max(1)),
                inputs: config.proof_inputs,
                memory_kib: npu_model::reference::DEFAULT_MEMORY_KIB,
                workdir: data_dir.tmp(),
                runs: Arc::new(tokio::sync::Semaphore::new(
                    crate::catalog::proof::REFERENCE_RUNS,
                )),
            }),
            webhooks: Arc::new(crate::ops::webhooks::sender::Sender::new(
                crate::ops::webhooks::kinds::Settings {
                    timeout: std::time::Duration::from_secs(config.webhook_timeout.max(1)),
                    retry_base: std::time::Duration::from_millis(config.webhook_retry_base_ms),
                    disable_after: config.webhook_disable_after.max(1),
                },
                webhook_reach,
            )),
        };
        // The admin listener's connections come out of the same descriptors.
        let admin_room = if admin_listener.is_some() {
            conn::ADMIN_CONNECTIONS as u64
        } else {
            0
        };
        let caps = |total| conn::table::Caps {
            total,
            per_peer: config.max_connections_per_peer.max(1),
            trusted: (*trusted).clone(),
        };
        let table = conn::table::Table::new(
            caps(conn::fit_connections(
                config.max_connections,
                nofile.saturating_sub(admin_room),
            )),
            Arc::clone(&state.metrics),
        );
        let admin = admin_listener.map(|l| {
            (
                l,
                conn::table::Table::new(caps(conn::ADMIN_CONNECTIONS), Arc::clone(&state.metrics)),
            )
        });
        Ok(Self {
            state,
            listener,
            table,
            admin,
            trusted,
            conn_limits: conn::Limits {
                header_timeout: std::time::Duration::from_secs(config.header_timeout.max(1)),
                idle_timeout: std::time::Duration::from_secs(config.idle_timeout.max(1)),
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
            tls,
        })
    }

    /// The bound address (the real port when `--listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound TCP listener has an address")
    }

    /// The `--admin-listen` address actually bound, if there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// `http` or `https`: what the listeners speak.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The shared state (for tests that look behind the API).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// What to tell the person who started the server: where it listens, where its data is, and
    /// how to authenticate. The first line is `npub-server listening on http://ADDR`, which
    /// scripts (and the tests) read to learn the port (`https://` with `--tls-cert`).
    pub fn banner(&self) -> String {
        let addr = self.local_addr();
        let scheme = self.scheme();
        let url = format!("{scheme}://{addr}");
        let root = self.data_dir.root();
        let key = self.state.keys.active().key_id();
        let mut out = String::new();
        let _ = writeln!(out, "npub-server listening on {url}");
        if let Some(admin) = self.admin_addr() {
            let _ = writeln!(
                out,
                "  admin:        http://{admin} (health, metrics, the API; plain HTTP)"
            );
        }
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
            self.table.caps().total,
            self.conn_limits.header_timeout.as_secs(),
            self.conn_limits.idle_timeout.as_secs()
        );
        if let Some(warning) = self.state.exposure.warning() {
            let _ = writeln!(out, "  WARNING:      {warning}");
        }
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
        // Each line works as written once NPUB_TOKEN holds the token and NAME is replaced
        // (tests/api/banner.rs runs them): a version is uploaded to a model that exists.
        let _ = writeln!(
            out,
            "  web UI:       {url}/ (sign in with an operator token)\n  \
             try:          curl -H \"Authorization: Bearer $NPUB_TOKEN\" {url}/api/v1/models\n  \
             create:       curl -H \"Authorization: Bearer $NPUB_TOKEN\" -H 'Content-Type: application/json' \
             -d '{{\"name\": \"NAME\"}}' {url}/api/v1/models\n  \
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
        // The banner goes to stdout for a person; the log (journald, a collector) gets the
        // addresses too, the web UI's among them.
        let scheme = self.scheme();
        let url = format!("{scheme}://{}", self.local_addr());
        tracing::info!(
            listen = %url,
            web_ui = %format!("{url}/"),
            admin = ?self.admin_addr().map(|a| format!("http://{a}")),
            "serving"
        );
        let Server {
            state,
            listener,
            conn_limits,
            table,
            admin,
            trusted,
            data_dir,
            tls,
            ..
        } = self;
        let reloader = tokio::spawn(reload_on_hangup(tls.clone(), Arc::clone(&state.metrics)));
        let db = state.db.clone();
        let fleet = Arc::clone(&state.polling);
        let (stop_background, stopped) = tokio::sync::watch::channel(());
        let until_stopped = |mut stopped: tokio::sync::watch::Receiver<()>| async move {
            let _ = stopped.changed().await;
        };
        let background = tokio::spawn(Arc::clone(&fleet).run_background(
            db.clone(),
            Arc::clone(&state.store),
            until_stopped(stopped.clone()),
        ));
        let prober = tokio::spawn(crate::ops::probe::probe_store(
            Arc::clone(&state.store),
            Arc::clone(&state.store_probe),
            until_stopped(stopped.clone()),
        ));
        let webhooks = tokio::spawn(Arc::clone(&state.webhooks).run(
            db.clone(),
            Arc::clone(&state.keys),
            until_stopped(stopped.clone()),
        ));
        let sweeper = tokio::spawn(crate::store::gc::run(
            db.clone(),
            Arc::clone(&state.store),
            state.limits.gc,
            Arc::clone(&state.metrics),
            until_stopped(stopped),
        ));
        let router = app(state.clone());
        // The admin listener stops with the main one.
        let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
        let admin = admin.map(|(listener, table)| {
            tokio::spawn(conn::serve(
                listener,
                router.clone(),
                state.clone(),
                conn_limits,
                table,
                conn::Front {
                    trusted: Arc::clone(&trusted),
                    tls: None,
                },
                async move {
                    let _ = admin_stopped.await;
                },
            ))
        });
        let result = conn::serve(
            listener,
            router,
            state,
            conn_limits,
            table,
            conn::Front { trusted, tls },
            shutdown,
        )
        .await;
        reloader.abort();
        let _ = stop_admin.send(());
        if let Some(admin) = admin {
            let _ = admin.await;
        }
        let _ = stop_background.send(());
        let _ = background.await;
        let _ = sweeper.await;
        let _ = webhooks.await;
        let _ = prober.await;
        if let Err(e) = fleet.flush_last_seen(&db).await {
            tracing::error!(error = %e, "writing last-seen times at shutdown");
        }
        db.close().await;
        drop(data_dir);
        tracing::info!("stopped");
        result
    }
}

/// Reads the TLS files again on every `SIGHUP` (`systemctl reload`, or certbot's deploy hook):
/// the next connections get the new certificate, those open keep theirs; a reload that fails
/// is logged and keeps the files in force. Without TLS a `SIGHUP` is logged and ignored (never
/// the default action, which would end the process).
async fn reload_on_hangup(tls: Option<Arc<crate::tls::Tls>>, metrics: Arc<Metrics>) {
    #[cfg(unix)]
    {
        let mut hangups =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for SIGHUP: no certificate reloads");
                    return;
                }
            };
        while hangups.recv().await.is_some() {
            let Some(tls) = &tls else {
                tracing::info!("SIGHUP: no --tls-cert, nothing to reload");
                continue;
            };
            match tls.reload() {
                Ok(()) => {
                    metrics.observe_tls_reload(true);
                    tracing::info!("SIGHUP: TLS certificate and keys reloaded");
                }
                Err(e) => {
                    metrics.observe_tls_reload(false);
                    tracing::error!(error = %e, "SIGHUP: TLS reload failed; the previous certificate stays");
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (tls, metrics);
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

/// Removes staged uploads a crash interrupted. Runs before the listener accepts anything; the
/// pack store is swept in the background once serving (`store/gc.rs`), so a store that cannot
/// be reached does not keep the server from starting.
fn sweep_staging(staging: &Staging) -> Result<(), StartError> {
    let staged = staging
        .sweep()
        .map_err(|e| StartError(format!("sweeping upload staging: {e}")))?;
    if staged > 0 {
        tracing::info!(files = staged, "removed interrupted uploads");
    }
    Ok(())
}
