//! The egress policy of `http.request`: which addresses and hosts a request may reach,
//! enforced on the address the connection is made to.
//!
//! # Layout
//!
//! - [`Policy`] (here): the operator's settings, parsed and validated once at start
//!   (`RARA_HTTP_EGRESS`, `RARA_HTTP_ALLOW_CIDRS`, `RARA_HTTP_ALLOW_HOSTS`), and the decision
//!   for one address or one URL.
//! - `ranges`: the refused ranges (loopback, link-local, private, CGNAT, unique-local,
//!   multicast, ...) and the IPv4-in-IPv6 forms judged by their IPv4 address.
//! - `resolver`: the DNS resolver `http.request`'s client connects through: it resolves a
//!   name and hands the connector only the addresses the policy opens, so the connection
//!   goes to exactly the addresses checked (no second lookup to rebind).
//!
//! Literal addresses never reach a resolver (the connector uses them as they are), so
//! [`Policy::check_url`] checks them before each request and each redirect hop.

mod ranges;
mod resolver;

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use reqwest::Url;

pub use ranges::{embedded_v4, refused};
pub use resolver::Resolver;

/// The variable that chooses the mode.
pub const EGRESS_VAR: &str = "RARA_HTTP_EGRESS";
/// The variable of the opened CIDRs.
pub const ALLOW_CIDRS_VAR: &str = "RARA_HTTP_ALLOW_CIDRS";
/// The variable of the opened host names.
pub const ALLOW_HOSTS_VAR: &str = "RARA_HTTP_ALLOW_HOSTS";
/// The rule named when the allow-list mode refuses what is on neither list.
pub const NOT_ALLOWED: &str = "not-allowlisted";

/// What is reachable besides the opened CIDRs and hosts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// `public` (the default): every public unicast address.
    #[default]
    Public,
    /// `allowlist`: nothing else.
    Allowlist,
}

/// A host name opened by `RARA_HTTP_ALLOW_HOSTS`: exact, or `*.suffix` for every name under
/// `suffix` (not `suffix` itself).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    /// Holds `.suffix`.
    Under(String),
}

/// The egress policy. The default refuses every special-purpose range and opens nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    mode: Mode,
    allow_cidrs: Vec<IpNet>,
    allow_hosts: Vec<HostPattern>,
}

/// A request the policy refuses: the host as the URL named it and the rule. It never holds
/// the path, the query, headers, a body or credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("egress to {host} refused ({rule})")]
pub struct Denied {
    pub host: String,
    /// `loopback`, `link-local`, `private`, ..., [`NOT_ALLOWED`], `https-downgrade`,
    /// `body-to-other-origin`.
    pub rule: &'static str,
}

/// An operator setting that does not parse; names the variable and the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {entry:?} is not valid: {reason}")]
pub struct Error {
    pub var: &'static str,
    pub entry: String,
    pub reason: String,
}

