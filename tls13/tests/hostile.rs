//! Hostile bytes into every parser a server can reach: each truncation and some tens of
//! thousand seeded mutations of valid messages must end in `Ok` or `Err`, never a panic (the
//! deterministic counterpart of `fuzz/`, which CI's fuzz smoke runs 15 s a target).
use npub_tls::Ticket;
use npub_tls::hello::{HRR_RANDOM, parse_server_hello};
use npub_tls::messages::{
    parse_certificate, parse_certificate_request, parse_certificate_verify,
    parse_encrypted_extensions, parse_finished, parse_key_update, parse_new_session_ticket,
};
use npub_tls::ticket::RECORD_LEN;
use npub_tls::x509::{Anchor, Cert};

/// xorshift64*: the mutations are the same at every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn server_hello(random: [u8; 32]) -> Vec<u8> {
    let mut out = vec![3, 3];
    out.extend_from_slice(&random);
    out.extend_from_slice(&[0, 0x13, 0x01, 0]);
    let mut e = vec![0, 43, 0, 2, 3, 4, 0, 51, 0, 69, 0, 0x17, 0, 65];
    e.extend_from_slice(&[4; 65]);
    e.extend_from_slice(&[0, 41, 0, 2, 0, 0, 0, 44, 0, 3, 0, 1, 9]);
    out.extend_from_slice(&(e.len() as u16).to_be_bytes());
    out.extend_from_slice(&e);
    out
}

/// A certificate as rcgen makes them for the server tests.
fn certificate() -> Vec<u8> {
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

fn seeds() -> Vec<Vec<u8>> {
    let cert = certificate();
    let mut cert_msg = vec![0];
    let entry_len = 3 + cert.len() + 2;
    cert_msg.extend_from_slice(&(entry_len as u32).to_be_bytes()[1..]);
    cert_msg.extend_from_slice(&(cert.len() as u32).to_be_bytes()[1..]);
    cert_msg.extend_from_slice(&cert);
    cert_msg.extend_from_slice(&[0, 0]);
    vec![
        server_hello([1; 32]),
        server_hello(HRR_RANDOM),
        vec![
            0, 15, 0, 16, 0, 11, 0, 9, 8, b'h', b't', b't', b'p', b'/', b'1', b'.', b'1',
        ],
        vec![0, 0, 0],
        cert_msg,
        cert,
        {
            let mut v = vec![4, 3, 0, 8, 0x30, 6, 2, 1, 1, 2, 1, 1];
            v.truncate(12);
            v
        },
        vec![0; 32],
        {
            let mut t = vec![
                0, 0, 14, 16, 1, 2, 3, 4, 1, 0, 0, 3, 1, 2, 3, 0, 8, 0, 42, 0, 4, 0, 0, 0, 0,
            ];
            t.truncate(25);
            t
        },
        vec![1],
    ]
}

/// Every parser on `bytes`; only that none panics matters.
fn parse_all(bytes: &[u8], cert_der: &[u8]) {
    let _ = parse_server_hello(bytes, true);
    let _ = parse_server_hello(bytes, false);
    let _ = parse_encrypted_extensions(bytes);
    let _ = parse_certificate_request(bytes);
    let _ = parse_certificate(bytes);
    let _ = parse_certificate_verify(bytes);
    let _ = parse_finished(bytes);
    let _ = parse_new_session_ticket(bytes);
    let _ = parse_key_update(bytes);
    let _ = Cert::parse(bytes);
    if let Ok(cert) = Cert::parse(cert_der) {
        if let Some(key) = cert.key() {
            let _ = Anchor::Key(key).check(bytes, None, "localhost", 1_800_000_000);
            let _ = Anchor::Ca { der: cert_der, key }.check(bytes, None, "127.0.0.1", 0);
            // A CA that signed nothing here: the intermediate is parsed and checked.
            let _ = Anchor::Ca {
                der: &[],
                key: [4; 65],
            }
            .check(cert_der, Some(bytes), "localhost", 1_800_000_000);
        }
    }
    if let Ok(record) = <&[u8; RECORD_LEN]>::try_from(bytes) {
        let _ = Ticket::from_record(record);
    }
}

#[test]
fn no_parser_panics_on_truncated_or_mutated_messages() {
    let seeds = seeds();
    let cert = seeds[5].clone();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for seed in &seeds {
        for n in 0..=seed.len() {
            parse_all(&seed[..n], &cert);
        }
        for _ in 0..4_000 {
            let mut m = seed.clone();
            for _ in 0..1 + rng.below(4) {
                match rng.below(3) {
                    0 if !m.is_empty() => {
                        let i = rng.below(m.len());
                        m[i] = rng.next() as u8;
                    }
                    1 if !m.is_empty() => {
                        let i = rng.below(m.len());
                        m[i] ^= 1 << rng.below(8);
                    }
                    _ => {
                        let i = rng.below(m.len() + 1);
                        m.truncate(i);
                    }
                }
            }
            parse_all(&m, &cert);
        }
    }
    let mut record = [0u8; RECORD_LEN];
    for _ in 0..4_000 {
        for b in record.iter_mut().take(90) {
            *b = rng.next() as u8;
        }
        record[..4].copy_from_slice(b"NTK1");
        parse_all(&record, &cert);
    }
}
