//! Which addresses `fetch_url` may connect to: ordinary global unicast hosts, nothing else.
//!
//! The list is IANA's, not ours: the IPv4 and IPv6 Special-Purpose Address Registries
//! (RFC 6890), kept here as the CSV files IANA publishes (`iana-ipv4-special-registry-1.csv`,
//! `iana-ipv6-special-registry-1.csv`, beside this file, unedited), each block with its name and
//! RFC. To follow a change of the registries, replace the two files with IANA's current ones; the
//! tests check that every row still parses.
//!
//! An address is refused when:
//!
//! - it lies in any block of the registries: private, shared (CGNAT), loopback, link-local,
//!   documentation, benchmarking (`198.18.0.0/15`, `2001:2::/48`), reserved, broadcast, unique
//!   local, discard-only, TEREDO, ORCHID and the rest. That includes the few blocks the registry
//!   marks globally reachable: they are anycast addresses of network protocols (PCP, TURN, AS112
//!   DNS, AMT), never a web page;
//! - it is multicast (`224.0.0.0/4`, RFC 5771; `ff00::/8`, RFC 4291: a registry of its own);
//! - it is an IPv6 address outside `2000::/3`, the only IPv6 space allocated for global unicast
//!   (RFC 4291; the rest is reserved, link-local, unique local or multicast).
//!
//! Three IPv6 forms carry an IPv4 address, and the packets go to that address: IPv4-mapped
//! (`::ffff:0:0/96`, RFC 4291), NAT64 (`64:ff9b::/96`, RFC 6052) and 6to4 (`2002::/16`, RFC 3056,
//! the IPv4 address in bits 16 to 48). They are judged by the IPv4 address they carry, so
//! `::ffff:8.8.8.8` may be fetched and `2002:c0a8:101::1` (192.168.1.1) may not.
//!
//! Loopback (`127.0.0.0/8`, `::1`) is let through only when the operator allows it, for tests
//! against a server on this machine (`fetch_allow_loopback`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use ipnet::{IpNet, Ipv6Net};

/// IANA's IPv4 Special-Purpose Address Registry, as published.
const IPV4_REGISTRY: &str = include_str!("iana-ipv4-special-registry-1.csv");
/// IANA's IPv6 Special-Purpose Address Registry, as published.
const IPV6_REGISTRY: &str = include_str!("iana-ipv6-special-registry-1.csv");

/// One block of a registry.
#[derive(Debug, Clone)]
pub struct Block {
    /// The block.
    pub net: IpNet,
    /// The registry's name for it ("Benchmarking").
    pub name: String,
    /// The RFCs that define it, as the registry gives them (`"[RFC2544]"`).
    pub rfc: String,
}

/// Every block of both registries (a row may list two blocks).
pub fn registry() -> &'static [Block] {
    static BLOCKS: LazyLock<Vec<Block>> = LazyLock::new(|| {
        let mut blocks = parse(IPV4_REGISTRY);
        blocks.extend(parse(IPV6_REGISTRY));
        blocks
    });
    &BLOCKS
}

/// The blocks of one registry's CSV. A cell that is not a block is skipped; the tests check
/// that no row of the vendored files is.
fn parse(csv_text: &str) -> Vec<Block> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(csv_text.as_bytes());
    let mut blocks = Vec::new();
    for record in reader.records().flatten() {
        let (Some(cell), Some(name), Some(rfc)) = (record.get(0), record.get(1), record.get(2))
        else {
            continue;
        };
        let rfc = rfc.split_whitespace().collect::<Vec<_>>().join(" ");
        // "192.0.0.0/24 [2]" carries a footnote; "192.0.0.170/32, 192.0.0.171/32" two blocks.
        for part in cell.split(',') {
            let Some(text) = part.split_whitespace().next() else { continue };
            if let Ok(net) = text.parse::<IpNet>() {
                blocks.push(Block { net, name: name.to_string(), rfc: rfc.clone() });
            }
        }
    }
    blocks
}

/// Why `ip` may not be fetched, or `None` when it may.
pub fn refused(ip: IpAddr, allow_loopback: bool) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4, allow_loopback),
        IpAddr::V6(v6) => refused_v6(v6, allow_loopback),
    }
}

fn refused_v4(ip: Ipv4Addr, allow_loopback: bool) -> Option<String> {
    if ip.is_loopback() && allow_loopback {
        return None;
    }
    if ip.is_multicast() {
        return Some("a multicast address (224.0.0.0/4, RFC 5771)".into());
    }
    special(IpAddr::V4(ip))
}

fn refused_v6(ip: Ipv6Addr, allow_loopback: bool) -> Option<String> {
    if let Some((v4, form)) = embedded_v4(ip) {
        return refused_v4(v4, allow_loopback).map(|why| format!("{form} for {v4}, {why}"));
    }
    if ip.is_loopback() && allow_loopback {
        return None;
    }
    if ip.is_multicast() {
        return Some("a multicast address (ff00::/8, RFC 4291)".into());
    }
    if let Some(why) = special(IpAddr::V6(ip)) {
        return Some(why);
    }
    (ip.segments()[0] & 0xe000 != 0x2000)
        .then(|| "outside 2000::/3, the global unicast space (RFC 4291)".into())
}

