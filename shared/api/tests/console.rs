//! The console's pages, session, CSRF protection and live stream, against a real Postgres (the
//! browser test of `cli/tests/console.rs` drives the same pages in Chromium).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use common::{Client, TOKEN};
use serde_json::json;
use sqlx::PgPool;
use tower::ServiceExt;

/// Sends a console request with optional cookie and form body; the status, headers and text.
async fn page(
    client: &Client,
    method: Method,
    uri: &str,
    cookie: bool,
    form: Option<String>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut request = axum::http::Request::builder().method(method).uri(uri);
    if cookie {
        request = request.header(header::COOKIE, format!("rara_session={TOKEN}"));
    }
    let body = match form {
        Some(form) => {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            axum::body::Body::from(form)
        }
        None => axum::body::Body::empty(),
    };
    let response = client.router.clone().oneshot(request.body(body).unwrap()).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}

/// The CSRF token the page's forms carry.
fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a form with the CSRF token") + r#"name="csrf" value=""#.len();
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_run_page_draws_every_step_and_reads_without_a_session(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let (status, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), false, None).await;
    assert_eq!(status, StatusCode::OK);
    for step in ["prepare", "work", "finish"] {
        assert!(
            html.contains(&format!(r#"class="step" data-step="{step}" data-status="pending""#)),
            "{step} in the DAG"
        );
    }
    assert_eq!(html.matches("<path d=").count(), 2, "two edges");
    assert!(html.contains("Read-only") && !html.contains(r#"name="csrf""#), "no form without a session");
    let (status, _, list) = page(&client, Method::GET, "/", false, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains(&run));
    let (status, _, _) = page(&client, Method::GET, &format!("/runs/{}", uuid::Uuid::now_v7()), false, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_form_acts_only_with_the_session_and_its_csrf_token(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let (status, _, _) = page(&client, Method::GET, "/?token=wrong", false, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, headers, _) = page(&client, Method::GET, &format!("/?token={TOKEN}"), false, None).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("rara_session={TOKEN};"))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );

    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), true, None).await;
    let csrf = csrf_of(&html);
    assert_ne!(csrf, TOKEN);
    let cancel = format!("/runs/{run}/cancel");
    let (status, _, _) = page(&client, Method::POST, &cancel, false, Some(format!("csrf={csrf}"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no session");
    let (status, _, error) = page(&client, Method::POST, &cancel, true, Some("csrf=forged".into())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "running", "a refused form changes nothing");

    let (status, headers, _) =
        page(&client, Method::POST, &cancel, true, Some(format!("csrf={csrf}&reason=done"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], format!("/runs/{run}").as_str());
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "cancelled");
    assert_eq!(read["steps"][0]["error"]["message"], "done");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_form_confirms_with_the_count_before_it_acts(pool: PgPool) {
    let client = Client::new(pool);
    let runs = [client.submit_demo().await, client.submit_demo().await];
    let (_, _, html) = page(&client, Method::GET, "/", true, None).await;
    let csrf = csrf_of(&html);
    let form = format!("csrf={csrf}&action=cancel&status=running&name=demo-api");
    let (status, _, confirm) = page(&client, Method::POST, "/bulk", true, Some(form.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(confirm.contains("2 running runs to cancel"), "{confirm}");
    for run in &runs {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], "running");
    }
    let (status, _, _) = page(&client, Method::POST, "/bulk", true, Some(format!("{form}&confirmed=yes"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    for run in &runs {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], "cancelled");
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_run_page_stream_sends_the_page_again_when_the_run_changes(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = common::api(pool).router();
    tokio::spawn(async move { axum::serve(listener, router).await });

    let http = reqwest::Client::new();
    let mut stream = http.get(format!("http://{addr}/runs/{run}/events")).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    // The stream subscribed before the answer's headers came back: the change is heard.
    let cancelled = client.post(&format!("/api/runs/{run}/cancel"), json!(null)).await;
    assert_eq!(cancelled.0, StatusCode::OK);
    let mut seen = String::new();
    let heard = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: update") && seen.contains(r#"data-status="cancelled""#) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "no update with the cancelled run: {seen}");
}
