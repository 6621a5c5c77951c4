//! The decision for one redirect hop. `http.request` follows redirects itself (the client's
//! own following is off) so that every hop passes the egress policy and these rules:
//!
//! | rule | why |
//! |---|---|
//! | at most [`MAX_REDIRECTS`] hops | a loop or a long chain ends |
//! | `https` never goes to `http` | a token sent over TLS stays on TLS |
//! | another origin gets only [`SAFE_HEADERS`] | input headers may hold secrets |
//! | a body never goes to another origin | the body may hold secrets |
//! | 301/302 of a POST and 303 become a GET without a body | as browsers do (Fetch) |

use reqwest::header::{HeaderMap, HeaderName};
use reqwest::{Method, StatusCode, Url};

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;
/// The input headers kept when a redirect leaves the origin (scheme, host, port).
pub const SAFE_HEADERS: [&str; 5] = ["accept", "accept-language", "content-language", "content-type", "user-agent"];
/// The headers that describe a body, dropped with it.
const BODY_HEADERS: [&str; 4] = ["content-encoding", "content-language", "content-location", "content-type"];

/// Whether `status` is a redirect `http.request` follows (when it has a `Location`).
pub fn is_followed(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// The next request of a redirect.
#[derive(Debug, PartialEq, Eq)]
pub struct Hop {
    pub method: Method,
    pub url: Url,
    /// The body is sent again (307, 308, or 301/302 of a method other than POST).
    pub keeps_body: bool,
    /// The hop leaves the origin: only [`SAFE_HEADERS`] go along.
    pub cross_origin: bool,
}

/// Why a redirect is not followed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `Location` is not a URL, or not `http`/`https` (the reason; never the location).
    BadLocation(&'static str),
    /// From `https` to `http`.
    Downgrade,
    /// The body would be sent to another origin.
    BodyToOtherOrigin,
}

/// The hop a `status` redirect from `from` to `location` makes of a `method` request.
pub fn next_hop(
    status: StatusCode,
    method: &Method,
    from: &Url,
    location: &str,
    has_body: bool,
) -> Result<Hop, Refusal> {
    let url = from.join(location).map_err(|_| Refusal::BadLocation("the Location is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(Refusal::BadLocation("the Location is not an http or https URL with a host"));
    }
    if from.scheme() == "https" && url.scheme() == "http" {
        return Err(Refusal::Downgrade);
    }
    let becomes_get = match status.as_u16() {
        301 | 302 => *method == Method::POST,
        303 => *method != Method::GET && *method != Method::HEAD,
        _ => false,
    };
    let method = if becomes_get { Method::GET } else { method.clone() };
    let keeps_body = has_body && !becomes_get;
    let cross_origin = url.origin() != from.origin();
    if keeps_body && cross_origin {
        return Err(Refusal::BodyToOtherOrigin);
    }
    Ok(Hop { method, url, keeps_body, cross_origin })
}

/// Drops what must not follow `hop`: the body's headers when the body is dropped, and every
/// header but [`SAFE_HEADERS`] when the hop leaves the origin. Dropped headers stay dropped
/// for later hops, back to the first origin included.
pub fn strip_headers(headers: &mut HeaderMap, hop: &Hop) {
    if !hop.keeps_body {
        for name in BODY_HEADERS {
            headers.remove(name);
        }
    }
    if hop.cross_origin {
        let names: Vec<HeaderName> = headers.keys().filter(|n| !SAFE_HEADERS.contains(&n.as_str())).cloned().collect();
        for name in names {
            headers.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(status: u16, method: Method, from: &str, location: &str, body: bool) -> Result<Hop, Refusal> {
        next_hop(StatusCode::from_u16(status).unwrap(), &method, &Url::parse(from).unwrap(), location, body)
    }

    #[test]
    fn https_never_goes_to_http() {
        assert_eq!(hop(302, Method::GET, "https://a.example/x", "http://a.example/y", false), Err(Refusal::Downgrade));
        assert!(hop(302, Method::GET, "http://a.example/x", "https://b.example/y", false).is_ok());
    }

    #[test]
    fn a_body_never_follows_to_another_origin() {
        for status in [307, 308] {
            let refused = hop(status, Method::POST, "https://a.example/", "https://b.example/", true);
            assert_eq!(refused, Err(Refusal::BodyToOtherOrigin), "{status}");
            let other_port = hop(status, Method::PUT, "https://a.example/", "https://a.example:8443/", true);
            assert_eq!(other_port, Err(Refusal::BodyToOtherOrigin), "{status}");
        }
        let same = hop(307, Method::POST, "https://a.example/x", "/y", true).unwrap();
        assert_eq!((same.method, same.keeps_body, same.cross_origin), (Method::POST, true, false));
        assert_eq!(same.url.as_str(), "https://a.example/y");
    }

    #[test]
    fn see_other_and_a_moved_post_become_a_get_without_a_body() {
        for status in [301, 302, 303] {
            let next = hop(status, Method::POST, "https://a.example/", "https://b.example/", true).unwrap();
            assert_eq!((next.method, next.keeps_body, next.cross_origin), (Method::GET, false, true), "{status}");
        }
        let head = hop(303, Method::HEAD, "https://a.example/", "/b", false).unwrap();
        assert_eq!(head.method, Method::HEAD);
        assert_eq!(
            hop(302, Method::PUT, "https://a.example/", "https://b.example/", true),
            Err(Refusal::BodyToOtherOrigin)
        );
    }

    #[test]
    fn a_location_that_is_not_http_is_refused() {
        assert!(matches!(
            hop(302, Method::GET, "https://a.example/", "file:///etc/passwd", false),
            Err(Refusal::BadLocation(_))
        ));
        assert!(matches!(
            hop(302, Method::GET, "https://a.example/", "http://[::1", false),
            Err(Refusal::BadLocation(_))
        ));
    }

    #[test]
    fn leaving_the_origin_keeps_only_safe_headers() {
        let mut headers = HeaderMap::new();
        for (name, value) in
            [("authorization", "Bearer s"), ("x-api-key", "k"), ("accept", "*/*"), ("content-type", "a/b")]
        {
            headers.insert(HeaderName::from_static(name), value.parse().unwrap());
        }
        let same = hop(307, Method::GET, "https://a.example/", "/b", false).unwrap();
        strip_headers(&mut headers, &same);
        assert_eq!(headers.len(), 3, "same origin: only the body's headers go (there is no body)");
        let other = hop(302, Method::GET, "https://a.example/", "https://b.example/", false).unwrap();
        strip_headers(&mut headers, &other);
        assert_eq!(headers.keys().map(|n| n.as_str()).collect::<Vec<_>>(), ["accept"]);
    }
}
