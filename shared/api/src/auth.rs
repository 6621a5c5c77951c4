//! Who may change state. Locally (`rara ui`) a random token, printed at start, is required on
//! every state-changing request: `Authorization: Bearer <token>` for the API; for the console,
//! a session cookie set by opening the printed URL (`/?token=…`), plus a CSRF token in every
//! form. Reads need no token. In AWS the function URL's IAM auth admits callers before rara
//! sees them, and [`Auth::iam`] requires no token (forms still carry the CSRF token); with
//! [`Auth::with_operators`] only the listed IAM principals may change state ([`Caller`]).
//!
//! Every key of the console is derived from one [`ConsoleKey`] with its own purpose
//! (HMAC-SHA256 of the purpose under the key material), so the instances that share the
//! material (the template's secret) share the keys, and one key reveals nothing of another.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::Error;

/// The name of the console's session cookie.
pub const SESSION_COOKIE: &str = "rara_session";

/// The purpose the CSRF key is derived for ([`ConsoleKey::derive`]).
pub const CSRF_PURPOSE: &str = "rara console csrf v1";

/// The key material every console key is derived from. `Debug` never shows it.
#[derive(Clone)]
pub struct ConsoleKey(Vec<u8>);

impl ConsoleKey {
    pub fn new(material: impl Into<Vec<u8>>) -> Self {
        ConsoleKey(material.into())
    }

    /// Fresh random material: the keys of this instance alone.
    pub fn random() -> Self {
        let mut bytes = vec![0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        ConsoleKey(bytes)
    }

    /// The key of `purpose`: HMAC-SHA256(material, purpose).
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

impl std::fmt::Debug for ConsoleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleKey(<redacted>)")
    }
}

/// The IAM identity the function URL admitted (`requestContext.authorizer.iam.userArn`),
/// put in the request's extensions by the Lambda adapter (`functions/api`); never read from a
/// header a caller could write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub arn: String,
}

/// What a request presents: its headers (bearer token, session cookie) and the IAM [`Caller`]
/// the adapter put in its extensions. Extracting it never fails.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub headers: HeaderMap,
    pub caller: Option<Caller>,
}

impl<S: Send + Sync> FromRequestParts<S> for Credentials {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Credentials { headers: parts.headers.clone(), caller: parts.extensions.get::<Caller>().cloned() })
    }
}

/// The token policy of one server.
#[derive(Clone)]
pub struct Auth {
    /// `None`: callers were authenticated before the request reached rara (IAM).
    token: Option<String>,
    /// The CSRF token every form carries, derived from the console key.
    csrf: String,
    /// `Some`: only these IAM principals may change state (reads stay open).
    operators: Option<Vec<String>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("operators", &self.operators)
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// A fresh random token (what `rara ui` prints).
    pub fn random() -> Self {
        Self::with_token(random_hex())
    }

    /// The token is required, and is the console key's material.
    pub fn with_token(token: String) -> Self {
        let csrf = csrf_token(&ConsoleKey::new(token.as_bytes()));
        Auth { token: Some(token), csrf, operators: None }
    }

    /// No token: the function URL's IAM auth admits callers. CSRF tokens come from `key` (the
    /// same material on every instance: the template's secret, or `RARA_CSRF_KEY`).
    pub fn iam(key: &ConsoleKey) -> Self {
        Auth { token: None, csrf: csrf_token(key), operators: None }
    }

    /// CSRF tokens from `key` rather than from the token (instances that share the key accept
    /// each other's forms).
    pub fn with_console_key(mut self, key: &ConsoleKey) -> Self {
        self.csrf = csrf_token(key);
        self
    }

    /// Only these IAM principals ([`Caller`]) may change state: an exact ARN, or a role whose
    /// assumed-role sessions count as the role.
    pub fn with_operators(mut self, operators: Vec<String>) -> Self {
        self.operators = Some(operators);
        self
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The API's check: the bearer token, when one is required, and the caller, when
    /// operators are named.
    pub fn check_bearer(&self, headers: &HeaderMap, caller: Option<&Caller>) -> Result<(), Error> {
        if let Some(token) = &self.token {
            let given = headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match given {
                Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => {}
                _ => return Err(Error::unauthorized()),
            }
        }
        self.check_operator(caller)
    }

    /// [`check_bearer`](Self::check_bearer) of what a request presents.
    pub fn check_request(&self, credentials: &Credentials) -> Result<(), Error> {
        self.check_bearer(&credentials.headers, credentials.caller.as_ref())
    }

    /// Whether the caller is one of the operators (always, when none are named).
    fn check_operator(&self, caller: Option<&Caller>) -> Result<(), Error> {
        let Some(operators) = &self.operators else { return Ok(()) };
        match caller {
            Some(caller) if operators.iter().any(|o| is_principal(o, &caller.arn)) => Ok(()),
            Some(caller) => Err(Error::forbidden(format!(
                "{} may read but not change state: it is not among the operators (RARA_API_OPERATORS)",
                caller.arn
            ))),
            None => Err(Error::forbidden(
                "no IAM caller identity on this request, and only operators (RARA_API_OPERATORS) may change state",
            )),
        }
    }

    /// Whether the session cookie holds the token (always, without a token).
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return true };
        cookie(headers, SESSION_COOKIE).is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
    }

    /// Whether the console shows this request its forms: a session and, when operators are
    /// named, an operator.
    pub fn may_act(&self, headers: &HeaderMap, caller: Option<&Caller>) -> bool {
        self.has_session(headers) && self.check_operator(caller).is_ok()
    }

    /// The console's check of a form: a session, an operator, and the CSRF token of the form.
    pub fn check_form(&self, headers: &HeaderMap, caller: Option<&Caller>, csrf: &str) -> Result<(), Error> {
        if !self.has_session(headers) {
            return Err(Error::unauthorized());
        }
        self.check_operator(caller)?;
        if !constant_time_eq(csrf.as_bytes(), self.csrf.as_bytes()) {
            return Err(Error::forbidden("the form's CSRF token is missing or wrong: reload the page"));
        }
        Ok(())
    }

    /// The CSRF token every console form carries: derived from the console key, so it is the
    /// same for every page and every instance that shares the key, and reveals nothing of it.
    pub fn csrf_token(&self) -> String {
        self.csrf.clone()
    }
}

fn csrf_token(key: &ConsoleKey) -> String {
    hex(&key.derive(CSRF_PURPOSE))
}

/// Whether `arn` (a caller) is the principal `operator`: the same ARN, or a session of the
/// role `operator` (`arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION` for
/// `arn:aws:iam::ACCOUNT:role/PATH/NAME`).
pub fn is_principal(operator: &str, arn: &str) -> bool {
    if operator == arn {
        return true;
    }
    let (Some(role), Some(session)) = (split_arn(operator), split_arn(arn)) else { return false };
    let (Some(role_path), Some(assumed)) =
        (role.resource.strip_prefix("role/"), session.resource.strip_prefix("assumed-role/"))
    else {
        return false;
    };
    let role_name = role_path.rsplit('/').next().unwrap_or(role_path);
    let assumed_name = assumed.split('/').next().unwrap_or_default();
    role.service == "iam"
        && session.service == "sts"
        && role.partition == session.partition
        && role.account == session.account
        && !role_name.is_empty()
        && role_name == assumed_name
}

struct Arn<'a> {
    partition: &'a str,
    service: &'a str,
    account: &'a str,
    resource: &'a str,
}

fn split_arn(arn: &str) -> Option<Arn<'_>> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some(service), Some(_region), Some(account), Some(resource)) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some(Arn { partition, service, account, resource })
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
mod tests;
