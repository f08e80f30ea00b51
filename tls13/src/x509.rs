//! The server's certificate, as far as the device checks it: a DER reader for the X.509 fields
//! it needs, and the trust anchor from the `--ca` file (PEM).
//!
//! | `--ca` file holds      | the server is accepted when                                            |
//! |------------------------|------------------------------------------------------------------------|
//! | `CERTIFICATE` (a CA)   | its certificate is signed by that CA's P-256 key (ECDSA-SHA256), or is that very certificate (a self-signed server certificate, pinned) |
//! | `PUBLIC KEY` (pinned)  | its certificate carries exactly that P-256 key                         |
//!
//! and in both cases its certificate is valid now (the host's clock through semihosting; a device
//! takes its RTC) and names the URL's host in its subjectAltName (an IPv4 address as an
//! `iPAddress`, a name as a `dNSName`; no wildcards, no common-name fallback, as rustls). At most
//! one intermediate: the certificate after the server's in its `Certificate` message, signed by
//! the CA, cA TRUE in its basicConstraints, valid now; longer chains are refused.
//!
//! What is parsed, and nothing more (RFC 5280 §4.1):
//!
//! | structure              | fields read                                                      |
//! |------------------------|------------------------------------------------------------------|
//! | `Certificate`          | `tbsCertificate` (its whole encoding, the signed bytes), `signatureAlgorithm`, `signatureValue` |
//! | `TBSCertificate`       | `validity`, `subjectPublicKeyInfo`, `extensions` (subjectAltName, basicConstraints); `version`, `serialNumber`, `signature`, `issuer`, `subject` skipped |
//! | `SubjectPublicKeyInfo` | `id-ecPublicKey` on `prime256v1`, the uncompressed point (65 bytes) |
use crate::error::CertError;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};

