//! Device certificates (`--client-ca FILE`): a device may present a client certificate issued
//! by that CA, with a P-256 key, naming it. The handshake checks the chain and the dates; the
//! connection then knows its device ([`DeviceName`]), and a token the device sends on it must be
//! that device's (`device/auth.rs`).
//!
//! | A device certificate …                          | Refused (`reason` of `npub_tls_client_cert_rejections_total`) |
//! |-------------------------------------------------|----------------------------------------------------|
//! | issued by another CA (or self-signed)           | in the handshake: `unknown_ca`                     |
//! | past its `notAfter` / before its `notBefore`    | in the handshake: `expired` / `not_yet_valid`      |
//! | with a key other than P-256, a bad signature, not for client authentication | in the handshake: `bad_certificate` |
//! | naming no device, or two                        | after the handshake, the connection closed: `no_device_name` |
//! | naming a device another than its token's        | the request answered 401: `device_mismatch`        |
//! | naming no enrolled device, sent without a token | the request answered 401: `unknown_device`         |
//!
//! The device's name is the subject's common name (CN), a DNS name in the subject alternative
//! names, or a URI `urn:npub:device:ID` there; a certificate may carry several of these as long as
//! they name the same device. Without a certificate a device authenticates with its token alone;
//! without a token, with its certificate alone.
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The prefix of a URI subject alternative name that names a device.
pub const DEVICE_URI_PREFIX: &str = "urn:npub:device:";
/// The only signature scheme a device proves its key with: ECDSA on P-256 (what a Cortex-M's
/// crypto engine and secure element offer).
const DEVICE_SCHEME: SignatureScheme = SignatureScheme::ECDSA_NISTP256_SHA256;

/// The device a connection's client certificate names (a request extension on the router's
/// side, and the lane's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceName(pub Arc<str>);

/// Why a client certificate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// Not issued by `--client-ca`.
    UnknownCa,
    /// Past its `notAfter`.
    Expired,
    /// Before its `notBefore`.
    NotYetValid,
    /// Not P-256, a bad signature, not for client authentication, or malformed.
    BadCertificate,
    /// Names no device, or several.
    NoDeviceName,
    /// Names another device than the token sent on the connection.
    DeviceMismatch,
    /// Names no enrolled device (unknown, or revoked), and no token was sent.
    UnknownDevice,
}

impl Rejection {
    /// Its label (`crate::ops::metrics::CLIENT_CERT_REJECTIONS`).
    pub fn label(self) -> &'static str {
        match self {
            Rejection::UnknownCa => "unknown_ca",
            Rejection::Expired => "expired",
            Rejection::NotYetValid => "not_yet_valid",
            Rejection::BadCertificate => "bad_certificate",
            Rejection::NoDeviceName => "no_device_name",
            Rejection::DeviceMismatch => "device_mismatch",
            Rejection::UnknownDevice => "unknown_device",
        }
    }

    /// What the log says.
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::UnknownCa => "client certificate not issued by --client-ca",
            Rejection::Expired => "client certificate expired",
            Rejection::NotYetValid => "client certificate not valid yet",
            Rejection::BadCertificate => {
                "client certificate unusable (not P-256, a bad signature, or not for client authentication)"
            }
            Rejection::NoDeviceName => {
                "client certificate names no device, or several (CN, DNS or urn:npub:device: names)"
            }
            Rejection::DeviceMismatch => "client certificate names another device than the token",
            Rejection::UnknownDevice => {
                "client certificate names no enrolled device (unknown or revoked)"
            }
        }
    }

    /// The rejection a failed handshake stands for, when it failed on the client's certificate
    /// (the server verifies no other certificate).
    pub fn of_handshake(error: &rustls::Error) -> Option<Self> {
        let rustls::Error::InvalidCertificate(e) = error else {
            return None;
        };
        Some(match e {
            CertificateError::UnknownIssuer => Rejection::UnknownCa,
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                Rejection::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                Rejection::NotYetValid
            }
            _ => Rejection::BadCertificate,
        })
    }
}

/// The device `cert` (a verified end-entity certificate) names.
pub fn device_name(cert: &CertificateDer<'_>) -> Result<DeviceName, Rejection> {
    let parsed = webpki::EndEntityCert::try_from(cert).map_err(|_| Rejection::BadCertificate)?;
    let mut names = common_name(parsed.subject())
        .into_iter()
        .chain(parsed.valid_dns_names())
        .chain(
            parsed
                .valid_uri_names()
                .filter_map(|u| u.strip_prefix(DEVICE_URI_PREFIX)),
        )
        .filter(|n| !n.is_empty());
    let first = names.next().ok_or(Rejection::NoDeviceName)?;
    if names.any(|n| n != first) {
        return Err(Rejection::NoDeviceName);
    }
    Ok(DeviceName(first.into()))
}

