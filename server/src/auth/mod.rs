//! Operator authentication: API tokens sent as `Authorization: Bearer <token>`.
//!
//! * A token is `npub_op_` followed by 64 hex digits (256 random bits from the OS). The prefix
//!   makes a leaked token easy to recognise (secret scanners, logs) and keeps operator tokens
//!   apart from the device tokens of the fleet API.
//! * Only SHA-256(token) is stored. A fast hash is right here: the secret has 256 bits of entropy,
//!   so there is nothing to brute-force, and it keeps the per-request lookup a single index probe.
//! * A token is shown once, in the response that creates it (or in the first start's banner).
//! * Revocation is immediate: every request looks its token up.
//! * Roles: `admin` may also manage tokens and signing keys; `operator` manages models, versions
//!   and (later) deployments.
mod extractor;
pub mod guard;
mod operator;
mod routes;
pub mod token;

pub(crate) use extractor::{bearer, bearer_token, peer};
pub use operator::{Admin, Operator, Role};
pub use routes::{TokenCreated, TokenInfo, router};
pub use token::bootstrap;
