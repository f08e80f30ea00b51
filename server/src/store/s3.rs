//! The S3-compatible store (`--pack-store s3://bucket/prefix`), through the `object_store` crate.
//!
//! | Key                  | Content                                   |
//! |----------------------|-------------------------------------------|
//! | `prefix/ab12…ef`     | the pack whose SHA-256 is `ab12…ef`        |
//!
//! Endpoint, region and credentials come from the usual `AWS_*` variables (`AWS_ENDPOINT`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_ALLOW_HTTP` for a plain-HTTP endpoint, …: every key `object_store`'s `AmazonS3Builder`
//! knows). Other keys in the bucket are listed as "not a pack name" and left alone.
//!
//! **Durability and atomicity.** An upload has been validated and fsynced in local staging
//! before `put` sees it. A pack of up to [`SINGLE_PUT_BYTES`] goes up in one `PutObject`, larger
//! ones as a multipart upload of [`PART_BYTES`] parts; either way S3 makes the object visible
//! only once it is complete (a `PutObject` whose body breaks off stores nothing, a multipart
//! upload is invisible until `CompleteMultipartUpload`), and a failed multipart upload is aborted.
//! The body carries `x-amz-checksum-sha256`, so the bucket refuses bytes that changed on the way.
//! `put` resolving means the bucket acknowledged the object: S3 is durable on acknowledgement.
//!
//! **Shared buckets.** Several replicas may share one bucket. The start-up sweep then sees
//! another replica's upload between its put and its commit as an orphan, so it only removes
//! orphans older than [`ORPHAN_GRACE`] ([`PackStore::orphan_grace`]).
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, Checksum};
use object_store::path::Path;
use object_store::signer::Signer as _;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectStore as _, ObjectStoreExt as _,
    PutPayload, RetryConfig, WriteMultipart,
};
use tokio::io::AsyncReadExt as _;

use super::digest::PackDigest;
use super::pack_store::{Listed, PackReader, PackStore, Put, StoreFuture};
use super::staging::Sealed;

/// Largest pack sent in one `PutObject` (held in memory while it goes up); larger ones go as a
/// multipart upload. Packs are a few MiB at most on an RA8P1's OSPI slot; 8 MiB keeps the
/// common case one request, and the memory of 16 concurrent uploads bounded.
pub const SINGLE_PUT_BYTES: u64 = 8 * 1024 * 1024;
/// Part size of a multipart upload (S3 wants at least 5 MiB for every part but the last).
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one upload in flight at once: memory is (this + 1) × [`PART_BYTES`] per upload.
pub const PARTS_IN_FLIGHT: usize = 2;
/// How long a presigned download URL stays valid. A device asks the server again for every
/// range it fetches, so this only has to outlast one request's start (S3 checks the expiry
/// when a request arrives, not while its body flows).
pub const PRESIGN_TTL: Duration = Duration::from_secs(10 * 60);
/// Orphans younger than this are left to the next start: another replica may be about to commit
/// the version that names them. An hour is far longer than any put-to-commit window, with room
/// for clock skew between the bucket and this host.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);
/// The key `probe` asks for: never a pack's name (not 64 hex digits).
const PROBE_KEY: &str = "npub-readiness-probe";
/// Retries of a failed request (connection refused, 5xx, throttling) before `put`, `open` or
/// `list` fails; with the default backoff, a dead endpoint fails an upload in about a second.
/// There is no bound on a whole request (`s3_http` bounds each wait instead): a download streamed
/// to a 2G modem may take many minutes, and is paced by it.
const MAX_RETRIES: usize = 3;

/// What [`S3Store::open`] needs.
#[derive(Debug, Clone, Default)]
pub struct S3Settings {
    /// `s3://bucket` or `s3://bucket/prefix`.
    pub url: String,
    /// `AWS_*` settings applied over the process environment's (an embedder's, a test's), e.g.
    /// `("AWS_ENDPOINT", "http://127.0.0.1:9000")`.
    pub overrides: Vec<(String, String)>,
    /// Answer device downloads with a `307` to a presigned URL instead of streaming them.
    pub presign: bool,
}

/// Packs as objects in an S3-compatible bucket.
#[derive(Clone)]
pub struct S3Store {
    s3: Arc<AmazonS3>,
    /// Empty for the bucket's root.
    prefix: Path,
    url: Arc<str>,
    presign: bool,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("url", &self.url)
            .field("presign", &self.presign)
            .finish_non_exhaustive()
    }
}

