//! The background sender: takes the queued deliveries to their receivers, one attempt at a time
//! per webhook, and writes every outcome back.
//!
//! | Threat                              | Bound                                                     |
//! |-------------------------------------|-----------------------------------------------------------|
//! | a receiver that never answers       | every attempt (connect, send, the answer's head) ends at `--webhook-timeout` |
//! | an answer trickled byte by byte     | the same deadline covers reading the answer; its status counts, the rest is dropped |
//! | a 10 GB answer                      | at most [`MAX_RESPONSE_BYTES`] are read, then the connection is closed |
//! | a dead receiver and a busy fleet    | [`MAX_PENDING`](super::kinds::MAX_PENDING) queued per webhook, then `dropped`; backoff between attempts; disabled after `--webhook-disable-after` failed attempts in a row |
//! | a slow receiver holding up others   | one attempt in flight per webhook; the webhooks are independent tasks |
//! | the server's own URL                | nothing a webhook sends causes an event: an attempt is one more request answered 401 |
//! | a URL aimed at the server's own host or the cloud metadata service | refused on every resolved address ([`Reach`](super::reach::Reach)), unless `--webhook-allow-address` covers it |
//! | several replicas                    | a webhook is leased (`lease_until`) by the replica sending to it |
//!
//! Order: a webhook's deliveries go oldest first; a failed one is retried after its backoff
//! before any later one is tried (the endpoint backs off, not just the message), and after
//! [`MAX_ATTEMPTS`] it is given up (`failed`) and the next one goes. A shutdown drops attempts in
//! flight: their rows stay `pending`, and the lease expires, so they are sent again.
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::emit::{prune, woken};
use super::kinds::{MAX_ATTEMPTS, MAX_LOGGED_BODY_CHARS, MAX_RESPONSE_BYTES, Settings};
use super::reach::{GuardedResolver, Reach};
use super::secret::open;
use super::sign::signature;
use crate::db::Db;
use crate::keys::signing::Keys;
use crate::time::now_ms;

/// The longest the sender sleeps between two looks at the queue (a retry whose backoff ends, a
/// delivery another replica queued without waking this one).
const TICK: Duration = Duration::from_secs(1);
/// How much longer than one attempt a lease lasts (the outcome still has to be written).
const LEASE_MARGIN: Duration = Duration::from_secs(30);

type Https = hyper_rustls::HttpsConnector<HttpConnector<GuardedResolver>>;

/// The webhook settings and the HTTP client every delivery goes through.
#[derive(Debug)]
pub struct Sender {
    settings: Settings,
    reach: Arc<Reach>,
    client: Client<Https, Body>,
}

/// What one attempt came to.
#[derive(Debug)]
struct Outcome {
    /// The receiver's status, when it answered.
    status: Option<u16>,
    /// Why it failed, when it did.
    error: Option<String>,
}