impl Policy {
    /// The policy of the three variables, `lookup` giving each one's value (unset or empty:
    /// the default). Every entry is checked; the first bad one is the error.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let value = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let mode = match value(EGRESS_VAR).as_deref().map(str::trim) {
            None | Some("public") => Mode::Public,
            Some("allowlist") => Mode::Allowlist,
            Some(other) => return Err(invalid(EGRESS_VAR, other, "expected `public` or `allowlist`")),
        };
        let entries = |var: &'static str| {
            value(var).map(|v| v.split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect())
        };
        let allow_cidrs: Vec<String> = entries(ALLOW_CIDRS_VAR).unwrap_or_default();
        let allow_hosts: Vec<String> = entries(ALLOW_HOSTS_VAR).unwrap_or_default();
        Ok(Policy {
            mode,
            allow_cidrs: allow_cidrs.iter().map(|e| parse_cidr(e)).collect::<Result<_, _>>()?,
            allow_hosts: allow_hosts.iter().map(|e| parse_host(e)).collect::<Result<_, _>>()?,
        })
    }

    /// The default policy with `cidrs` opened (tests and local tools).
    pub fn opening(cidrs: &str) -> Result<Self, Error> {
        Self::from_lookup(|var| (var == ALLOW_CIDRS_VAR).then(|| cidrs.to_owned()))
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether `RARA_HTTP_ALLOW_HOSTS` opens `host` (whatever it resolves to).
    pub fn opens_host(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.allow_hosts.iter().any(|pattern| match pattern {
            HostPattern::Exact(name) => *name == host,
            HostPattern::Under(suffix) => host.ends_with(suffix.as_str()),
        })
    }

    /// `Ok` when a connection to `ip` is allowed, else the rule that refuses it. An opened
    /// CIDR holding the address, or the IPv4 address it embeds, opens it.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), &'static str> {
        let embedded = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        if self.allow_cidrs.iter().any(|net| net.contains(&ip) || embedded.is_some_and(|v4| net.contains(&v4))) {
            return Ok(());
        }
        match self.mode {
            Mode::Allowlist => Err(NOT_ALLOWED),
            Mode::Public => refused(ip).map_or(Ok(()), Err),
        }
    }

    /// Checks what can be checked of `url` before connecting: a literal address, or, in the
    /// allow-list mode without opened CIDRs, a name on no list (refused without a lookup).
    /// Other names are checked by the [`Resolver`] at connect time.
    pub fn check_url(&self, url: &Url) -> Result<(), Denied> {
        let denied = |rule| Denied { host: url.host_str().unwrap_or_default().to_owned(), rule };
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip)).map_err(denied),
            Some(url::Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip)).map_err(denied),
            Some(url::Host::Domain(name)) => {
                if self.mode == Mode::Allowlist && self.allow_cidrs.is_empty() && !self.opens_host(name) {
                    return Err(denied(NOT_ALLOWED));
                }
                Ok(())
            }
            None => Err(denied("no-host")),
        }
    }
}

/// `public addresses; CIDRs opened: 127.0.0.1/32; hosts opened: *.corp.example`, for logs.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.mode {
            Mode::Public => "public addresses",
            Mode::Allowlist => "the allow-list only",
        })?;
        if !self.allow_cidrs.is_empty() {
            let cidrs: Vec<String> = self.allow_cidrs.iter().map(ToString::to_string).collect();
            write!(f, "; CIDRs opened: {}", cidrs.join(","))?;
        }
        if !self.allow_hosts.is_empty() {
            let hosts: Vec<String> = self
                .allow_hosts
                .iter()
                .map(|pattern| match pattern {
                    HostPattern::Exact(name) => name.clone(),
                    HostPattern::Under(suffix) => format!("*{suffix}"),
                })
                .collect();
            write!(f, "; hosts opened: {}", hosts.join(","))?;
        }
        Ok(())
    }
}

fn invalid(var: &'static str, entry: &str, reason: impl std::fmt::Display) -> Error {
    Error { var, entry: entry.to_owned(), reason: reason.to_string() }
}

/// `10.1.0.0/16`, `fd00::/8`, or one address (`10.1.2.3`: a /32).
fn parse_cidr(entry: &str) -> Result<IpNet, Error> {
    if let Ok(ip) = IpAddr::from_str(entry) {
        return Ok(IpNet::from(ip));
    }
    IpNet::from_str(entry)
        .map_err(|_| invalid(ALLOW_CIDRS_VAR, entry, "expected an address or a CIDR such as 10.0.0.0/8 or fd00::/8"))
}

/// `api.example.com` or `*.example.com`: letters, digits, `-` and `.`; not an address.
fn parse_host(entry: &str) -> Result<HostPattern, Error> {
    let lower = entry.to_ascii_lowercase();
    let lower = lower.strip_suffix('.').unwrap_or(&lower);
    if IpAddr::from_str(lower.trim_start_matches('[').trim_end_matches(']')).is_ok() {
        return Err(invalid(ALLOW_HOSTS_VAR, entry, format_args!("an address: open it in {ALLOW_CIDRS_VAR}")));
    }
    let (pattern, name) = match lower.strip_prefix("*.") {
        Some(suffix) => (HostPattern::Under(format!(".{suffix}")), suffix),
        None => (HostPattern::Exact(lower.to_owned()), lower),
    };
    let label_ok = |l: &str| !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(invalid(ALLOW_HOSTS_VAR, entry, "expected a host name such as api.example.com or *.example.com"));
    }
    Ok(pattern)
}

#[cfg(test)]
mod tests;