/// Splits `s3://bucket/prefix` into the bucket and the key prefix, or says what is wrong.
fn parse_url(url: &str) -> Result<(String, Path), String> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("{url:?}: a pack store URL starts with s3://"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("{url:?}: no bucket name after s3://"));
    }
    // S3's own rule for bucket names (3–63 of lowercase letters, digits, dots and hyphens).
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if !valid {
        return Err(format!(
            "{url:?}: bucket {bucket:?} is not a bucket name (3 to 63 lowercase letters, digits, \
             dots and hyphens)"
        ));
    }
    let prefix = prefix.trim_end_matches('/');
    let prefix = Path::parse(prefix).map_err(|e| format!("{url:?}: prefix {prefix:?}: {e}"))?;
    Ok((bucket.to_owned(), prefix))
}

impl S3Store {
    /// A store over the bucket `settings.url` names. Nothing is contacted yet; the start-up sweep's
    /// listing is the first request, and fails the start if the bucket cannot be reached.
    pub fn open(settings: &S3Settings) -> Result<Self, String> {
        let (bucket, prefix) = parse_url(&settings.url)?;
        // Timeouts are the HTTP client's own (`s3_http`); these options only carry `AWS_ALLOW_HTTP`.
        let client = ClientOptions::new();
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: Duration::from_secs(60),
        };
        // Client options first: `with_config` then adjusts them (`AWS_ALLOW_HTTP`), where a
        // later `with_client_options` would replace them.
        let mut builder = AmazonS3Builder::new()
            .with_http_connector(super::s3_http::Connector)
            .with_client_options(client)
            .with_retry(retry)
            .with_checksum_algorithm(Checksum::SHA256);
        for (key, value) in std::env::vars() {
            if key.starts_with("AWS_")
                && let Ok(k) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>()
            {
                builder = builder.with_config(k, value);
            }
        }
        for (key, value) in &settings.overrides {
            let k = key
                .to_ascii_lowercase()
                .parse::<AmazonS3ConfigKey>()
                .map_err(|_| format!("{key}: not an S3 setting"))?;
            builder = builder.with_config(k, value);
        }
        let s3 = builder
            .with_bucket_name(&bucket)
            .build()
            .map_err(|e| format!("{}: {e}", settings.url))?;
        Ok(Self {
            s3: Arc::new(s3),
            prefix,
            url: Arc::from(settings.url.as_str()),
            presign: settings.presign,
        })
    }

    fn key(&self, digest: PackDigest) -> Path {
        self.prefix.clone().join(digest.hex())
    }

    /// Sends the staged file up, in one request or as a multipart upload.
    async fn upload(&self, key: &Path, staged: &Sealed) -> io::Result<()> {
        let mut file = tokio::fs::File::open(staged.path()).await?;
        if staged.len() <= SINGLE_PUT_BYTES {
            let mut bytes = Vec::with_capacity(usize::try_from(staged.len()).unwrap_or(0));
            file.read_to_end(&mut bytes).await?;
            if bytes.len() as u64 != staged.len() {
                return Err(io::Error::other(format!(
                    "staged pack {} changed length: {} bytes, sealed at {}",
                    staged.digest(),
                    bytes.len(),
                    staged.len()
                )));
            }
            self.s3
                .put(key, PutPayload::from(bytes))
                .await
                .map_err(|e| store_error("storing", key, e))?;
            return Ok(());
        }
        let upload = self
            .s3
            .put_multipart(key)
            .await
            .map_err(|e| store_error("starting the upload of", key, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        match feed(&mut writer, &mut file, staged.len()).await {
            Ok(()) => writer
                .finish()
                .await
                .map(drop)
                .map_err(|e| store_error("storing", key, e)),
            Err(e) => {
                if let Err(abort) = writer.abort().await {
                    // Invisible but billed: a bucket lifecycle rule removes it (server/README.md).
                    tracing::warn!(%key, error = %abort, "cannot abort a failed multipart upload");
                }
                Err(e)
            }
        }
    }

    async fn exists(&self, key: &Path) -> io::Result<Option<u64>> {
        match self.s3.head(key).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error("looking up", key, e)),
        }
    }
}

/// Copies the staged file into the multipart upload, [`PARTS_IN_FLIGHT`] parts at a time.
async fn feed(
    writer: &mut WriteMultipart,
    file: &mut tokio::fs::File,
    sealed_len: u64,
) -> io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        writer
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(io::Error::other)?;
        writer.write(&buf[..n]);
        sent += n as u64;
    }
    if sent != sealed_len {
        return Err(io::Error::other(format!(
            "staged pack changed length: {sent} bytes, sealed at {sealed_len}"
        )));
    }
    Ok(())
}

fn store_error(doing: &str, key: &Path, e: object_store::Error) -> io::Error {
    io::Error::other(format!("S3 pack store: {doing} {key}: {e}"))
}