/// The most specific registry block holding `ip`, said in words.
fn special(ip: IpAddr) -> Option<String> {
    registry()
        .iter()
        .filter(|b| b.net.contains(&ip))
        .max_by_key(|b| b.net.prefix_len())
        .map(|b| format!("in {} ({}, {})", b.net, b.name, b.rfc))
}

/// The IPv4 address an IPv6 address carries, and the form's name: IPv4-mapped, NAT64
/// (well-known prefix) or 6to4.
fn embedded_v4(ip: Ipv6Addr) -> Option<(Ipv4Addr, &'static str)> {
    static NAT64: LazyLock<Option<Ipv6Net>> = LazyLock::new(|| "64:ff9b::/96".parse().ok());
    static SIX_TO_FOUR: LazyLock<Option<Ipv6Net>> = LazyLock::new(|| "2002::/16".parse().ok());
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some((v4, "an IPv4-mapped address"));
    }
    let o = ip.octets();
    if NAT64.is_some_and(|n| n.contains(&ip)) {
        return Some((Ipv4Addr::new(o[12], o[13], o[14], o[15]), "a NAT64 address"));
    }
    if SIX_TO_FOUR.is_some_and(|n| n.contains(&ip)) {
        return Some((Ipv4Addr::new(o[2], o[3], o[4], o[5]), "a 6to4 address"));
    }
    None
}

/// `net`'s first and last address (for the tests).
#[cfg(test)]
fn ends(net: &IpNet) -> [IpAddr; 2] {
    [net.network(), net.broadcast()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// Every row of the vendored files gives its blocks: none is lost to a parse.
    #[test]
    fn every_row_of_both_registries_is_read() {
        let rows = |text: &str| {
            let mut reader = csv::Reader::from_reader(text.as_bytes());
            reader.records().map(|r| r.unwrap()).collect::<Vec<_>>()
        };
        let (v4, v6) = (rows(IPV4_REGISTRY), rows(IPV6_REGISTRY));
        // 25 rows, one of them with two blocks; 25 rows.
        assert_eq!((v4.len(), v6.len()), (25, 25));
        assert_eq!(parse(IPV4_REGISTRY).len(), 26);
        assert_eq!(parse(IPV6_REGISTRY).len(), 25);
        assert!(registry().iter().all(|b| b.rfc.starts_with("[RFC")), "{:?}", registry());
        let bench = registry().iter().find(|b| b.net.to_string() == "198.18.0.0/15").unwrap();
        assert_eq!((bench.name.as_str(), bench.rfc.as_str()), ("Benchmarking", "[RFC2544]"));
    }

    /// The first and last address of every block of both registries is refused, even with
    /// loopback allowed (but for loopback itself).
    #[test]
    fn every_registry_block_is_refused() {
        for block in registry() {
            for addr in ends(&block.net) {
                assert!(refused(addr, false).is_some(), "{addr} ({}) was allowed", block.name);
                let loopback = match addr {
                    IpAddr::V4(v4) => v4.is_loopback(),
                    IpAddr::V6(v6) => {
                        v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback())
                    }
                };
                if !loopback {
                    assert!(refused(addr, true).is_some(), "{addr} allowed with loopback");
                }
            }
        }
    }

    #[test]
    fn the_reported_holes_are_closed() {
        for addr in ["198.18.0.1", "198.19.255.254", "2002::1", "2002:c612:1::1", "2002:a00:1::"] {
            assert!(refused(ip(addr), false).is_some(), "{addr} was allowed");
        }
        let why = refused(ip("198.18.0.1"), false).unwrap();
        assert!(why.contains("Benchmarking") && why.contains("RFC2544"), "{why}");
        let why = refused(ip("2002:c0a8:101::1"), false).unwrap();
        assert!(why.contains("6to4") && why.contains("192.168.1.1"), "{why}");
    }

    #[test]
    fn embedded_ipv4_is_judged_by_the_ipv4_address() {
        for addr in [
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:198.18.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::c0a8:1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2002:e000:1::",
        ] {
            assert!(refused(ip(addr), false).is_some(), "{addr} was allowed");
        }
        for addr in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert_eq!(refused(ip(addr), false), None, "{addr} was refused");
        }
        // NAT64's local-use prefix is a registry block of its own: refused outright.
        assert!(refused(ip("64:ff9b:1::808:808"), false).is_some());
    }

    #[test]
    fn multicast_and_unallocated_ipv6_are_refused() {
        for addr in
            ["224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", "fec0::1", "4000::1", "::2"]
        {
            assert!(refused(ip(addr), false).is_some(), "{addr} was allowed");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.215.14",
            "198.17.255.255",
            "198.20.0.0",
            "2606:4700::1111",
            "2606:4700::",
            "2001:4860:4860::8888",
            "2a00:1450:4001::200e",
        ] {
            assert_eq!(refused(ip(addr), false), None, "{addr} was refused");
        }
        assert_eq!(refused(ip("127.0.0.1"), true), None);
        assert_eq!(refused(ip("::1"), true), None);
        assert!(refused(ip("127.0.0.1"), false).is_some());
        assert!(refused(ip("10.0.0.1"), true).is_some(), "loopback allowed opens nothing else");
    }
}