impl Sender {
    /// A sender with `settings`, sending only where `reach` allows; `https://` receivers are
    /// checked against the system's roots.
    pub fn new(settings: Settings, reach: Reach) -> Self {
        let reach = Arc::new(reach);
        let mut tcp = HttpConnector::new_with_resolver(GuardedResolver::new(Arc::clone(&reach)));
        tcp.set_connect_timeout(Some(settings.timeout));
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let builder = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
            Ok(b) => b,
            Err(e) => {
                // Only an `https://` receiver needs them; it then fails with an unknown issuer.
                tracing::warn!(error = %e, "no system TLS roots for webhook receivers");
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                    rustls::ClientConfig::builder_with_provider(
                        rustls::crypto::ring::default_provider().into(),
                    )
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default protocol versions")
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
                )
            }
        };
        let https = builder.https_or_http().enable_http1().wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        Self {
            settings,
            reach,
            client,
        }
    }

    /// Where deliveries may go.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// The settings in force.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Sends until `stop` resolves.
    pub async fn run(self: Arc<Self>, db: Db, keys: Arc<Keys>, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let busy: Arc<Mutex<HashSet<i64>>> = Arc::default();
        let mut tasks = JoinSet::new();
        loop {
            // Listening before the look at the queue: a commit during it is not missed.
            let wake = woken();
            tokio::pin!(wake);
            wake.as_mut().enable();
            let wait = match self.pass(&db, &keys, &busy, &mut tasks).await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook sender: reading the queue");
                    TICK
                }
            };
            tokio::select! {
                () = &mut stop => break,
                () = &mut wake => {}
                () = tokio::time::sleep(wait) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        tasks.abort_all();
    }

    /// One look at the queue: an attempt started for every webhook with a due delivery that is
    /// not being sent to; returns how long to sleep before the next look.
    async fn pass(
        self: &Arc<Self>,
        db: &Db,
        keys: &Arc<Keys>,
        busy: &Arc<Mutex<HashSet<i64>>>,
        tasks: &mut JoinSet<()>,
    ) -> Result<Duration, sqlx::Error> {
        let now = now_ms();
        let due: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT w.id, w.next_attempt_at FROM webhooks w WHERE w.disabled_at IS NULL \
             AND w.lease_until <= $1 AND EXISTS (SELECT 1 FROM webhook_deliveries d \
             WHERE d.webhook_id = w.id AND d.state = 'pending') ORDER BY w.id",
        )
        .bind(now)
        .fetch_all(db)
        .await?;
        let mut wait = TICK;
        for (webhook, next) in due {
            if next > now {
                let until = Duration::from_millis(u64::try_from(next - now).unwrap_or(0));
                wait = wait.min(until);
                continue;
            }
            if !busy
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(webhook)
            {
                continue;
            }
            if !self.lease(db, webhook, now).await? {
                busy.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&webhook);
                continue;
            }
            let (me, db, keys, busy) = (
                Arc::clone(self),
                db.clone(),
                Arc::clone(keys),
                Arc::clone(busy),
            );
            tasks.spawn(async move {
                if let Err(e) = me.attempt(&db, &keys, webhook).await {
                    tracing::warn!(webhook, error = %e, "webhook delivery: recording the attempt");
                }
                busy.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&webhook);
            });
        }
        Ok(wait.max(Duration::from_millis(10)))
    }

    /// Takes `webhook` for one attempt: false when another replica holds it.
    async fn lease(&self, db: &Db, webhook: i64, now: i64) -> Result<bool, sqlx::Error> {
        let until = now + millis(self.settings.timeout + LEASE_MARGIN);
        let mut tx = crate::db::begin_write(db).await?;
        let taken: Option<(i64,)> = sqlx::query_as(
            "UPDATE webhooks SET lease_until = $1 WHERE id = $2 AND lease_until <= $3 \
             AND disabled_at IS NULL RETURNING id",
        )
        .bind(until)
        .bind(webhook)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(taken.is_some())
    }

    /// One attempt at `webhook`'s oldest pending delivery, and its outcome written.
    async fn attempt(&self, db: &Db, keys: &Keys, webhook: i64) -> Result<(), sqlx::Error> {
        let row: Option<(String, Vec<u8>, i64, String, String, i64)> = sqlx::query_as(
            "SELECT w.url, w.secret_sealed, d.id, d.message_id, d.payload, d.attempts \
             FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id \
             WHERE w.id = $1 AND d.state = 'pending' ORDER BY d.id LIMIT 1",
        )
        .bind(webhook)
        .fetch_optional(db)
        .await?;
        let Some((url, sealed, delivery, message, payload, attempts)) = row else {
            return release(db, webhook).await;
        };
        let outcome = match open(&keys.store, webhook, &sealed).await {
            Ok(secret) => self.send(&url, &secret[..], &message, payload).await,
            Err(e) => Outcome {
                status: None,
                error: Some(format!("the signing secret does not open: {e}")),
            },
        };
        self.record(db, webhook, delivery, attempts + 1, outcome)
            .await
    }

    /// Signs and sends one attempt, within `--webhook-timeout`.
    async fn send(&self, url: &str, secret: &[u8], message: &str, payload: String) -> Outcome {
        let failed = |error: String| Outcome {
            status: None,
            error: Some(error),
        };
        // The resolver checks every address a name resolves to; an address in the URL is never
        // resolved, so it is checked here (the allow list may have changed since registration).
        let literal = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().and_then(|h| self.reach.refuse_literal(h)));
        if let Some(refused) = literal {
            return failed(refused);
        }
        let timestamp = now_ms() / 1000;
        let request = Request::post(url)
            .header("content-type", "application/json")
            .header(
                "user-agent",
                concat!("npub-server/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", message)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                signature(secret, message, timestamp, payload.as_bytes()),
            )
            .body(Body::from(payload));
        let request = match request {
            Ok(r) => r,
            Err(e) => return failed(format!("not a URL a request can go to: {e}")),
        };
        let deadline = Instant::now() + self.settings.timeout;
        let response = match tokio::time::timeout_at(deadline, self.client.request(request)).await {
            Err(_) => {
                return failed(format!(
                    "no answer within {} s",
                    self.settings.timeout.as_secs_f64()
                ));
            }
            Ok(Err(e)) => return failed(describe(&e)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        // The status decides; the body is read (within the same deadline, at most
        // MAX_RESPONSE_BYTES) only so the log can show why a receiver refused.
        let body = tokio::time::timeout_at(
            deadline,
            axum::body::to_bytes(Body::new(response.into_body()), MAX_RESPONSE_BYTES),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        if status.is_success() {
            return Outcome {
                status: Some(status.as_u16()),
                error: None,
            };
        }
        let excerpt: String = String::from_utf8_lossy(&body)
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_LOGGED_BODY_CHARS)
            .collect();
        Outcome {
            status: Some(status.as_u16()),
            error: Some(if excerpt.is_empty() {
                format!("answered {status}")
            } else {
                format!("answered {status}: {excerpt}")
            }),
        }
    }

    /// Writes one attempt's outcome: the delivery delivered, retried later or given up; the
    /// webhook's run of failures, backoff and (after too many) its disabling; its lease ended.
    async fn record(
        &self,
        db: &Db,
        webhook: i64,
        delivery: i64,
        attempts: i64,
        outcome: Outcome,
    ) -> Result<(), sqlx::Error> {
        let now = now_ms();
        let status = outcome.status.map(i64::from);
        let mut tx = crate::db::begin_write(db).await?;
        match &outcome.error {
            None => {
                sqlx::query(
                    "UPDATE webhook_deliveries SET state = 'delivered', attempts = $1, \
                     last_attempt_at = $2, last_status = $3, last_error = NULL, delivered_at = $2 \
                     WHERE id = $4",
                )
                .bind(attempts)
                .bind(now)
                .bind(status)
                .bind(delivery)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE webhooks SET consecutive_failures = 0, next_attempt_at = 0, \
                     lease_until = 0 WHERE id = $1",
                )
                .bind(webhook)
                .execute(&mut *tx)
                .await?;
            }
            Some(error) => {
                let given_up = attempts >= MAX_ATTEMPTS;
                let retry_at = now + millis(self.settings.backoff(attempts));
                sqlx::query(
                    "UPDATE webhook_deliveries SET state = $1, attempts = $2, last_attempt_at = $3, \
                     last_status = $4, last_error = $5, next_attempt_at = $6 WHERE id = $7",
                )
                .bind(if given_up { "failed" } else { "pending" })
                .bind(attempts)
                .bind(now)
                .bind(status)
                .bind(error)
                .bind(retry_at)
                .bind(delivery)
                .execute(&mut *tx)
                .await?;
                let failures: Option<(i64,)> = sqlx::query_as(
                    "UPDATE webhooks SET consecutive_failures = consecutive_failures + 1, \
                     next_attempt_at = $1, lease_until = 0 WHERE id = $2 \
                     RETURNING consecutive_failures",
                )
                .bind(if given_up { now } else { retry_at })
                .bind(webhook)
                .fetch_optional(&mut *tx)
                .await?;
                let failures = failures.map_or(0, |(n,)| n);
                if failures >= i64::from(self.settings.disable_after) {
                    tracing::warn!(webhook, failures, %error, "webhook disabled");
                    sqlx::query(
                        "UPDATE webhooks SET disabled_at = $1, disabled_reason = $2 \
                         WHERE id = $3 AND disabled_at IS NULL",
                    )
                    .bind(now)
                    .bind(format!(
                        "{failures} failed attempts in a row; the last: {error}"
                    ))
                    .bind(webhook)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        prune(&mut tx, webhook).await?;
        tx.commit().await
    }
}

/// Ends `webhook`'s lease without an attempt (its queue emptied meanwhile).
async fn release(db: &Db, webhook: i64) -> Result<(), sqlx::Error> {
    let mut tx = crate::db::begin_write(db).await?;
    sqlx::query("UPDATE webhooks SET lease_until = 0 WHERE id = $1")
        .bind(webhook)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A client error with its causes (hyper's own says only "client error (Connect)").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
