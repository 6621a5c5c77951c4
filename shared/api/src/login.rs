//! How a browser gets a session: it opens a one-time login URL (`/login?code=…`), which spends
//! the code and sets the session cookie ([`crate::auth::session`]). `rara ui` prints one at
//! start; a holder of the token asks for another with `POST /api/login` (the way into the
//! console of a Lambda deployment that uses a token). The token itself never goes in a URL.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Credentials;
use crate::auth::session::LOGIN_LIFETIME;
use crate::{Api, Error, ErrorBody};

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/login", get(login)).route("/api/login", post(issue))
}

/// The path of the login URL of `code`.
pub fn path(code: &str) -> String {
    format!("/login?code={code}")
}

#[derive(Debug, Clone, Deserialize)]
struct LoginQuery {
    code: String,
}

/// Spends the code, sets the session cookie and sends the browser to the runs list.
async fn login(State(api): State<Api>, query: Result<Query<LoginQuery>, QueryRejection>) -> Result<Response, Error> {
    let Query(query) = query?;
    let cookie = api.auth().start_session(&query.code)?;
    let mut response = Redirect::to("/").into_response();
    let cookie =
        HeaderValue::from_str(&cookie).map_err(|_| Error::bad_request("the session cookie is not a header"))?;
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// A one-time login URL for a browser.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LoginResponse {
    /// The URL to open, built from the request's `Host`.
    pub url: String,
    /// The same URL's path and query, to append to the API's base URL.
    pub path: String,
    /// The code is refused after this (RFC 3339), and after its first use.
    pub expires_at: DateTime<Utc>,
}

/// Get a one-time login URL: opening it gives a browser a console session (12 hours), so the
/// token never goes in a URL. The code expires after 5 minutes and works once.
#[utoipa::path(post, path = "/api/login", tag = "login", security(("token" = [])),
    responses((status = 200, body = LoginResponse), (status = "4XX", body = ErrorBody)))]
pub async fn issue(State(api): State<Api>, credentials: Credentials) -> Result<Json<LoginResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let (code, expires_at) = api.auth().login_code(LOGIN_LIFETIME);
    let path = path(&code);
    let url = match host(&credentials.headers) {
        Some(host) => format!("{}://{host}{path}", if api.auth().secure_cookies() { "https" } else { "http" }),
        None => path.clone(),
    };
    Ok(Json(LoginResponse { url, path, expires_at }))
}

fn host(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::HOST).and_then(|v| v.to_str().ok()).filter(|h| !h.is_empty())
}
