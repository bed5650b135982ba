//! Which client network a request comes from: the unit the anonymous lane is fair
//! between (limit.rs). A crawler rotates addresses within its provider's blocks, so one
//! address is too small a unit; an IPv4 /24 and an IPv6 /56 (a household's or a
//! server's delegation) by default.
//!
//! The address is the TCP peer's, unless the peer is a trusted proxy: then the
//! rightmost address of `X-Forwarded-For` that is not itself a trusted proxy (each proxy
//! appends the address it saw, so the rightmost untrusted one is the first that no
//! trusted party vouches for; anything left of it the client may have written), or
//! `Forwarded: for=` read the same way.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::HeaderMap;
use ipnet::IpNet;

/// A client's network: its address with the host bits cleared, and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientNet {
    addr: IpAddr,
    prefix: u8,
}

impl fmt::Display for ClientNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `addr/prefix`, as `Display` writes it (the fleet's reports carry networks so).
impl std::str::FromStr for ClientNet {
    type Err = ipnet::AddrParseError;

    fn from_str(s: &str) -> Result<ClientNet, Self::Err> {
        let net: IpNet = s.parse()?;
        let prefix = net.prefix_len();
        Ok(ClientNet::of(net.addr(), prefix, prefix))
    }
}

impl ClientNet {
    /// The network of `addr` for these prefix lengths (an IPv4-mapped IPv6 address
    /// counts as IPv4).
    pub fn of(addr: IpAddr, v4: u8, v6: u8) -> ClientNet {
        let addr = match addr {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
            a => a,
        };
        match addr {
            IpAddr::V4(a) => {
                let prefix = v4.min(32);
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                ClientNet {
                    addr: IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask)),
                    prefix,
                }
            }
            IpAddr::V6(a) => {
                let prefix = v6.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                ClientNet {
                    addr: IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask)),
                    prefix,
                }
            }
        }
    }
}

/// How a request's client network is found: prefix lengths and trusted proxies.
#[derive(Clone, Copy, Debug)]
pub struct ClientNets<'a> {
    pub v4: u8,
    pub v6: u8,
    pub trusted: &'a [IpNet],
}

impl<'a> ClientNets<'a> {
    pub fn from_limits(l: &'a levee_config::Limits) -> ClientNets<'a> {
        ClientNets {
            v4: l.client_network_v4,
            v6: l.client_network_v6,
            trusted: &l.trusted_proxies,
        }
    }

    /// The client's network for a request from `peer` with these headers.
    pub fn of(&self, peer: IpAddr, headers: &HeaderMap) -> ClientNet {
        ClientNet::of(self.client_addr(peer, headers), self.v4, self.v6)
    }

    fn trusted(&self, a: IpAddr) -> bool {
        let a = match a {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
            a => a,
        };
        self.trusted.iter().any(|n| n.contains(&a))
    }

    /// The client's address: the peer's, or, from a trusted proxy, the rightmost
    /// address of the forwarding headers that is not a trusted proxy.
    pub fn client_addr(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.trusted.is_empty() || !self.trusted(peer) {
            return peer;
        }
        let mut hops: Vec<IpAddr> = Vec::new();
        // Several fields of one name are one list, in order (RFC 9110 §5.3).
        for v in headers.get_all("x-forwarded-for") {
            let Ok(v) = v.to_str() else { return peer };
            for item in v.split(',') {
                match parse_node(item) {
                    Some(a) => hops.push(a),
                    // A hop levee cannot read: nothing left of it can be trusted.
                    None => hops.clear(),
                }
            }
        }
        if hops.is_empty() {
            for v in headers.get_all(http::header::FORWARDED) {
                let Ok(v) = v.to_str() else { return peer };
                for element in v.split(',') {
                    let node = element.split(';').find_map(|pair| {
                        let (k, v) = pair.split_once('=')?;
                        k.trim().eq_ignore_ascii_case("for").then_some(v)
                    });
                    match node.and_then(parse_node) {
                        Some(a) => hops.push(a),
                        None => hops.clear(),
                    }
                }
            }
        }
        hops.into_iter()
            .rev()
            .find(|a| !self.trusted(*a))
            .unwrap_or(peer)
    }
}

/// One hop: `1.2.3.4`, `1.2.3.4:80`, `"[2001:db8::1]:80"`, `2001:db8::1`.
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Ok(a) = s.parse::<IpAddr>() {
        return Some(a);
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, _) = rest.split_once(']')?;
        return inside.parse().ok();
    }
    let (host, port) = s.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(trusted: &[&str]) -> ClientNets<'static> {
        let list: Vec<IpNet> = trusted.iter().map(|t| t.parse().unwrap()).collect();
        ClientNets {
            v4: 24,
            v6: 56,
            trusted: Vec::leak(list),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn networks_are_masked() {
        let n = ClientNet::of("203.0.113.77".parse().unwrap(), 24, 56);
        assert_eq!(n.to_string(), "203.0.113.0/24");
        let n = ClientNet::of("2001:db8:1:2ff:1::9".parse().unwrap(), 24, 56);
        assert_eq!(n.to_string(), "2001:db8:1:200::/56");
        let n = ClientNet::of("::ffff:10.1.2.3".parse().unwrap(), 24, 56);
        assert_eq!(n.to_string(), "10.1.2.0/24");
        assert_eq!(
            ClientNet::of("10.1.2.3".parse().unwrap(), 0, 0).to_string(),
            "0.0.0.0/0"
        );
        assert_eq!(
            ClientNet::of("10.1.2.3".parse().unwrap(), 32, 0).to_string(),
            "10.1.2.3/32"
        );
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_proxies() {
        let h = headers(&[("x-forwarded-for", "198.51.100.7")]);
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(nets(&[]).client_addr(peer, &h), peer);
        assert_eq!(nets(&["10.0.0.0/8"]).client_addr(peer, &h), peer);
        assert_eq!(
            nets(&["192.0.2.0/24"]).client_addr(peer, &h).to_string(),
            "198.51.100.7"
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let t = nets(&["192.0.2.0/24", "10.0.0.0/8"]);
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        // The client wrote 1.1.1.1 itself; 198.51.100.7 is what the first proxy saw.
        let h = headers(&[
            ("x-forwarded-for", "1.1.1.1, 198.51.100.7"),
            ("x-forwarded-for", "10.0.0.5"),
        ]);
        assert_eq!(t.client_addr(peer, &h).to_string(), "198.51.100.7");
        // Garbage to the right of a hop: nothing before it is believed.
        let h = headers(&[("x-forwarded-for", "198.51.100.7, nonsense")]);
        assert_eq!(t.client_addr(peer, &h), peer);
        let h = headers(&[(
            "forwarded",
            "for=198.51.100.9;proto=https, for=\"[2001:db8::1]:443\"",
        )]);
        assert_eq!(t.client_addr(peer, &h).to_string(), "2001:db8::1");
        let h = headers(&[("forwarded", "for=198.51.100.9:8080")]);
        assert_eq!(t.client_addr(peer, &h).to_string(), "198.51.100.9");
        // Only trusted hops: the peer.
        let h = headers(&[("x-forwarded-for", "10.0.0.5")]);
        assert_eq!(t.client_addr(peer, &h), peer);
    }
}