impl PackStore for S3Store {
    fn put<'a>(&'a self, staged: &'a Sealed) -> StoreFuture<'a, Put> {
        Box::pin(async move {
            let key = self.key(staged.digest());
            match self.exists(&key).await? {
                Some(len) if len == staged.len() => return Ok(Put::AlreadyPresent),
                Some(len) => tracing::warn!(
                    %key, stored = len, pack = staged.len(),
                    "a stored pack has the wrong length; replacing it"
                ),
                None => {}
            }
            self.upload(&key, staged).await?;
            Ok(Put::Created)
        })
    }

    fn open_from(&self, digest: PackDigest, offset: u64) -> StoreFuture<'_, Option<PackReader>> {
        Box::pin(async move {
            let key = self.key(digest);
            let options = GetOptions {
                range: (offset > 0).then_some(GetRange::Offset(offset)),
                ..GetOptions::default()
            };
            let got = match self.s3.get_opts(&key, options).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(store_error("reading", &key, e)),
            };
            let len = got.meta.size;
            let stream = got.into_stream().map_err(io::Error::other);
            Ok(Some(PackReader {
                len,
                reader: Box::pin(tokio_util::io::StreamReader::new(stream)),
            }))
        })
    }

    fn remove(&self, digest: PackDigest) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let key = self.key(digest);
            if self.exists(&key).await?.is_none() {
                return Ok(false);
            }
            self.s3
                .delete(&key)
                .await
                .map_err(|e| store_error("deleting", &key, e))?;
            Ok(true)
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<Listed>> {
        Box::pin(async move {
            let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
            let mut objects = self.s3.list(prefix);
            let mut out = Vec::new();
            while let Some(meta) = objects.next().await {
                let meta = meta.map_err(|e| {
                    io::Error::other(format!("S3 pack store: listing {}: {e}", self.url))
                })?;
                let name = meta
                    .location
                    .prefix_match(&self.prefix)
                    .and_then(|mut parts| match (parts.next(), parts.next()) {
                        (Some(only), None) => only.as_ref().parse::<PackDigest>().ok(),
                        _ => None,
                    });
                match name {
                    Some(digest) => out.push(Listed {
                        digest,
                        modified: Some(SystemTime::from(meta.last_modified)),
                    }),
                    None => tracing::warn!(key = %meta.location, "not a pack name; left alone"),
                }
            }
            out.sort_by_key(|l| l.digest);
            Ok(out)
        })
    }

    fn orphan_grace(&self) -> Duration {
        ORPHAN_GRACE
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            // One HEAD of a key that is never a pack: "not found" is an answer, and all a probe
            // asks for. (A listing could page through every pack.)
            let key = self.prefix.clone().join(PROBE_KEY);
            self.exists(&key).await.map(drop)
        })
    }

    fn serve_from_memory(&self) -> bool {
        false
    }

    fn download_url(&self, digest: PackDigest) -> StoreFuture<'_, Option<String>> {
        Box::pin(async move {
            if !self.presign {
                return Ok(None);
            }
            let key = self.key(digest);
            let url = self
                .s3
                .signed_url(axum::http::Method::GET, &key, PRESIGN_TTL)
                .await
                .map_err(|e| store_error("presigning", &key, e))?;
            Ok(Some(url.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let (b, p) = parse_url("s3://npub-packs").unwrap();
        assert_eq!((b.as_str(), p.as_ref()), ("npub-packs", ""));
        let (b, p) = parse_url("s3://npub-packs/fleet/eu/").unwrap();
        assert_eq!((b.as_str(), p.as_ref()), ("npub-packs", "fleet/eu"));
    }

    #[test]
    fn rejects_urls_that_name_no_bucket() {
        for (url, says) in [
            ("/var/lib/packs", "starts with s3://"),
            ("https://s3.example/bucket", "starts with s3://"),
            ("s3://", "no bucket name"),
            ("s3:///prefix", "no bucket name"),
            ("s3://Packs", "not a bucket name"),
            ("s3://ab", "not a bucket name"),
            ("s3://packs/a//b", "prefix"),
            ("s3://packs/../b", "prefix"),
        ] {
            let err = parse_url(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn rejects_an_unknown_override() {
        let err = S3Store::open(&S3Settings {
            url: "s3://packs".into(),
            overrides: vec![("AWS_NO_SUCH_THING".into(), "1".into())],
            presign: false,
        })
        .unwrap_err();
        assert!(
            err.contains("AWS_NO_SUCH_THING: not an S3 setting"),
            "{err}"
        );
    }
}
