//! A version's release signatures (issue 34, `docs/release.md`): the NPRB bundle made where the
//! model is built, stored beside the version and served to devices with its deployments.
//!
//! The server holds no release private key and never makes a signature; it checks what it can
//! before it stores a bundle, so that a mistake is found at the upload and not on every device:
//!
//! | # | check                                                          | 422 says |
//! |---|----------------------------------------------------------------|----------|
//! | 1 | the bundle's format (`Bundle::parse`: header, 1..=4 signatures, one release, no key twice) | `release signatures: not a valid bundle: …` |
//! | 2 | it releases this version's pack (SHA-256)                        | `… release another pack (SHA-256 …), not this version's …` |
//! | 3 | … as this model name, 4 … this version, 5 … for this accelerator | `… release model "b", not "a"` (and so on) |
//! | 6 | … with this version's IO digest, 7 … and no self-test (packs carry none) | `… IO digest …` |
//! | 8 | each signature by a release key a stored release record added: not revoked, and its ed25519 signature verifies | `signature 1 (key …): …` |
//!
//! What it cannot check: a signature by a key no stored record names (a key provisioned at the
//! factory, or whose record was never uploaded) is stored unverified and shown so (`known:
//! false`); devices verify it. Who may release a model is the devices' policy, which the server
//! knows only from the release records it was given.
use axum::Json as JsonResponse;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use npub_core::Accel;
use npub_core::release::{
    self, Bundle, DeviceReleaseTrust, MAX_BUNDLE_BYTES, encode_bundle, merge_bundles,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Operator;
use crate::db::Conn;
use crate::fleet::change::{Effect, FleetChange, Record};
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Path, Query, small_body};
use crate::keys::release::{KnownRelease, NO_SELFTEST, VersionFacts};
use crate::state::AppState;
use crate::store::to_hex;
use crate::time::rfc3339;

/// Documents a bundle body: bytes, not JSON.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)]
pub(crate) struct BundleFile(Vec<u8>);

/// What a 413 of a bundle names.
pub const BUNDLE_PART: &str = "the release bundle";

/// One signature of a stored bundle, as the JSON view shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReleaseSignature {
    /// The release key's id, 16 hex digits.
    pub key_id: String,
    /// When it was signed (RFC 3339; what the signer's clock said).
    pub signed_at: String,
    /// Whether a stored release record added this key, so that the server verified the
    /// signature; `false`: unknown here (a factory-provisioned key), verified by devices only.
    pub known: bool,
    /// Whether a stored release record revoked this key since: devices refuse the signature.
    pub revoked: bool,
}

/// `GET …/release-signatures` with `Accept: application/json`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReleaseInfo {
    /// The model.
    pub model: String,
    /// The version.
    pub version: String,
    /// SHA-256 of the bundle's bytes (the device route's `ETag` is `"r-<this>"`).
    pub bundle_sha256: String,
    /// The bundle's length in bytes.
    pub bundle_bytes: usize,
    /// The pack SHA-256 every signature signs.
    pub pack_sha256: String,
    /// The accelerator they name.
    pub accelerator: String,
    /// The IO digest they name; absent: none.
    pub io_digest: Option<String>,
    /// The signatures, in bundle order.
    pub signatures: Vec<ReleaseSignature>,
    /// *k*: valid signatures the model's rule needs, as the stored release records set it (1
    /// when no record names a policy).
    pub threshold: u8,
    /// *n*: the release keys the model's policy names (its own or the default one), whose
    /// signatures count; empty when no stored record sets a policy (any trusted key counts).
    pub policy_keys: Vec<String>,
    /// The rule in words: "2 of the release keys …", "1 by any trusted release key".
    pub rule: String,
    /// Whether the bundle meets that rule now (devices that applied every stored record would
    /// install the version).
    pub meets_rule: bool,
    /// Why not, when it does not.
    pub problem: Option<String>,
}

/// `POST …/release-signatures` query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AttachQuery {
    /// Replace the stored bundle instead of merging into it (after a release key leaked: the
    /// re-signed bundle without the leaked key's signature). Default false: merged.
    #[serde(default)]
    pub replace: bool,
}

/// The release-signature routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(attach_signatures, get_signatures))
}

