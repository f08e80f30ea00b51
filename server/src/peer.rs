//! Who a connection or a request comes from: the key that limits and throttles count against,
//! and the client behind a trusted reverse proxy.
//!
//! | Peer of the TCP connection       | The request's client (`ConnectInfo`, logs, auth throttling) | Per-peer connection cap |
//! |----------------------------------|----------------------------------------------------------|-------------------------|
//! | not a `--trusted-proxy`          | the TCP peer; `Forwarded` / `X-Forwarded-For` are ignored | applies                 |
//! | inside a `--trusted-proxy` CIDR  | the nearest address in `Forwarded: for=` (or, without that header, `X-Forwarded-For`) that is not itself a trusted proxy, read from the right; the TCP peer if the header names none | exempt: a balancer carries many clients' connections (the global cap still applies) |
//!
//! Reading from the right matters: a client can write any address into the header it sends; only
//! the entries the trusted proxies appended after it are believed. Keys are the IPv4 address or
//! the IPv6 /64 (one host's privacy addresses are one peer).
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::http::HeaderMap;

use crate::cidr::Networks;

/// What per-peer limits count against: the IPv4 address, or the IPv6 address's /64.
pub fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
    }
}

/// The `--trusted-proxy` networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Networks);

impl TrustedProxies {
    /// Parses the flag's values (each an address or a CIDR); the error names the bad one.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        Networks::parse(values).map(Self)
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(ip)
    }

    /// The client a request from `peer` with `headers` comes from (the module doc's table).
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        if self.0.is_empty() || !self.contains(peer.ip()) {
            return peer;
        }
        let forwarded = forwarded_for(headers);
        let chain = if forwarded.is_empty() {
            x_forwarded_for(headers)
        } else {
            forwarded
        };
        chain
            .into_iter()
            .rev()
            .find(|a| !self.contains(a.ip()))
            .unwrap_or(peer)
    }
}

/// The `for=` addresses of every `Forwarded` element (RFC 7239), in order; an element whose
/// `for` is not an address (`unknown`, an obfuscated `_name`) ends the list there, since nothing
/// left of it can be attributed.
fn forwarded_for(headers: &HeaderMap) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for value in headers.get_all("forwarded") {
        let Ok(value) = value.to_str() else {
            return Vec::new();
        };
        for element in value.split(',') {
            let node = element.split(';').find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                k.trim().eq_ignore_ascii_case("for").then(|| v.trim())
            });
            match node.map(|n| node_address(n.trim_matches('"'))) {
                Some(Some(addr)) => out.push(addr),
                // No `for`, or one that names no address: what came before it is unattributable.
                _ => out.clear(),
            }
        }
    }
    out
}

/// The addresses of `X-Forwarded-For`, in order (a value that is not an address clears what came
/// before it, as in [`forwarded_for`]).
fn x_forwarded_for(headers: &HeaderMap) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(value) = value.to_str() else {
            return Vec::new();
        };
        for item in value.split(',') {
            match node_address(item.trim()) {
                Some(addr) => out.push(addr),
                None => out.clear(),
            }
        }
    }
    out
}

/// `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`, `[2001:db8::1]:4711` or a bare IPv6 address.
fn node_address(node: &str) -> Option<SocketAddr> {
    if let Ok(addr) = node.parse::<SocketAddr>() {
        return Some(addr);
    }
    let bare = node.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn sock(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn keys_ipv6_by_its_64_and_ipv4_by_itself() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(key(a), key(b));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn believes_forwarded_headers_only_from_trusted_proxies() {
        let trusted =
            TrustedProxies::parse(&["10.0.0.0/8".into(), "2001:db8::/32".into()]).unwrap();
        let h = headers(&[("x-forwarded-for", "203.0.113.9")]);
        // From a trusted proxy: the client it names.
        assert_eq!(
            trusted.client(sock("10.1.2.3:5000"), &h),
            sock("203.0.113.9:0")
        );
        // From anyone else: ignored.
        assert_eq!(
            trusted.client(sock("198.51.100.1:5000"), &h),
            sock("198.51.100.1:5000")
        );
        // No proxies configured: ignored.
        assert_eq!(
            TrustedProxies::default().client(sock("10.1.2.3:5000"), &h),
            sock("10.1.2.3:5000")
        );
    }

    #[test]
    fn rejects_addresses_a_client_wrote_left_of_the_proxies() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8".into()]).unwrap();
        // The client claims 1.1.1.1; the proxies appended the address it really came from.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.5")]);
        assert_eq!(
            trusted.client(sock("10.0.0.6:1"), &h),
            sock("203.0.113.9:0")
        );
        // Forwarded wins over X-Forwarded-For, with ports and brackets.
        let h = headers(&[
            ("x-forwarded-for", "198.51.100.77"),
            (
                "forwarded",
                "for=1.1.1.1, for=\"[2001:db8:cafe::17]:4711\";proto=https",
            ),
        ]);
        assert_eq!(
            trusted.client(sock("10.0.0.6:1"), &h),
            sock("[2001:db8:cafe::17]:4711")
        );
        // `unknown` ends what can be attributed: the proxy's own address is used.
        let h = headers(&[("forwarded", "for=unknown")]);
        assert_eq!(trusted.client(sock("10.0.0.6:1"), &h), sock("10.0.0.6:1"));
    }

    #[test]
    fn rejects_a_trusted_proxy_that_is_not_a_network() {
        for bad in ["10.0.0.0/33", "not-an-ip", "10.0.0.0/x", "::/129"] {
            let e = TrustedProxies::parse(&[bad.into()]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        let ok =
            TrustedProxies::parse(&["127.0.0.1".into(), " ::1/128 ,0.0.0.0/0".into()]).unwrap();
        assert!(ok.contains("127.0.0.1".parse().unwrap()));
        assert!(ok.contains("192.0.2.1".parse().unwrap()));
        assert!(ok.contains("::1".parse().unwrap()));
        assert!(!ok.contains("::2".parse().unwrap()));
    }
}