/// An uncompressed P-256 point.
pub const KEY_BYTES: usize = 65;

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0]` EXPLICIT version.
const VERSION: u8 = 0xA0;
/// `[3]` EXPLICIT extensions.
const EXTENSIONS: u8 = 0xA3;
/// GeneralName `[2]` dNSName and `[7]` iPAddress (implicit, primitive).
const DNS_NAME: u8 = 0x82;
const IP_ADDRESS: u8 = 0x87;

/// 1.2.840.10045.4.3.2
const ECDSA_WITH_SHA256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02];
/// 1.2.840.10045.2.1
const EC_PUBLIC_KEY: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
/// 1.2.840.10045.3.1.7
const PRIME256V1: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
/// 2.5.29.17
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1D, 0x11];
/// 2.5.29.19
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x13];

/// A DER encoding that does not parse as what it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// A bounded reader of DER TLVs; every read stays inside the slice it was given.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next TLV: (tag, value, the whole encoding).
    fn any(&mut self) -> Result<(u8, &'a [u8], &'a [u8]), Malformed> {
        let all = self.0;
        let (&tag, rest) = all.split_first().ok_or(Malformed)?;
        let (&first, rest) = rest.split_first().ok_or(Malformed)?;
        let (len, rest) = match first {
            0..=0x7F => (usize::from(first), rest),
            // Long form, 1 to 3 length bytes (a certificate is well under 16 MiB).
            0x81..=0x83 => {
                let n = usize::from(first & 0x7F);
                let bytes = rest.get(..n).ok_or(Malformed)?;
                let len = bytes.iter().fold(0usize, |l, &b| l << 8 | usize::from(b));
                (len, &rest[n..])
            }
            _ => return Err(Malformed),
        };
        let value = rest.get(..len).ok_or(Malformed)?;
        let header = all.len() - rest.len();
        self.0 = &rest[len..];
        Ok((tag, value, &all[..header + len]))
    }

    /// The next TLV, which must have `tag`: its value.
    fn take(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
        match self.any()? {
            (t, value, _) if t == tag => Ok(value),
            _ => Err(Malformed),
        }
    }
}

/// The fields of a certificate the checks use, borrowed from its DER.
#[derive(Debug, Clone, Copy)]
pub struct Cert<'a> {
    /// The whole `tbsCertificate` encoding: what the issuer signed.
    signed: &'a [u8],
    /// `signatureAlgorithm` is ecdsa-with-SHA256.
    ecdsa_sha256: bool,
    /// `signatureValue`, the DER ECDSA signature.
    signature: &'a [u8],
    /// `notBefore`, `notAfter`, Unix seconds.
    not_before: u64,
    not_after: u64,
    /// The subject's P-256 key, if it is one.
    key: Option<[u8; KEY_BYTES]>,
    /// The GeneralNames of subjectAltName.
    names: &'a [u8],
    /// basicConstraints says cA TRUE.
    is_ca: bool,
}

impl<'a> Cert<'a> {
    /// Parses `der`, which must be one certificate and nothing after it.
    pub fn parse(der: &'a [u8]) -> Result<Self, Malformed> {
        let mut outer = Der(der);
        let mut cert = Der(outer.take(SEQUENCE)?);
        if !outer.is_empty() {
            return Err(Malformed);
        }
        let (tag, tbs, signed) = cert.any()?;
        if tag != SEQUENCE {
            return Err(Malformed);
        }
        let mut alg = Der(cert.take(SEQUENCE)?);
        let ecdsa_sha256 = alg.take(OID)? == ECDSA_WITH_SHA256;
        let signature = bit_string(cert.take(BIT_STRING)?)?;

        let mut tbs = Der(tbs);
        if tbs.peek() == Some(VERSION) {
            tbs.any()?;
        }
        tbs.take(INTEGER)?;
        tbs.take(SEQUENCE)?; // signature
        tbs.take(SEQUENCE)?; // issuer
        let mut validity = Der(tbs.take(SEQUENCE)?);
        let not_before = time(validity.any()?)?;
        let not_after = time(validity.any()?)?;
        tbs.take(SEQUENCE)?; // subject
        let key = spki_key(tbs.take(SEQUENCE)?)?;
        let (mut names, mut is_ca): (&[u8], bool) = (&[], false);
        while let Some(tag) = tbs.peek() {
            let (_, value, _) = tbs.any()?;
            if tag == EXTENSIONS {
                (names, is_ca) = extensions(value)?;
            }
        }
        Ok(Self {
            signed,
            ecdsa_sha256,
            signature,
            not_before,
            not_after,
            key,
            names,
            is_ca,
        })
    }

    /// The subject's P-256 key.
    pub fn key(&self) -> Option<[u8; KEY_BYTES]> {
        self.key
    }

    /// Whether `issuer_key` signed this certificate (ECDSA P-256 with SHA-256).
    fn signed_by(&self, issuer_key: &[u8; KEY_BYTES]) -> bool {
        let Ok(key) = VerifyingKey::from_sec1_bytes(issuer_key) else {
            return false;
        };
        let Ok(signature) = Signature::from_der(self.signature) else {
            return false;
        };
        self.ecdsa_sha256 && key.verify(self.signed, &signature).is_ok()
    }

    /// Whether subjectAltName names `host` (an IPv4 address or a DNS name).
    fn names_host(&self, host: &str) -> bool {
        let ip: Option<core::net::Ipv4Addr> = host.parse().ok();
        let mut names = Der(self.names);
        while let Ok((tag, value, _)) = names.any() {
            let hit = match (tag, ip) {
                (IP_ADDRESS, Some(ip)) => value == ip.octets(),
                (DNS_NAME, None) => value.eq_ignore_ascii_case(host.as_bytes()),
                _ => false,
            };
            if hit {
                return true;
            }
        }
        false
    }
}

/// A BIT STRING's bytes (no unused bits).
fn bit_string(value: &[u8]) -> Result<&[u8], Malformed> {
    match value.split_first() {
        Some((0, bits)) => Ok(bits),
        _ => Err(Malformed),
    }
}

/// A `SubjectPublicKeyInfo`'s P-256 point; `None` for any other kind of key.
fn spki_key(spki: &[u8]) -> Result<Option<[u8; KEY_BYTES]>, Malformed> {
    let mut spki = Der(spki);
    let mut alg = Der(spki.take(SEQUENCE)?);
    let kind = alg.take(OID)?;
    let curve = if alg.peek() == Some(OID) {
        alg.take(OID)?
    } else {
        &[]
    };
    let point = bit_string(spki.take(BIT_STRING)?)?;
    if kind != EC_PUBLIC_KEY || curve != PRIME256V1 {
        return Ok(None);
    }
    Ok(point.try_into().ok())
}

/// From `extensions` (`[3]`'s value): the GeneralNames of subjectAltName (empty if there is
/// none), and whether basicConstraints says cA TRUE.
fn extensions(extensions: &[u8]) -> Result<(&[u8], bool), Malformed> {
    let mut outer = Der(extensions);
    let mut list = Der(outer.take(SEQUENCE)?);
    let (mut names, mut is_ca): (&[u8], bool) = (&[], false);
    while !list.is_empty() {
        let mut ext = Der(list.take(SEQUENCE)?);
        let id = ext.take(OID)?;
        if ext.peek() == Some(BOOLEAN) {
            ext.take(BOOLEAN)?;
        }
        let value = ext.take(OCTET_STRING)?;
        if id == SUBJECT_ALT_NAME {
            names = Der(value).take(SEQUENCE)?;
        } else if id == BASIC_CONSTRAINTS {
            // SEQUENCE { cA BOOLEAN DEFAULT FALSE, pathLenConstraint INTEGER OPTIONAL }
            let mut bc = Der(Der(value).take(SEQUENCE)?);
            is_ca = bc.peek() == Some(BOOLEAN) && bc.take(BOOLEAN)? == [0xFF];
        }
    }
    Ok((names, is_ca))
}

/// A `Time` (UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ`) as Unix seconds.
fn time((tag, value, _): (u8, &[u8], &[u8])) -> Result<u64, Malformed> {
    let (year, rest) = match (tag, value.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&value[..2])?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &value[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&value[..4])?, &value[4..]),
        _ => return Err(Malformed),
    };
    if rest[10] != b'Z' {
        return Err(Malformed);
    }
    let [month, day, hour, minute, second] =
        [0, 2, 4, 6, 8].map(|i| digits(&rest[i..i + 2]).unwrap_or(u64::MAX));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return Err(Malformed);
    }
    if second > 60 {
        return Err(Malformed);
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

fn digits(text: &[u8]) -> Result<u64, Malformed> {
    text.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit()
            .then(|| n * 10 + u64::from(c - b'0'))
            .ok_or(Malformed)
    })
}

