//! `http.request` against a real HTTP server bound to 127.0.0.1:0, with 127.0.0.1 opened by
//! the egress policy (tests/egress.rs shows what the default refuses).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

mod common;

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use common::context;
use rara_builtins::egress::Policy;
use rara_builtins::http_request::{HTTP_4XX, HTTP_5XX, HTTP_CONNECT, HTTP_TIMEOUT};
use rara_builtins::{BuiltinsConfig, HttpRequest};
use rara_domain::StepError;
use rara_domain::executor::Executor;
use rara_domain::step_error::codes;
use serde_json::{Value, json};
use tokio::time::Instant;

const LARGE_BODY_CHARS: usize = 50_000;

/// Serves the test routes on a fresh port and returns `http://127.0.0.1:<port>`.
async fn server() -> String {
    let app = Router::new()
        .route(
            "/json",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::SET_COOKIE, "session=s3cret"),
                        (header::ETAG, "\"v1\""),
                    ],
                    r#"{"hello":"world"}"#,
                )
            }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .route("/busy", get(|| async { StatusCode::TOO_MANY_REQUESTS }))
        .route("/throttled", get(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "12")]) }))
        .route(
            "/throttled-forever",
            get(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "18446744073709551615")]) }),
        )
        .route("/unavailable", get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "down: internal detail") }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                "late"
            }),
        )
        .route("/large", get(|| async { "é".repeat(LARGE_BODY_CHARS) }))
        .route(
            "/large-json",
            get(|| async { ([(header::CONTENT_TYPE, "application/json")], format!("[{}1]", "1,".repeat(1_000))) }),
        )
        .route("/echo", any(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

async fn echo(method: Method, headers: HeaderMap, body: String) -> impl IntoResponse {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    axum::Json(json!({
        "method": method.as_str(),
        "x_test": header("x-test"),
        "content_type": header("content-type"),
        "user_agent": header("user-agent"),
        "body": body,
    }))
}

/// The default config with 127.0.0.1 opened.
fn config() -> BuiltinsConfig {
    BuiltinsConfig { egress: Policy::opening("127.0.0.1/32").unwrap(), ..BuiltinsConfig::default() }
}

fn executor() -> HttpRequest {
    HttpRequest::new(&config()).unwrap()
}

async fn run(input: Value) -> Result<Value, StepError> {
    executor().execute(context(Duration::from_secs(30)), input).await
}

#[tokio::test]
async fn a_json_answer_returns_status_selected_headers_body_and_parsed_json() {
    let base = server().await;
    let output = run(json!({ "url": format!("{base}/json") })).await.unwrap();
    assert_eq!(output["status"], 200);
    assert_eq!(output["body"], r#"{"hello":"world"}"#);
    assert_eq!(output["truncated"], false);
    assert_eq!(output["json"], json!({ "hello": "world" }));
    assert_eq!(output["headers"]["content-type"], "application/json");
    assert_eq!(output["headers"]["etag"], "\"v1\"");
    assert!(output["headers"].get("set-cookie").is_none(), "{output}");
}

#[tokio::test]
async fn method_headers_and_a_string_body_reach_the_server() {
    let base = server().await;
    let output = run(json!({
        "method": "put",
        "url": format!("{base}/echo"),
        "headers": { "X-Test": "yes", "Content-Type": "text/plain" },
        "body": "plain text",
    }))
    .await
    .unwrap();
    assert_eq!(
        output["json"],
        json!({
            "method": "PUT",
            "x_test": "yes",
            "content_type": "text/plain",
            "user_agent": rara_builtins::config::DEFAULT_USER_AGENT,
            "body": "plain text",
        })
    );
}

#[tokio::test]
async fn a_json_body_is_sent_as_json() {
    let base = server().await;
    let output =
        run(json!({ "method": "POST", "url": format!("{base}/echo"), "body": { "a": [1, 2] } })).await.unwrap();
    assert_eq!(output["json"]["content_type"], "application/json");
    assert_eq!(
        serde_json::from_str::<Value>(output["json"]["body"].as_str().unwrap()).unwrap(),
        json!({ "a": [1, 2] })
    );
}

#[tokio::test]
async fn a_404_is_a_permanent_http_4xx() {
    let base = server().await;
    let err = run(json!({ "url": format!("{base}/missing") })).await.unwrap_err();
    assert_eq!(err.code, HTTP_4XX);
    assert!(!err.retryable);
    assert_eq!(err.details["status"], 404);
    assert!(err.message.contains(&format!("GET {base}")), "{}", err.message);
}

#[tokio::test]
async fn a_429_is_retryable() {
    let base = server().await;
    let err = run(json!({ "url": format!("{base}/busy") })).await.unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), (HTTP_4XX, true));
}

#[tokio::test]
async fn a_retry_after_header_becomes_retry_after_seconds() {
    let base = server().await;
    let err = run(json!({ "url": format!("{base}/throttled") })).await.unwrap_err();
    assert_eq!(err.details["retry_after_seconds"], json!(12));
    let forever = run(json!({ "url": format!("{base}/throttled-forever") })).await.unwrap_err();
    assert_eq!(forever.details["retry_after_seconds"], json!(86_400), "clamped to MAX_RETRY_AFTER where it enters");
    let plain = run(json!({ "url": format!("{base}/busy") })).await.unwrap_err();
    assert!(plain.details.get("retry_after_seconds").is_none(), "{:?}", plain.details);
}

#[tokio::test]
async fn a_503_is_a_retryable_http_5xx_that_shows_neither_query_nor_body() {
    let base = server().await;
    let err = run(json!({
        "url": format!("{base}/unavailable?token=s3cret"),
        "headers": { "authorization": "Bearer h3ader" },
    }))
    .await
    .unwrap_err();
    assert_eq!(err.code, HTTP_5XX);
    assert!(err.retryable);
    assert!(err.message.contains("503"), "{}", err.message);
    let shown = format!("{} {}", err.message, err.details);
    for secret in ["s3cret", "h3ader", "internal detail", "/unavailable"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_http_connect_without_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let err = run(json!({ "url": format!("http://{address}/x?token=s3cret") })).await.unwrap_err();
    assert_eq!(err.code, HTTP_CONNECT);
    assert!(err.retryable);
    assert!(err.message.contains(&format!("GET http://{address}")), "{}", err.message);
    assert!(!err.message.contains("s3cret"), "{}", err.message);
}

#[tokio::test]
async fn a_slow_answer_past_timeout_seconds_is_a_retryable_http_timeout() {
    let base = server().await;
    let start = Instant::now();
    let err = run(json!({ "url": format!("{base}/slow"), "timeout_seconds": 0.2 })).await.unwrap_err();
    assert_eq!(err.code, HTTP_TIMEOUT);
    assert!(err.retryable);
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

#[tokio::test]
async fn the_execution_deadline_caps_the_request_timeout() {
    let base = server().await;
    let start = Instant::now();
    let err = executor()
        .execute(context(Duration::from_millis(300)), json!({ "url": format!("{base}/slow"), "timeout_seconds": 60 }))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::DEADLINE_EXCEEDED);
    assert!(err.retryable);
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

#[tokio::test]
async fn cancelling_mid_request_returns_a_permanent_cancelled_promptly() {
    let base = server().await;
    let ctx = context(Duration::from_secs(30));
    let cancel = ctx.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
        Instant::now()
    });
    let err = executor().execute(ctx, json!({ "url": format!("{base}/slow") })).await.unwrap_err();
    let returned = Instant::now();
    let cancelled_at = canceller.await.unwrap();
    assert_eq!(err.code, codes::CANCELLED);
    assert!(!err.retryable);
    assert!(returned.duration_since(cancelled_at) < Duration::from_millis(200), "{:?}", returned - cancelled_at);
}

#[tokio::test]
async fn a_large_body_is_cut_at_max_response_bytes_on_a_character_boundary() {
    let base = server().await;
    let config = BuiltinsConfig { max_response_bytes: 1_001, ..config() };
    let output = HttpRequest::new(&config)
        .unwrap()
        .execute(context(Duration::from_secs(30)), json!({ "url": format!("{base}/large") }))
        .await
        .unwrap();
    assert_eq!(output["truncated"], true);
    assert_eq!(output["body"], "é".repeat(500));
}

#[tokio::test]
async fn the_default_limit_is_64_kib_and_a_body_within_the_limit_is_whole() {
    let base = server().await;
    let output = run(json!({ "url": format!("{base}/large") })).await.unwrap();
    assert_eq!(output["truncated"], true, "2 x {LARGE_BODY_CHARS} bytes exceed 64 KiB");
    assert_eq!(output["body"].as_str().unwrap().len(), 65_536);

    let config = BuiltinsConfig { max_response_bytes: 2 * LARGE_BODY_CHARS, ..config() };
    let executor = HttpRequest::new(&config).unwrap();
    let output =
        executor.execute(context(Duration::from_secs(30)), json!({ "url": format!("{base}/large") })).await.unwrap();
    assert_eq!(output["truncated"], false);
    assert_eq!(output["body"].as_str().unwrap().chars().count(), LARGE_BODY_CHARS);
}

#[tokio::test]
async fn a_truncated_json_body_has_no_json_field() {
    let base = server().await;
    let config = BuiltinsConfig { max_response_bytes: 100, ..config() };
    let output = HttpRequest::new(&config)
        .unwrap()
        .execute(context(Duration::from_secs(30)), json!({ "url": format!("{base}/large-json") }))
        .await
        .unwrap();
    assert_eq!(output["truncated"], true);
    assert!(output.get("json").is_none(), "{output}");
}

#[tokio::test]
async fn invalid_input_is_a_permanent_invalid_input_naming_the_field() {
    let cases = [
        (json!({ "method": "FETCH", "url": "http://example.com" }), "method"),
        (json!({ "url": "ftp://example.com/file" }), "url"),
        (json!({ "url": "not a url?token=s3cret" }), "url"),
        (json!({ "url": "http://example.com", "headers": "Bearer s3cret" }), "headers"),
        (json!({ "url": "http://example.com", "headers": { "bad name": "s3cret" } }), "headers.bad name"),
        (json!({ "url": "http://example.com", "headers": { "x": "s3cret\n" } }), "headers.x"),
        (json!({ "url": "http://example.com", "timeout_seconds": 0 }), "timeout_seconds"),
        (json!({ "url": "http://example.com", "timeout_seconds": 86_400 }), "timeout_seconds"),
        (json!({ "url": "http://example.com", "verb": "GET" }), "verb"),
        (json!({ "headers": {} }), "url"),
    ];
    for (input, field) in cases {
        let err = run(input.clone()).await.unwrap_err();
        assert_eq!(err.code, codes::INVALID_INPUT, "{input}");
        assert!(!err.retryable);
        assert!(err.message.contains(field), "{field} not in {}", err.message);
        assert!(!err.message.contains("s3cret"), "{}", err.message);
    }
}
