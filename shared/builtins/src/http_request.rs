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
//! not cut and parses.
//!
//! Failures: 5xx, 408, 429, timeouts and transport errors are retryable (`HTTP_5XX`,
//! `HTTP_4XX`, `HTTP_TIMEOUT`, `HTTP_CONNECT`, `HTTP_TRANSPORT`); other 4xx are permanent
//! `HTTP_4XX`. Input headers, bodies and the URL's path and query may hold secrets: they are
//! never logged, and errors name only the method, the origin (scheme, host, port) and the status.

use std::collections::BTreeMap;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_domain::step_error::codes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;

use crate::config::BuiltinsConfig;
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
/// Too many redirects or a redirect loop (permanent).
pub const HTTP_REDIRECT: &str = "HTTP_REDIRECT";

/// Why the executor could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the http.request client could not be built")]
    Client(#[source] reqwest::Error),
}

/// Sends HTTP requests with one client, built once (rustls, no system proxy).
#[derive(Debug, Clone)]
pub struct HttpRequest {
    client: reqwest::Client,
    max_response_bytes: usize,
    default_timeout: Duration,
}

impl HttpRequest {
    pub fn new(config: &BuiltinsConfig) -> Result<Self, Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.http_connect_timeout)
            .user_agent(config.user_agent.as_str())
            .no_proxy()
            .build()
            .map_err(Error::Client)?;
        Ok(Self { client, max_response_bytes: config.max_response_bytes, default_timeout: config.http_default_timeout })
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
}

#[async_trait::async_trait]
impl Executor for HttpRequest {
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let request = validate(input::parse(NAME, input)?, self.default_timeout)?;
        let target = request.target.clone();
        let timeout = request.timeout;
        let result = guard(&ctx, async {
            tokio::time::timeout(timeout, self.send(request)).await.unwrap_or_else(|_| Err(timed_out(&target, timeout)))
        })
        .await;
        if let Err(err) = &result {
            tracing::debug!(target = %target, code = %err.code, retryable = err.retryable, "http.request failed");
        }
        result
    }
}

impl HttpRequest {
    async fn send(&self, request: Request) -> Result<serde_json::Value, StepError> {
        let Request { method, url, headers, body, target, .. } = request;
        let builder = self.client.request(method, url).headers(headers);
        let builder = match body {
            None => builder,
            Some(serde_json::Value::String(text)) => builder.body(text),
            Some(json) => builder.json(&json),
        };
        let mut response = builder.send().await.map_err(|err| transport_error(&target, err))?;
        let status = response.status();
        if status.is_client_error() || status.is_server_error() {
            return Err(with_retry_after(status_error(&target, status), response.headers()));
        }
        tracing::debug!(target = %target, status = status.as_u16(), "http.request answered");

        let headers: serde_json::Map<String, serde_json::Value> = RETURNED_HEADERS
            .iter()
            .filter_map(|&name| {
                let value = response.headers().get(name)?.to_str().ok()?;
                Some((name.to_owned(), value.into()))
            })
            .collect();
        let is_json =
            response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_json_media_type);
        let (body, truncated) =
            read_limited(&mut response, self.max_response_bytes).await.map_err(|err| transport_error(&target, err))?;

        let mut output = serde_json::json!({
            "status": status.as_u16(),
            "headers": headers,
            "body": utf8_text(&body, truncated),
            "truncated": truncated,
        });
        if is_json
            && !truncated
            && let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body)
        {
            output["json"] = json;
        }
        Ok(output)
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

    let target = format!("{method} {}", url.origin().ascii_serialization());
    Ok(Request { method, url, headers, body: input.body, timeout, target })
}

/// Reads at most `limit` bytes of the body; `true` when there was more.
async fn read_limited(response: &mut reqwest::Response, limit: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let expected = response.content_length().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let mut body = Vec::with_capacity(expected.min(limit));
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The body as text. A body cut inside a UTF-8 sequence loses the partial character; other
/// invalid bytes become U+FFFD.
fn utf8_text(body: &[u8], truncated: bool) -> String {
    match std::str::from_utf8(body) {
        Ok(text) => text.to_owned(),
        Err(err) if truncated && err.error_len().is_none() => {
            String::from_utf8_lossy(&body[..err.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}

fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

fn status_error(target: &str, status: StatusCode) -> StepError {
    let message = format!("{NAME}: {target} answered {status}");
    let error = if status.is_server_error() {
        StepError::retryable(HTTP_5XX, message)
    } else if matches!(status, StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS) {
        StepError::retryable(HTTP_4XX, message)
    } else {
        StepError::permanent(HTTP_4XX, message)
    };
    error.with_details(serde_json::json!({ "status": status.as_u16(), "target": target }))
}

/// A `Retry-After` header in seconds (the HTTP-date form is not read) becomes the error detail
/// `retry_after_seconds`, which sets the next attempt's delay exactly (rara_domain::retry).
fn with_retry_after(mut error: StepError, headers: &reqwest::header::HeaderMap) -> StepError {
    let seconds = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let (Some(seconds), Some(details)) = (seconds, error.details.as_object_mut()) {
        details.insert("retry_after_seconds".into(), seconds.into());
    }
    error
}

fn timed_out(target: &str, timeout: Duration) -> StepError {
    StepError::retryable(HTTP_TIMEOUT, format!("{NAME}: {target} did not answer within {:.3}s", timeout.as_secs_f64()))
        .with_details(serde_json::json!({ "target": target }))
}

/// Classifies a client error. The message is built from the error chain without the URL.
fn transport_error(target: &str, err: reqwest::Error) -> StepError {
    let (code, retryable) = if err.is_timeout() {
        (HTTP_TIMEOUT, true)
    } else if err.is_connect() {
        (HTTP_CONNECT, true)
    } else if err.is_redirect() {
        (HTTP_REDIRECT, false)
    } else if err.is_builder() {
        (codes::INVALID_INPUT, false)
    } else {
        (HTTP_TRANSPORT, true)
    };
    let err = err.without_url();
    let mut message = format!("{NAME}: {target}: {err}");
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    let error = if retryable { StepError::retryable(code, message) } else { StepError::permanent(code, message) };
    error.with_details(serde_json::json!({ "target": target }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_cut_inside_a_character_drops_the_partial_character() {
        let body = "aé".as_bytes();
        assert_eq!(utf8_text(&body[..2], true), "a");
        assert_eq!(utf8_text(body, false), "aé");
        assert_eq!(utf8_text(&[b'a', 0xff, b'b'], false), "a\u{fffd}b");
    }

    #[test]
    fn json_media_types_are_recognised() {
        assert!(is_json_media_type("application/json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(is_json_media_type("application/problem+json"));
        assert!(!is_json_media_type("text/plain"));
    }

    #[test]
    fn the_target_shows_the_origin_but_not_path_query_or_credentials() {
        let input = Input {
            method: Some("post".to_owned()),
            url: "https://user:pw@example.com:8443/a/b?token=s3cret".to_owned(),
            headers: BTreeMap::new(),
            body: None,
            timeout_seconds: None,
        };
        let request = validate(input, Duration::from_secs(1)).unwrap();
        assert_eq!(request.target, "POST https://example.com:8443");
    }
}