/// A version as a release is checked against.
struct Target {
    id: i64,
    facts: VersionFacts,
    stored: Option<Vec<u8>>,
}

/// `versions` as [`target`] reads it: id, sha256, accel, io_digest, release_bundle,
/// golden_input, golden_sha256.
type TargetRow = (
    i64,
    String,
    i64,
    Option<String>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<String>,
);

async fn target(conn: &mut Conn, model: &str, version: &str) -> Result<Target, ApiError> {
    let row: Option<TargetRow> = sqlx::query_as(
        "SELECT v.id, v.sha256, v.accel, v.io_digest, v.release_bundle, v.golden_input, \
         v.golden_sha256 FROM versions v \
         JOIN models m ON m.id = v.model_id WHERE m.name = $1 AND v.version = $2",
    )
    .bind(model)
    .bind(version)
    .fetch_optional(&mut *conn)
    .await?;
    let (id, sha, accel, io, stored, golden, golden_sha) =
        row.ok_or_else(|| ApiError::NotFound(format!("model {model:?} version {version:?}")))?;
    let facts = stored_facts(
        model,
        version,
        &sha,
        accel,
        io.as_deref(),
        golden.as_deref(),
        golden_sha.as_deref(),
    )?;
    Ok(Target { id, facts, stored })
}

/// The facts a release of a stored version must name, from its `versions` columns (sha256,
/// accel, io_digest, golden_input, golden_sha256); the 500 when a stored digest is not 64 hex
/// digits.
pub(crate) fn stored_facts(
    model: &str,
    version: &str,
    sha256: &str,
    accel: i64,
    io_digest: Option<&str>,
    golden_input: Option<&[u8]>,
    golden_sha256: Option<&str>,
) -> Result<VersionFacts, ApiError> {
    let selftest = super::proof::selftest_digest(golden_input, golden_sha256);
    VersionFacts::of_row(model, version, sha256, accel, io_digest, selftest)
        .ok_or_else(|| ApiError::internal("versions: a digest is not 64 hex digits"))
}

/// Checks `uploaded` against `facts` and the release keys the server knows (the table above);
/// `Err` is the 422.
pub fn check_bundle(
    uploaded: &[u8],
    facts: &VersionFacts,
    known: &KnownRelease,
) -> Result<(), ApiError> {
    let refuse = |why: String| ApiError::invalid(format!("release signatures: {why}"));
    let bundle = Bundle::parse(uploaded).map_err(|e| refuse(format!("not a valid bundle: {e}")))?;
    let release = bundle
        .first()
        .fields()
        .map_err(|e| refuse(format!("not a valid bundle: {e}")))?;
    let they = "they release";
    if release.pack_sha256 != facts.pack_sha256 {
        return Err(refuse(format!(
            "{they} another pack (SHA-256 {}), not this version's ({})",
            to_hex(&release.pack_sha256),
            to_hex(&facts.pack_sha256)
        )));
    }
    if release.model_name != facts.model {
        return Err(refuse(format!(
            "{they} model {:?}, not {:?}",
            release.model_name, facts.model
        )));
    }
    if release.model_version != facts.version {
        return Err(refuse(format!(
            "{they} version {:?} of {:?}, not {:?}",
            release.model_version, facts.model, facts.version
        )));
    }
    let accel = Accel::from_word(facts.accel);
    if release.accel != accel {
        return Err(refuse(format!(
            "{they} the pack for accelerator {}, but it is compiled for {}",
            release.accel.name(),
            accel.name()
        )));
    }
    if release.io_digest != facts.io_digest {
        let show = |d: &[u8; 32]| {
            if d == &[0; 32] {
                "none".to_owned()
            } else {
                to_hex(d)
            }
        };
        return Err(refuse(format!(
            "{they} IO bindings with digest {}, but this version's IO digest is {}",
            show(&release.io_digest),
            show(&facts.io_digest)
        )));
    }
    if release.selftest_digest != facts.selftest_digest {
        let show = |d: &[u8; 32]| {
            if d == &NO_SELFTEST {
                "none".to_owned()
            } else {
                to_hex(d)
            }
        };
        let fix = if facts.selftest_digest == NO_SELFTEST {
            "this version has no golden vector, so its manifests carry no self-test: sign the \
             release without --selftest"
        } else {
            "its manifests carry the self-test of GET …/selftest: sign the release with \
             --selftest and that record"
        };
        return Err(refuse(format!(
            "{they} a self-test with SHA-256 {}, but this version's self-test record has SHA-256 \
             {} ({fix}); devices would refuse it",
            show(&release.selftest_digest),
            show(&facts.selftest_digest)
        )));
    }
    for (index, signature) in bundle.signatures().enumerate() {
        let key_id = signature.key_id();
        let Some((public_key, revoked)) = known.key(key_id) else {
            continue;
        };
        if revoked {
            return Err(refuse(format!(
                "signature {index} (key {key_id}): the release key was revoked by a stored \
                 release record; devices refuse it"
            )));
        }
        // The device's own check, with this key alone trusted and this signature alone.
        let mut one = DeviceReleaseTrust::new();
        one.add_key(public_key)
            .and_then(|_| encode_bundle(&[*signature.as_bytes()]))
            .and_then(|single| release::check(&one, &single, &facts.facts()))
            .map_err(|e| refuse(format!("signature {index} (key {key_id}): {e}")))?;
    }
    Ok(())
}

