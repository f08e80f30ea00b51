//! The HTTP client the S3 store talks through: hyper-util's pooled client, rustls with ring for
//! `https://` endpoints (system roots), plain HTTP only when `AWS_ALLOW_HTTP` says so.
//!
//! Why not `object_store`'s built-in reqwest client: it needs reqwest's TLS, and in reqwest 0.13
//! that is aws-lc (a C build of aws-lc-sys) or "no provider", which, being a Cargo feature, would
//! switch TLS on in every reqwest client of the workspace (the device agent's, the tests') and
//! make each of them panic for want of a provider. A client of our own keeps ring here and
//! leaves everyone else's reqwest as it was.
//!
//! | Bound            | Value            | Why                                                     |
//! |------------------|------------------|---------------------------------------------------------|
//! | connect          | [`CONNECT_TIMEOUT`] | a dead endpoint fails a request fast (and is retried) |
//! | response head    | [`READ_TIMEOUT`] | a bucket that accepted the request but never answers     |
//! | each body frame  | [`READ_TIMEOUT`], while polled | a stalled transfer; a download paced by a slow device is not stalled, it is simply not polled |
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::rt::TokioExecutor;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody,
    HttpResponse, HttpResponseBody, HttpService,
};
use object_store::{ClientConfigKey, ClientOptions};

/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the answer's head, or its next body frame, may take to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

type Https = hyper_rustls::HttpsConnector<TcpConnector>;

/// Makes [`S3Http`] clients; `object_store` asks for one when the store is built.
#[derive(Debug, Default)]
pub struct Connector;

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let allow_http = options
            .get_config_value(&ClientConfigKey::AllowHttp)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let mut tcp = TcpConnector::new();
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_native_roots() {
            Ok(b) => b,
            Err(e) => {
                // Only an `https://` endpoint needs them; it then fails with an unknown issuer.
                tracing::warn!(error = %e, "no system TLS roots for the S3 store");
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                    rustls::ClientConfig::builder_with_provider(
                        rustls::crypto::ring::default_provider().into(),
                    )
                    .with_safe_default_protocol_versions()
                    .map_err(generic)?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
                )
            }
        };
        let https = builder.https_or_http().enable_http1().wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(HttpClient::new(S3Http { client, allow_http }))
    }
}

fn generic(e: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "S3",
        source: Box::new(e),
    }
}

/// One pooled client.
#[derive(Debug)]
struct S3Http {
    client: Client<Https, HttpRequestBody>,
    allow_http: bool,
}

#[derive(Debug)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Refused {}

#[async_trait::async_trait]
impl HttpService for S3Http {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        if req.uri().scheme_str() == Some("http") && !self.allow_http {
            return Err(HttpError::new(
                HttpErrorKind::Unknown,
                Refused("a plain-HTTP S3 endpoint needs AWS_ALLOW_HTTP=true"),
            ));
        }
        let response = tokio::time::timeout(READ_TIMEOUT, self.client.request(req))
            .await
            .map_err(|_| HttpError::new(HttpErrorKind::Timeout, Refused("no answer in time")))?
            .map_err(classify)?;
        Ok(response.map(|body| {
            HttpResponseBody::new(Stalling {
                inner: body,
                timer: None,
            })
        }))
    }
}

/// Sorts a client error the way `object_store`'s retry wants it.
fn classify(e: hyper_util::client::legacy::Error) -> HttpError {
    let kind = if e.is_connect() {
        HttpErrorKind::Connect
    } else {
        HttpErrorKind::Request
    };
    HttpError::new(kind, e)
}

/// A response body that fails when a polled frame takes longer than [`READ_TIMEOUT`].
struct Stalling {
    inner: hyper::body::Incoming,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Stalling {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.timer = None;
            return Poll::Ready(frame.map(|f| {
                f.map_err(|e| {
                    let kind = if e.is_incomplete_message() || e.is_closed() {
                        HttpErrorKind::Interrupted
                    } else {
                        HttpErrorKind::Unknown
                    };
                    HttpError::new(kind, e)
                })
            }));
        }
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(READ_TIMEOUT)));
        ready!(timer.as_mut().poll(cx));
        self.timer = None;
        Poll::Ready(Some(Err(HttpError::new(
            HttpErrorKind::Timeout,
            Refused("the answer's body stalled"),
        ))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
