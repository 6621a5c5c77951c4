//! What guards every request before a handler runs, and every response after it:
//!
//! - the `Host` check ([`Hosts`]): a page of another site whose name rebinds to 127.0.0.1 sends
//!   its own name as `Host`, and is refused with `421 misdirected` before anything is read;
//! - the security headers (`headers`): a Content-Security-Policy that allows exactly the
//!   console's inline script and style (by their SHA-256) and no framing, `nosniff`,
//!   `Referrer-Policy: no-referrer` and `X-Frame-Options: DENY`, on pages, API answers and
//!   errors alike.

use std::net::{IpAddr, SocketAddr};
use std::sync::LazyLock;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::console::pages;
use crate::{Api, Error};

/// The longest `Host` an error quotes.
const QUOTED_HOST_CHARS: usize = 100;

/// The names (with or without a port) a server answers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Hosts {
    /// Any `Host`: the Lambda behind a function URL, whose host varies, unless names are set.
    #[default]
    Any,
    /// Only these `(name, port)`; a name without a port matches it on any port.
    Only(Vec<(String, Option<u16>)>),
}

impl Hosts {
    /// What a server bound to `addr` answers to: its address, the loopback names when it
    /// listens on loopback (or everywhere), and `names` (`NAME` or `NAME:PORT`).
    pub fn bound(addr: SocketAddr, names: &[String]) -> Hosts {
        let port = Some(addr.port());
        let ip = addr.ip();
        let mut allowed = vec![];
        if ip.is_loopback() || ip.is_unspecified() {
            allowed.extend(["localhost", "127.0.0.1", "[::1]"].map(|name| (name.to_owned(), port)));
        }
        if !ip.is_unspecified() && !allowed.contains(&(literal(ip), port)) {
            allowed.push((literal(ip), port));
        }
        allowed.extend(names.iter().map(|name| split(name)));
        Hosts::Only(allowed)
    }

    /// Only `names` (`NAME` or `NAME:PORT`); no name: any host.
    pub fn named(names: &[String]) -> Hosts {
        if names.is_empty() { Hosts::Any } else { Hosts::Only(names.iter().map(|name| split(name)).collect()) }
    }

    /// Whether a request with this `Host` is answered (a `Host` without a port is port 80).
    pub fn allows(&self, host: &str) -> bool {
        let Hosts::Only(allowed) = self else { return true };
        let (name, port) = split(host);
        allowed.iter().any(|(n, p)| *n == name && p.is_none_or(|p| p == port.unwrap_or(80)))
    }

    fn list(&self) -> String {
        let Hosts::Only(allowed) = self else { return "any".to_owned() };
        let names: Vec<String> = allowed
            .iter()
            .map(|(name, port)| match port {
                Some(port) => format!("{name}:{port}"),
                None => name.clone(),
            })
            .collect();
        names.join(", ")
    }
}

/// How an address is written in a `Host` header.
fn literal(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

/// A `Host` (or a configured name) as a lower-case name and its port, if it has one.
fn split(host: &str) -> (String, Option<u16>) {
    let host = host.trim().to_ascii_lowercase();
    let end = if host.starts_with('[') { host.find(']').map_or(0, |i| i + 1) } else { 0 };
    match host[end..].rfind(':').map(|i| i + end) {
        Some(colon) if !host[..colon].contains(':') || end > 0 => match host[colon + 1..].parse() {
            Ok(port) => (host[..colon].to_owned(), Some(port)),
            Err(_) => (host, None),
        },
        _ => (host, None),
    }
}

/// Refuses a request whose `Host` (or HTTP/2 authority) the server does not answer to.
pub(crate) async fn check_host(State(api): State<Api>, request: Request, next: Next) -> Response {
    let hosts = api.hosts();
    if *hosts == Hosts::Any {
        return next.run(request).await;
    }
    let host = match request.headers().get(header::HOST) {
        Some(value) => value.to_str().ok().map(str::to_owned),
        None => request.uri().authority().map(|a| a.as_str().to_owned()),
    };
    if let Some(host) = &host
        && hosts.allows(host)
    {
        return next.run(request).await;
    }
    let shown: String = host.unwrap_or_default().chars().take(QUOTED_HOST_CHARS).collect();
    let message = format!(
        "this server does not answer to `Host: {shown}` (it answers to {}): a page of another site may be \
         trying to read it. To reach it by another name, allow it (`rara ui --allow-host NAME`, or \
         RARA_API_HOSTS for the api function)",
        hosts.list()
    );
    Error::new(StatusCode::MISDIRECTED_REQUEST, "misdirected", message, 1).into_response()
}

/// The policy of every response: exactly the console's inline script and style, no framing.
static CONTENT_SECURITY_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let scripts: Vec<String> = pages::inline_scripts().iter().map(|s| hash(s)).collect();
    let policy = format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self'; \
         form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        scripts.join(" "),
        hash(pages::inline_style())
    );
    HeaderValue::from_str(&policy).unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
});

/// A CSP source of the text of an inline element: `'sha256-<base64>'`.
pub fn hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// Puts the security headers on a response.
pub(crate) async fn headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY.clone());
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_server_answers_to_its_address_and_the_loopback_names_only() {
        let hosts = Hosts::bound("127.0.0.1:7878".parse().unwrap(), &[]);
        for host in ["127.0.0.1:7878", "localhost:7878", "LOCALHOST:7878", "[::1]:7878"] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in ["evil.example", "evil.example:7878", "127.0.0.1:7879", "127.0.0.1", "localhost.evil:7878"] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn configured_names_match_on_their_port_or_any() {
        let hosts = Hosts::bound("10.0.0.5:80".parse().unwrap(), &["rara.internal".into(), "Ops:8443".into()]);
        assert!(hosts.allows("10.0.0.5") && hosts.allows("10.0.0.5:80"), "port 80 is implied");
        assert!(hosts.allows("rara.internal:9000") && hosts.allows("ops:8443"));
        assert!(!hosts.allows("ops:8444") && !hosts.allows("localhost:80"), "not on loopback");
        assert!(Hosts::named(&[]).allows("anything"));
        assert!(!Hosts::named(&["a.example".into()]).allows("b.example"));
        assert_eq!(split("[::1]:80"), ("[::1]".to_owned(), Some(80)));
        assert_eq!(split("[::1]"), ("[::1]".to_owned(), None));
    }

    #[test]
    fn the_policy_hashes_the_inline_script_and_style_it_allows() {
        let policy = CONTENT_SECURITY_POLICY.to_str().unwrap();
        assert!(policy.contains(&hash(pages::inline_style())), "{policy}");
        for script in pages::inline_scripts() {
            assert!(policy.contains(&hash(script)), "{policy}");
        }
        assert!(policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe-inline"));
        // The example of the CSP specification's hash-source: alert('Hello, world.');
        assert_eq!(hash("alert('Hello, world.');"), "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='");
    }
}
