//! What `http.request` makes of an answer or a failure: the output of a response, and the
//! step error of a status, a timeout, a transport error or a refusal.

use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ReportError, Reporter};
use rara_domain::retry::MAX_RETRY_AFTER;
use rara_domain::step_error::codes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use tokio::io::AsyncReadExt;

use super::{HTTP_4XX, HTTP_5XX, HTTP_CONNECT, HTTP_REDIRECT, HTTP_TIMEOUT, HTTP_TRANSPORT, NAME, RETURNED_HEADERS};
use crate::egress::Denied;

/// The largest body `save_body` stores (whole; a longer one is cut there and marked
/// `truncated`).
pub const MAX_SAVED_BODY_BYTES: u64 = 5 * 1024 * 1024 * 1024;

/// The [`RETURNED_HEADERS`] of `response`.
fn returned_headers(response: &reqwest::Response) -> serde_json::Map<String, serde_json::Value> {
    RETURNED_HEADERS
        .iter()
        .filter_map(|&name| {
            let value = response.headers().get(name)?.to_str().ok()?;
            Some((name.to_owned(), value.into()))
        })
        .collect()
}

/// The output of a response whose body is stored as the artifact `name` (`save_body`), streamed
/// to the artifact store through `reporter`: status, [`RETURNED_HEADERS`], the artifact.
pub async fn saved(
    target: &str,
    response: reqwest::Response,
    name: &str,
    reporter: &dyn Reporter,
) -> Result<serde_json::Value, StepError> {
    let status = response.status();
    let headers = returned_headers(&response);
    let media_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    // A transport error's text never carries the URL (its path and query may hold secrets).
    let chunks = futures::stream::unfold(Some(response), |response| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e.without_url())), None)),
        }
    });
    let body = tokio_util::io::StreamReader::new(Box::pin(chunks)).take(MAX_SAVED_BODY_BYTES);
    let artifact = reporter.store_artifact(name, Box::pin(body), media_type.as_deref()).await.map_err(|e| match e {
        ReportError::LeaseLost => StepError::permanent(codes::CANCELLED, format!("{NAME}: the lease was lost")),
        ReportError::Unavailable(why) => StepError::retryable(
            codes::ARTIFACT_STORE_UNAVAILABLE,
            format!("{NAME} {target}: the body could not be stored: {why}"),
        ),
    })?;
    tracing::debug!(target = %target, status = status.as_u16(), bytes = artifact.size_bytes, "http.request body stored");
    let truncated = artifact.size_bytes.is_some_and(|n| n as u64 >= MAX_SAVED_BODY_BYTES);
    Ok(serde_json::json!({
        "status": status.as_u16(),
        "headers": headers,
        "artifact": {
            "name": artifact.name, "uri": artifact.uri, "media_type": artifact.media_type,
            "size_bytes": artifact.size_bytes, "digest": artifact.digest,
        },
        "truncated": truncated,
    }))
}

/// The output of a response that is not an error: status, [`RETURNED_HEADERS`], the body cut
/// to `limit` bytes, and `json` when the response says it is JSON, was not cut and parses.
pub async fn output(
    target: &str,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<serde_json::Value, StepError> {
    let status = response.status();
    tracing::debug!(target = %target, status = status.as_u16(), "http.request answered");
    let headers = returned_headers(&response);
    let is_json = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_json_media_type);
    let (body, truncated) = read_limited(&mut response, limit).await.map_err(|err| transport_error(target, err))?;

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

/// A 4xx or 5xx answer, with its `Retry-After`.
pub fn status_error(target: &str, status: StatusCode, headers: &HeaderMap) -> StepError {
    let message = format!("{NAME}: {target} answered {status}");
    let error = if status.is_server_error() {
        StepError::retryable(HTTP_5XX, message)
    } else if matches!(status, StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS) {
        StepError::retryable(HTTP_4XX, message)
    } else {
        StepError::permanent(HTTP_4XX, message)
    };
    let mut details = serde_json::json!({ "status": status.as_u16(), "target": target });
    if let Some(seconds) = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry_after_seconds) {
        details["retry_after_seconds"] = seconds.into();
    }
    error.with_details(details)
}

/// A `Retry-After` in seconds (the HTTP-date form is not read), clamped to
/// [`MAX_RETRY_AFTER`] here, where the peer's number enters: the error detail
/// `retry_after_seconds` sets the next attempt's delay exactly (rara_domain::retry), and a
/// peer's `18446744073709551615` must not reach a `Duration` conversion.
fn retry_after_seconds(value: &str) -> Option<u64> {
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All digits: a number too large for u64 is past the clamp too.
    Some(digits.parse::<u64>().unwrap_or(u64::MAX).min(MAX_RETRY_AFTER.as_secs()))
}

pub fn timed_out(target: &str, timeout: Duration) -> StepError {
    StepError::retryable(HTTP_TIMEOUT, format!("{NAME}: {target} did not answer within {:.3}s", timeout.as_secs_f64()))
        .with_details(serde_json::json!({ "target": target }))
}

/// A refusal of the egress policy: permanent `EGRESS_DENIED` naming the host and the rule.
pub fn egress_denied(target: &str, denied: &Denied) -> StepError {
    StepError::permanent(codes::EGRESS_DENIED, format!("{NAME}: {target}: {denied}"))
        .with_details(serde_json::json!({ "target": target, "host": denied.host, "rule": denied.rule }))
}

/// A redirect not followed (too many, or a bad `Location`): permanent `HTTP_REDIRECT`.
pub fn redirect_error(target: &str, reason: &str) -> StepError {
    StepError::permanent(HTTP_REDIRECT, format!("{NAME}: {target}: redirect not followed: {reason}"))
        .with_details(serde_json::json!({ "target": target }))
}

/// Classifies a client error. A refusal of the egress resolver, found in the chain, is
/// `EGRESS_DENIED`. The message is built from the error chain without the URL.
pub fn transport_error(target: &str, err: reqwest::Error) -> StepError {
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        if let Some(denied) = cause.downcast_ref::<Denied>() {
            return egress_denied(target, denied);
        }
        source = cause.source();
    }
    let (code, retryable) = if err.is_timeout() {
        (HTTP_TIMEOUT, true)
    } else if err.is_connect() {
        (HTTP_CONNECT, true)
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
    fn retry_after_is_clamped_to_a_day_where_it_enters() {
        assert_eq!(retry_after_seconds(" 12 "), Some(12));
        assert_eq!(retry_after_seconds("18446744073709551615"), Some(86_400));
        assert_eq!(retry_after_seconds("99999999999999999999999999"), Some(86_400));
        assert_eq!(retry_after_seconds("86401"), Some(86_400));
        for ignored in ["", "-1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "1e9"] {
            assert_eq!(retry_after_seconds(ignored), None, "{ignored}");
        }
    }
}
