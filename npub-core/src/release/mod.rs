//! Release signatures: a compromised server cannot ship a model that nobody released.
//!
//! A deployment manifest says the *server* wants a pack installed; a release signature says a
//! *release key* — held where the model is built, never by the server — released that pack as
//! one model, version and NPU configuration. A device whose release trust holds release keys
//! installs a pack only when the manifest verifies **and** the release signatures beside it meet
//! the release policy for the manifest's model: *k* valid signatures by *k* different keys the
//! policy names, as TUF's thresholds do.
//!
//! ```text
//!  where the model is built (std)                     device (no_std, no alloc)
//!  release KeyPair / --signer-cmd
//!    ─ sign_release ─► 288 bytes ─┐
//!  second signer ─ sign_release ──┴─► bundle ≤ 1,168 bytes ─► check(&trust, bundle, &facts)
//!                                                               │ facts: ReleaseFacts::of_manifest(&verified, &selftest)
//!                                                               ▼ Released (only check makes one)
//!  offline release root ─ sign_trust_update ─► 144-byte NPK1 ─► apply_update(&mut keyring, &mut trust, …)
//! ```
//!
//! | file | what |
//! |------|------|
//! | `constants.rs` | magics, sizes, limits ([`MAX_BUNDLE_BYTES`], [`MAX_POLICY_KEYS`], the device capacities) |
//! | `model_id.rs` | [`ModelId`]: a model name's 8-byte id, as policies name models |
//! | `layout.rs` | one release signature ([`ReleaseView`], the table; [`ReleaseFields`]) |
//! | `bundle.rs` | several signatures of one release ([`Bundle`], the table) |
//! | `policy.rs` | *k* of up to four keys, per model or default ([`ReleasePolicy`]) |
//! | `trust.rs` | the release keys and policies a device holds ([`ReleaseTrust`]) |
//! | `update.rs` | the keyring-update actions 4–8 that change them ([`ReleaseChange`], [`apply_update`]) |
//! | `check.rs` | the device's check ([`check`], [`ReleaseFacts`], [`Released`]) |
//! | `selftest.rs` | the self-test delivered with a pack ([`SelfTest`], the table): its digest is a release's `selftest_digest` |
//! | `sign.rs` (std) | signing with a key pair or any [`Signer`] |
//!
//! Everything but `sign.rs` and the bundle builders is `no_std` and allocation-free; `check`
//! and `apply_update` are what a device calls. `docs/release.md` has the layouts, the policy
//! rules and the figures; `docs/keys.md` the threat model and the operator's procedures.

mod bundle;
mod check;
mod constants;
mod layout;
mod model_id;
mod policy;
mod selftest;
#[cfg(feature = "std")]
mod sign;
mod trust;
mod update;

pub use bundle::Bundle;
#[cfg(feature = "alloc")]
pub use bundle::{encode_bundle, merge_bundles};
pub use check::{ReleaseFacts, Released, check};
pub use constants::{
    BUNDLE_HEADER_BYTES, BUNDLE_MAGIC, BUNDLE_VERSION, DEVICE_RELEASE_KEYS,
    DEVICE_RELEASE_POLICIES, MAX_BUNDLE_BYTES, MAX_BUNDLE_SIGNATURES, MAX_POLICY_KEYS,
    MAX_SELFTEST_INPUT_BYTES, POLICY_BYTES, RELEASE_ACTIONS, RELEASE_BYTES, RELEASE_MAGIC,
    RELEASE_SIGNED_BYTES, RELEASE_VERSION, SELFTEST_HEADER_BYTES, SELFTEST_MAGIC, SELFTEST_VERSION,
};
pub use layout::{RELEASE_DOMAIN, ReleaseFields, ReleaseView};
pub use model_id::{MODEL_ID_BYTES, MODEL_ID_DOMAIN, ModelId};
pub use policy::ReleasePolicy;
pub use selftest::SelfTest;
#[cfg(feature = "alloc")]
pub use selftest::encode_selftest;
#[cfg(feature = "std")]
pub use sign::{Signer, sign_release, sign_trust_update, signing_message};
pub use trust::{Applies, ReleaseTrust};
pub use update::{ReleaseChange, TrustChange, TrustUpdate, apply_update, check_update_signature};

/// The release trust a device keeps with the capacities of [`DEVICE_RELEASE_KEYS`] and
/// [`DEVICE_RELEASE_POLICIES`].
pub type DeviceReleaseTrust = ReleaseTrust<DEVICE_RELEASE_KEYS, DEVICE_RELEASE_POLICIES>;
