//! Who may change state. Locally (`rara ui`) a random token, printed at start, is required on
//! every state-changing request: `Authorization: Bearer <token>` for the API; for the console,
//! a session cookie set by opening the printed URL (`/?token=…`), plus a CSRF token in every
//! form. Reads need no token. In AWS the function URL's IAM auth admits callers before rara
//! sees them, and [`Auth::iam`] requires no token (forms still carry the CSRF token).

use axum::http::HeaderMap;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::Error;

/// The name of the console's session cookie.
pub const SESSION_COOKIE: &str = "rara_session";

/// The token policy of one server.
#[derive(Debug, Clone)]
pub struct Auth {
    /// `None`: callers were authenticated before the request reached rara (IAM).
    token: Option<String>,
    /// The key CSRF tokens are derived from.
    csrf_key: String,
}

impl Auth {
    /// A fresh random token (what `rara ui` prints).
    pub fn random() -> Self {
        Self::with_token(random_hex())
    }

    pub fn with_token(token: String) -> Self {
        Auth { csrf_key: token.clone(), token: Some(token) }
    }

    /// No token: the function URL's IAM auth admits callers. CSRF tokens come from `csrf_key`
    /// (one value shared by every instance, e.g. from the environment) or a random key.
    pub fn iam(csrf_key: Option<String>) -> Self {
        Auth { token: None, csrf_key: csrf_key.unwrap_or_else(random_hex) }
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The API's check: the bearer token, when one is required.
    pub fn check_bearer(&self, headers: &HeaderMap) -> Result<(), Error> {
        let Some(token) = &self.token else { return Ok(()) };
        let given = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
            _ => Err(Error::unauthorized()),
        }
    }

    /// Whether the session cookie holds the token (always, without a token).
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return true };
        cookie(headers, SESSION_COOKIE).is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
    }

    /// The console's check of a form: a session, and the CSRF token of the form.
    pub fn check_form(&self, headers: &HeaderMap, csrf: &str) -> Result<(), Error> {
        if !self.has_session(headers) {
            return Err(Error::unauthorized());
        }
        if !constant_time_eq(csrf.as_bytes(), self.csrf_token().as_bytes()) {
            return Err(Error::forbidden("the form's CSRF token is missing or wrong: reload the page"));
        }
        Ok(())
    }

    /// The CSRF token every console form carries: derived from the key, so it is the same for
    /// every page and every instance that shares the key, and reveals nothing of the token.
    pub fn csrf_token(&self) -> String {
        hex(&Sha256::digest(format!("rara-console-csrf:{}", self.csrf_key)))
    }
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: axum::http::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        h
    }

    #[test]
    fn a_bearer_token_is_required_and_must_match() {
        let auth = Auth::with_token("s3cret".into());
        assert!(auth.check_bearer(&HeaderMap::new()).is_err());
        assert!(auth.check_bearer(&headers(axum::http::header::AUTHORIZATION, "Bearer nope")).is_err());
        assert!(auth.check_bearer(&headers(axum::http::header::AUTHORIZATION, "Bearer s3cret")).is_ok());
        assert!(Auth::iam(None).check_bearer(&HeaderMap::new()).is_ok());
    }

    #[test]
    fn a_form_needs_the_session_cookie_and_the_csrf_token() {
        let auth = Auth::with_token("s3cret".into());
        let session = headers(axum::http::header::COOKIE, "a=b; rara_session=s3cret");
        assert!(auth.check_form(&session, &auth.csrf_token()).is_ok());
        assert!(auth.check_form(&session, "forged").is_err());
        assert!(auth.check_form(&HeaderMap::new(), &auth.csrf_token()).is_err());
        assert_ne!(auth.csrf_token(), "s3cret");
    }
}