/// The common name in a DER `Name` (the contents of its SEQUENCE, as webpki gives it): a SET of
/// SEQUENCE { OID, value } per relative name. The first CN that is a UTF-8, printable or IA5
/// string.
fn common_name(name: &[u8]) -> Option<&str> {
    // 2.5.4.3, DER-encoded.
    const CN: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x03];
    let mut rest = name;
    while !rest.is_empty() {
        let (tag, set, after) = tlv(rest)?;
        rest = after;
        if tag != 0x31 {
            return None;
        }
        let mut attrs = set;
        while !attrs.is_empty() {
            let (tag, attr, after) = tlv(attrs)?;
            attrs = after;
            if tag != 0x30 {
                return None;
            }
            let Some(value) = attr.strip_prefix(CN) else {
                continue;
            };
            let (tag, text, _) = tlv(value)?;
            if matches!(tag, 0x0c | 0x13 | 0x16) {
                return std::str::from_utf8(text).ok();
            }
        }
    }
    None
}

/// One DER TLV at the start of `der`: tag, contents, what follows. Short and long lengths up to
/// four bytes; `None` for anything that runs past the end.
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes.iter().fold(0usize, |l, &b| (l << 8) | usize::from(b))
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((tag, contents, after))
}

/// webpki's client verifier for `--client-ca`, with a certificate optional (a device may use its
/// token alone) and P-256 the only key a device may prove.
#[derive(Debug)]
pub struct DeviceVerifier(pub Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for DeviceVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0.verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme != DEVICE_SCHEME {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::BadSignature,
            ));
        }
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme != DEVICE_SCHEME {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::BadSignature,
            ));
        }
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![DEVICE_SCHEME]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_common_name_among_other_attributes() {
        // SET { SEQ { O = "npub" } }, SET { SEQ { CN = "dev-1" } }
        let name = [
            0x31, 0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x04, b'n', b'p', b'u',
            b'b', 0x31, 0x0e, 0x30, 0x0c, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x05, b'd', b'e',
            b'v', b'-', b'1',
        ];
        assert_eq!(common_name(&name), Some("dev-1"));
        assert_eq!(common_name(&name[..15]), None);
    }

    fn device_cert(cn: Option<&str>, sans: Vec<rcgen::SanType>) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen names a certificate "rcgen self signed cert" unless told otherwise.
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        params.subject_alt_names = sans;
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn names_the_device_by_its_cn_a_dns_name_or_its_urn() {
        let dns = |n: &str| rcgen::SanType::DnsName(n.try_into().unwrap());
        let uri = |n: &str| rcgen::SanType::URI(n.try_into().unwrap());
        let name = |c| device_name(&c).map(|n: DeviceName| n.0.to_string());
        assert_eq!(name(device_cert(Some("dev-1"), vec![])), Ok("dev-1".into()));
        assert_eq!(
            name(device_cert(None, vec![dns("dev-2")])),
            Ok("dev-2".into())
        );
        assert_eq!(
            name(device_cert(None, vec![uri("urn:npub:device:dev-3")])),
            Ok("dev-3".into())
        );
        // The same device named twice is one name.
        assert_eq!(
            name(device_cert(Some("dev-4"), vec![dns("dev-4")])),
            Ok("dev-4".into())
        );
    }

    #[test]
    fn rejects_a_certificate_naming_no_device_or_two() {
        let dns = |n: &str| rcgen::SanType::DnsName(n.try_into().unwrap());
        let uri = |n: &str| rcgen::SanType::URI(n.try_into().unwrap());
        assert_eq!(
            device_name(&device_cert(None, vec![])),
            Err(Rejection::NoDeviceName)
        );
        assert_eq!(
            device_name(&device_cert(None, vec![uri("https://example.com/")])),
            Err(Rejection::NoDeviceName)
        );
        assert_eq!(
            device_name(&device_cert(Some("dev-1"), vec![dns("dev-2")])),
            Err(Rejection::NoDeviceName)
        );
    }

    #[test]
    fn rejects_each_certificate_error_with_its_reason() {
        let of = |e| Rejection::of_handshake(&rustls::Error::InvalidCertificate(e));
        assert_eq!(
            of(CertificateError::UnknownIssuer),
            Some(Rejection::UnknownCa)
        );
        assert_eq!(of(CertificateError::Expired), Some(Rejection::Expired));
        assert_eq!(
            of(CertificateError::NotValidYet),
            Some(Rejection::NotYetValid)
        );
        assert_eq!(
            of(CertificateError::BadSignature),
            Some(Rejection::BadCertificate)
        );
        assert_eq!(
            Rejection::of_handshake(&rustls::Error::HandshakeNotComplete),
            None
        );
        for r in [
            Rejection::UnknownCa,
            Rejection::Expired,
            Rejection::NotYetValid,
            Rejection::BadCertificate,
            Rejection::NoDeviceName,
            Rejection::DeviceMismatch,
            Rejection::UnknownDevice,
        ] {
            assert!(
                crate::ops::metrics::CLIENT_CERT_REJECTIONS.contains(&r.label()),
                "{r:?}"
            );
        }
    }

    #[test]
    fn rejects_a_name_that_runs_past_its_end() {
        assert_eq!(common_name(&[0x31, 0x05, 0x30]), None);
        assert_eq!(tlv(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(tlv(&[0x30, 0x80]), None);
    }
}