/// Days from 1970-01-01 to `year-month-day` (year ≥ 1970), after H. Hinnant's algorithm.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    // Before 1970 is before the epoch: 0 (a GeneralizedTime may say year 0000).
    if year < 1970 {
        return 0;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

/// What the `--ca` file provisions.
#[derive(Debug, Clone, Copy)]
pub enum Anchor<'a> {
    /// A CA certificate (or the server's own, self-signed): its DER and its key.
    Ca { der: &'a [u8], key: [u8; KEY_BYTES] },
    /// The server's public key, pinned.
    Key([u8; KEY_BYTES]),
}

/// Why a `--ca` file is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorError {
    /// No `-----BEGIN CERTIFICATE-----` or `-----BEGIN PUBLIC KEY-----` section.
    NoPem,
    /// The section's base64 does not decode, or does not fit the buffer.
    Base64,
    /// The DER inside is not a certificate or key.
    Der,
    /// The key is not P-256.
    NotP256,
}

impl AnchorError {
    pub const fn what(self) -> &'static str {
        match self {
            AnchorError::NoPem => "holds no PEM CERTIFICATE or PUBLIC KEY",
            AnchorError::Base64 => "its PEM base64 does not decode (or is longer than 2 KiB)",
            AnchorError::Der => "its DER is not an X.509 certificate or a SubjectPublicKeyInfo",
            AnchorError::NotP256 => {
                "its key is not ECDSA P-256 (the only kind the firmware checks)"
            }
        }
    }
}

