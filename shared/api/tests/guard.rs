//! How the console and the API guard their reads, against the real router served on a socket
//! over a real Postgres: the `Host` check, reads that need authentication, the session (its own
//! value, expiring) and its one-time login codes, fences hidden from anonymous readers, and the
//! security headers on every answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use chrono::{TimeDelta, Utc};
use common::{Client, TOKEN};
use rara_api::{Api, Auth, Hosts};
use rara_store::claim::ClaimRequest;
use serde_json::Value;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `api` on 127.0.0.1:0 answering to the names a loopback `rara ui` answers to.
async fn serve(api: Api) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api.with_hosts(Hosts::bound(addr, &[])).router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// `curl -H 'Host: HOST' http://ADDR/PATH`, written by hand: the status line and the answer.
async fn get_as_host(addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), socket.read_to_string(&mut answer)).await.unwrap().unwrap();
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

fn api(pool: PgPool, read_auth: bool) -> Api {
    let config = rara_domain::config::Config::from_lookup("test", |_| None).unwrap();
    let auth = Auth::with_token(TOKEN.to_owned()).with_read_auth(read_auth);
    Api::new(rara_store::Store::new(pool), config, auth).unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_request_naming_another_host_is_refused_over_tcp_and_reads_nothing(pool: PgPool) {
    let run = Client::new(pool.clone()).submit_demo().await;
    let addr = serve(api(pool, false)).await;

    let (status, answer) = get_as_host(addr, "evil.example", "/api/runs").await;
    assert_eq!(status, 421, "{answer}");
    assert!(answer.contains(r#""code":"misdirected""#) && answer.contains("--allow-host"), "{answer}");
    assert!(!answer.contains(&run), "nothing of the runs is read");
    let (status, _) = get_as_host(addr, &format!("evil.example:{}", addr.port()), &format!("/runs/{run}")).await;
    assert_eq!(status, 421, "the port does not make a name acceptable");

    for host in [addr.to_string(), format!("localhost:{}", addr.port())] {
        let (status, answer) = get_as_host(addr, &host, "/api/runs").await;
        assert_eq!(status, 200, "{host}: {answer}");
        assert!(answer.contains(&run));
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_read_auth_a_read_without_a_session_or_the_token_gets_401(pool: PgPool) {
    let run = Client::new(pool.clone()).submit_demo().await;
    let base = format!("http://{}", serve(api(pool, true)).await);
    let http = reqwest::Client::new();
    for path in ["/api/runs".to_owned(), format!("/api/runs/{run}"), "/".to_owned(), format!("/runs/{run}")] {
        let refused = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        let body = refused.text().await.unwrap();
        assert!(!body.contains(&run) && body.contains("login URL"), "{path}: {body}");
        let read = http.get(format!("{base}{path}")).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(read.status(), 200, "{path} with the token");
    }
    let document = http.get(format!("{base}/openapi.json")).send().await.unwrap();
    assert_eq!(document.status(), 200, "the document holds no data");
}

/// The session a login URL starts on `base`: its `Set-Cookie`.
async fn login(http: &reqwest::Client, base: &str) -> (String, String) {
    let issued: Value =
        http.post(format!("{base}/api/login")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    let url = issued["url"].as_str().unwrap_or_else(|| panic!("{issued}")).to_owned();
    assert!(url.starts_with(&format!("{base}/login?code=")) && !url.contains(TOKEN), "{url}");
    let opened = http.get(&url).send().await.unwrap();
    assert_eq!(opened.status(), 303);
    (url, opened.headers()["set-cookie"].to_str().unwrap().to_owned())
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_session_is_its_own_value_it_expires_and_its_login_url_works_once(pool: PgPool) {
    let api = api(pool, true);
    let auth = api.auth().clone();
    let base = format!("http://{}", serve(api).await);
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

    let (url, set_cookie) = login(&http, &base).await;
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set_cookie.contains(attribute), "{attribute}: {set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let value = cookie.strip_prefix("rara_session=").unwrap();
    assert!(value.starts_with("v1.") && value != TOKEN && !value.contains(TOKEN), "{value}");
    let read = |cookie: String| http.get(format!("{base}/api/runs")).header("cookie", cookie).send();
    assert_eq!(read(cookie.clone()).await.unwrap().status(), 200, "the session reads");
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401, "a login URL works once");

    let expired = auth.session_value(Utc::now() - TimeDelta::seconds(1));
    assert_eq!(read(format!("rara_session={expired}")).await.unwrap().status(), 401, "an expired session");
    let lasting = auth.session_value(Utc::now() + TimeDelta::hours(1));
    assert_eq!(read(format!("rara_session={lasting}")).await.unwrap().status(), 200);
    let (head, _) = lasting.rsplit_once('.').unwrap();
    let extended = lasting.replacen(head.split('.').nth(1).unwrap(), "99999999999", 1);
    assert_eq!(read(format!("rara_session={extended}")).await.unwrap().status(), 401, "a changed expiry");
    assert_eq!(read(format!("rara_session={TOKEN}")).await.unwrap().status(), 401, "the token is no session");
    let other = Auth::with_token("another-token".into()).session_value(Utc::now() + TimeDelta::hours(1));
    assert_eq!(read(format!("rara_session={other}")).await.unwrap().status(), 401, "another key's session");

    let in_url = http.get(format!("{base}/?token={TOKEN}")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(in_url.status(), 400, "the token never goes in a URL");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_anonymous_reader_is_not_shown_fences_or_lease_data(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let store = rara_store::Store::new(pool.clone());
    let leased = store.lease_due("scheduler-1", 10, Duration::from_secs(60)).await.unwrap();
    let request = ClaimRequest { step_id: leased[0].step_id, lease_token: leased[0].lease_token };
    store.claim("holder-executor-7", &[request], Duration::from_secs(60)).await.unwrap();
    let base = format!("http://{}", serve(api(pool, false)).await);
    let http = reqwest::Client::new();

    let shown = http.get(format!("{base}/api/runs/{run}")).bearer_auth(TOKEN).send().await.unwrap();
    let shown: Value = shown.json().await.unwrap();
    let step = prepare(&shown);
    assert!(step["fence"].is_i64() && step["attempts"][0]["fence"].is_i64(), "{shown}");
    assert_eq!(step["leased_by"], "holder-executor-7");

    let anonymous: Value = http.get(format!("{base}/api/runs/{run}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(prepare(&anonymous)["status"], "running", "{anonymous}");
    assert_eq!(prepare(&anonymous)["attempts"][0]["attempt"], 1);
    let text = anonymous.to_string();
    for hidden in ["holder-executor-7", "scheduler-1", "\"fence\"", "lease_expires_at", "leased_by"] {
        assert!(!text.contains(hidden), "{hidden} in {text}");
    }
    // The attempts' holder and fence are in the step's panel.
    let page = http.get(format!("{base}/runs/{run}?step=prepare")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(r#"id="step-panel""#), "the panel is shown");
    assert!(!page.contains("holder-executor-7") && !page.contains("<th>fence</th>"), "the page hides them too");
    let session = client.session().await;
    let page = http.get(format!("{base}/runs/{run}?step=prepare")).header("cookie", session).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("holder-executor-7") && page.contains("<th>fence</th>"), "a session sees them");
}

/// The demo's first step, the one leased and claimed.
fn prepare(run: &Value) -> &Value {
    run["steps"].as_array().unwrap().iter().find(|s| s["name"] == "prepare").unwrap()
}

fn assert_guarded(what: &str, headers: &HeaderMap) {
    let csp = headers.get("content-security-policy").map(|v| v.to_str().unwrap()).unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'"), "{what}: {csp}");
    assert!(csp.contains("script-src 'sha256-") && !csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(headers.get("x-content-type-options").unwrap(), "nosniff", "{what}");
    assert_eq!(headers.get("referrer-policy").unwrap(), "no-referrer", "{what}");
    assert_eq!(headers.get("x-frame-options").unwrap(), "DENY", "{what}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_answer_carries_the_security_headers(pool: PgPool) {
    let run = Client::new(pool.clone()).submit_demo().await;
    let addr = serve(api(pool, false)).await;
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let answers = [
        ("a page", http.get(format!("{base}/runs/{run}")).send().await.unwrap(), StatusCode::OK),
        ("an API answer", http.get(format!("{base}/api/runs")).send().await.unwrap(), StatusCode::OK),
        ("a 401", http.post(format!("{base}/api/runs")).send().await.unwrap(), StatusCode::UNAUTHORIZED),
        ("a 404", http.get(format!("{base}/nothing/here")).send().await.unwrap(), StatusCode::NOT_FOUND),
    ];
    for (what, answer, status) in answers {
        assert_eq!(answer.status().as_u16(), status.as_u16(), "{what}");
        assert_guarded(what, answer.headers());
    }
    let (status, answer) = get_as_host(addr, "evil.example", "/").await;
    assert_eq!(status, 421);
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("content-security-policy:") && lower.contains("x-frame-options: deny"), "{answer}");
}

/// The text of every `<tag>…</tag>` element of `html`.
fn elements<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    html.match_indices(&open)
        .map(|(at, _)| {
            let start = at + open.len();
            &html[start..start + html[start..].find(&close).unwrap()]
        })
        .collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_inline_script_and_style_of_a_page_is_allowed_by_the_policy(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let session = client.session().await;
    let base = format!("http://{}", serve(api(pool, false)).await);
    let http = reqwest::Client::new();
    let mut scripts = 0;
    for (path, cookie) in
        [("/".to_owned(), Some(&session)), (format!("/runs/{run}"), Some(&session)), (format!("/runs/{run}"), None)]
    {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let page = request.send().await.unwrap();
        let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
        let html = page.text().await.unwrap();
        for text in elements(&html, "script").into_iter().chain(elements(&html, "style")) {
            assert!(csp.contains(&rara_api::guard::hash(text)), "{path}: not allowed by {csp}: {text}");
            scripts += 1;
        }
        assert!(!html.contains(" style=") && !html.contains(" onclick="), "{path}: an inline attribute");
        assert!(!html.contains("<script ") && !html.contains("<style "), "{path}: an element the check misses");
    }
    assert!(scripts >= 7, "the pages' scripts and styles were found ({scripts})");
}
