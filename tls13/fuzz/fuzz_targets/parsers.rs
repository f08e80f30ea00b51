//! Any bytes into every parser a server can reach (the message parsers, the certificate
//! parser and verifier, the ticket record): `Ok` or `Err`, never a panic. The fuzzer's
//! counterpart of `tests/hostile.rs`, which mutates valid messages deterministically.
#![no_main]
use libfuzzer_sys::fuzz_target;
use npub_tls::Ticket;
use npub_tls::hello::parse_server_hello;
use npub_tls::messages::{
    parse_certificate, parse_certificate_request, parse_certificate_verify,
    parse_encrypted_extensions, parse_finished, parse_key_update, parse_new_session_ticket,
};
use npub_tls::ticket::RECORD_LEN;
use npub_tls::x509::{Anchor, Cert};

fuzz_target!(|data: &[u8]| {
    let _ = parse_server_hello(data, true);
    let _ = parse_server_hello(data, false);
    let _ = parse_encrypted_extensions(data);
    let _ = parse_certificate_request(data);
    let _ = parse_certificate(data);
    let _ = parse_certificate_verify(data);
    let _ = parse_finished(data);
    let _ = parse_new_session_ticket(data);
    let _ = parse_key_update(data);
    if let Ok(cert) = Cert::parse(data) {
        let _ = cert.key();
    }
    // The bytes as the server's certificate, under a pinned key and under a CA; the CA's
    // own certificate is then the bytes too (self-signed).
    let _ = Anchor::Key([4; 65]).check(data, None, "localhost", 1_800_000_000);
    let _ = Anchor::Ca {
        der: data,
        key: [4; 65],
    }
    .check(data, Some(data), "127.0.0.1", 0);
    if let Ok(record) = <&[u8; RECORD_LEN]>::try_from(data) {
        let _ = Ticket::from_record(record);
    }
});
