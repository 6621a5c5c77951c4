//! `http.request`: one HTTP request.
//!
//! Input: `{"method": "GET", "url": "https://..", "headers": {"name": "value"},
//! "body": "<text>" | <JSON>, "timeout_seconds": T}`; only `url` is required. A string body
//! is sent as is; any other JSON body is sent as JSON. The request stops at the smaller of
//! `timeout_seconds` (default [`BuiltinsConfig::http_default_timeout`]) and the execution
//! deadline, and when the step is cancelled.
//!
//! Output: `{"status": 200, "headers": {..}, "body": "<text>", "truncated": false, "json": ..}`
//! with the headers of [`RETURNED_HEADERS`] only, the body cut to
//! [`BuiltinsConfig::max_response_bytes`], and `json` when the response says it is JSON, was
//! not cut and parses. With `"save_body": "NAME"` the body is streamed into the artifact store
//! instead, as the attempt's artifact NAME (whole, up to [`MAX_SAVED_BODY_BYTES`]), and the
//! output has `"artifact": {name, uri, media_type, size_bytes, digest}` in place of `body`; a
//! run without an artifact store fails the step (retryable `ARTIFACT_STORE_UNAVAILABLE`).
//!
//! Failures: 5xx, 408, 429, timeouts and transport errors are retryable (`HTTP_5XX`,
//! `HTTP_4XX`, `HTTP_TIMEOUT`, `HTTP_CONNECT`, `HTTP_TRANSPORT`); other 4xx are permanent
//! `HTTP_4XX`. Input headers, bodies and the URL's path and query may hold secrets: they are
//! never logged, and errors name only the method, the origin (scheme, host, port) and the status.
//!
//! Egress: every connection, the first and each redirect hop's, goes only to an address the
//! [`Policy`] of [`BuiltinsConfig::egress`] opens; a refusal is a permanent `EGRESS_DENIED`
//! naming the host and the rule. Redirects are followed here, hop by hop (`redirect`: at most
//! five, never from https to http, input headers other than a few safe ones and bodies never
//! sent to another origin); a redirect not followed is a permanent `HTTP_REDIRECT`.
//!
//! # Layout
//!
//! - here: the executor, its input, the request loop over redirect hops;
//! - `redirect`: the decision for one hop;
//! - `answer`: the output of a response, and the step error of each failure.

mod answer;
mod redirect;

pub use answer::MAX_SAVED_BODY_BYTES;
pub use redirect::{MAX_REDIRECTS, SAFE_HEADERS};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use reqwest::{Method, Url};
use serde::Deserialize;

use crate::config::BuiltinsConfig;
use crate::egress::{Denied, Policy, Resolver};
use crate::guard::guard;
use crate::input;

/// The operation name.
pub const NAME: &str = "http.request";
/// The longest `timeout_seconds` accepted: one hour.
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
/// The methods accepted (case-insensitive in the input).
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/// The response headers copied to the output. Others (`set-cookie` first) are dropped.
pub const RETURNED_HEADERS: [&str; 9] = [
    "cache-control",
    "content-encoding",
    "content-language",
    "content-length",
    "content-type",
    "etag",
    "last-modified",
    "location",
    "retry-after",
];

/// A 5xx answer (retryable).
pub const HTTP_5XX: &str = "HTTP_5XX";
/// A 4xx answer (permanent, except 408 and 429).
pub const HTTP_4XX: &str = "HTTP_4XX";
/// The request outlived `timeout_seconds` (retryable).
pub const HTTP_TIMEOUT: &str = "HTTP_TIMEOUT";
/// No connection could be made (retryable).
pub const HTTP_CONNECT: &str = "HTTP_CONNECT";
/// The connection broke while sending or reading (retryable).
pub const HTTP_TRANSPORT: &str = "HTTP_TRANSPORT";
/// More than [`MAX_REDIRECTS`] redirects, or a `Location` that is not an http(s) URL
/// (permanent).
pub const HTTP_REDIRECT: &str = "HTTP_REDIRECT";

/// Why the executor could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the http.request client could not be built")]
    Client(#[source] reqwest::Error),
}

/// Sends HTTP requests with one client, built once (rustls, no system proxy, no redirects of
/// its own, names resolved through the egress [`Resolver`]).
#[derive(Debug, Clone)]
pub struct HttpRequest {
    client: reqwest::Client,
    egress: Arc<Policy>,
    max_response_bytes: usize,
    default_timeout: Duration,
}

