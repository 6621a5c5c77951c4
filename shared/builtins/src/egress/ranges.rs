//! The address ranges `http.request` refuses unless an operator opens them, each with the
//! rule name an `EGRESS_DENIED` error reports (IANA's special-purpose registries, RFC 6890).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(segments: [u16; 8], len: u8) -> Ipv6Net {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len)
}

/// Refused IPv4 ranges, the first match names the rule (broadcast before reserved).
const V4: [(Ipv4Net, &str); 16] = [
    (v4(0, 0, 0, 0, 8), "unspecified"),
    (v4(10, 0, 0, 0, 8), "private"),
    (v4(100, 64, 0, 0, 10), "cgnat"),
    (v4(127, 0, 0, 0, 8), "loopback"),
    (v4(169, 254, 0, 0, 16), "link-local"),
    (v4(172, 16, 0, 0, 12), "private"),
    (v4(192, 0, 0, 0, 24), "protocol-assignments"),
    (v4(192, 0, 2, 0, 24), "documentation"),
    (v4(192, 88, 99, 0, 24), "reserved"),
    (v4(192, 168, 0, 0, 16), "private"),
    (v4(198, 18, 0, 0, 15), "benchmarking"),
    (v4(198, 51, 100, 0, 24), "documentation"),
    (v4(203, 0, 113, 0, 24), "documentation"),
    (v4(224, 0, 0, 0, 4), "multicast"),
    (v4(255, 255, 255, 255, 32), "broadcast"),
    (v4(240, 0, 0, 0, 4), "reserved"),
];

/// Refused IPv6 ranges inside global unicast (2000::/3); everything outside it is refused
/// too (`reserved`), except the forms that embed an IPv4 address, judged by that address.
const V6: [(Ipv6Net, &str); 4] = [
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "documentation"),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "documentation"),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), "protocol-assignments"),
    (v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3), ""),
];

const V6_OUTSIDE_GLOBAL: [(Ipv6Net, &str); 5] = [
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique-local"),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link-local"),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "site-local"),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "private"),
];

/// The IPv4 address an IPv6 address stands for: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
/// `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d` and 6to4
/// `2002:AABB:CCDD::`. A connection to one of these can reach the IPv4 address.
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // `::` and `::1` are themselves, not IPv4-compatible addresses.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)),
        _ => None,
    }
}

/// The rule that refuses `ip`, or `None` for a public unicast address.
pub fn refused(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => V4.iter().find(|(net, _)| net.contains(&ip)).map(|(_, rule)| *rule),
        IpAddr::V6(ip) if ip.is_unspecified() => Some("unspecified"),
        IpAddr::V6(ip) if ip.is_loopback() => Some("loopback"),
        IpAddr::V6(ip) => match embedded_v4(ip) {
            Some(v4) => refused(IpAddr::V4(v4)),
            None => match V6.iter().find(|(net, _)| net.contains(&ip)) {
                Some((_, "")) => None,
                Some((_, rule)) => Some(*rule),
                None => Some(
                    V6_OUTSIDE_GLOBAL.iter().find(|(net, _)| net.contains(&ip)).map_or("reserved", |(_, rule)| *rule),
                ),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(ip: &str) -> Option<&'static str> {
        refused(ip.parse().unwrap())
    }

    #[test]
    fn cloud_metadata_and_local_addresses_are_refused_by_name() {
        let cases = [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("169.254.169.254", "link-local"),
            ("169.254.170.2", "link-local"),
            ("10.0.0.5", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.100.100.200", "cgnat"),
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("239.1.2.3", "multicast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.10", "documentation"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "unique-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("100::1", "reserved"),
        ];
        for (ip, expected) in cases {
            assert_eq!(rule(ip), Some(expected), "{ip}");
        }
    }

    #[test]
    fn ipv4_in_ipv6_forms_are_judged_by_their_ipv4_address() {
        for ip in ["::ffff:127.0.0.1", "::ffff:0:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"] {
            assert_eq!(rule(ip), Some("loopback"), "{ip}");
        }
        assert_eq!(rule("::ffff:169.254.169.254"), Some("link-local"));
        assert_eq!(rule("64:ff9b::a9fe:a9fe"), Some("link-local"));
        assert_eq!(rule("::ffff:8.8.8.8"), None);
        assert_eq!(rule("64:ff9b::808:808"), None);
    }

    #[test]
    fn public_unicast_addresses_pass() {
        for ip in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "2a00:1450::1"] {
            assert_eq!(rule(ip), None, "{ip}");
        }
    }
}
