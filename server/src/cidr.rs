//! IP networks as an operator writes them on the command line: `10.0.0.0/8`, `2001:db8::/32`, or
//! one address (a /32 or /128). `--trusted-proxy` and `--webhook-allow-address` take lists of them.
//!
//! IPv4-mapped IPv6 addresses (`::ffff:10.1.2.3`) are the IPv4 address they carry, on both sides
//! of a comparison: a dual-stack socket reports an IPv4 peer that way.
use std::net::IpAddr;

/// One network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n`, `x::y/n` or a bare address; the error names the text and what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{text:?}: not an IP address or CIDR (e.g. 10.0.0.0/8)"))?;
        let net = net.to_canonical();
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Self { net, prefix })
    }

    /// Whether `ip` is inside the network.
    pub fn contains(self, ip: IpAddr) -> bool {
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// A list of networks (a flag's values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(Vec<Cidr>);

impl Networks {
    /// Parses a flag's values, each an address or a CIDR, or several separated by commas; empty
    /// entries are skipped. The error names the bad one.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(Cidr::parse)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether any network holds `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_holds_its_addresses_and_mapped_ones() {
        let n = Networks::parse(&["10.0.0.0/8, 2001:db8::/32".into(), "192.0.2.7".into()]).unwrap();
        for inside in ["10.1.2.3", "::ffff:10.9.9.9", "2001:db8::1", "192.0.2.7"] {
            assert!(n.contains(inside.parse().unwrap()), "{inside}");
        }
        for outside in ["11.0.0.1", "192.0.2.8", "2001:db9::1", "::1"] {
            assert!(!n.contains(outside.parse().unwrap()), "{outside}");
        }
        assert!(
            Networks::parse(&["0.0.0.0/0".into()])
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
    }

    #[test]
    fn rejects_a_bad_network_naming_it() {
        let e = Networks::parse(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(
            e.contains("\"10.0.0.0/33\": the prefix length must be 0 to 32"),
            "{e}"
        );
        let e = Networks::parse(&["lab-net".into()]).unwrap_err();
        assert!(e.contains("\"lab-net\": not an IP address"), "{e}");
    }
}