/// The bundle to store: `uploaded` checked, then merged into `stored` (unless `replace`).
pub fn accept(
    uploaded: &[u8],
    stored: Option<&[u8]>,
    replace: bool,
    facts: &VersionFacts,
    known: &KnownRelease,
) -> Result<Vec<u8>, ApiError> {
    check_bundle(uploaded, facts, known)?;
    match stored {
        Some(stored) if !replace => merge_bundles(stored, uploaded).map_err(|e| {
            ApiError::invalid(format!(
                "release signatures: cannot merge them with the stored ones: {e}"
            ))
        }),
        _ => Ok(uploaded.to_vec()),
    }
}

/// The key ids of a bundle, for the audit log.
fn key_ids(bundle: &[u8]) -> Vec<String> {
    Bundle::parse(bundle)
        .map(|b| b.signatures().map(|s| s.key_id().to_string()).collect())
        .unwrap_or_default()
}

/// Attaches release signatures to a version: the body is the NPRB bundle `npub release sign`
/// writes (`PACK.release`). Checked against the version (pack SHA-256, model name, version,
/// accelerator, IO digest) and against the release keys the stored release records add (revoked
/// or not, the signature itself); then merged with the bundle stored before (a third signer),
/// or replacing it with `replace=true`.
#[utoipa::path(
    post,
    path = "/api/v1/models/{name}/versions/{version}/release-signatures",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
        AttachQuery,
    ),
    request_body(content = BundleFile, content_type = "application/octet-stream",
        description = "the NPRB bundle (docs/release.md), at most 1,168 bytes"),
    security(("token" = [])),
    responses(
        (status = 201, body = ReleaseInfo, description = "stored (merged); the stored bundle's view"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such model or version"),
        (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "not a valid bundle, or it does not release this version, or a signature is refused: the detail says which"),
    )
)]
async fn attach_signatures(
    State(state): State<AppState>,
    op: Operator,
    Path((name, version)): Path<(String, String)>,
    Query(q): Query<AttachQuery>,
    request: Request,
) -> Result<(StatusCode, JsonResponse<ReleaseInfo>), ApiError> {
    // One byte over the limit is enough to say "too long" in the bundle's own words.
    let uploaded = small_body(request.into_body(), MAX_BUNDLE_BYTES + 1, BUNDLE_PART).await?;
    let mut tx = FleetChange::begin(&state).await?;
    let t = target(&mut tx, &name, &version).await?;
    let known = KnownRelease::load(&mut tx).await?;
    let bundle = accept(&uploaded, t.stored.as_deref(), q.replace, &t.facts, &known)?;
    sqlx::query("UPDATE versions SET release_bundle = $1 WHERE id = $2")
        .bind(bundle.as_slice())
        .bind(t.id)
        .execute(&mut *tx)
        .await?;
    // Devices are served the bundle of what they are assigned from the poll snapshot: a
    // deployed version's new bundle needs a new one.
    let deployed: Option<(i64,)> = sqlx::query_as(
        "SELECT id FROM deployments WHERE version_id = $1 AND state <> 'aborted' LIMIT 1",
    )
    .bind(t.id)
    .fetch_optional(&mut *tx)
    .await?;
    let record = Record::Audit {
        op: &op,
        action: "version.release",
        object: format!("models/{name}/versions/{version}"),
        detail: serde_json::json!({
            "uploaded": key_ids(&uploaded),
            "stored": key_ids(&bundle),
            "replace": q.replace,
            "bundle_sha256": to_hex(&Sha256::digest(&bundle)),
        }),
    };
    let effect = if deployed.is_some() {
        Effect::Fleet
    } else {
        Effect::Nothing
    };
    tx.commit(record, effect).await?.finish().await;
    tracing::info!(model = %name, %version, keys = ?key_ids(&bundle), "release signatures stored");
    let info = info_of(&name, &version, &bundle, &t.facts, &known)?;
    Ok((StatusCode::CREATED, JsonResponse(info)))
}