impl<'a> Anchor<'a> {
    /// The anchor in the PEM text `pem`, its DER decoded into `der`.
    pub fn from_pem(pem: &[u8], der: &'a mut [u8]) -> Result<Self, AnchorError> {
        let text = core::str::from_utf8(pem).map_err(|_| AnchorError::NoPem)?;
        for (label, is_cert) in [("CERTIFICATE", true), ("PUBLIC KEY", false)] {
            let Some(body) = pem_section(text, label) else {
                continue;
            };
            let n = base64(body, der).ok_or(AnchorError::Base64)?;
            let der = &der[..n];
            return if is_cert {
                let cert = Cert::parse(der).map_err(|_| AnchorError::Der)?;
                let key = cert.key().ok_or(AnchorError::NotP256)?;
                Ok(Anchor::Ca { der, key })
            } else {
                let mut outer = Der(der);
                let spki = outer.take(SEQUENCE).map_err(|_| AnchorError::Der)?;
                let key = spki_key(spki).map_err(|_| AnchorError::Der)?;
                Ok(Anchor::Key(key.ok_or(AnchorError::NotP256)?))
            };
        }
        Err(AnchorError::NoPem)
    }

    /// What identifies the anchor: the CA certificate's DER, or the pinned key.
    pub fn identity(&self) -> &[u8] {
        match self {
            Anchor::Ca { der, .. } => der,
            Anchor::Key(key) => key,
        }
    }

    /// Checks the server's certificate `leaf` (DER) for `host` at `now` (Unix seconds); its
    /// key, which must then sign the handshake. With a CA anchor, `intermediate` (the next
    /// certificate the server sent) may stand between the CA and `leaf`: it must be signed by
    /// the CA, say cA in its basicConstraints, be valid now, and have signed `leaf`.
    pub fn check(
        &self,
        leaf: &[u8],
        intermediate: Option<&[u8]>,
        host: &str,
        now: u64,
    ) -> Result<[u8; KEY_BYTES], CertError> {
        let cert = Cert::parse(leaf).map_err(|_| CertError::Malformed)?;
        let key = cert.key().ok_or(CertError::NotP256)?;
        let trusted = match self {
            Anchor::Ca { der, key: ca } => {
                *der == leaf
                    || cert.signed_by(ca)
                    || match intermediate {
                        Some(i) => via_intermediate(&cert, i, ca, now)?,
                        None => false,
                    }
            }
            Anchor::Key(pinned) => *pinned == key,
        };
        if !trusted {
            return Err(CertError::UnknownCa);
        }
        valid_at(&cert, now)?;
        if !cert.names_host(host) {
            return Err(CertError::WrongHostName);
        }
        Ok(key)
    }
}

fn valid_at(cert: &Cert<'_>, now: u64) -> Result<(), CertError> {
    if now < cert.not_before {
        return Err(CertError::NotYetValid);
    }
    if now > cert.not_after {
        return Err(CertError::Expired);
    }
    Ok(())
}

/// Whether `intermediate` (DER), issued by the CA whose key is `ca`, issued `cert`.
fn via_intermediate(
    cert: &Cert<'_>,
    intermediate: &[u8],
    ca: &[u8; KEY_BYTES],
    now: u64,
) -> Result<bool, CertError> {
    let Ok(i) = Cert::parse(intermediate) else {
        return Ok(false);
    };
    let Some(i_key) = i.key() else {
        return Ok(false);
    };
    if !i.is_ca || !i.signed_by(ca) || !cert.signed_by(&i_key) {
        return Ok(false);
    }
    valid_at(&i, now)?;
    Ok(true)
}

/// The base64 between `-----BEGIN {label}-----` and the next `-----END `.
fn pem_section<'t>(text: &'t str, label: &str) -> Option<&'t str> {
    let mut rest = text;
    while let Some(i) = rest.find("-----BEGIN ") {
        let after = &rest[i + "-----BEGIN ".len()..];
        if let Some(body) = after
            .strip_prefix(label)
            .and_then(|a| a.strip_prefix("-----"))
        {
            let end = body.find("-----END ")?;
            return Some(&body[..end]);
        }
        rest = after;
    }
    None
}

/// Decodes standard base64 (whitespace skipped, `=` padding) into `out`; the length.
fn base64(text: &str, out: &mut [u8]) -> Option<usize> {
    let (mut acc, mut bits, mut n) = (0u32, 0u32, 0usize);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            c if c.is_ascii_whitespace() => continue,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            *out.get_mut(n)? = (acc >> bits) as u8;
            n += 1;
        }
    }
    Some(n)
}
