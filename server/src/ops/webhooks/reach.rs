//! Where a webhook may send: an admin registers any `http(s)` URL, and the server then makes
//! requests to it from inside the operator's network. Some addresses are never a receiver and are
//! worth attacking from there (server-side request forgery), so deliveries to them are refused
//! unless `--webhook-allow-address` lets their range through.
//!
//! | Refused range                                   | Why                                                          |
//! |-------------------------------------------------|--------------------------------------------------------------|
//! | loopback: `127.0.0.0/8`, `::1`                   | the server itself: its admin listener, a database or object store on loopback |
//! | unspecified: `0.0.0.0/8`, `::`                   | reaches the local host on Linux                              |
//! | link-local: `169.254.0.0/16`, `fe80::/10`         | cloud instance metadata (`169.254.169.254`: credentials)     |
//! | multicast and broadcast: `224.0.0.0/4`, `255.255.255.255`, `ff00::/8` | no receiver answers there          |
//!
//! Private networks (`10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `fc00::/7`) are allowed:
//! operators' receivers (a chat relay, an incident tool) commonly live there. IPv4-mapped and
//! NAT64 (`64:ff9b::/96`) addresses are judged as the IPv4 address they carry.
//!
//! The check runs where it cannot be dodged: on every address a host name resolves to, at each
//! attempt, by the resolver the connection uses (a name that resolved to a public address at
//! registration and to `127.0.0.1` later — DNS rebinding — is refused then); an address written in
//! the URL is checked before the attempt, and already when the webhook is registered (422).
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::Name;

use crate::cidr::Networks;

/// The delivery address policy: the refused ranges of the module doc, less `--webhook-allow-address`.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    allowed: Networks,
}

impl Reach {
    /// The policy with `allowed` let through (`--webhook-allow-address`).
    pub fn new(allowed: Networks) -> Self {
        Self { allowed }
    }

    /// Why a delivery to `ip` is refused (the range's name), or `None` when it may go.
    pub fn refused(&self, ip: IpAddr) -> Option<&'static str> {
        if self.allowed.contains(ip) {
            return None;
        }
        match embedded_v4(ip) {
            Some(v4) => v4_refused(v4),
            None => match ip {
                IpAddr::V6(v6) if v6.is_loopback() => Some("loopback"),
                IpAddr::V6(v6) if v6.is_unspecified() => Some("unspecified"),
                IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some("link-local"),
                IpAddr::V6(v6) if v6.is_multicast() => Some("multicast"),
                _ => None,
            },
        }
    }

    /// The refusal of a URL whose host is an address, as the API and the delivery log say it.
    pub fn refuse_literal(&self, host: &str) -> Option<String> {
        let ip: IpAddr = host.trim_matches(['[', ']']).parse().ok()?;
        self.refused(ip).map(|why| refusal(host, ip, why))
    }
}

/// What the API and the delivery log say about a refused address.
fn refusal(host: &str, ip: IpAddr, why: &str) -> String {
    format!(
        "{host} is {ip}, a {why} address: webhooks do not send there unless the server's \
         --webhook-allow-address covers it (docs/webhooks.md)"
    )
}

/// The IPv4 address `ip` is or carries (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`).
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]).then(|| {
                let o = v6.octets();
                Ipv4Addr::new(o[12], o[13], o[14], o[15])
            })
        }
    }
}

fn v4_refused(v4: Ipv4Addr) -> Option<&'static str> {
    if v4.is_loopback() {
        Some("loopback")
    } else if v4.octets()[0] == 0 {
        Some("unspecified")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if v4.is_multicast() {
        Some("multicast")
    } else if v4.is_broadcast() {
        Some("broadcast")
    } else {
        None
    }
}

/// The resolver every delivery connects through: the system's, then the [`Reach`] check on each
/// address; a name left with none fails the attempt with the reason.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    reach: Arc<Reach>,
}

impl GuardedResolver {
    /// A resolver applying `reach`.
    pub fn new(reach: Arc<Reach>) -> Self {
        Self { reach }
    }
}

type Resolving = Pin<Box<dyn Future<Output = io::Result<std::vec::IntoIter<SocketAddr>>> + Send>>;

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Resolving;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let reach = Arc::clone(&self.reach);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            // The attempt's deadline (`--webhook-timeout`) bounds the lookup too.
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refusal = None;
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match reach.refused(a.ip()) {
                    None => true,
                    Some(why) => {
                        first_refusal.get_or_insert_with(|| refusal(&host, a.ip(), why));
                        false
                    }
                })
                .collect();
            match (kept.is_empty(), first_refusal) {
                (true, Some(why)) => Err(io::Error::new(io::ErrorKind::PermissionDenied, why)),
                _ => Ok(kept.into_iter()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reach: &Reach, ip: &str) -> Option<&'static str> {
        reach.refused(ip.parse().unwrap())
    }

    #[test]
    fn rejects_the_servers_own_host_and_the_metadata_service() {
        let reach = Reach::default();
        for (ip, why) in [
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::7f00:1", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("255.255.255.255", "broadcast"),
        ] {
            assert_eq!(refused(&reach, ip), Some(why), "{ip}");
        }
    }

    #[test]
    fn private_and_public_receivers_are_allowed() {
        let reach = Reach::default();
        for ip in [
            "10.1.2.3",
            "192.168.1.10",
            "172.16.0.1",
            "fd00::1",
            "203.0.113.9",
            "2001:db8::1",
        ] {
            assert_eq!(refused(&reach, ip), None, "{ip}");
        }
    }

    #[test]
    fn the_allow_list_lets_a_range_through() {
        let reach = Reach::new(Networks::parse(&["127.0.0.0/8".into()]).unwrap());
        assert_eq!(refused(&reach, "127.0.0.1"), None);
        assert_eq!(refused(&reach, "::1"), Some("loopback"));
        let said = Reach::default().refuse_literal("[::1]").unwrap();
        assert!(said.contains("[::1] is ::1, a loopback address"), "{said}");
        assert_eq!(Reach::default().refuse_literal("receiver.example"), None);
    }

    #[tokio::test]
    async fn rejects_a_name_resolving_only_to_refused_addresses() {
        use tower_service::Service;
        let mut resolver = GuardedResolver::new(Arc::new(Reach::default()));
        let name: Name = "localhost".parse().unwrap();
        let e = resolver.call(name).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("localhost is "), "{e}");
        let mut allowed = GuardedResolver::new(Arc::new(Reach::new(
            Networks::parse(&["127.0.0.0/8, ::1".into()]).unwrap(),
        )));
        let kept: Vec<_> = allowed
            .call("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!kept.is_empty());
    }
}