/// The JSON view of a stored bundle.
pub fn info_of(
    name: &str,
    version: &str,
    bundle: &[u8],
    facts: &VersionFacts,
    known: &KnownRelease,
) -> Result<ReleaseInfo, ApiError> {
    let parsed = Bundle::parse(bundle)
        .map_err(|e| ApiError::internal(format!("a stored release bundle: {e}")))?;
    let first = parsed.first();
    let signatures = parsed
        .signatures()
        .map(|s| {
            let key = known.key(s.key_id());
            ReleaseSignature {
                key_id: s.key_id().to_string(),
                signed_at: rfc3339(
                    i64::try_from(s.signed_at())
                        .unwrap_or(0)
                        .saturating_mul(1000),
                ),
                known: key.is_some(),
                revoked: key.is_some_and(|(_, revoked)| revoked),
            }
        })
        .collect();
    let problem = known.meets(bundle, &facts.facts()).err();
    let io = first.io_digest();
    Ok(ReleaseInfo {
        model: name.to_owned(),
        version: version.to_owned(),
        bundle_sha256: to_hex(&Sha256::digest(bundle)),
        bundle_bytes: bundle.len(),
        pack_sha256: to_hex(&first.pack_sha256()),
        accelerator: Accel::from_word(first.accel_word()).name().to_owned(),
        io_digest: (io != [0; 32]).then(|| to_hex(&io)),
        signatures,
        threshold: known.threshold_for(name),
        policy_keys: known
            .policy_keys_for(name)
            .iter()
            .map(ToString::to_string)
            .collect(),
        rule: known.rule_for(name),
        meets_rule: problem.is_none(),
        problem,
    })
}

/// A version's release signatures: the stored bundle's bytes (what devices are sent), or with
/// `Accept: application/json` what they say (key ids, when signed, *k* of the model's rule).
#[utoipa::path(
    get,
    path = "/api/v1/models/{name}/versions/{version}/release-signatures",
    tag = "versions",
    params(
        ("name" = String, Path, description = "model name"),
        ("version" = String, Path, description = "version"),
    ),
    security(("token" = [])),
    responses(
        (status = 200, description = "the bundle, or its JSON view with `Accept: application/json`",
         content(
            (BundleFile = "application/octet-stream"),
            (ReleaseInfo = "application/json"),
         )),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "no such version, or nobody released it yet"),
    )
)]
async fn get_signatures(
    State(state): State<AppState>,
    _op: Operator,
    Path((name, version)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let mut conn = state.db.acquire().await?;
    let t = target(&mut conn, &name, &version).await?;
    let bundle = t.stored.ok_or_else(|| {
        ApiError::NotFound(format!(
            "release signatures of model {name:?} version {version:?}"
        ))
    })?;
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if json {
        let known = KnownRelease::load(&mut conn).await?;
        let info = info_of(&name, &version, &bundle, &t.facts, &known)?;
        return Ok(JsonResponse(info).into_response());
    }
    let etag = HeaderValue::from_str(&format!("\"r-{}\"", to_hex(&Sha256::digest(&bundle))))
        .map_err(ApiError::internal)?;
    let disposition = HeaderValue::from_str(&format!(
        "attachment; filename=\"{name}-{version}.npub.release\""
    ))
    .map_err(ApiError::internal)?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::ETAG, etag),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        Body::from(bundle),
    )
        .into_response())
}
