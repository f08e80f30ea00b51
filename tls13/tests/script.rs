//! The handshake against a scripted server: the flights a real server never sends (a
//! HelloRetryRequest, TLS 1.2, an alert, a record over the limit), each refused with its own
//! variant, and what the client wrote in answer.
use embedded_io::{ErrorKind, ErrorType, Read, Write};
use npub_tls::hello::HRR_RANDOM;
use npub_tls::{Anchor, Client, Config, Error, Refusal};
use rand_core::OsRng;

/// A transport that answers with `script` and keeps what the client wrote.
struct Script {
    script: Vec<u8>,
    at: usize,
    written: Vec<u8>,
}

impl Script {
    fn new(script: Vec<u8>) -> Self {
        Self {
            script,
            at: 0,
            written: Vec::new(),
        }
    }

    /// The records the client wrote: (type, body).
    fn records(&self) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut w = &self.written[..];
        while w.len() >= 5 {
            let len = usize::from(u16::from_be_bytes([w[3], w[4]]));
            out.push((w[0], w[5..5 + len].to_vec()));
            w = &w[5 + len..];
        }
        out
    }
}

impl ErrorType for Script {
    type Error = ErrorKind;
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let n = buf.len().min(self.script.len() - self.at);
        buf[..n].copy_from_slice(&self.script[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// A plaintext handshake record holding a ServerHello (or HelloRetryRequest) with `exts`.
fn server_hello(random: [u8; 32], exts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&random);
    body.extend_from_slice(&[0, 0x13, 0x01, 0]);
    let mut e = Vec::new();
    for (id, data) in exts {
        e.extend_from_slice(&id.to_be_bytes());
        e.extend_from_slice(&(data.len() as u16).to_be_bytes());
        e.extend_from_slice(data);
    }
    body.extend_from_slice(&(e.len() as u16).to_be_bytes());
    body.extend_from_slice(&e);
    let mut msg = vec![2];
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    msg.extend_from_slice(&body);
    record(22, &msg)
}

fn record(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![ty, 3, 3];
    r.extend_from_slice(&(body.len() as u16).to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// Runs a handshake against `script`; the error and the transport.
fn run(script: Vec<u8>) -> (Error, Script) {
    let key = p256::SecretKey::random(&mut OsRng);
    let point =
        p256::elliptic_curve::sec1::ToEncodedPoint::to_encoded_point(&key.public_key(), false);
    let mut k = [0u8; 65];
    k.copy_from_slice(point.as_bytes());
    let anchor = Anchor::Key(k);
    let mut read = vec![0u8; npub_tls::READ_BUFFER_MIN];
    let mut write = vec![0u8; 2048];
    let mut client = Client::new(&mut read, &mut write).unwrap();
    let mut io = Script::new(script);
    let config = Config {
        host: "localhost",
        anchor: &anchor,
        now: 1_800_000_000,
        resume: true,
    };
    let e = client.handshake(&mut io, &config, &mut OsRng).unwrap_err();
    assert!(!client.is_open());
    (e, io)
}

const V13: &[u8] = &[3, 4];

#[test]
fn a_hello_retry_request_with_a_cookie_is_answered_with_the_cookie() {
    let mut script = server_hello(HRR_RANDOM, &[(43, V13), (44, &[0, 3, 7, 8, 9])]);
    // Then the server gives up: handshake_failure.
    script.extend(record(21, &[2, 40]));
    let (e, io) = run(script);
    assert_eq!(e, Error::Alert(40));
    let records = io.records();
    assert_eq!(records.len(), 2, "two ClientHellos");
    let second = &records[1].1;
    assert!(
        second.windows(9).any(|w| w == [0, 44, 0, 5, 0, 3, 7, 8, 9]),
        "the second ClientHello echoes the cookie"
    );
    assert_eq!(records[0].1[6..38], second[6..38], "the same random");
}

/// The key_share extension of a ClientHello record's body: (group, share).
fn key_share(client_hello: &[u8]) -> (u16, Vec<u8>) {
    let at = client_hello
        .windows(2)
        .rposition(|w| w == [0, 51])
        .expect("a key_share");
    let e = &client_hello[at + 4..];
    let group = u16::from_be_bytes([e[2], e[3]]);
    let len = usize::from(u16::from_be_bytes([e[4], e[5]]));
    (group, e[6..6 + len].to_vec())
}

#[test]
fn a_hello_retry_request_for_secp256r1_is_answered_with_a_p256_share() {
    let script = server_hello(HRR_RANDOM, &[(43, V13), (51, &[0, 0x17])]);
    let mut script = script;
    script.extend(record(21, &[2, 40]));
    let (e, io) = run(script);
    assert_eq!(e, Error::Alert(40));
    let records = io.records();
    assert_eq!(records.len(), 2, "two ClientHellos");
    let (g1, s1) = key_share(&records[0].1);
    assert_eq!((g1, s1.len()), (0x1D, 32), "x25519 first");
    let (g2, s2) = key_share(&records[1].1);
    assert_eq!(
        (g2, s2.len(), s2[0]),
        (0x17, 65, 4),
        "then a secp256r1 point"
    );
    assert!(
        !records[1].1.windows(2).any(|w| w == [0, 44]),
        "no cookie was sent, none is echoed"
    );
}

#[test]
fn rejects_a_hello_retry_request_for_the_group_offered() {
    let script = server_hello(HRR_RANDOM, &[(43, V13), (51, &[0, 0x1D])]);
    let (e, io) = run(script);
    assert_eq!(e, Error::Refused(Refusal::HelloRetrySameGroup));
    // The refusal is told to the server: a fatal illegal_parameter alert, in clear.
    assert_eq!(io.records().last().unwrap(), &(21, vec![2, 47]));
}

#[test]
fn rejects_a_hello_retry_request_for_another_group() {
    let script = server_hello(HRR_RANDOM, &[(43, V13), (51, &[0, 0x18])]);
    assert_eq!(run(script).0, Error::Refused(Refusal::HelloRetryGroup));
}

#[test]
fn rejects_a_hello_retry_request_that_changes_nothing() {
    let script = server_hello(HRR_RANDOM, &[(43, V13)]);
    assert_eq!(run(script).0, Error::Refused(Refusal::HelloRetryNoChange));
}

#[test]
fn rejects_a_second_hello_retry_request() {
    let mut script = server_hello(HRR_RANDOM, &[(43, V13), (44, &[0, 1, 1])]);
    script.extend(server_hello(HRR_RANDOM, &[(43, V13), (44, &[0, 1, 2])]));
    assert_eq!(run(script).0, Error::Refused(Refusal::SecondHelloRetry));
}

#[test]
fn rejects_a_cookie_longer_than_kept() {
    let mut cookie = vec![1, 1];
    cookie.extend_from_slice(&[5u8; 257]);
    let script = server_hello(HRR_RANDOM, &[(43, V13), (44, &cookie)]);
    assert_eq!(run(script).0, Error::Refused(Refusal::CookieTooLong));
}

#[test]
fn rejects_tls12() {
    let script = server_hello([1; 32], &[]);
    assert_eq!(run(script).0, Error::Refused(Refusal::NotTls13));
}

#[test]
fn rejects_a_record_longer_than_allowed() {
    let mut script = vec![22, 3, 3, 0x40, 0x01];
    script.extend_from_slice(&[0; 0x4001]);
    assert_eq!(run(script).0, Error::Refused(Refusal::RecordTooLong));
}

#[test]
fn rejects_a_record_of_an_unknown_type() {
    let script = record(24, &[0; 4]);
    assert_eq!(run(script).0, Error::Refused(Refusal::UnexpectedRecord));
}

#[test]
fn rejects_another_message_in_place_of_the_server_hello() {
    let script = record(22, &[8, 0, 0, 2, 0, 0]);
    assert_eq!(run(script).0, Error::Refused(Refusal::UnexpectedMessage));
}

#[test]
fn rejects_an_invalid_key_share_point() {
    // After a HelloRetryRequest for secp256r1: a point not on the curve.
    let mut script = server_hello(HRR_RANDOM, &[(43, V13), (51, &[0, 0x17])]);
    let mut share = vec![0, 0x17, 0, 65, 4];
    share.extend_from_slice(&[0xFF; 64]);
    script.extend(server_hello([1; 32], &[(43, V13), (51, &share)]));
    assert_eq!(run(script).0, Error::Refused(Refusal::KeyShare));
}

#[test]
fn rejects_an_x25519_share_of_low_order() {
    let mut share = vec![0, 0x1D, 0, 32];
    share.extend_from_slice(&[0; 32]);
    let script = server_hello([1; 32], &[(43, V13), (51, &share)]);
    assert_eq!(run(script).0, Error::Refused(Refusal::KeyShare));
}

#[test]
fn rejects_a_server_share_in_a_group_not_offered() {
    // A secp256r1 point when the ClientHello offered x25519 only.
    let mut share = vec![0, 0x17, 0, 65, 4];
    share.extend_from_slice(&[0x11; 64]);
    let script = server_hello([1; 32], &[(43, V13), (51, &share)]);
    assert_eq!(run(script).0, Error::Refused(Refusal::KeyShare));
}

#[test]
fn a_server_alert_ends_the_handshake_with_its_code() {
    assert_eq!(run(record(21, &[2, 70])).0, Error::Alert(70));
}

#[test]
fn a_connection_closed_mid_record_is_closed() {
    assert_eq!(run(vec![22, 3, 3, 0, 50, 1, 2]).0, Error::Closed);
}
