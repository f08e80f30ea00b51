//! Signing keys on the host (feature `std`): generation, signing, and key files.
//!
//! A key is an ed25519 key pair from a 32-byte seed drawn from the operating system's CSPRNG. The
//! same kind of key serves as a *signing key* (signs manifests; its public half goes in device
//! keyrings) and as a *root key* (signs keyring updates; its public half is built into firmware):
//! the role is where the public key is installed, and domain separation keeps a signature made in
//! one role from being valid in the other.
mod file;
mod pair;

pub use file::{
    public_key_file_text, public_key_path, read_public_key, read_secret_key, write_key_files,
};
pub use pair::KeyPair;
