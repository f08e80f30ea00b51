//! The pack store: immutable packs named by the SHA-256 of their bytes.
//!
//! Content addressing gives deduplication for free (two versions with the same bytes share one
//! file) and makes a stored pack self-verifying. Uploads are first staged on local disk
//! ([`staging`]) and handed to the store only once validated and fsynced.
//!
//! ## Where packs live
//! | `--pack-store`          | Store         | Downloads                                                  |
//! |-------------------------|---------------|------------------------------------------------------------|
//! | (unset)                 | [`LocalStore`]: `<data-dir>/packs/` | from the poll cache's memory                |
//! | `s3://bucket/prefix`    | [`S3Store`]: objects `prefix/<sha256>` in an S3-compatible bucket | streamed from the bucket (ranged GET), or a `307` to a presigned URL with `--presign-downloads` |
//!
//! The server talks to packs only through [`PackStore`] (`Arc<dyn PackStore>` in the state), and
//! every method is async and moves whole objects, which is what an object store offers. Staging
//! stays on local disk for both: an upload is validated and fsynced there before the store sees
//! it, so a store only ever receives packs that passed.
mod digest;
pub mod gc;
mod local;
mod open;
mod pack_store;
mod s3;
mod s3_http;
pub mod staging;
mod timed;

pub use digest::{NotADigest, PackDigest, from_hex, to_hex};
pub use local::LocalStore;
pub use open::open;
pub use pack_store::{Listed, PackReader, PackStore, Put, StoreFuture};
pub use s3::{S3Settings, S3Store};
pub use staging::{Sealed, StagedFile, Staging};
pub use timed::{DEFAULT_STORE_TIMEOUT, Timed};
