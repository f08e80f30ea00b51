//! The keys this server signs with: the manifest signing keys and the root key, their routes, and
//! where their secrets live.
pub mod release;
pub mod routes;
pub mod secrets;
pub mod signing;
