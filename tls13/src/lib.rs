//! A small TLS 1.3 client for the device: no_std, no allocation, no `unsafe`, and exactly what
//! the device's link to npub-server needs (RFC 8446), everything else refused:
//!
//! | part                 | what is supported                                                   |
//! |----------------------|---------------------------------------------------------------------|
//! | cipher suite         | TLS_AES_128_GCM_SHA256                                              |
//! | key exchange         | ECDHE on x25519; secp256r1 if a HelloRetryRequest asks for it (one with a cookie is answered too) |
//! | server signature     | ecdsa_secp256r1_sha256                                              |
//! | server certificate   | checked by [`x509::Anchor`]: a CA's P-256 key, or a pinned key      |
//! | extensions           | SNI, ALPN `http/1.1`, supported_versions, key_share, psk_key_exchange_modes (psk_dhe_ke), pre_shared_key, cookie, ticket_request (RFC 9149) |
//! | resumption           | NewSessionTicket kept as a [`Ticket`] (a fixed-size record), offered with its binder and obfuscated age while it lives, reused (no ticket asked for after a resumed handshake) |
//! | not supported        | 0-RTT, TLS 1.2, client certificates (an empty one is sent if asked), other groups or suites, messages split across records |
//!
//! Modules: [`client`] (the state machine and record I/O), [`hello`] and [`messages`] (the
//! encodings), [`kx`] (the key exchange), [`record`] (AES-GCM records), [`schedule`] (the key schedule), [`ticket`],
//! [`x509`] (the certificate verifier), [`codec`] and [`error`] beneath them all.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod client;
pub mod codec;
pub mod error;
pub mod hello;
pub mod kx;
pub mod messages;
pub mod record;
pub mod schedule;
pub mod ticket;
pub mod x509;

pub use client::{Client, Config, Handshake, READ_BUFFER_MIN, Traffic, WRITE_BUFFER_MIN};
pub use error::{CertError, ConfigError, Error, Refusal};
pub use ticket::{Ticket, TicketError};
pub use x509::{Anchor, AnchorError};
