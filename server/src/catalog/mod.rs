//! The catalog: models and their versions (packs), uploads and what validates them.
pub mod models;
pub mod proof;
pub mod release;
pub mod upload;
pub mod validate;
pub mod versions;