impl HttpRequest {
    pub fn new(config: &BuiltinsConfig) -> Result<Self, Error> {
        let egress = Arc::new(config.egress.clone());
        let client = reqwest::Client::builder()
            .connect_timeout(config.http_connect_timeout)
            .user_agent(config.user_agent.as_str())
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(Resolver::new(egress.clone())))
            .build()
            .map_err(Error::Client)?;
        Ok(Self {
            client,
            egress,
            max_response_bytes: config.max_response_bytes,
            default_timeout: config.http_default_timeout,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object like {\"method\": \"GET\", \"url\": \"https://..\"}")]
struct Input {
    #[serde(default)]
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<serde_json::Value>,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    #[serde(default)]
    save_body: Option<String>,
}

/// A validated request, and what errors may say about it.
#[derive(Debug)]
struct Request {
    method: Method,
    url: Url,
    headers: HeaderMap,
    body: Option<serde_json::Value>,
    timeout: Duration,
    /// `"GET https://host:port"`: all that messages and logs may show of the request.
    target: String,
    /// The artifact the body is stored as, instead of being returned.
    save_body: Option<String>,
}

#[async_trait::async_trait]
impl Executor for HttpRequest {
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let request = validate(input::parse(NAME, input)?, self.default_timeout)?;
        let target = request.target.clone();
        let timeout = request.timeout;
        let result = guard(&ctx, async {
            tokio::time::timeout(timeout, self.send(request, &ctx))
                .await
                .unwrap_or_else(|_| Err(answer::timed_out(&target, timeout)))
        })
        .await;
        if let Err(err) = &result {
            tracing::debug!(target = %target, code = %err.code, retryable = err.retryable, "http.request failed");
        }
        result
    }
}

impl HttpRequest {
    /// Sends the request and follows redirects hop by hop (module `redirect`), each hop
    /// checked by the egress policy before it connects (a literal address) and while it
    /// connects (a name, in the resolver).
    async fn send(&self, request: Request, ctx: &ExecutionContext) -> Result<serde_json::Value, StepError> {
        let Request { mut method, mut url, mut headers, mut body, .. } = request;
        let mut hops = 0;
        loop {
            let target = target(&method, &url);
            self.egress.check_url(&url).map_err(|denied| answer::egress_denied(&target, &denied))?;
            let builder = self.client.request(method.clone(), url.clone()).headers(headers.clone());
            let builder = match &body {
                None => builder,
                Some(serde_json::Value::String(text)) => builder.body(text.clone()),
                Some(json) => builder.json(json),
            };
            let response = builder.send().await.map_err(|err| answer::transport_error(&target, err))?;
            let status = response.status();
            let location = response.headers().get(LOCATION).filter(|_| redirect::is_followed(status));
            if let Some(location) = location {
                hops += 1;
                if hops > redirect::MAX_REDIRECTS {
                    let reason = format!("more than {} redirects", redirect::MAX_REDIRECTS);
                    return Err(answer::redirect_error(&target, &reason));
                }
                let location = location.to_str().map_err(|_| answer::redirect_error(&target, "bad Location"))?;
                let hop = redirect::next_hop(status, &method, &url, location, body.is_some())
                    .map_err(|refusal| refused_hop(&target, &url, refusal))?;
                redirect::strip_headers(&mut headers, &hop);
                if !hop.keeps_body {
                    body = None;
                }
                (method, url) = (hop.method, hop.url);
                continue;
            }
            if status.is_client_error() || status.is_server_error() {
                return Err(answer::status_error(&target, status, response.headers()));
            }
            return match &request.save_body {
                Some(name) => answer::saved(&target, response, name, ctx.reporter.as_ref()).await,
                None => answer::output(&target, response, self.max_response_bytes).await,
            };
        }
    }
}

/// `"GET https://host:port"`: all that messages and logs may show of a request.
fn target(method: &Method, url: &Url) -> String {
    format!("{method} {}", url.origin().ascii_serialization())
}

/// A redirect refused: the scheme and body rules are egress refusals naming the hop's host.
fn refused_hop(target: &str, from: &Url, refusal: redirect::Refusal) -> StepError {
    let host = from.host_str().unwrap_or_default().to_owned();
    match refusal {
        redirect::Refusal::BadLocation(reason) => answer::redirect_error(target, reason),
        redirect::Refusal::Downgrade => answer::egress_denied(target, &Denied { host, rule: "https-downgrade" }),
        redirect::Refusal::BodyToOtherOrigin => {
            answer::egress_denied(target, &Denied { host, rule: "body-to-other-origin" })
        }
    }
}

fn validate(input: Input, default_timeout: Duration) -> Result<Request, StepError> {
    let method = input.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    if !METHODS.contains(&method.as_str()) {
        return Err(input::invalid(NAME, "method", format_args!("must be one of {}", METHODS.join(", "))));
    }
    let method = Method::from_bytes(method.as_bytes()).map_err(|err| input::invalid(NAME, "method", err))?;

    // A URL parse error never repeats the URL, which may carry a token in its query.
    let url = Url::parse(&input.url).map_err(|err| input::invalid(NAME, "url", err))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(input::invalid(NAME, "url", "the scheme must be http or https"));
    }
    if url.host().is_none() {
        return Err(input::invalid(NAME, "url", "a host is required"));
    }

    let mut headers = HeaderMap::with_capacity(input.headers.len());
    for (name, value) in &input.headers {
        let field = format!("headers.{name}");
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| input::invalid(NAME, &field, "not a valid header name"))?;
        let mut value =
            HeaderValue::from_str(value).map_err(|_| input::invalid(NAME, &field, "not a valid header value"))?;
        value.set_sensitive(true);
        headers.append(header, value);
    }

    let timeout = match input.timeout_seconds {
        None => default_timeout,
        Some(seconds) if seconds > 0.0 && seconds <= MAX_TIMEOUT_SECONDS => Duration::from_secs_f64(seconds),
        Some(_) => {
            return Err(input::invalid(
                NAME,
                "timeout_seconds",
                format_args!("must be greater than 0 and at most {MAX_TIMEOUT_SECONDS}"),
            ));
        }
    };

    let target = target(&method, &url);
    if let Some(name) = &input.save_body
        && (name.is_empty() || name.len() > 200 || name.contains('/'))
    {
        return Err(input::invalid(NAME, "save_body", "an artifact name: 1 to 200 characters, no '/'"));
    }
    Ok(Request { method, url, headers, body: input.body, timeout, target, save_body: input.save_body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_shows_the_origin_but_not_path_query_or_credentials() {
        let input = Input {
            method: Some("post".to_owned()),
            url: "https://user:pw@example.com:8443/a/b?token=s3cret".to_owned(),
            headers: BTreeMap::new(),
            body: None,
            timeout_seconds: None,
            save_body: None,
        };
        let request = validate(input, Duration::from_secs(1)).unwrap();
        assert_eq!(request.target, "POST https://example.com:8443");
    }
}
