//! The `api` Lambda: rara's HTTP API and console ([`rara_api`]) behind a function URL or API
//! Gateway, through `lambda_http` (the same router `rara ui` serves).
//!
//! # Layout
//!
//! - `main.rs`: wiring once (pool, configuration), then `lambda_http::run(router)`.
//! - this file: the auth policy from the environment ([`auth_from_lookup`]).
//!
//! In AWS the function URL uses `AuthType: AWS_IAM`: a caller signs with SigV4 and IAM decides
//! before rara sees the request, so no token is required ([`rara_api::Auth::iam`]). Setting
//! `RARA_API_TOKEN` requires a bearer token as well (behind API Gateway without IAM auth).
//! Server-sent events need a streaming response; behind a buffered function URL the console
//! still reads and acts, and a page shows changes when reloaded.

use rara_api::Auth;

/// The bearer token state-changing requests must carry, when set.
pub const TOKEN_VAR: &str = "RARA_API_TOKEN";
/// The key the console's CSRF tokens are derived from (the same on every instance).
pub const CSRF_KEY_VAR: &str = "RARA_CSRF_KEY";

/// The token policy the environment asks for.
pub fn auth_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Auth {
    let var = |k: &str| lookup(k).filter(|v| !v.is_empty());
    match var(TOKEN_VAR) {
        Some(token) => Auth::with_token(token),
        None => Auth::iam(var(CSRF_KEY_VAR)),
    }
}
