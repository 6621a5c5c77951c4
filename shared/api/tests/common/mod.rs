//! The API under test: the real router over a scratch database, called in process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use rara_api::{Api, Auth};
use rara_domain::config::Config;
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;

pub const TOKEN: &str = "test-token";

pub fn api(pool: PgPool) -> Api {
    let config = Config::from_lookup("test", |_| None).unwrap();
    Api::new(Store::new(pool), config, Auth::with_token(TOKEN.to_owned())).unwrap()
}

/// Three steps in a chain, all in-process.
pub fn demo_definition() -> Value {
    json!({"name": "demo-api", "steps": [
        {"name": "prepare", "operation": "noop"},
        {"name": "work", "operation": "sleep", "input": {"seconds": 1}, "depends_on": ["prepare"]},
        {"name": "finish", "operation": "noop", "depends_on": ["work"]},
    ]})
}

pub async fn runs_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(pool).await.unwrap()
}

pub struct Client {
    pub router: Router,
}

impl Client {
    pub fn new(pool: PgPool) -> Self {
        Client { router: api(pool).router() }
    }

    /// Sends a request; the answer's status and body text.
    pub async fn send(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some((content_type, bytes)) => request.header(header::CONTENT_TYPE, content_type).body(Body::from(bytes)),
            None => request.body(Body::empty()),
        }
        .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn get(&self, uri: &str) -> (StatusCode, Value) {
        let (status, text) = self.send(Method::GET, uri, None, None).await;
        (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{uri}: not JSON: {text}")))
    }

    /// A POST with the token; `null` sends no body.
    pub async fn post(&self, uri: &str, body: Value) -> (StatusCode, Value) {
        let body = (!body.is_null()).then(|| ("application/json", serde_json::to_vec(&body).unwrap()));
        let (status, text) = self.send(Method::POST, uri, Some(TOKEN), body).await;
        (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{uri}: not JSON: {text}")))
    }

    /// A console session: a login URL asked for with the token, opened once; the `Cookie`
    /// header value (`rara_session=…`) the browser would send.
    pub async fn session(&self) -> String {
        let (status, login) = self.post("/api/login", Value::Null).await;
        assert_eq!(status, StatusCode::OK, "{login}");
        let request = Request::get(login["path"].as_str().unwrap()).body(Body::empty()).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
        cookie.split(';').next().unwrap().to_owned()
    }

    pub async fn submit_demo(&self) -> String {
        let (status, body) = self.post("/api/runs", json!({"definition": demo_definition()})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }
}

/// Sends a console request with optional cookie and form body; the status, headers and text.
pub async fn page(
    client: &Client,
    method: Method,
    uri: &str,
    cookie: Option<&str>,
    form: Option<String>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut request = axum::http::Request::builder().method(method).uri(uri);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
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
pub fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a form with the CSRF token") + r#"name="csrf" value=""#.len();
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}
